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

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import installed
from tests.clients.harness import (
    ClientRun,
    ProxyRun,
    RunFigures,
    breaks_by_rule,
    check_invariants,
    clean_env,
    conversation_sessions,
    describe_breaks,
    fill_traffic,
    proxied,
    record_figures,
    run_client,
)
from tests.clients.plans import PlanScript, Step
from tests.clients.repo import make_repo
from tests.clients.responses_upstream import ResponsesUpstream
from tests.proxy.servers import serve

pytestmark = pytest.mark.slow

TASK = "Work through the scripted inventory plan, part one."
RESUME = "Continue with part two of the inventory plan."
TIMEOUT = 420.0
"""Seconds one ``claude -p`` may take (a direct run takes well under a minute)."""
ALLOWED = "Bash Read Edit Write Glob Grep"
PART_ONE_END = "CF-PART-ONE-DONE: part one of the plan is finished."
FINAL = "CF-PART-TWO-DONE: the whole scripted plan is finished."
CALL_MARK = re.compile(r"cf\d{3}s\d")


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


def is_main(body: Mapping[str, Any]) -> bool:
    return any(isinstance(t, Mapping) and t.get("name") == "Bash" for t in body.get("tools") or [])


@pytest.fixture(scope="module")
def claude() -> str:
    return installed("claude", "npm install -g @anthropic-ai/claude-code; .ci/run installs it")


def session(
    claude: str, dirs: tuple[Path, Path], window: int | None, show: Callable[[str], None]
) -> tuple[RunFigures, list[str]]:
    """Run both parts, directly (``window`` None) or through the proxy; return the figures and
    what failed (empty: the run passed)."""
    home, work = dirs
    make_repo(work)
    steps = plan(work)
    script = PlanScript(steps, marker_tool="Bash", id_prefix="toolu_", final=FINAL)
    upstream = ResponsesUpstream(script)
    figures = RunFigures("claude-code", "proxy" if window else "direct", window)
    figures.steps_planned = len(steps)
    problems: list[str] = []
    proxy: ProxyRun | None = None
    runs: list[ClientRun] = []
    with serve(upstream) as upstream_url, _maybe_proxy(upstream_url, window, work.parent) as proxy:
        base = proxy.url if proxy else upstream_url
        runs.append(run_claude(claude, base, home, work, resume=False))
        if runs[0].returncode == 0:
            runs.append(run_claude(claude, base, home, work, resume=True))
    extra = proxy.errors() if proxy else ""
    for run in runs:
        if run.returncode != 0:
            problems.append(run.failure(extra))
    figures.exit_code = runs[-1].returncode
    figures.seconds = round(sum(r.seconds for r in runs), 1)
    if len(runs) == 2 and FINAL not in runs[1].stdout:
        problems.append(f"the final answer is not in Claude Code's output: {runs[1].stdout[-500:]}")
    checked = run_client(
        ["python3", "tests/check.py", "--all"], cwd=work, env={"PATH": "/usr/bin:/bin"}, timeout=60
    )
    if "cf-all-ok" not in checked.stdout:
        problems.append(f"not every edit landed: {checked.stdout}")
    client = proxy.model_exchanges() if proxy else None
    fill_traffic(figures, upstream.requests, client)
    breaks = check_invariants(upstream.requests, client, task=TASK, main=is_main)
    figures.invariant_breaks = len(breaks)
    figures.breaks_by_rule = breaks_by_rule(breaks)
    if breaks:
        problems.append(describe_breaks(breaks))
    figures.steps_completed = script.completed
    figures.side_requests = script.side_requests
    figures.refusals = script.refusals[:5]
    if script.completed < len(steps):
        problems.append(
            f"{script.completed} of {len(steps)} steps done; refusals: {script.refusals[:3]}"
        )
    if proxy is not None:
        figures.sessions, figures.session_chains = conversation_sessions(proxy.store, CALL_MARK)
        if figures.session_chains != 1:
            problems.append(
                f"{figures.sessions} sessions in {figures.session_chains} chains for one conversation"
            )
    figures.passed = not problems
    record_figures(figures, show)
    return figures, problems


def _maybe_proxy(upstream_url: str, window: int | None, tmp: Path) -> Any:
    import contextlib

    if window is None:
        return contextlib.nullcontext(None)
    return proxied(upstream_url, window, tmp / "proxy.db")


def test_claude_code_direct(
    claude: str, dirs: tuple[Path, Path], show: Callable[[str], None]
) -> None:
    _, problems = session(claude, dirs, None, show)
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize(
    "window",
    [
        pytest.param(
            24_000,
            marks=pytest.mark.xfail(
                strict=False,
                reason="issue 26: the proxy refuses Claude Code's first request at 24k (its tools are never deferred)",
            ),
        ),
        pytest.param(
            32_000,
            marks=pytest.mark.xfail(
                strict=False,
                reason="issue 26: at 32k the reply reserve leaves no room; the task is cut and steps loop",
            ),
        ),
        pytest.param(
            64_000,
            marks=pytest.mark.xfail(
                strict=False,
                reason="issue 26: Edit inputs re-serialized with replace_all fork the session; old Edit inputs become {}",
            ),
        ),
    ],
)
def test_claude_code_through_the_proxy(
    claude: str, dirs: tuple[Path, Path], window: int, show: Callable[[str], None]
) -> None:
    _, problems = session(claude, dirs, window, show)
    assert not problems, "\n\n".join(problems)
