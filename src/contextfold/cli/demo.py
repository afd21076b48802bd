"""``contextfold demo``: watch the engine manage a coding agent's context, offline.

A scripted model fixes a real bug in a temporary copy of a small bundled project with the real
tools (listing, grep, reading files, running the tests, editing), through a deliberately small
window. Masking, an offloaded output, a compaction and a resume from the store happen on the way,
each announced as it happens; a table sums the session up at the end.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

import contextfold
from contextfold.agent import StopReason, run_agent
from contextfold.agent.text import human_size
from contextfold.cli import _render
from contextfold.cli._agent_setup import Agent, build_agent
from contextfold.cli._demo_script import (
    FIRST_TASK,
    SECOND_TASK,
    THIRD_TASK,
    first_turn,
    second_turn,
    third_turn,
)
from contextfold.cli._meter import MeterTracker
from contextfold.cli._printer import TranscriptPrinter, print_wrapped
from contextfold.cli._store import browsable
from contextfold.config import Settings
from contextfold.edits import MaskEdit, edit_action
from contextfold.engine import Session
from contextfold.events import (
    CompactionFinished,
    MemorySink,
    OutputOffloaded,
    OutputTruncated,
    TokenUsage,
)
from contextfold.messages import reproducible_ids
from contextfold.model_registry import ModelInfo
from contextfold.providers import ChatResponse, ScriptedModel
from contextfold.store import SessionStore, open_store

__all__ = ["DEMO_WINDOW", "INTERRUPTED_STATUS", "demo"]

DEMO_WINDOW = 6_000
"""The demo's context window: small enough that a ten-step bug fix needs every mechanism."""

DEMO_REPLY_RESERVE = 1_500
"""Tokens of the demo window kept for the reply."""

INTERRUPTED_STATUS = 130
"""Exit status after Ctrl-C (128 + SIGINT, as shells report it)."""

DEMO_FIRST_ID = 0xD << 84
"""Where the demo's id sequence starts (``ses_d000…01``): not where a replay of its session
starts its own."""

DEMO_WIDTH = 100
"""Most columns the demo uses, so that its output reads well pasted into a README."""

PROJECT_NAME = "shopcart"
_PROJECT_SOURCE = Path(contextfold.__file__).resolve().parent / "_demo_project"
_TEST_TIMEOUT = 60.0


@dataclass
class _Tally:
    """What the summary table reports, gathered while the demo runs."""

    events: MemorySink = field(default_factory=MemorySink)
    peak_tokens: int = 0
    calls: int = 0
    window: int = 0

    def on_response(self, session: Session) -> None:
        request = session.last_request
        if request is not None:
            self.peak_tokens = max(self.peak_tokens, request.tokens)
        self.calls += 1


_EDIT_NAMES = {"mask": "mask batch", "truncate": "truncation"}
"""How the summary table names some edit actions."""


def demo(
    window: Annotated[
        int,
        typer.Option(
            "--window",
            min=4_000,
            metavar="TOKENS",
            help="Context window in tokens. Larger windows need fewer interventions.",
        ),
    ] = DEMO_WINDOW,
    keep: Annotated[
        bool,
        typer.Option(
            "--keep", metavar="", help="Keep the temporary project and session store afterwards."
        ),
    ] = False,
) -> None:
    """Watch contextfold keep a coding agent's context healthy: offline, no API key needed.

    A scripted model fixes a bug in a temporary copy of a small Python project with the real
    tools and real outputs, through a deliberately small window. You see old outputs masked, a
    long test log offloaded to the store, a compaction, and the session resumed by id from the
    store, each announced as it happens, then a summary table.
    """
    out = _render.console()
    out.width = min(out.width, DEMO_WIDTH)
    folder = _demo_folder()
    try:
        # The same ids on every run: ids and paths reach what the model reads, so they make the
        # token counts, and the counts make the compactions.
        with _python_on_path(), reproducible_ids(DEMO_FIRST_ID):
            stop = _run_demo(out, folder, window)
    finally:
        if keep:
            out.print(f"\nKept {_render.escape(str(folder))} (project and sessions.db).")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    if stop == "interrupted":
        out.print("\n[dim]Interrupted.[/dim]")
        raise typer.Exit(INTERRUPTED_STATUS)


