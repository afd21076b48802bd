"""Claude Code (npm ``@anthropic-ai/claude-code``), default tool set, headless, through the proxy
at 24k, 32k and 64k windows, and directly (the control).

A 28-step plan on the generated repository (:mod:`tests.clients.repo`) with Read, Grep, Glob,
Edit, Write and Bash, large outputs included (a 110 KB CSV printed, a 4,000-line log read, 20,000
lines of ``seq``): ``claude -p TASK`` runs part one (20 steps, then a turn-ending answer), then
``claude -p --continue RESUME`` runs part two (8 steps) in the same conversation. Claude Code
keeps its default tools (never cut with ``--tools``); as root it runs in the ``acceptEdits``
permission mode with ``--allowedTools`` (``bypassPermissions`` is refused to root).

Asserted: exit 0 both times; every edit landed (``tests/check.py --all``); every invariant of
:mod:`tests.clients.invariants` on every upstream request; one stored session chain for the
conversation; every step completed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import installed
from tests.clients.harness import ClientRun, Session, clean_env, drive, run_client
from tests.clients.plans import PlanScript, Step
from tests.clients.repo import edits_missing, make_repo
from tests.clients.responses_upstream import ResponsesUpstream, serving_only

pytestmark = pytest.mark.slow

TASK = "Work through the scripted inventory plan, part one."
RESUME = "Continue with part two of the inventory plan."
TIMEOUT = 420.0
"""Seconds one ``claude -p`` may take (a direct run takes well under a minute)."""
ALLOWED = "Bash Read Edit Write Glob Grep"
PART_ONE_END = "CF-PART-ONE-DONE: part one of the plan is finished."
FINAL = "CF-PART-TWO-DONE: the whole scripted plan is finished."


def _bash(command: str, description: str) -> tuple[str, dict[str, Any]]:
    return "Bash", {"command": command, "description": description}


def _read(
    path: Path, offset: int | None = None, limit: int | None = None
) -> tuple[str, dict[str, Any]]:
    args: dict[str, Any] = {"file_path": str(path)}
    if offset is not None:
        args["offset"] = offset
    if limit is not None:
        args["limit"] = limit
    return "Read", args


def _edit(path: Path, old: str, new: str) -> tuple[str, dict[str, Any]]:
    return "Edit", {"file_path": str(path), "old_string": old, "new_string": new}


def plan(work: Path) -> list[Step]:
    """The 28 steps (see the module docstring); ``work`` is the repository's absolute path."""
    stock, pricing = work / "inventory" / "stock.py", work / "inventory" / "pricing.py"
    report = (
        '"""A report."""\n\nfrom inventory import stock\n\n\n'
        'def summary():\n    return f"cf-report-ok limit={stock.LIMIT}"\n'
    )
    notes = "# Notes\n\n" + "".join(f"- note {i}: reorder rules checked\n" for i in range(40))
    return [
        Step(
            (("Glob", {"pattern": "**/*.py"}),), "Find the Python files.", ("stock.py",), user=TASK
        ),
        Step((_read(stock),), "Read the stock module.", ("def reorder_level",)),
        Step(
            (("Grep", {"pattern": "TODO", "output_mode": "content", "-n": True}),),
            "Find TODOs.",
            ("TODO(cf-1)",),
        ),
        Step(
            (_bash("python3 tests/check.py", "Run the checks"),),
            "Run the checks.",
            ("edit-1 FAILED",),
        ),
        Step(
            (_edit(stock, "return 0  # TODO(cf-1)", "return max(0, threshold - on_hand)"),),
            "Fix reorder_level.",
            thinking="The reorder level is the gap to the threshold.",
        ),
        Step(
            (
                _bash(
                    "grep -q 'max(0, threshold - on_hand)' inventory/stock.py && echo cf-edit-1-ok",
                    "Check edit 1",
                ),
            ),
            "Check it.",
            ("cf-edit-1-ok",),
        ),
        Step(
            (_bash("cat data/items.csv", "Print the item list"),),
            "Look at the items.",
            ("sku,name,qty,price",),
        ),
        Step((_read(work / "logs" / "app.log", 1, 600),), "Read the log.", ("request 0001",)),
        Step(
            (("Grep", {"pattern": "ERROR", "path": "logs", "output_mode": "count"}),),
            "Count errors.",
        ),
        Step(
            (("Write", {"file_path": str(work / "inventory" / "report.py"), "content": report}),),
            "Write a report module.",
        ),
        Step(
            (
                _bash(
                    'python3 -c "from inventory.report import summary; print(summary())"',
                    "Run the report",
                ),
            ),
            "Run it.",
            ("cf-report-ok",),
            thinking="The report imports stock.",
        ),
        Step((_read(pricing),), "Read the pricing module.", ("def price_with_tax",)),
        Step((_edit(pricing, "TAX = 0.0  # TODO(cf-2)", "TAX = 0.2"),), "Set the tax."),
        Step(
            (
                _bash(
                    "grep -q 'TAX = 0.2' inventory/pricing.py && echo cf-edit-2-ok", "Check edit 2"
                ),
            ),
            "Check it.",
            ("cf-edit-2-ok",),
        ),
        Step((_bash("seq 1 20000", "Print 20k lines"),), "Print many lines."),
        Step(
            (_bash("wc -l data/items.csv", "Count items"), ("Glob", {"pattern": "**/*.md"})),
            "Two at once.",
            ("3000", "README.md"),
        ),
        Step(
            (("Grep", {"pattern": "def ", "path": "inventory", "output_mode": "content"}),),
            "List functions.",
            ("def reorder_level",),
            thinking="Next, the limit.",
        ),
        Step((_edit(stock, "LIMIT = 100", "LIMIT = 250"),), "Raise the limit."),
        Step(
            (_bash("python3 tests/check.py", "Run the checks"),), "Run the checks.", ("cf-all-ok",)
        ),
        Step(say=PART_ONE_END),
        Step((_read(pricing),), "Read pricing again.", ("TAX = 0.2",), user=RESUME),
        Step(
            (_edit(pricing, "DISCOUNT = 0  # TODO(cf-3)", "DISCOUNT = 5"),),
            "Set the discount.",
            thinking="Discount next.",
        ),
        Step(
            (
                _bash(
                    "grep -q 'DISCOUNT = 5' inventory/pricing.py && echo cf-edit-3-ok",
                    "Check edit 3",
                ),
            ),
            "Check it.",
            ("cf-edit-3-ok",),
        ),
        Step((("Write", {"file_path": str(work / "NOTES.md"), "content": notes}),), "Write notes."),
        Step(
            (_bash("grep -n ERROR logs/app.log | head -n 300", "List errors"),),
            "List errors.",
            ("ERROR request 0007",),
        ),
        Step((_read(work / "data" / "items.csv", 1000, 800),), "Read some items.", ("SKU01000",)),
        Step(
            (_bash("python3 tests/check.py --all", "Run all checks"),),
            "Run all checks.",
            ("cf-all-ok",),
        ),
        Step((("Glob", {"pattern": "inventory/*.py"}),), "List the package.", ("report.py",)),
    ]


