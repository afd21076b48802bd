"""The ``ask`` approval on a terminal: all of what a write or command will do, then a yes or no.

The user is shown every line of the tool's summary (a whole command, a whole new file, every
hunk of an edit), with control characters shown as escapes (see
:func:`~contextfold.cli._render.printable`) and their number in the header. A summary taller
than the terminal is paged: ``Enter`` shows the next page, ``a`` all the rest, ``q`` (or ``n``,
``Esc``, ``Ctrl-D``) stops.

Stopping declines. The question is asked only once the last line has been printed, so a yes is
never given to a line the user was not shown; a prompt that allowed a yes after a partial view
would have to rely on the user reading a warning at the moment they are tired of paging, which
is exactly when a ``curl … | sh`` on line 150 gets through.

Without a pager (output not a terminal: the chat driven by a pipe), everything is printed
before the question.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.control import Control
from rich.segment import ControlType
from rich.text import Text

from contextfold.cli._render import (
    escape,
    plural,
    printable,
    printable_text,
    unprintable_count,
)

__all__ = ["APPROVAL_MIN_PAGE_ROWS", "APPROVAL_SPARE_ROWS", "ApprovalPrompt"]

APPROVAL_SPARE_ROWS = 2
"""Terminal rows a page of the approval leaves free: the ``-- lines … shown --`` line below it
and one spare, so that no page scrolls its own top away (the first page also leaves the rows of
the header above it)."""
APPROVAL_MIN_PAGE_ROWS = 5
"""Fewest rows a page takes, however small the terminal says it is."""

_INDENT = "  "
_TAB_SIZE = 8  # rich's and the terminal's
_NEXT_PAGE = ("\r", "\n", " ")
_ALL_THE_REST = ("a", "A")
_STOP = ("q", "Q", "n", "N", "\x1b")


class ApprovalPrompt:
    """The ``approve(tool_name, summary) -> bool`` callback of the ``ask`` mode, on a console.

    ``ask(question)`` reads the answer to the final question (a line: ``y``, ``n`` or ``a`` for
    always). ``read_key()`` reads one key for the pager; ``None`` prints everything at once (no
    terminal to page on). ``scope`` names how long "always" lasts (``this chat``).
    """

    def __init__(
        self,
        console: Console,
        *,
        ask: Callable[[str], str],
        read_key: Callable[[], str] | None,
        scope: str,
    ) -> None:
        self.console = console
        self.ask = ask
        self.read_key = read_key
        self.scope = scope
        self.always = False

    def __call__(self, tool_name: str, summary: str) -> bool:
        """Show all of ``summary``, then ask; true when the user allowed the call."""
        if self.always:
            return True
        # Split on newlines only: a carriage return inside a line is shown as an escape, not
        # taken as a line break that would let the rest of the line pass for another line.
        lines = summary.split("\n")
        header_rows = self._header(tool_name, lines, summary)
        shown = self._show(lines, header_rows)
        if shown < len(lines):
            self.console.print(
                f"[yellow]Declined:[/yellow] you stopped at line {shown:,} of {len(lines):,}; "
                f"the {escape(printable(tool_name))} call was not allowed."
            )
            return False
        answer = self.ask(f"Allow? [y]es / [n]o / [a]lways for {self.scope}: ")
        choice = answer.strip().lower()[:1]
        self.always = choice == "a"
        return choice in ("y", "a")

    def _header(self, tool_name: str, lines: Sequence[str], summary: str) -> int:
        """Print what is asked about and its size; the terminal rows that took."""
        header = Text.assemble(
            (f"{printable(tool_name)} wants to run", "yellow"), f" ({plural(len(lines), 'line')}):"
        )
        hidden = unprintable_count(summary)
        if hidden:
            header.append(
                f" it holds {plural(hidden, 'terminal control character')}, shown as escapes "
                "like \\x1b: read them, they can hide or rewrite text.",
                style="bold red",
            )
        self.console.print(header, soft_wrap=True)
        return self._rows(header.plain)

    def _show(self, lines: Sequence[str], taken: int) -> int:
        """Print ``lines`` page by page, the first page under ``taken`` rows already printed;
        how many lines were shown (all, unless the user stopped)."""
        read_key = self.read_key
        start = 0
        while start < len(lines):
            end = len(lines) if read_key is None else self._page_end(lines, start, taken)
            taken = 0
            for line in lines[start:end]:
                self.console.print(Text.assemble(_INDENT, printable_text(line)), soft_wrap=True)
            start = end
            if read_key is not None and start < len(lines):
                key = self._more(read_key, start, len(lines))
                if key in _STOP:
                    return start
                if key in _ALL_THE_REST:
                    read_key = None
        return start

    def _page_end(self, lines: Sequence[str], start: int, taken: int) -> int:
        """Where the page from ``start`` ends: as many lines as fill the terminal's rows less
        ``taken``, the rows a long line wraps onto included (always at least one line)."""
        height = self.console.size.height
        room = max(APPROVAL_MIN_PAGE_ROWS, height - APPROVAL_SPARE_ROWS - taken)
        end = start
        while end < len(lines):
            rows = self._rows(_INDENT + printable(lines[end]))
            if end > start and rows > room:
                break
            room -= rows
            end += 1
        return end

    def _rows(self, text: str) -> int:
        """Terminal rows ``text`` (one line, no control characters) takes once wrapped."""
        width = max(1, self.console.size.width)
        return max(1, -(-cell_len(text.expandtabs(_TAB_SIZE)) // width))

    def _more(self, read_key: Callable[[], str], shown: int, total: int) -> str:
        """Ask for a pager key after line ``shown`` of ``total``; the key (``q`` on Ctrl-D)."""
        self.console.print(
            f"[reverse]-- lines 1-{shown:,} of {total:,} shown · Enter: next page · "
            "a: all the rest · q: stop and decline --[/reverse]",
            end="",
        )
        try:
            while True:
                key = read_key()
                if key in (*_NEXT_PAGE, *_ALL_THE_REST, *_STOP):
                    return key
        except EOFError:
            return "q"
        finally:
            # Erase the pager line, so the summary reads on without it.
            self.console.control(
                Control((ControlType.CARRIAGE_RETURN,), (ControlType.ERASE_IN_LINE, 2))
            )
