"""The ``read_result`` tool: the model reads back an output that was taken out of its window.

Three ways to read, all bounded so that reading never floods the window it is meant to spare:

- ``{ref, offset, limit}`` — a page of characters (first page by default), with the exact
  ``offset`` to continue from;
- ``{ref, start_line, end_line}`` — numbered lines, 1-based and inclusive;
- ``{ref, pattern}`` — a regular-expression search returning the matching lines with their
  numbers (optionally within ``start_line``/``end_line``).

Every answer is a :class:`ToolResultPart`; mistakes (unknown ref, bad arguments) come back as
``is_error=True`` results whose text tells the model what to do instead, never as exceptions.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import regex

from contextfold.errors import RefNotFoundError, SessionNotFoundError
from contextfold.messages import ToolResultPart
from contextfold.outputs.blob_store import BlobStore, is_ref
from contextfold.outputs.blobs import REF_PATTERN
from contextfold.outputs.graphemes import ceil_boundary, floor_boundary

__all__ = [
    "READ_RESULT_LINE_CHARS",
    "READ_RESULT_MAX_BYTES",
    "READ_RESULT_MAX_CHARS",
    "READ_RESULT_MAX_LINES",
    "READ_RESULT_MAX_MATCHES",
    "READ_RESULT_PAGE_CHARS",
    "READ_RESULT_SEARCH_SECONDS",
    "read_result",
]

READ_RESULT_PAGE_CHARS = 4_000
"""Characters in a page when the model gives no ``limit``."""
READ_RESULT_MAX_CHARS = 8_000
"""Largest ``limit`` honoured; larger requests get this many characters and a note."""
READ_RESULT_MAX_BYTES = 8 * 1024
"""UTF-8 bytes of one page: below the 10 KiB inline output limit, so a page is never cut again."""
READ_RESULT_MIN_BYTES = 256
"""The smallest page a caller may ask for: less would not show a useful piece of any output."""
READ_RESULT_MAX_LINES = 200
"""Lines of one page (below the 256-line inline limit)."""
READ_RESULT_MAX_MATCHES = 50
"""Matching lines listed by one ``pattern`` search."""
READ_RESULT_LINE_CHARS = 300
"""A matching line longer than this is shown as a window around the match."""
READ_RESULT_SEARCH_SECONDS = 2.0
"""Time allowed for one ``pattern`` search (a pathological regex must not hang the agent)."""

_NAME = "read_result"
_REF_HELP = (
    "Refs look like ref_0123abcd4567 (ref_ and 12 hex digits). They appear where a long or old "
    'tool output was replaced: "ref=ref_…" in a stored-output preview, "Full output: '
    'read_result ref=…" in a cut output, or "→ read_result ref_…" at the end of a masked one. '
    "Copy one exactly."
)


class _ArgumentError(ValueError):
    pass


def _error(call_id: str, text: str) -> ToolResultPart:
    return ToolResultPart(call_id, _NAME, text, is_error=True)


def _int_arg(arguments: Mapping[str, Any], name: str, least: int) -> int | None:
    value = arguments.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())  # weak models send numbers as strings
    if isinstance(value, bool) or not isinstance(value, int):
        raise _ArgumentError(f"{name} must be a whole number, got {value!r}")
    if value < least:
        raise _ArgumentError(f"{name} must be at least {least}, got {value}")
    return value


def _resolve_ref(value: Any) -> str | None:
    """The ref in ``value``: exact, or the only one inside text such as 'read_result ref_…'."""
    if is_ref(value):
        return str(value)
    if isinstance(value, str):
        found = {str(ref) for ref in REF_PATTERN.findall(value)}
        if len(found) == 1:
            return found.pop()
    return None


def read_result(
    blobs: BlobStore,
    session_id: str,
    arguments: Mapping[str, Any],
    *,
    call_id: str = "",
    max_bytes: int = READ_RESULT_MAX_BYTES,
) -> ToolResultPart:
    """Answer one ``read_result`` call from ``blobs`` for ``session_id``.

    ``arguments`` are the call's parsed arguments (:meth:`ToolCallPart.args`); ``call_id`` is
    copied into the returned result. Refs of other sessions are unknown here by construction.
    ``max_bytes`` caps one page (the engine lowers it for small windows, so that a page is never
    cut again on its way into the transcript).
    """
    max_bytes = max(READ_RESULT_MIN_BYTES, min(max_bytes, READ_RESULT_MAX_BYTES))
    raw_ref = arguments.get("ref")
    if raw_ref is None or raw_ref == "":
        return _error(call_id, f"read_result needs a ref. {_REF_HELP}")
    ref = _resolve_ref(raw_ref)
    if ref is None:
        return _error(call_id, f"{raw_ref!r} is not a ref. {_REF_HELP}")
    try:
        offset = _int_arg(arguments, "offset", 0)
        limit = _int_arg(arguments, "limit", 1)
        start_line = _int_arg(arguments, "start_line", 1)
        end_line = _int_arg(arguments, "end_line", 1)
    except _ArgumentError as exc:
        return _error(call_id, f"{exc}. Call read_result again with corrected arguments.")
    pattern = arguments.get("pattern")
    if pattern is not None and not isinstance(pattern, str):
        return _error(call_id, f"pattern must be a string (a regular expression), got {pattern!r}")
    if (offset is not None or limit is not None) and (start_line or end_line or pattern):
        return _error(
            call_id,
            "Use either offset/limit (characters) or start_line/end_line / pattern, not both.",
        )
    if start_line and end_line and end_line < start_line:
        return _error(call_id, f"end_line ({end_line}) is before start_line ({start_line}).")
    try:
        text = blobs.get_blob(session_id, ref)
    except (RefNotFoundError, SessionNotFoundError):
        return _error(call_id, f"No stored output has ref {ref!r} in this session. {_REF_HELP}")
    except Exception as exc:  # a broken store must not end the agent's turn
        return _error(call_id, f"The stored output {ref} could not be read ({exc}). Try again.")
    if pattern:
        found = _search(text, ref, pattern, start_line, end_line, max_bytes)
        return ToolResultPart(call_id, _NAME, found)
    if start_line or end_line:
        body, error = _lines(text, ref, start_line or 1, end_line, max_bytes)
        return ToolResultPart(call_id, _NAME, body, is_error=error)
    body, error = _page(text, ref, offset or 0, limit, max_bytes)
    return ToolResultPart(call_id, _NAME, body, is_error=error)


def _fit(text: str, start: int, stop: int, max_bytes: int) -> int:
    """Where a page starting at ``start`` must end: at most ``stop``, within the byte and line
    caps, on a grapheme boundary, and never empty while text remains."""
    end = stop
    newline = start
    for _ in range(READ_RESULT_MAX_LINES):
        newline = text.find("\n", newline, end) + 1
        if newline == 0:
            break
    else:
        end = newline
    if not text.isascii():
        encoded = text[start:end].encode("utf-8", "surrogatepass")
        if len(encoded) > max_bytes:
            end = start + len(encoded[:max_bytes].decode("utf-8", "ignore"))
    else:
        end = min(end, start + max_bytes)
    if end < len(text):
        end = floor_boundary(text, end, start)
    if end <= start < len(text):
        end = ceil_boundary(text, start + 1, start)  # one cluster wider than a page
    return end


def _line_number(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def _page(text: str, ref: str, offset: int, limit: int | None, max_bytes: int) -> tuple[str, bool]:
    size = len(text)
    if offset >= size and size > 0:
        return (
            f"offset {offset} is past the end of {ref}: it has {size} characters "
            f"(offsets 0 to {size - 1}).",
            True,
        )
    wanted = limit or READ_RESULT_PAGE_CHARS
    end = _fit(text, offset, min(size, offset + min(wanted, READ_RESULT_MAX_CHARS)), max_bytes)
    header = (
        f"[{ref}: characters {offset}-{max(offset, end - 1)} of {size}, "
        f"lines {_line_number(text, offset)}-{_line_number(text, max(offset, end - 1))} "
        f"of {_total_lines(text)}]"
    )
    if end < size:
        capped = " (pages are capped)" if end - offset < wanted else ""
        footer = f"[more: use offset={end}{capped}]"
    else:
        footer = "[end of output]"
    body = text[offset:end]
    return f"{header}\n{body}{'' if body.endswith(chr(10)) else chr(10)}{footer}", False


def _total_lines(text: str) -> int:
    return text.count("\n") + (0 if not text or text.endswith("\n") else 1)


def _line_start(text: str, line: int) -> int:
    """Character position where 1-based ``line`` starts (``len(text)`` when past the end)."""
    position = 0
    for _ in range(line - 1):
        position = text.find("\n", position) + 1
        if position == 0:
            return len(text)
    return position


def _lines(
    text: str, ref: str, start_line: int, end_line: int | None, max_bytes: int
) -> tuple[str, bool]:
    total = _total_lines(text)
    if start_line > max(total, 1):
        return f"start_line {start_line} is past the end of {ref}: it has {total} lines.", True
    last = min(end_line or start_line + READ_RESULT_MAX_LINES - 1, total)
    start = _line_start(text, start_line)
    stop = _line_start(text, last + 1)
    end = _fit(text, start, stop, max_bytes)
    shown = text[start:end].split("\n")
    if shown and shown[-1] == "" and end > start and text[end - 1] == "\n":
        shown.pop()
    numbered = [f"{start_line + i:>6}\t{line}" for i, line in enumerate(shown)]
    shown_last = start_line + len(shown) - 1
    header = f"[{ref}: lines {start_line}-{shown_last} of {total}]"
    if end < stop and (end == 0 or text[end - 1] != "\n"):
        footer = f"[line {shown_last} continues: use offset={end} to read on]"
    elif shown_last < last:
        footer = f"[more: use start_line={shown_last + 1} (pages are capped)]"
    elif last < total:
        footer = f"[more: use start_line={last + 1}]"
    else:
        footer = "[end of output]"
    return "\n".join([header, *numbered, footer]), False


def _window(line: str, column: int) -> str:
    if len(line) <= READ_RESULT_LINE_CHARS:
        return line
    start = max(0, min(column - READ_RESULT_LINE_CHARS // 3, len(line) - READ_RESULT_LINE_CHARS))
    start = floor_boundary(line, start)
    end = floor_boundary(line, start + READ_RESULT_LINE_CHARS, start)
    return ("…" if start > 0 else "") + line[start:end] + ("…" if end < len(line) else "")


def _search(
    text: str,
    ref: str,
    pattern: str,
    start_line: int | None,
    end_line: int | None,
    max_bytes: int,
) -> str:
    note = ""
    try:
        compiled = regex.compile(pattern, regex.MULTILINE)
    except regex.error as exc:
        compiled = regex.compile(regex.escape(pattern), regex.MULTILINE)
        note = f" (not a valid regular expression: {exc}; searched for the literal text)"
    low = _line_start(text, start_line) if start_line else 0
    high = _line_start(text, end_line + 1) if end_line else len(text)
    line = start_line or 1
    scanned_to = low
    reported: list[str] = []
    matching = 0
    size = 0
    timed_out = False
    deadline = time.monotonic() + READ_RESULT_SEARCH_SECONDS
    position = low
    while position < high:
        remaining = deadline - time.monotonic()
        try:
            match = compiled.search(text, position, high, timeout=max(remaining, 0.001))
        except TimeoutError:
            timed_out = True
            break
        if match is None:
            break
        line += text.count("\n", scanned_to, match.start())
        scanned_to = match.start()
        matching += 1
        begin = text.rfind("\n", 0, match.start()) + 1
        finish = text.find("\n", match.start())
        finish = len(text) if finish < 0 else finish
        if len(reported) < READ_RESULT_MAX_MATCHES and size < max_bytes:
            entry = f"{line:>6}: {_window(text[begin:finish], match.start() - begin)}"
            entry_size = len(entry.encode("utf-8", "surrogatepass")) + 1
            if size + entry_size <= max_bytes or not reported:
                reported.append(entry)
            size += entry_size
        position = finish + 1  # one entry per line: go on from the next line
    scope = f"lines {start_line or 1}-{end_line}" if end_line else "all lines"
    if start_line and not end_line:
        scope = f"lines {start_line}-end"
    if not matching:
        return f"[{ref}: no line matches /{pattern}/ in {scope}{note}]"
    header = f"[{ref}: {matching} lines match /{pattern}/ in {scope}{note}]"
    lines = [header, *reported]
    if timed_out:
        lines.append("[search stopped after its time limit: simplify the pattern]")
    if len(reported) < matching:
        lines.append(
            f"[showing the first {len(reported)}: narrow the pattern, or search a range with "
            f"start_line/end_line (from line {_next_line(reported)})]"
        )
    return "\n".join(lines)


def _next_line(reported: list[str]) -> int:
    return int(reported[-1].split(":", 1)[0]) + 1 if reported else 1
