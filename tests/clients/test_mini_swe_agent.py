"""mini-swe-agent (PyPI ``mini-swe-agent``, 2.x: tool calling with one ``bash`` tool, through
LiteLLM's ``openai/`` Chat Completions), directly (the control) and through the proxy at 12k.

It lives in a venv of its own (never the project's): ``$CONTEXTFOLD_CLIENT_VENVS/mswea``
(default ``/var/cache/contextfold-clients/mswea``), which ``.ci/run`` creates; without it the
tests skip. :mod:`tests.clients.mswea_driver` runs one task through its Python API; every step
is a ``bash`` call, the last one ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``, which ends the
run. Its observations are ``<returncode>…</returncode>\\n<output>…</output>``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import client_venv
from tests.clients.harness import ClientRun, Session, clean_env, drive, run_client
from tests.clients.plans import PlanScript, Step
from tests.clients.repo import edits_missing, make_repo
from tests.clients.responses_upstream import ResponsesUpstream

pytestmark = pytest.mark.slow

TASK = "Work through the scripted inventory plan with mini-swe-agent."
TIMEOUT = 300.0
WINDOW = 12_000
DRIVER = Path(__file__).with_name("mswea_driver.py")


def _bash(command: str) -> tuple[str, dict[str, Any]]:
    return "bash", {"command": command}


def plan() -> list[Step]:
    """Fourteen bash steps with three edits and large outputs, then the submission."""
    return [
        Step((_bash("ls -R inventory tests"),), "List the files.", ("stock.py",), user=TASK),
        Step((_bash("cat inventory/stock.py"),), "Read stock.", ("def reorder_level",)),
        Step((_bash("grep -rn TODO inventory"),), "Find TODOs.", ("TODO(cf-1)",)),
        Step(
            (
                _bash(
                    "sed -i 's/return 0  # TODO(cf-1)/return max(0, threshold - on_hand)/' "
                    "inventory/stock.py && echo cf-edit-1-done"
                ),
            ),
            "Fix reorder_level.",
            ("cf-edit-1-done",),
        ),
        Step((_bash("head -c 20000 data/items.csv"),), "Print items.", ("sku,name,qty,price",)),
        Step((_bash("head -n 150 logs/app.log"),), "Read the log.", ("request 0001",)),
        Step(
            (_bash("sed -i 's/TAX = 0.0  # TODO(cf-2)/TAX = 0.2/' inventory/pricing.py"),), "Tax."
        ),
        Step((_bash("grep -c 'TAX = 0.2' inventory/pricing.py"),), "Check it.", ("1",)),
        Step((_bash("seq 1 3000"),), "Print many lines.", ("3000",)),
        Step((_bash("sed -i 's/LIMIT = 100/LIMIT = 250/' inventory/stock.py"),), "Limit."),
        Step(
            (_bash("sed -i 's/DISCOUNT = 0  # TODO(cf-3)/DISCOUNT = 5/' inventory/pricing.py"),),
            "Discount.",
        ),
        Step((_bash("grep -n ERROR logs/app.log | head -n 120"),), "Errors.", ("request 0007",)),
        Step((_bash("python3 tests/check.py --all"),), "All checks.", ("cf-all-ok",)),
        Step((_bash("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),), "Submit."),
    ]


def mswea_session(python: Path, dirs: tuple[Path, Path]) -> Session:
    home, work = dirs
    make_repo(work)

    def runs(base_url: str) -> list[ClientRun]:
        env = clean_env(
            home,
            MSWEA_SILENT_STARTUP="1",
            MSWEA_COST_TRACKING="ignore_errors",
            MSWEA_GLOBAL_CONFIG_DIR=str(home / "mswea"),
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            OPENAI_API_KEY="dummy",
        )
        command = [str(python), str(DRIVER), base_url, str(work), TASK]
        return [run_client(command, cwd=work, env=env, timeout=TIMEOUT)]

    # The last step submits: its result never comes back (the driver exits 0 only on
    # "Submitted").
    return Session(
        client="mini-swe-agent",
        script=PlanScript(plan(), marker_tool="bash", final="unused: the run ends on submit"),
        runs=runs,
        landed=lambda: edits_missing(work),
        task=TASK,
        final='"exit_status": "Submitted"',
        ends_on_last_call=True,
    )


@pytest.fixture(scope="module")
def mswea() -> Path:
    return client_venv("mswea", "mini-swe-agent")


def test_mini_swe_agent_direct(
    mswea: Path, dirs: tuple[Path, Path], show: Callable[[str], None]
) -> None:
    spec = mswea_session(mswea, dirs)
    _, problems = drive(spec, ResponsesUpstream(spec.script), None, dirs[0].parent, show)
    assert not problems, "\n\n".join(problems)


def test_mini_swe_agent_through_the_proxy(
    mswea: Path, dirs: tuple[Path, Path], show: Callable[[str], None]
) -> None:
    spec = mswea_session(mswea, dirs)
    _, problems = drive(spec, ResponsesUpstream(spec.script), WINDOW, dirs[0].parent, show)
    assert not problems, "\n\n".join(problems)