def _demo_folder() -> Path:
    """A new folder for the demo with the same name on every run (``contextfold-demo-1`` in the
    temporary folder, unless another demo holds it): its path is in the outputs the model
    reads."""
    parent = Path(tempfile.gettempdir())
    for number in itertools.count(1):
        folder = parent / f"contextfold-demo-{number}"
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            continue
        return folder
    raise AssertionError("unreachable")


def _run_demo(out: Console, folder: Path, window: int) -> StopReason:
    """Run the demo's turns; how the last one stopped (``interrupted``: Ctrl-C ended it)."""
    project = folder / PROJECT_NAME
    shutil.copytree(_PROJECT_SOURCE, project, ignore=shutil.ignore_patterns("__pycache__"))
    settings = _demo_settings(folder / "sessions.db")
    info = ModelInfo("demo", window, provider="scripted", max_output_tokens=DEMO_REPLY_RESERVE)
    tally = _Tally(window=window - DEMO_REPLY_RESERVE)
    model = ScriptedModel([*first_turn(), *second_turn()], name="demo")

    agent = _agent(settings, project, model, info, tally)
    _header(out, agent, project, folder)
    session = agent.open_session(title="fix lower-case discount codes")
    try:
        for number, task in ((1, FIRST_TASK), (2, SECOND_TASK)):
            if _turn(out, agent, session, number, task, tally) == "interrupted":
                return "interrupted"
        session_id = session.id
    finally:
        agent.close()
    out.print()
    print_wrapped(
        out,
        f"[bold]Closed the session and its engine.[/bold] Resuming {session_id} from the store "
        "in a new engine…",
    )

    model.add(*third_turn())
    agent = _agent(settings, project, model, info, tally)
    try:
        resumed = agent.open_session(resume=session_id)
        view = resumed.view
        print_wrapped(
            out,
            f"Resumed from the snapshot: {len(view)} messages in the view "
            f"(the transcript holds {browsable(agent.engine.store).last_seq(session_id)}).",
        )
        if _turn(out, agent, resumed, 3, THIRD_TASK, tally) == "interrupted":
            return "interrupted"
    finally:
        agent.close()
    _summary(out, folder / "sessions.db", project, tally)
    return "answered"


def _demo_settings(store: Path) -> Settings:
    # Built from nothing, not from config files: the demo must run the same everywhere.
    settings = Settings()
    for key, value in (
        ("store", str(store)),
        ("approval", "auto"),
        ("preset", "mask-first"),
        ("background_compaction", False),  # compaction in the foreground: a repeatable story
        ("max_output_tokens", DEMO_REPLY_RESERVE),
    ):
        settings.set(key, value, "demo")
    return settings


def _agent(
    settings: Settings, project: Path, model: ScriptedModel, info: ModelInfo, tally: _Tally
) -> Agent:
    return build_agent(
        settings,
        root=project,
        approve=None,
        sinks=[tally.events],
        model=model,
        info=info,
        include_global_instructions=False,
        quiet_sqlite_warning=True,  # one process writes this throw-away store
    )


def _header(out: Console, agent: Agent, project: Path, folder: Path) -> None:
    engine = agent.engine
    tools = engine.counter.count_tools(agent.toolbox.specs())
    thresholds = engine.policy.thresholds
    offload = human_size(engine.policy.output_limits.offload_above_bytes)
    print_wrapped(
        out,
        "[bold]contextfold demo[/bold]: a scripted agent fixes a bug in a copy of a small project, "
        "with real tools and real outputs, offline. The window is deliberately tiny, so every way "
        "of keeping it healthy shows up. The left column is how full the window was for each "
        "model call; [cyan]◆[/cyan] marks what the engine did to the context.",
    )
    out.print()
    rows = (
        ("project", f"{project} (AGENTS.md loaded; tests: python -m tests)"),
        ("model", "scripted: no API key, no network"),
        (
            "window",
            f"{engine.model.context_window:,} tokens: {engine.reserved_output:,} kept for the "
            f"reply, {engine.effective_window:,} for the prompt (the tools take {tools:,})",
        ),
        (
            "policy",
            f"mask at {thresholds.mask_at:.0%}, compact at {thresholds.compact_at:.0%} down "
            f"to {thresholds.compact_target:.0%}, offload outputs over {offload}",
        ),
        ("store", str(folder / "sessions.db")),
    )
    for label, value in rows:
        print_wrapped(out, _render.escape(value), lead=f"  [dim]{label:<8}[/dim] ", indent=11)


