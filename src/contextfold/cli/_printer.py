"""An agent run printed for people: replies, tool calls and results, and every engine notice.

Each model call opens with a gutter showing how full the window was for that request
(`` 38% ``, coloured by zone), so the reader sees the context fill up and shrink as the run goes.
Notices (masking, offloads, compaction...) appear where they happen, marked with ``◆``. Given a
:class:`~contextfold.cli._busy.BusyIndicator` (the chat on a terminal), the printer shows it
while the model works and takes it away before printing anything.
"""

from __future__ import annotations

import json
import re
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from contextfold.agent import AgentHooks
from contextfold.cli._busy import BusyIndicator
from contextfold.cli._meter import ZONE_STYLES, MeterTracker
from contextfold.cli._notices import NoticeWriter
from contextfold.cli._render import printable, shorten
from contextfold.events import Event
from contextfold.messages import ToolCallPart, ToolResultPart
from contextfold.providers import ChatResponse

__all__ = ["TranscriptPrinter", "describe_call", "describe_result", "print_wrapped"]

GUTTER_WIDTH = 5
"""Characters of the left column holding the context share of each request."""

CALL_WIDTH = 48
"""Width of a tool call's description when its result follows on the same line."""

_EXIT_CODE = re.compile(r"^exit code: (-?\d+)$", re.MULTILINE)
_FOUND = re.compile(r"^Found (\d+) match", re.MULTILINE)


def print_wrapped(console: Console, markup: str, *, lead: str = "", indent: int = 0) -> None:
    """``markup`` after ``lead`` (markup too), wrapped to the console with later lines indented
    by ``indent`` columns and no trailing spaces (the output is meant to be pasted). Control
    characters in either are shown as escapes (see :func:`printable`)."""
    head = Text.from_markup(printable(lead), emoji=False)
    width = max(20, console.width - indent)
    body = Text.from_markup(printable(markup), emoji=False)
    for i, piece in enumerate(body.wrap(console, width)):
        piece.rstrip()
        console.print(
            Text.assemble(head if i == 0 else Text(" " * indent), piece),
            soft_wrap=True,
            highlight=False,
        )


def describe_call(call: ToolCallPart) -> str:
    """A tool call as a short line: ``shell python -m tests``, ``read_file cart.py:10-40``."""
    args: dict[str, Any] = call.args() if call.arguments_valid else {}
    name = call.name
    if name == "shell":
        detail = str(args.get("command", ""))
    elif name in ("read_file", "write_file", "edit_file", "list_dir"):
        detail = str(args.get("path", "."))
        if "start_line" in args or "end_line" in args:
            detail += f":{args.get('start_line', 1)}-{args.get('end_line', '')}"
    elif name in ("grep", "glob"):
        detail = str(args.get("pattern", ""))
        if args.get("path"):
            detail += f" in {args['path']}"
    elif name == "read_result":
        detail = str(args.get("ref", ""))
        if "pattern" in args:
            detail += f" /{args['pattern']}/"
        elif "start_line" in args:
            detail += f" lines {args['start_line']}-{args.get('end_line', '')}"
    elif name == "compact_context":
        detail = str(args.get("focus", ""))
    else:
        detail = json.dumps(args, ensure_ascii=False) if args else call.arguments
    return f"{name} {shorten(detail, 70)}".rstrip()


def describe_result(result: ToolResultPart) -> tuple[bool, str]:
    """``(ok, summary)`` of a result as the transcript holds it: ``exit 1 · 45 lines``."""
    text = result.content
    if result.is_error:
        return False, shorten(text.splitlines()[0] if text else "error", 60)
    kept = " · preview + ref" if result.ref else ""
    lines = _lines_of(text)
    exit_code = _EXIT_CODE.findall(text)
    if exit_code:
        code = int(exit_code[-1])
        return code == 0, f"exit {code} · {lines:,} lines{kept}"
    found = _FOUND.search(text)
    if found and result.name == "grep":
        return True, f"{found.group(1)} matches{kept}"
    return True, f"{lines:,} lines{kept}"


def _lines_of(text: str) -> int:
    # A cut or offloaded output says how long it was; count that, not the preview.
    total = re.search(r"(?:Total output lines: |bytes, )(\d+)(?: lines)?", text)
    return int(total.group(1)) if total else text.count("\n") + 1


