"""``contextfold demo`` runs offline to the end and shows every mechanism it promises."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextfold.cli import app
from tests.interrupts import sigint_by_default

runner = CliRunner()


@pytest.fixture(scope="module")
def demo_output() -> str:
    result = runner.invoke(app, ["demo"], env={"NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_demo_announces_masking_offload_compaction_and_resume(demo_output: str) -> None:
    assert "◆ masked" in demo_output
    assert "◆ offloaded a" in demo_output and "to the store as ref_" in demo_output
    assert "◆ compacted the context" in demo_output
    assert "Resuming ses_" in demo_output and "Resumed from the snapshot" in demo_output


def test_the_agent_fixes_the_bug_with_real_tools(demo_output: str) -> None:
    assert "KeyError" in demo_output  # the real traceback, read by the scripted agent
    assert re.search(r"edit_file shopcart/discounts\.py\s+✓", demo_output)
    assert re.search(r"tests now\s+passing \(12 tests\)", demo_output)


def test_after_the_resume_the_stored_log_is_read_back(demo_output: str) -> None:
    after = demo_output.split("Resumed from the snapshot")[1]
    assert re.search(r"read_result ref_[0-9a-f]{12}", after)
    assert re.search(r"\b51 products have 0% VAT", after)


def test_the_summary_table_adds_up(demo_output: str) -> None:
    summary = demo_output.split("Session summary")[1]
    for label in ("turns", "model calls", "tokens sent", "peak context", "context edits"):
        assert label in summary
    readable, total = map(int, re.search(r"refs recoverable\s+(\d+) of (\d+)", summary).groups())
    assert readable == total > 0
    peak = int(re.search(r"peak context\s+[\d,]+ of [\d,]+ tokens \((\d+)", summary).group(1))
    assert peak < 100  # every request fitted the window


def test_the_output_fits_a_readme(demo_output: str) -> None:
    lines = demo_output.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert not any(line != line.rstrip() for line in lines)
    assert "\x1b[" not in demo_output  # no colour codes when piped


def test_the_temporary_project_is_removed_unless_kept() -> None:
    before = set(Path(tempfile.gettempdir()).glob("contextfold-demo-*"))
    result = runner.invoke(app, ["demo", "--keep"])
    kept = set(Path(tempfile.gettempdir()).glob("contextfold-demo-*")) - before
    assert result.exit_code == 0 and len(kept) == 1
    folder = kept.pop()
    assert (folder / "sessions.db").exists()
    assert "CODES[code.strip().upper()]" in (folder / "shopcart/shopcart/discounts.py").read_text()
    shutil.rmtree(folder)


def test_every_run_tells_the_same_story(demo_output: str) -> None:
    # The same compactions, counts and refs every run: ids, paths and the project's test output
    # are the same, so the token counts are.
    again = runner.invoke(app, ["demo"], env={"NO_COLOR": "1"})
    assert again.exit_code == 0, again.output
    assert again.stdout == demo_output


_LAUNCH = "import sys\nfrom contextfold_launcher import main\nsys.argv[0] = 'contextfold'\nmain()"


def _interrupted_demo(after_line: str | None) -> tuple[int, str, str]:
    """Run the demo as a process and send it SIGINT when ``after_line`` was printed (during
    start-up when ``None``); its status, output and errors."""
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen(
        [sys.executable, "-c", _LAUNCH, "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=sigint_by_default,  # Ctrl-C as a terminal delivers it
    )
    assert process.stdout is not None
    seen: list[str] = []
    if after_line is not None:
        for line in process.stdout:
            seen.append(line)
            if after_line in line:
                break
        else:
            pytest.fail(f"the demo never printed {after_line!r}: {''.join(seen)}")
    else:
        time.sleep(0.3)  # while the command line loads
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    return process.returncode, "".join(seen) + out, err


@pytest.mark.slow
@pytest.mark.parametrize("moment", [None, "contextfold demo", "turn 1", "turn 2", "Resuming"])
def test_ctrl_c_stops_the_demo_at_any_moment(moment: str | None) -> None:
    status, out, err = _interrupted_demo(moment)
    # Before Python runs any code the signal kills the interpreter (a shell shows 130 for it).
    assert status == 130 or (moment is None and status == -signal.SIGINT), (out, err)
    assert "Traceback" not in err + out
    assert "Session summary" not in out  # it stopped; it did not carry on with the next turn
    if moment in ("turn 1", "turn 2"):
        later = "turn 2" if moment == "turn 1" else "turn 3"
        assert later not in out.split(moment, 1)[1]


def test_the_readme_shows_what_the_demo_prints(demo_output: str) -> None:
    """The README's excerpt of the demo is the demo's own output, line for line (trimmed where
    it says ``…``). Refs and figures are compared by shape: they follow the demo folder's name
    (``contextfold-demo-N``, the first free one), which is in the outputs the model reads."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    excerpt = readme.split("<!-- demo-output -->", 1)[1].split("```text\n", 1)[1].split("```")[0]
    printed = {_shape(line) for line in demo_output.splitlines()}
    shown = [line for line in excerpt.splitlines() if line.strip() not in ("…", "")]
    assert shown[0] == "$ contextfold demo"
    missing = [line for line in shown[1:] if _shape(line) not in printed]
    assert not missing, f"README.md shows demo lines the demo no longer prints: {missing}"


def _shape(line: str) -> str:
    """A line with its refs and numbers blanked."""
    return re.sub(r"\d[\d,.]*", "N", re.sub(r"ref_[0-9a-f]{12}", "ref_X", line)).rstrip()