def _turn(
    out: Console, agent: Agent, session: Session, number: int, task: str, tally: _Tally
) -> StopReason:
    out.print()
    out.rule(f"turn {number}", align="left", style="dim")
    print_wrapped(out, _render.escape(task), lead="[bold]you:[/bold] ", indent=5)
    printer = TranscriptPrinter(out, MeterTracker(session), one_line=True)
    hooks = printer.hooks()
    shown = hooks.on_response

    def on_response(response: ChatResponse) -> None:
        tally.on_response(printer.meter.session)
        if shown:
            shown(response)

    hooks.on_response = on_response
    result = run_agent(session, agent.model, agent.toolbox, task, system=agent.system, hooks=hooks)
    printer.finish()
    printer.line(
        f"[dim]context now: {_render.escape(printer.meter.read().text())}[/dim]", gutter=" " * 5
    )
    if result.stop == "max_steps":
        _render.print_error("the scripted agent stopped early (max_steps)", warning=True)
    return result.stop


def _summary(out: Console, store_path: Path, project: Path, tally: _Tally) -> None:
    events = tally.events
    usage = events.of_type(TokenUsage)
    offloaded = events.of_type(OutputOffloaded)
    refs = {e.ref for e in offloaded} | {e.ref for e in events.of_type(OutputTruncated) if e.ref}
    edits: Counter[str] = Counter()
    store = open_store(store_path)
    try:
        sessions = [s.id for s in store.list_sessions()]
        for session_id in sessions:
            for record in store.iter_edits(session_id):
                edit = record.edit
                action = edit_action(edit)
                kind = _EDIT_NAMES.get(action, action)
                if isinstance(edit, MaskEdit):
                    refs |= {item.ref for item in edit.items if item.ref}
                edits[kind] += 1
        readable = sum(1 for ref in refs if _readable(store, sessions, ref))
    finally:
        store.close()
    compactions = events.of_type(CompactionFinished)
    size = sum(e.size_bytes for e in offloaded)
    edit_text = ", ".join(_count(n, kind) for kind, n in sorted(edits.items())) or "none"
    if compactions:
        edit_text += f" (in {_count(len(compactions), 'compaction')})"
    rows = (
        ("turns", "3 (the last one after a resume from the store)"),
        ("model calls", f"{tally.calls}"),
        ("tokens sent", f"{sum(e.input_tokens for e in usage):,} (prompts of all calls)"),
        (
            "peak context",
            f"{tally.peak_tokens:,} of {tally.window:,} tokens "
            f"({_render.format_share(tally.peak_tokens, tally.window)})",
        ),
        ("context edits", edit_text),
        ("outputs offloaded", f"{len(offloaded)} ({human_size(size)} kept in the store)"),
        ("refs recoverable", f"{readable} of {len(refs)} (read_result reads each one back)"),
        ("tests now", _test_status(project)),
    )
    out.print("\n[bold]Session summary[/bold]")
    for label, value in rows:
        print_wrapped(out, _render.escape(value), lead=f"  {label:<18} ", indent=21)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}es" if noun.endswith("h") else f"{n} {noun}s"


def _readable(store: SessionStore, sessions: list[str], ref: str) -> bool:
    for session_id in sessions:
        try:
            store.get_blob(session_id, ref)
            return True
        except LookupError:
            continue
    return False


def _test_status(project: Path) -> str:
    """The project's own test run, outside the agent: the proof of the fix."""
    run = subprocess.run(
        [sys.executable, "-m", "tests"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=_TEST_TIMEOUT,
        check=False,
    )
    output = run.stdout + run.stderr
    ran = re.search(r"Ran (\d+) tests?", output)
    count = f"{ran.group(1)} tests" if ran else "tests"
    return f"passing ({count})" if run.returncode == 0 else f"failing ({count})"


@contextmanager
def _python_on_path() -> Iterator[None]:
    """Put this interpreter first on PATH, so the agent's ``python -m tests`` finds it even when
    contextfold runs from a virtual environment that is not activated."""
    before = os.environ.get("PATH")
    os.environ["PATH"] = os.pathsep.join(
        [str(Path(sys.executable).parent), *([before] if before else [])]
    )
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PATH", None)
        else:
            os.environ["PATH"] = before
