"""The chat loop: read a line, run a slash command or the agent, show what happened.

On a terminal the prompt is prompt_toolkit's: history kept in the user data folder, completion of
slash commands, and a status line with the context meter (used / window, coloured by zone, cache
reads, cost). When stdin is not a terminal, lines are read plainly, so pipes and tests can drive
the chat; approval questions then read their answer from the next line.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TextIO

import typer
from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.styles import Style
from rich.console import Console
from rich.markup import escape

from contextfold.agent import run_agent
from contextfold.budget import Zone
from contextfold.cli._agent_setup import Agent
from contextfold.cli._approval import ApprovalPrompt
from contextfold.cli._busy import BusyIndicator
from contextfold.cli._history import PrivateFileHistory
from contextfold.cli._meter import MeterTracker, bar
from contextfold.cli._notices import MANUAL_TRIGGER
from contextfold.cli._printer import TranscriptPrinter
from contextfold.cli._render import plural, shorten
from contextfold.cli._slash import COMMANDS, ChatState, run_slash
from contextfold.engine import Session
from contextfold.errors import ContextfoldError, ProviderError
from contextfold.events import Event, LossReported
from contextfold.paths import data_dir
from contextfold.retention.loss import stored_where

__all__ = ["HISTORY_FILE", "LOSS_PAUSE_LISTED", "ChatRepl", "EventRelay"]

HISTORY_FILE = "chat_history"
"""The prompt history file, in the user data folder."""
LOSS_PAUSE_LISTED = 10
"""Lost facts ``--pause-on-loss`` lists before its question (the rest are counted)."""

_PROMPT_STYLE = Style.from_dict(
    {
        "bottom-toolbar": "noreverse",
        "meter.ok": "fg:ansigreen",
        "meter.mask": "fg:ansiyellow",
        "meter.compact": "fg:ansimagenta",
        "meter.block": "fg:ansired bold",
        "meter.overflow": "fg:ansired bold",
        "dim": "fg:ansibrightblack",
    }
)


class EventRelay:
    """An event sink made before the chat exists; it forwards to whatever ``target`` is."""

    def __init__(self) -> None:
        self.target: Callable[[Event], None] | None = None

    def emit(self, event: Event) -> None:
        if self.target is not None:
            self.target(event)


class SlashCompleter(Completer):
    """Completes ``/command`` names, with their help beside them."""

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or " " in text:
            return
        for command in COMMANDS.values():
            if command.name.startswith(text[1:]):
                yield Completion(
                    "/" + command.name, start_position=-len(text), display_meta=command.help
                )


class ChatRepl:
    """One chat: the agent, the session it continues, and the terminal it talks to."""

    def __init__(
        self,
        agent: Agent,
        session: Session,
        relay: EventRelay,
        *,
        out: Console,
        interactive: bool,
        stdin: TextIO | None = None,
        pause_on_loss: bool = False,
    ) -> None:
        self.agent = agent
        self.pause_on_loss = pause_on_loss
        self.out = out
        self.interactive = interactive
        self._stdin = stdin or sys.stdin
        meter = MeterTracker(session)
        # On a terminal, calls print as they start (a command may take a while) and a spinner
        # shows while the model works; in a pipe each call prints once with its result, which
        # reads better in a log, and nothing spins.
        printer = TranscriptPrinter(
            out,
            meter,
            stream=interactive,
            one_line=not interactive,
            busy=BusyIndicator(out) if interactive else None,
        )
        self.state = ChatState(session, agent.toolbox, out, meter, printer)
        relay.target = self._event
        self._approval = ApprovalPrompt(
            out,
            ask=self._approval_answer,
            read_key=typer.getchar if interactive else None,
            scope="this chat",
        )
        self._status = FormattedText([])
        self._prompt: PromptSession[str] | None = None
        if interactive:
            self._prompt = PromptSession(
                history=_history(),
                completer=SlashCompleter(),
                complete_while_typing=True,
                bottom_toolbar=self._toolbar,
                style=_PROMPT_STYLE,
            )

    @property
    def session(self) -> Session:
        """The session the chat continues now."""
        return self.state.session

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> None:
        """Read and answer lines until ``/quit`` or end of input."""
        self._greet()
        for line in self._lines():
            text = line.strip()
            if not text:
                continue
            try:
                if text.startswith("/"):
                    if not run_slash(self.state, text):
                        break
                else:
                    self._task(text)
            except ProviderError as exc:
                self.out.print(f"[red]model error:[/red] {escape(str(exc))}")
            except ContextfoldError as exc:
                self.out.print(f"[red]error:[/red] {escape(str(exc))}")
        self.out.print(
            f"Session {self.session.id} is saved; continue it with "
            f"[bold]contextfold chat --resume {self.session.id}[/bold]"
        )

    def _lines(self) -> Iterator[str]:
        if self._prompt is None:
            for line in self._stdin:
                self.out.print(f"[bold]you:[/bold] {escape(line.rstrip())}", highlight=False)
                yield line
            return
        while True:
            # Measured once per prompt: the status line is drawn again at every keystroke.
            self._status = self._status_line()
            try:
                yield self._prompt.prompt("› ")
            except KeyboardInterrupt:
                continue  # Ctrl-C at the prompt clears the line, as in a shell
            except EOFError:
                return

    def _task(self, text: str) -> None:
        agent = self.agent
        printer = self.state.printer
        printer.model_working()
        try:
            result = run_agent(
                self.session,
                agent.model,
                agent.toolbox,
                text,
                system=agent.system,
                max_steps=agent.max_steps,
                # Engine events reach the printer through the relay, also outside a run
                # (/compact).
                hooks=printer.hooks(events=False),
            )
        finally:
            printer.idle()  # a model error is printed next, then the prompt
        printer.finish()
        if result.stop == "interrupted":
            self.out.print("[yellow]Stopped.[/yellow] The transcript keeps what was done so far.")
        elif result.stop == "max_steps":
            self.out.print(
                f"[yellow]Paused after {result.steps} model calls[/yellow] (--max-steps); "
                "send a message to let the agent go on."
            )
        if not self.interactive:
            self.out.print(f"[dim]{escape(self.state.meter.read().text())}[/dim]")

    def _greet(self) -> None:
        engine = self.agent.engine
        model = engine.model
        self.out.print(
            f"[bold]contextfold chat[/bold] · {escape(self.agent.model.name)} · window "
            f"{model.context_window:,} tokens · preset {engine.compactor.name} · approval "
            f"{self.agent.approval.mode} · session {self.session.id}"
        )
        self.out.print("[dim]/help lists the commands; Ctrl-D leaves.[/dim]")

    # -- engine events -----------------------------------------------------------------------

    def _event(self, event: Event) -> None:
        """Show an engine event; with ``--pause-on-loss``, ask before going on after a
        compaction that lost facts."""
        self.state.printer.event(event)
        if self.pause_on_loss and isinstance(event, LossReported):
            self._pause_on_loss(event)

    def _pause_on_loss(self, event: LossReported) -> None:
        """Ask whether the agent may go on after ``event`` reported lost facts; a no stops the
        task as Ctrl-C does (the compaction stays: the transcript keeps what it took out).

        A compaction the user asked for (``/compact``) is not questioned: they chose it."""
        if not event.lost or event.trigger == MANUAL_TRIGGER:
            return
        printer = self.state.printer
        printer.idle()  # never a spinner over the question
        printer.finish()  # notices held back for a tool result print first
        lost = [item for item in event.items if stored_where(item) == "lost"]
        self.out.print(
            f"[yellow]The compaction took {plural(event.lost, 'fact')} out of the context "
            "that nothing in it can bring back:[/yellow]"
        )
        for item in lost[:LOSS_PAUSE_LISTED]:
            kind, text = item.get("kind", "fact"), shorten(str(item.get("text", "")), 160)
            self.out.print(f"  [dim]{escape(str(kind))}:[/dim] {escape(text)}", highlight=False)
        if event.lost > LOSS_PAUSE_LISTED:
            self.out.print(f"  [dim]… and {event.lost - LOSS_PAUSE_LISTED} more[/dim]")
        answer = self._approval_answer("Continue? [Y/n] ").strip().lower()
        if answer.startswith("n"):
            raise KeyboardInterrupt  # the agent loop stops the task cleanly on it

    # -- approval and the status line --------------------------------------------------------

    def approve(self, tool_name: str, summary: str) -> bool:
        """Ask the user whether a write or command may run (the ``ask`` approval mode), once
        they have been shown all of ``summary`` (paged on a terminal)."""
        self.state.printer.idle()  # never a spinner over the question
        return self._approval(tool_name, summary)

    def _approval_answer(self, question: str) -> str:
        if self._prompt is not None:
            return self._prompt.prompt(question, bottom_toolbar=None)
        self.out.print(question, end="", markup=False)
        answer = self._stdin.readline()
        self.out.print(escape(answer.strip()))
        return answer

    def _toolbar(self) -> FormattedText:
        return self._status

    def _status_line(self) -> FormattedText:
        reading = self.state.meter.read()
        zone = reading.zone
        style = f"class:meter.{zone.value}"
        zone_note = "" if zone is Zone.OK else f" {zone.value}"
        return FormattedText(
            [
                (style, f" {bar(reading.fraction)} {reading.fraction:.0%}{zone_note} "),
                ("", f" {reading.text()} "),
                ("class:dim", f" {self.session.id} · /help "),
            ]
        )


def _history() -> PrivateFileHistory | InMemoryHistory:
    try:
        return PrivateFileHistory(data_dir() / HISTORY_FILE)
    except OSError:  # a read-only home must not stop the chat: history is a convenience
        return InMemoryHistory()
