"""The chat's slash commands: what they show and do, on the chat's state.

Each command is a function ``(chat, argument) -> bool`` (false ends the chat) registered in
:data:`COMMANDS` with its usage and a one-line help, which ``/help`` and the completer show.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape

from contextfold.agent import Toolbox, restart_session
from contextfold.cli._meter import MeterTracker, bar
from contextfold.cli._printer import TranscriptPrinter, describe_call, print_wrapped
from contextfold.cli._render import format_int, format_time, printable, shorten
from contextfold.cli._store import browsable
from contextfold.compaction import CompactResult, recent_window_start
from contextfold.engine import Session
from contextfold.errors import UsageError
from contextfold.messages import Message, SummaryPart
from contextfold.tools.deferral import COMPACT_CONTEXT_TOOL, READ_RESULT_TOOL

__all__ = ["COMMANDS", "ChatState", "SlashCommand", "manual_compaction_report", "run_slash"]


@dataclass
class ChatState:
    """What the commands work on: the session being continued, and where output goes."""

    session: Session
    toolbox: Toolbox
    out: Console
    meter: MeterTracker
    printer: TranscriptPrinter

    def switch(self, session: Session) -> None:
        """Continue in ``session`` from now on (``/resume``, ``/restart``)."""
        self.session = session
        self.meter.follow(session)


@dataclass(frozen=True)
class SlashCommand:
    """A command: its name, what it takes, a one-line help, and what it does."""

    name: str
    usage: str
    help: str
    run: Callable[[ChatState, str], bool]


def run_slash(chat: ChatState, line: str) -> bool:
    """Run the command on ``line`` (``/name argument``); false when the chat should end."""
    name, _, argument = line.strip()[1:].partition(" ")
    command = COMMANDS.get(name.lower()) or _ALIASES.get(name.lower())
    if command is None:
        chat.out.print(f"[red]unknown command /{escape(name)}[/red]; /help lists them")
        return True
    return command.run(chat, argument.strip())


# -- the budget ----------------------------------------------------------------------------------


def _tokens(chat: ChatState, argument: str) -> bool:
    session, out = chat.session, chat.out
    engine = session.engine
    reading = chat.meter.read()
    out.print(
        f"[bold]Context[/bold] {bar(reading.fraction)} {escape(reading.text())}", highlight=False
    )
    request = session.last_request
    if request is None:
        out.print("  No request yet: the breakdown by component appears after the first message.")
    else:
        budget = request.budget
        out.print(f"  Last request, by component (of {budget.effective_window:,} tokens):")
        for name, tokens in budget.components().items():
            share = tokens / budget.effective_window if budget.effective_window else 0.0
            out.print(f"    {name:<13} {tokens:>8,}  {share:>4.0%}", highlight=False)
        out.print(f"    {'free':<13} {max(0, budget.remaining):>8,}", highlight=False)
        out.print(
            f"    {'reply reserve':<13} {budget.reserved_output:>8,}  "
            f"(window {budget.context_window:,})",
            highlight=False,
        )
        if session.learned_window is not None:
            out.print(f"  {_learned_window_line(session)}", highlight=False)
        marks = budget.marks(engine.policy.thresholds)
        out.print(
            f"  Marks: mask {marks.mask_tokens:,} · compact {marks.compact_tokens:,} → "
            f"{marks.target_tokens:,} · block {marks.block_tokens:,}",
            highlight=False,
        )
    usage = session.usage()
    cost = "unknown (no prices for this model)" if usage.cost is None else f"${usage.cost:.4f}"
    left = (
        "unknown yet"
        if usage.turns_left is None
        else f"~{usage.turns_left:,} at ~{usage.average_growth:,.0f} tokens per call"
    )
    out.print(
        f"  Session: {usage.calls:,} calls · {usage.input_tokens:,} tokens in, "
        f"{usage.output_tokens:,} out · cache reads {usage.cache_hit_rate:.0%} of input · "
        f"cost {cost} · calls left {left}",
        highlight=False,
    )
    return True


# -- what the view holds ---------------------------------------------------------------------------


def _context(chat: ChatState, argument: str) -> bool:
    session, out = chat.session, chat.out
    engine = session.engine
    view = list(session.view)
    stored = browsable(engine.store).last_seq(session.id) if session.persisted else len(view)
    out.print(
        f"[bold]The view[/bold]: {len(view)} messages the model sees, of {stored} in the "
        "transcript (nothing is deleted: the rest is in the store)."
    )
    if session.learned_window is not None:
        out.print(f"  {_learned_window_line(session)}", highlight=False)
    summaries = [p for m in view for p in m.parts_of(SummaryPart)]
    for part in summaries:
        filled = [name for name, items in part.sections.items() if items]
        out.print(
            f"  [cyan]summary[/cyan] of earlier turns ({len(part.text):,} chars; "
            f"{', '.join(filled) or 'free text'})",
            highlight=False,
        )
    stored_away = [(m, r) for m in view for r in m.tool_results if r.ref]
    if stored_away:
        out.print(f"  [cyan]behind refs[/cyan] ({len(stored_away)}; read_result brings them back):")
        for _, result in stored_away[-12:]:
            first = result.content.strip().splitlines()[0] if result.content.strip() else ""
            print_wrapped(out, escape(shorten(first, 90)), lead=f"    {result.ref}  ", indent=22)
        if len(stored_away) > 12:
            out.print(f"    … and {len(stored_away) - 12} earlier ones")
    start = recent_window_start(
        view,
        engine.counter,
        turns=engine.policy.recent.turns,
        max_tokens=engine.policy.recent.max_tokens(session.effective_window),
    )
    recent = view[start:]
    tokens = sum(engine.counter.count_message(m) for m in recent)
    out.print(
        f"  [cyan]recent window[/cyan] kept verbatim: {len(recent)} messages, {tokens:,} tokens:"
    )
    for message in recent[-15:]:
        out.print(f"    {escape(_describe(message))}", highlight=False)
    return True


def _learned_window_line(session: Session) -> str:
    return (
        f"Window: {session.context_window:,} tokens, the limit the provider stated when it "
        f"refused a request (the model's registry window is "
        f"{session.engine.model.context_window:,}); every request is planned against it."
    )


def _describe(message: Message) -> str:
    if message.tool_results:
        result = message.tool_results[0]
        return f"tool       {result.name}: {shorten(result.content, 70)}"
    if message.tool_calls:
        calls = ", ".join(describe_call(c) for c in message.tool_calls)
        text = f"{shorten(message.text, 30)} " if message.text.strip() else ""
        return f"assistant  {text}→ {shorten(calls, 70)}"
    return f"{message.role:<10} {shorten(message.text, 80)}"


# -- actions ---------------------------------------------------------------------------------------


def _compact(chat: ChatState, argument: str) -> bool:
    # The engine's events for a manual compaction get no notice: this is its one report.
    session = chat.session
    before = session.usage().context_tokens
    result = session.compact(argument or None)
    chat.out.print(
        escape(manual_compaction_report(result, before, session.usage().context_tokens)),
        highlight=False,
    )
    return True


def manual_compaction_report(result: CompactResult, before_tokens: int, after_tokens: int) -> str:
    """What ``/compact`` did, in plain words: the messages changed and how, and the context's
    size before and after (``before_tokens`` / ``after_tokens``, the meter's figures); or that
    nothing changed, and why."""
    if not result.changed:
        return f"Nothing compacted: {result.unchanged_reason}."
    changes = result.message_changes()
    readable = ""
    # Every tool output a compaction hides or shortens is stored first, under a ref.
    if any(m.tool_results for m in result.before_view if m.id in changes):
        readable = "; the tool outputs it took out stay readable with read_result"
    return (
        f"Compacted {result.what_changed()}: {before_tokens:,} → {after_tokens:,} tokens in the "
        f"context{readable}."
    )


def _pin(chat: ChatState, argument: str) -> bool:
    session, out = chat.session, chat.out
    if argument:
        try:
            added = session.pin(argument)
        except UsageError as exc:
            out.print(f"[red]{escape(str(exc))}[/red]")
            return True
        if added is None:
            out.print("Already pinned.")
        else:
            out.print(f"Pinned: {escape(added.text)}", highlight=False)
    pins = session.pins
    if not pins:
        out.print("No pins. /pin TEXT keeps TEXT in every request, whatever compaction removes.")
        return True
    out.print(f"[bold]Pins[/bold] ({len(pins)}; sent verbatim with every request):")
    for number, pin in enumerate(pins, 1):
        out.print(f"  {number:>2}. {escape(pin.text)}  [dim]({pin.source})[/dim]", highlight=False)
    return True


def _unpin(chat: ChatState, argument: str) -> bool:
    if not argument.isdigit():
        chat.out.print("usage: /unpin N (the number /pin lists)")
        return True
    removed = chat.session.unpin(int(argument))
    if removed is None:
        chat.out.print(f"No pin number {escape(argument)}; /pin lists them.")
    else:
        chat.out.print(f"Unpinned: {escape(removed.text)}", highlight=False)
    return True


def _restart(chat: ChatState, argument: str) -> bool:
    child = restart_session(chat.session, focus=argument or None)
    chat.switch(child)
    return True


def _resume(chat: ChatState, argument: str) -> bool:
    if not argument:
        chat.out.print("usage: /resume SESSION_ID (see /sessions)")
        return True
    session = chat.session.engine.resume(argument)
    chat.switch(session)
    chat.out.print(
        f"Resumed {session.id}: {len(session.view)} messages in the view "
        f"({escape(session.info.title or 'untitled')})."
    )
    return True


def _sessions(chat: ChatState, argument: str) -> bool:
    store = browsable(chat.session.engine.store)
    sessions = store.list_sessions(limit=15)
    if not sessions:
        chat.out.print("No stored sessions yet.")
        return True
    for info in sessions:
        mark = "*" if info.id == chat.session.id else " "
        parent = f" ← {info.parent_id}" if info.parent_id else ""
        chat.out.print(
            f" {mark} {info.id}  {format_time(info.updated)}  {format_int(info.message_count):>6}"
            f" msgs  {escape(shorten(printable(info.title or 'untitled'), 40))}{parent}",
            highlight=False,
        )
    chat.out.print("   /resume ID continues one.")
    return True


def _instructions(chat: ChatState, argument: str) -> bool:
    loader = chat.session.engine.instructions
    if loader is None:
        chat.out.print("Project instructions are turned off (instructions.enabled = false).")
        return True
    loaded = loader.current or loader.load()
    if not loaded.sources:
        folders = ", ".join(str(f) for f, _ in loader.folders())
        chat.out.print(f"No AGENTS.md (or CLAUDE.md) found; looked in {escape(folders)}.")
        return True
    chat.out.print(
        f"[bold]Instructions[/bold]: {loaded.size:,} bytes of {loaded.max_bytes:,} allowed"
        f"{' (cut)' if loaded.truncated else ''}, from:"
    )
    for source in loaded.sources:
        cut = " (cut)" if source.truncated else ""
        chat.out.print(
            f"  {source.scope:<9} {escape(str(source.path))}  {source.size:,} bytes{cut}",
            highlight=False,
        )
    return True


def _tools(chat: ChatState, argument: str) -> bool:
    engine = chat.session.engine
    request = chat.session.last_request
    specs = list(request.tools) if request else [*chat.toolbox, READ_RESULT_TOOL]
    if request is None:
        specs.append(COMPACT_CONTEXT_TOOL)
    chat.out.print(f"[bold]Tools offered[/bold] ({len(specs)}):")
    for spec in specs:
        tokens = engine.counter.count_tools([spec])
        summary = shorten(spec.description, 60)
        chat.out.print(
            f"  {spec.name:<16} {spec.source:<8} {tokens:>5,} tokens  {escape(summary)}",
            highlight=False,
        )
    if request is not None and request.deferred_tools:
        chat.out.print(f"  deferred (tool_search finds them): {', '.join(request.deferred_tools)}")
    return True


def _help(chat: ChatState, argument: str) -> bool:
    chat.out.print("[bold]Commands[/bold] (anything else is a message for the agent):")
    for command in COMMANDS.values():
        chat.out.print(
            f"  {escape(f'{command.usage:<20}')} {escape(command.help)}", highlight=False
        )
    chat.out.print("  Ctrl-C stops the agent mid-task; Ctrl-D or /quit leaves.")
    return True


def _quit(chat: ChatState, argument: str) -> bool:
    return False


COMMANDS: dict[str, SlashCommand] = {
    c.name: c
    for c in (
        SlashCommand("tokens", "/tokens", "the budget by component, calls left, cost", _tokens),
        SlashCommand(
            "context", "/context", "what the view holds: summary, refs, recent turns", _context
        ),
        SlashCommand("compact", "/compact [focus]", "compact the context now", _compact),
        SlashCommand("pin", "/pin [text]", "pin a standing constraint; list the pins", _pin),
        SlashCommand("unpin", "/unpin N", "remove pin number N", _unpin),
        SlashCommand("instructions", "/instructions", "the AGENTS.md files loaded", _instructions),
        SlashCommand("tools", "/tools", "the tools offered to the model", _tools),
        SlashCommand("sessions", "/sessions", "recent stored sessions", _sessions),
        SlashCommand("resume", "/resume ID", "continue a stored session", _resume),
        SlashCommand(
            "restart", "/restart [focus]", "continue in a fresh session with a summary", _restart
        ),
        SlashCommand("help", "/help", "this list", _help),
        SlashCommand("quit", "/quit", "leave (the session stays in the store)", _quit),
    )
}
"""The commands by name, in the order ``/help`` lists them."""

_ALIASES = {"exit": COMMANDS["quit"], "q": COMMANDS["quit"], "?": COMMANDS["help"]}