def claude_env(home: Path, base_url: str) -> dict[str, str]:
    return clean_env(
        home,
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY="dummy",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        # A failing request fails the run at once instead of being retried for minutes.
        CLAUDE_CODE_MAX_RETRIES="1",
    )


def run_claude(claude: str, base_url: str, home: Path, work: Path, *, resume: bool) -> ClientRun:
    command = [claude, "-p", RESUME if resume else TASK]
    if resume:
        command.insert(2, "--continue")
    command += ["--permission-mode", "acceptEdits", "--allowedTools", ALLOWED]
    return run_client(command, cwd=work, env=claude_env(home, base_url), timeout=TIMEOUT)


@pytest.fixture(scope="module")
def claude() -> str:
    return installed("claude", "npm install -g @anthropic-ai/claude-code; .ci/run installs it")


def claude_session(claude: str, dirs: tuple[Path, Path], note: str = "") -> Session:
    """Part one with ``claude -p``, then part two with ``claude -p --continue``."""
    home, work = dirs
    make_repo(work)
    steps = plan(work)

    def runs(base_url: str) -> list[ClientRun]:
        done = [run_claude(claude, base_url, home, work, resume=False)]
        if done[0].returncode == 0:
            done.append(run_claude(claude, base_url, home, work, resume=True))
        return done

    return Session(
        client="claude-code",
        script=PlanScript(steps, marker_tool="Bash", id_prefix="toolu_", final=FINAL),
        runs=runs,
        landed=lambda: edits_missing(work),
        task=TASK,
        final=FINAL,
        note=note,
    )


def test_claude_code_direct(
    claude: str, dirs: tuple[Path, Path], show: Callable[[str], None]
) -> None:
    spec = claude_session(claude, dirs)
    _, problems = drive(spec, ResponsesUpstream(spec.script), None, dirs[0].parent, show)
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize("window", [24_000, 32_000, 64_000])
def test_claude_code_through_the_proxy(
    claude: str, dirs: tuple[Path, Path], window: int, show: Callable[[str], None]
) -> None:
    spec = claude_session(claude, dirs)
    _, problems = drive(spec, ResponsesUpstream(spec.script), window, dirs[0].parent, show)
    assert not problems, "\n\n".join(problems)


BRIDGED_WINDOW = 200_000
"""Large enough that the proxy has nothing to shrink: what is tested is the bridge."""


def test_claude_code_bridged_to_a_chat_only_upstream(
    claude: str, dirs: tuple[Path, Path], show: Callable[[str], None]
) -> None:
    """Claude Code speaks the Messages API; the upstream only Chat Completions (as Ollama,
    vLLM, LM Studio and llama.cpp builds without ``/v1/messages`` do): the proxy finds that out
    (``/v1/messages`` answers 404) and bridges, thinking, parallel calls and all."""
    spec = claude_session(claude, dirs, note="Messages → Chat upstream")
    upstream = serving_only(ResponsesUpstream(spec.script), "openai")
    _, problems = drive(spec, upstream, BRIDGED_WINDOW, dirs[0].parent, show)
    assert not problems, "\n\n".join(problems)
    paths = {r.path for r in upstream.requests if r.protocol is not None}
    assert paths == {"/v1/chat/completions"}, paths
