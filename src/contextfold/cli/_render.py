"""Shared output helpers for the commands: consoles, number formats, progress, JSON, and
:func:`printable`, which makes text from users, models and stores safe to show on a terminal.

Consoles are made per call, not at import time, so they write to whatever ``sys.stdout`` is when
a command runs (typer's test runner swaps it). Rich already honours ``NO_COLOR`` and leaves out
every ANSI code when the output is not a terminal; progress bars go to stderr and only appear on
a terminal, so piped output stays plain and parseable.

Text the CLI did not write itself (session titles, tool calls, model replies, commands to
approve) can carry terminal control sequences: ``ESC [8m`` conceals what follows, ``ESC [1A``
and ``ESC [2K`` erase a line already shown, ``ESC ]52;`` writes the clipboard, a bare carriage
return prints over the start of a line. The consoles made here pass every string they print
through :func:`printable`, which shows each such character as an escape (``\\x1b``) instead
of sending it: a hidden instruction becomes visible rather than silently dropped or obeyed.
Text that reaches the terminal another way (a :class:`~rich.text.Text` built by hand, a
``typer`` prompt) goes through :func:`printable` where it is built.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, TextIO

import regex
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

__all__ = [
    "PIPE_WIDTH",
    "PROGRESS_MIN_ITEMS",
    "JsonFlag",
    "console",
    "error_console",
    "escape",
    "format_int",
    "format_share",
    "format_time",
    "plural",
    "print_error",
    "print_json",
    "printable",
    "printable_text",
    "progress",
    "shorten",
    "table",
    "unprintable_count",
]

JsonFlag = Annotated[bool, typer.Option("--json", metavar="", help="Print JSON for machines.")]
"""The ``--json`` flag of every command that can print JSON for machines."""

PROGRESS_MIN_ITEMS = 5
"""Fewer items than this finish too fast for a progress bar to be worth its flicker."""

PIPE_WIDTH = 200
"""Line width when stdout is not a terminal (and ``COLUMNS`` is unset): wide enough that piped
tables keep one row per line for ``grep``, instead of rich's 80-column default."""


def console() -> Console:
    """A console on the current stdout (no colour when piped or when ``NO_COLOR`` is set)."""
    return _console(sys.stdout)


def error_console() -> Console:
    """A console on the current stderr, for errors, warnings and progress."""
    return _console(sys.stderr)


def _console(file: TextIO) -> Console:
    # No emoji codes: a title ":warning:" is shown as written, not as a picture.
    out = _PrintableConsole(file=file, highlight=False, emoji=False)
    if not out.is_terminal and not os.environ.get("COLUMNS"):
        out.width = PIPE_WIDTH
    return out


class _PrintableConsole(Console):
    """A console that shows control characters in every string it prints as escapes."""

    def render_str(self, text: str, *args: Any, **kwargs: Any) -> Text:
        # Every string printed, markup or not, table cells included, comes through here; rich's
        # own styling is added later, so escaping here never touches it.
        return super().render_str(printable(text), *args, **kwargs)


# -- terminal-safe text ----------------------------------------------------------------------------

_UNPRINTABLE = regex.compile(r"(?![\n\t\u200c\u200d])[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]")
"""The characters :func:`printable` escapes: Unicode's controls (C0, DEL, C1: ``\\x9b`` is a
one-byte CSI), format characters (bidi overrides that reorder what is shown, zero-width and tag
characters a reader cannot see), lone surrogates (undecodable bytes kept by ``surrogateescape``)
and the line and paragraph separators. Newline and tab are layout, kept; so are the two joiners,
which emoji and several scripts need."""


def printable(text: str) -> str:
    """``text`` with every control character shown as a Python escape (``\\x1b``, ``\\r``,
    ``\\u202e``): safe to put on a terminal, with nothing hidden, erased or moved. Newlines and
    tabs are kept. Escaping twice changes nothing."""
    shown: str = _UNPRINTABLE.sub(_escaped, text)
    return shown


def printable_text(text: str, *, escape_style: str = "reverse") -> Text:
    """:func:`printable` as rich text, each escape in ``escape_style`` so that it stands out
    from text that merely looks like an escape."""
    out = Text()
    start = 0
    for match in _UNPRINTABLE.finditer(text):
        out.append(text[start : match.start()])
        out.append(_escaped(match), style=escape_style)
        start = match.end()
    out.append(text[start:])
    return out


def unprintable_count(text: str) -> int:
    """How many characters of ``text`` :func:`printable` shows as escapes."""
    return sum(1 for _ in _UNPRINTABLE.finditer(text))


def _escaped(match: regex.Match[str]) -> str:
    char = match.group()
    if char == "\r":
        return "\\r"
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def print_error(message: str, *, warning: bool = False) -> None:
    """One ``error: ...`` (or ``warning: ...``) line on stderr, as the error boundary writes."""
    label, style = ("warning", "yellow") if warning else ("error", "red")
    error_console().print(f"[{style}]{label}:[/{style}] {escape(message)}", soft_wrap=True)


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout, with no styling whatever the terminal."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def table(*columns: str, title: str | None = None, numeric: tuple[str, ...] = ()) -> Table:
    """A plain table with ``columns``; the ones named in ``numeric`` are right-aligned."""
    out = Table(title=title, title_justify="left", header_style="bold", box=None, pad_edge=False)
    for name in columns:
        out.add_column(name, justify="right" if name in numeric else "left")
    return out


def format_int(value: int | None) -> str:
    """``12,345``; an em dash for an unknown value."""
    return "—" if value is None else f"{value:,}"


def format_share(part: float | None, whole: float | None) -> str:
    """``part`` as a percentage of ``whole`` (``5.9%``, ``<0.1%``); a dash when unknown."""
    if part is None or not whole:
        return "—"
    share = 100 * part / whole
    if 0 < share < 0.1:
        return "<0.1%"
    return f"{share:.1f}%"


def format_time(timestamp: float | None) -> str:
    """A Unix time as local ``YYYY-MM-DD HH:MM``; a dash when unknown."""
    if not timestamp:
        return "—"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp))


def plural(count: int, word: str) -> str:
    """``"1 call"``, ``"3 calls"``: the count with its noun (English ``s`` plurals only)."""
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def shorten(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(0, width - 1)] + "…"


@contextmanager
def progress(total: int, description: str) -> Iterator[Progress | None]:
    """A progress bar on stderr over ``total`` items; ``None`` when stderr is not a terminal or
    there are too few items to bother."""
    err = error_console()
    if total < PROGRESS_MIN_ITEMS or not err.is_terminal:
        yield None
        return
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    with bar:
        bar.add_task(description, total=total)
        yield bar