class TranscriptPrinter:
    """Prints a run to ``console`` through :class:`AgentHooks`; see the module docstring.

    ``stream`` shows reply text as it arrives; ``one_line`` prints each tool call with its result
    on one line once it is done (a tidy log) instead of the call first (live, for a terminal);
    ``show_final`` false leaves the final answer for the caller to print (``run`` puts it alone
    on stdout). ``busy`` is shown from :meth:`model_working` until the model's reply or a tool
    call prints; notices in between pause it.
    """

    def __init__(
        self,
        console: Console,
        meter: MeterTracker,
        *,
        stream: bool = False,
        one_line: bool = False,
        show_final: bool = True,
        busy: BusyIndicator | None = None,
    ) -> None:
        self.console = console
        self.busy = busy
        self.meter = meter
        self.stream = stream
        self.one_line = one_line
        self.show_final = show_final
        self.notices = NoticeWriter()
        self._step_open = False  # the gutter of the current model call has been printed
        self._streamed = False
        self._in_tool = False
        self._pending: list[str] = []  # notices held back until a one-line tool result prints

    def hooks(self, *, events: bool = True) -> AgentHooks:
        """The hooks to pass to :func:`~contextfold.agent.run_agent`; ``events=False`` when the
        engine's events already reach :meth:`event` through a sink of its own."""
        return AgentHooks(
            on_text_delta=self._delta if self.stream else None,
            on_response=self._response,
            on_tool_call=self._tool_call,
            on_tool_result=self._tool_result,
            on_event=self.event if events else None,
        )

    # -- lines -------------------------------------------------------------------------------

    def _gutter(self) -> str:
        if self._step_open:
            return " " * GUTTER_WIDTH
        self._step_open = True
        request = self.meter.session.last_request
        window = self.meter.session.engine.effective_window
        if request is None or not window:
            return " " * GUTTER_WIDTH
        fraction = request.tokens / window
        style = ZONE_STYLES[self.meter.session.engine.policy.thresholds.zone(fraction)]
        return f"[{style}]{fraction:>4.0%}[/{style}] "

    def line(self, markup: str, *, gutter: str | None = None) -> None:
        """Print markup after the gutter, wrapped lines indented under the text."""
        lead = self._gutter() if gutter is None else gutter
        with self._busy_paused():
            print_wrapped(self.console, markup, lead=lead, indent=GUTTER_WIDTH)

    def model_working(self) -> None:
        """The model is at work: show the busy indicator, if there is one."""
        if self.busy is not None:
            self.busy.start()

    def idle(self) -> None:
        """Nothing is at work any more (or something else must print): take the indicator away."""
        if self.busy is not None:
            self.busy.stop()

    def _busy_paused(self) -> AbstractContextManager[None]:
        return self.busy.paused() if self.busy is not None else nullcontext()

    def event(self, event: Event) -> None:
        """Show the notice for an engine event (if it has one)."""
        notice = self.notices.notice(event)
        if notice is None:
            return
        style = "yellow" if notice.level == "warning" else "cyan"
        text = f"[{style}]◆ {escape(notice.text)}[/{style}]"
        if self.one_line and self._in_tool:
            self._pending.append(text)
        else:
            self.line(text, gutter=" " * GUTTER_WIDTH)

    def finish(self) -> None:
        """End the run's output: close a reply cut short (an interrupt mid-stream), flush held
        notices, and start the next run afresh."""
        self.idle()
        if self._streamed:
            self.console.print()
        for text in self._pending:
            self.line(text, gutter=" " * GUTTER_WIDTH)
        self._pending.clear()
        self._streamed = self._step_open = self._in_tool = False

    # -- hooks: each model reply opens a new step, and with it a new gutter -----------------

    def _delta(self, text: str) -> None:
        self.idle()  # the reply itself shows the model at work
        if not self._streamed:
            self._step_open = False
            self.console.print(self._gutter(), end="", highlight=False)
            self._streamed = True
        self.console.print(text, end="", markup=False, highlight=False, soft_wrap=True)

    def _response(self, response: ChatResponse) -> None:
        self.idle()
        final = not response.tool_calls
        if self._streamed:
            self.console.print()
        else:
            self._step_open = False
            if response.text.strip() and (self.show_final or not final):
                self.line(escape(response.text.strip()))
        self._streamed = False

    def _tool_call(self, call: ToolCallPart) -> None:
        self.idle()  # the tool runs now, and may ask for approval
        self._in_tool = True
        if not self.one_line:
            self.line(f"[dim]→[/dim] {escape(describe_call(call))}")

    def _tool_result(self, call: ToolCallPart, result: ToolResultPart) -> None:
        self._in_tool = False
        ok, summary = describe_result(result)
        mark = "[green]✓[/green]" if ok else "[red]✗[/red]"
        if self.one_line:
            described = escape(describe_call(call).ljust(CALL_WIDTH))
            self.line(f"[dim]→[/dim] {described} {mark} [dim]{escape(summary)}[/dim]")
            for text in self._pending:
                self.line(text, gutter=" " * GUTTER_WIDTH)
            self._pending.clear()
        else:
            self.line(f"  {mark} [dim]{escape(summary)}[/dim]")
        self.model_working()  # the model reads the result next (a further call stops it)
