"""Head-and-tail truncation of tool output, by lines, bytes and tokens (whichever binds first).

A cut output reads::

    Total output lines: 1203
    <optional note line, e.g. how to read the full output>

    <first lines>
    [… 951 of 1203 lines (40311 bytes) omitted …]
    <last lines>

and the whole of it — header, note and marker included — stays within every limit. The counts in
the marker are exact: lines that lost every character, and UTF-8 bytes of the original that are
not shown. Whole lines are kept when they fit; a line too long for its share (a minified bundle, a
JSON blob) is cut inside, always on a grapheme-cluster boundary. Errors usually sit at the end of
an output, so the tail gets the larger share.

Secrets are redacted before an output is cut (never after: a cut that drops the ``BEGIN`` line
of a key leaves a body no redactor recognises); an output that fits is returned as it is.

The search works on the UTF-8 bytes with ``find``/``rfind`` from both ends, so its cost grows with
what is kept, not with the size of the output.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from contextfold.errors import ConfigError
from contextfold.outputs.graphemes import ceil_boundary, floor_boundary
from contextfold.redaction.redactor import redact_text

__all__ = [
    "DEFAULT_HEAD_RATIO",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_LINES",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_OFFLOAD_ABOVE_BYTES",
    "DEFAULT_PREVIEW_CHARS",
    "OutputLimits",
    "TextCounter",
    "TruncatedOutput",
    "count_lines",
    "decode_output",
    "estimate_tokens",
    "truncate_head_tail",
    "truncate_redacted",
]

DEFAULT_MAX_LINES = 256
"""Lines of one tool output kept inline (beyond it, the output is cut to head and tail)."""
DEFAULT_MAX_BYTES = 10 * 1024
"""UTF-8 bytes of one tool output kept inline: a page of text, a small share of any window."""
DEFAULT_MAX_TOKENS = 2_500
"""Tokens of one tool output kept inline (about 8 % of a 32k window)."""
DEFAULT_HEAD_RATIO = 0.4
"""Share of a cut output's budget given to its head; the tail gets the rest, since errors and
summaries ("3 failed, 120 passed") come last."""
DEFAULT_OFFLOAD_ABOVE_BYTES = 16 * 1024
"""Outputs larger than this go to the blob store whole, and the transcript holds a preview."""
DEFAULT_PREVIEW_CHARS = 500
"""Characters of an offloaded output shown in its preview (head and tail)."""

MIN_LINES = 6
MIN_BYTES = 256
MIN_TOKENS = 64
"""Smallest limits accepted: a cut output needs room for its header, marker and a little text."""

BYTES_PER_TOKEN_ESTIMATE = 4
"""The cheap estimate used when no token counter is given: one token per four UTF-8 bytes (close
for English and code, and it over-counts rather than under-counts for other scripts)."""

HEADER = "Total output lines: {total}"
MARKER = "[… {omitted} of {total} lines ({omitted_bytes} bytes) omitted …]"

_SURROGATES = re.compile("[\ud800-\udfff]")
_MAX_TOKEN_ROUNDS = 12


class TextCounter(Protocol):
    """Anything that counts tokens in a string (every :mod:`contextfold.tokens.counters` counter
    does)."""

    def count_text(self, text: str) -> int:
        """Tokens of ``text``."""
        ...


def estimate_tokens(text: str) -> int:
    """A cheap token estimate: UTF-8 bytes over :data:`BYTES_PER_TOKEN_ESTIMATE`, rounded up."""
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return -(-size // BYTES_PER_TOKEN_ESTIMATE)


def _count(counter: TextCounter | None, text: str) -> int:
    return estimate_tokens(text) if counter is None else counter.count_text(text)


def count_lines(text: str) -> int:
    """Lines in ``text``: newlines, plus one for a last line without a newline."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def decode_output(output: str | bytes) -> tuple[str, bytes, bool]:
    """The output as text and as UTF-8 bytes, and whether invalid UTF-8 had to be replaced.

    Bytes that are not UTF-8, and lone surrogates in a string (what ``errors="surrogateescape"``
    leaves behind), become U+FFFD so that every later count is exact.
    """
    if isinstance(output, bytes | bytearray):
        raw = bytes(output)
        try:
            return raw.decode("utf-8"), raw, False
        except UnicodeDecodeError:
            text = raw.decode("utf-8", "replace")
            return text, text.encode("utf-8"), True
    try:
        return output, output.encode("utf-8"), False
    except UnicodeEncodeError:
        try:
            text = output.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        except UnicodeEncodeError:
            text = _SURROGATES.sub("\ufffd", output)
        return text, text.encode("utf-8"), True


@dataclass(frozen=True, slots=True)
class OutputLimits:
    """How much of one tool output may enter the context window, and when it is offloaded.

    The three inline limits apply together (whichever binds first) and include the header and
    omission marker of a cut output. ``head_ratio`` splits a cut output's budget between head and
    tail. Outputs above ``offload_above_bytes`` are stored whole and replaced by a preview of
    ``preview_chars`` characters (see :func:`contextfold.outputs.intake.prepare_tool_output`). Field
    names match the ``outputs.*`` settings of :mod:`contextfold.config`.
    """

    max_lines: int = DEFAULT_MAX_LINES
    max_bytes: int = DEFAULT_MAX_BYTES
    max_tokens: int = DEFAULT_MAX_TOKENS
    head_ratio: float = DEFAULT_HEAD_RATIO
    offload_above_bytes: int = DEFAULT_OFFLOAD_ABOVE_BYTES
    preview_chars: int = DEFAULT_PREVIEW_CHARS

    def __post_init__(self) -> None:
        for name, least in (
            ("max_lines", MIN_LINES),
            ("max_bytes", MIN_BYTES),
            ("max_tokens", MIN_TOKENS),
        ):
            value = getattr(self, name)
            if value < least:
                raise ConfigError(
                    f"outputs.{name}",
                    f"{value} is too small to hold the truncation header and marker; "
                    f"use at least {least}",
                )
        if not 0.0 < self.head_ratio < 1.0:
            raise ConfigError(
                "outputs.head_ratio", f"{self.head_ratio} must be between 0 and 1 (exclusive)"
            )
        if self.offload_above_bytes < 0 or self.preview_chars < 0:
            raise ConfigError(
                "outputs.offload_above_bytes",
                "offload_above_bytes and preview_chars must not be negative",
            )

    def fits(self, text: str, counter: TextCounter | None = None) -> bool:
        """True when ``text`` is within all three inline limits as it is."""
        size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        if size > self.max_bytes or count_lines(text) > self.max_lines:
            return False
        return _count(counter, text) <= self.max_tokens


@dataclass(frozen=True, slots=True)
class TruncatedOutput:
    """The text to show for an output, and what was left out of it.

    ``exceeded`` names the limits the full output broke (``"lines"``, ``"bytes"``,
    ``"tokens"``; tokens are only counted when lines and bytes fit, so a huge output is never
    tokenized whole). Counts are of the output after any invalid-UTF-8 replacement
    (``invalid_utf8``) and, when a secret had to be redacted before the cut (``redacted``),
    of the redacted output.
    """

    text: str
    truncated: bool
    total_lines: int
    total_bytes: int
    kept_bytes: int
    omitted_lines: int = 0
    omitted_bytes: int = 0
    exceeded: tuple[str, ...] = ()
    invalid_utf8: bool = False
    redacted: bool = False


# --------------------------------------------------------------------------------------------------
# Choosing what to keep
# --------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Cut:
    """What to keep: whole lines up to ``head_end`` or a partial first line of ``head_partial``
    bytes; whole lines from ``tail_start`` or a partial last line (``tail_start is None``); and
    how many lines each side shows."""

    head_end: int | None
    head_partial: int
    head_lines: int
    tail_start: int | None
    tail_lines: int


def _lines_forward(
    data: bytes, start: int, stop: int, max_bytes: int, max_lines: int
) -> tuple[int, int]:
    """End of the longest run of whole lines from ``start`` within both budgets, and its lines."""
    if max_bytes <= 0 or max_lines <= 0:
        return start, 0
    end = data.rfind(b"\n", start, min(stop, start + max_bytes)) + 1
    if end <= start:
        return start, 0
    lines = data.count(b"\n", start, end)
    if lines > max_lines:
        # One C call instead of max_lines finds: the last piece is what follows the lines kept.
        region = data[start:end]
        end = start + len(region) - len(region.split(b"\n", max_lines)[-1])
        lines = max_lines
    return end, lines


def _lines_backward(data: bytes, floor: int, max_bytes: int, max_lines: int) -> tuple[int, int]:
    """Start of the longest run of whole lines that ends the output, and its lines
    (``len(data)`` and 0 if none fits)."""
    size = len(data)
    if max_bytes <= 0 or max_lines <= 0:
        return size, 0
    low = max(floor, size - max_bytes)
    if low == 0 or data[low - 1] == 0x0A:
        start = low
    else:
        newline = data.find(b"\n", low, size)
        if newline < 0:
            return size, 0
        start = newline + 1
    if start >= size:
        return size, 0
    open_last = data[-1] != 0x0A
    lines = data.count(b"\n", start, size) + open_last
    if lines > max_lines:
        region = data[start:]
        start += len(region.rsplit(b"\n", max_lines + (not open_last))[0]) + 1
        lines = max_lines
    return start, lines


def _choose(data: bytes, total_lines: int, budget: int, lines: int, head_ratio: float) -> _Cut:
    """Pick head and tail: whole lines first, a partial first or last line only when it must."""
    size = len(data)
    head_share = int(budget * head_ratio)
    head_line_share = min(max(1, round(lines * head_ratio)), lines - 1)
    newline = data.find(b"\n")
    first_len = size if newline < 0 else newline + 1
    last_len = size - (data.rfind(b"\n", 0, size - 1) + 1)
    # The first and last lines matter most (the command echo, the final error): when both fit,
    # keep both whole, whatever the ratio says.
    if total_lines >= 2 and first_len + last_len <= budget:
        head_share = max(first_len, min(head_share, budget - last_len))

    head_end, head_lines = _lines_forward(data, 0, size, head_share, head_line_share)
    if head_end > 0:
        head_bytes = head_end
    else:
        head_bytes, head_lines = head_share, 1  # reserved for a partial first line
    tail_start, tail_lines = _lines_backward(
        data, head_end, budget - head_bytes, lines - head_lines
    )
    if tail_start == 0:  # everything fits this budget (only while shrinking for tokens)
        return _Cut(None, 0, 0, 0, tail_lines)
    if tail_start >= size:
        # The last line is too long for what is left: keep its end (the head keeps its share).
        return _Cut(head_end or None, head_share, head_lines, None, 1)
    # Budget the tail did not use goes back to the head, whole lines if possible.
    room, line_room = budget - (size - tail_start), lines - tail_lines
    end, count = _lines_forward(data, 0, tail_start, room, line_room)
    if end > 0:
        return _Cut(end, 0, count, tail_start, tail_lines)
    return _Cut(None, room, 1, tail_start, tail_lines)


def _partial_head(text: str, data: bytes, max_bytes: int) -> str:
    """The longest prefix of the first line within ``max_bytes`` that ends on a cluster boundary."""
    if max_bytes <= 0:
        return ""
    max_bytes = min(max_bytes, len(data))
    line_end = text.find("\n")
    line_end = len(text) if line_end < 0 else line_end + 1
    chars = max_bytes if text.isascii() else len(data[:max_bytes].decode("utf-8", "ignore"))
    return text[: floor_boundary(text, min(chars, line_end), 0, line_end)]


def _partial_tail(text: str, data: bytes, max_bytes: int, floor_char: int) -> str:
    """The longest suffix of the last line within ``max_bytes`` starting on a cluster boundary."""
    if max_bytes <= 0:
        return ""
    max_bytes = min(max_bytes, len(data))
    size = len(text)
    low = max(text.rfind("\n", 0, size - 1) + 1, floor_char)
    if text.isascii():
        start = size - max_bytes
    else:
        start = size - len(data[len(data) - max_bytes :].decode("utf-8", "ignore"))
    return text[ceil_boundary(text, max(start, low), low, size) :]


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


@dataclass(slots=True)
class _Rendered:
    text: str
    omitted_lines: int
    omitted_bytes: int
    size: int  # UTF-8 bytes of ``text``
    lines: int  # lines of ``text``


def _render(
    text: str,
    data: bytes,
    total_lines: int,
    budget: int,
    lines: int,
    head_ratio: float,
    prefix: str,
) -> _Rendered:
    """The cut output for one content budget, with its counts (computed, not re-measured)."""
    cut = _choose(data, total_lines, budget, lines, head_ratio)
    if cut.head_end is not None:
        head = data[: cut.head_end].decode("utf-8")
        head_size = cut.head_end
    else:
        head = _partial_head(text, data, cut.head_partial)
        head_size = _utf8_len(head)
    if cut.tail_start is not None:
        tail = data[cut.tail_start :].decode("utf-8")
        tail_size = len(data) - cut.tail_start
    else:
        tail = _partial_tail(text, data, budget - head_size, len(head))
        tail_size = _utf8_len(tail)
    head_lines = cut.head_lines if head else 0
    tail_lines = cut.tail_lines if tail else 0
    omitted_bytes = len(data) - head_size - tail_size
    shown = 1 if total_lines == 1 and head and tail else head_lines + tail_lines
    omitted = total_lines - shown
    marker = MARKER.format(omitted=omitted, total=total_lines, omitted_bytes=omitted_bytes)
    newlines = (head != "" and not head.endswith("\n")) + (tail != "")
    parts = [prefix, head, "\n" if newlines > (tail != "") else "", marker]
    if tail:
        parts += ["\n", tail]
    result = "".join(parts)
    size = _utf8_len(prefix) + head_size + _utf8_len(marker) + newlines + tail_size
    result_lines = prefix.count("\n") + head_lines + 1 + tail_lines
    return _Rendered(result, omitted, omitted_bytes, size, result_lines)


def _measure(text: str) -> tuple[int, int]:
    return _utf8_len(text), count_lines(text)


def truncate_head_tail(
    output: str | bytes,
    limits: OutputLimits | None = None,
    *,
    counter: TextCounter | None = None,
    note: str | None = None,
) -> TruncatedOutput:
    """Cut ``output`` to its head and tail so that the result fits every limit in ``limits``.

    An output within the limits comes back unchanged (``truncated=False``). Otherwise the result
    starts with ``Total output lines: M`` and ``note`` (one line, e.g. where the full output
    is), then the head, the exact marker ``[… N of M lines (K bytes) omitted …]`` and the tail.
    ``counter`` counts tokens (a :mod:`contextfold.tokens.counters` counter); without one, a cheap
    estimate is used. ``bytes`` are decoded as UTF-8, invalid sequences replaced.

    Secrets are redacted before anything is cut (``redacted=True`` when one was): a cut can
    drop the ``BEGIN`` line of a key or keep half a token, and no redactor would recognise what
    is left. When the redacted text fits the limits, it comes back whole (``truncated=False``).
    """
    return _truncate(output, limits or OutputLimits(), counter, note, redact_text)


def truncate_redacted(
    text: str,
    limits: OutputLimits,
    *,
    counter: TextCounter | None = None,
    note: str | None = None,
) -> TruncatedOutput:
    """:func:`truncate_head_tail` for a text whose secrets are redacted already (a caller that
    needs the redacted text itself), so that the redactor does not run twice."""
    return _truncate(text, limits, counter, note, None)


def _truncate(
    output: str | bytes,
    limits: OutputLimits,
    counter: TextCounter | None,
    note: str | None,
    redact: Callable[[str], str] | None,
) -> TruncatedOutput:
    text, data, replaced = decode_output(output)
    total_lines = data.count(b"\n") + (0 if not data or data[-1] == 0x0A else 1)
    exceeded = []
    if total_lines > limits.max_lines:
        exceeded.append("lines")
    if len(data) > limits.max_bytes:
        exceeded.append("bytes")
    total_tokens = 0
    if not exceeded:
        total_tokens = _count(counter, text)
        if total_tokens > limits.max_tokens:
            exceeded.append("tokens")
    if not exceeded:
        return TruncatedOutput(text, False, total_lines, len(data), len(data), 0, 0, (), replaced)
    safe = text if redact is None else redact(text)
    if safe == text:
        return _cut_to_fit(text, data, limits, counter, note, exceeded, total_tokens, replaced)
    data = safe.encode("utf-8")
    if limits.fits(safe, counter):
        size = len(data)
        return TruncatedOutput(
            safe, False, count_lines(safe), size, size, 0, 0, tuple(exceeded), replaced, True
        )
    cut = _cut_to_fit(safe, data, limits, counter, note, exceeded, 0, replaced)
    return replace(cut, redacted=True)


def _cut_to_fit(
    text: str,
    data: bytes,
    limits: OutputLimits,
    counter: TextCounter | None,
    note: str | None,
    exceeded: list[str],
    total_tokens: int,
    replaced: bool,
) -> TruncatedOutput:
    """``text`` (``data`` in UTF-8, ``total_tokens`` when counted) cut to fit ``limits``."""
    total_bytes = len(data)
    total_lines = count_lines(text)
    note_line = " ".join(note.split("\n")) if note else ""
    prefix = (
        HEADER.format(total=total_lines) + "\n" + (note_line + "\n" if note_line else "") + "\n"
    )
    # Budget with the widest marker this output can have; the real one is never longer.
    widest = MARKER.format(omitted=total_lines, total=total_lines, omitted_bytes=total_bytes)
    overhead_bytes = len(prefix.encode("utf-8")) + len(widest.encode("utf-8")) + 2
    overhead_lines = count_lines(prefix) + 1
    budget = max(0, limits.max_bytes - overhead_bytes)
    lines = max(2, limits.max_lines - overhead_lines)
    if counter is None:
        # The estimate is additive: translate the token limit into bytes directly.
        token_bytes = limits.max_tokens * BYTES_PER_TOKEN_ESTIMATE - overhead_bytes
        budget = max(0, min(budget, token_bytes))
    elif total_tokens:
        # Only the token limit binds, and the whole output was counted: start from its density
        # so that one more count usually settles it.
        density = total_bytes / total_tokens
        budget = max(0, min(budget, int(limits.max_tokens * density * 0.95) - overhead_bytes))

    for _ in range(_MAX_TOKEN_ROUNDS):
        cut = _render(text, data, total_lines, budget, lines, limits.head_ratio, prefix)
        if cut.size <= limits.max_bytes and cut.lines <= limits.max_lines:
            tokens = _count(counter, cut.text)
            if tokens <= limits.max_tokens:
                return TruncatedOutput(
                    cut.text,
                    True,
                    total_lines,
                    total_bytes,
                    cut.size,
                    cut.omitted_lines,
                    cut.omitted_bytes,
                    tuple(exceeded),
                    replaced,
                )
            # Scale the content budget by how far over the token limit the result is.
            scaled = int(budget * limits.max_tokens / max(tokens, 1) * 0.97)
            budget = max(0, min(scaled, budget - 1))
        else:  # cannot happen with the budgets above; shrink rather than ever exceed
            budget = max(0, min(budget - 1, int(budget * 0.9)))
            lines = max(2, lines - 1)
        if budget == 0:
            break
    return _bare_marker(text, data, total_lines, limits, counter, prefix, exceeded, replaced)


def _bare_marker(
    text: str,
    data: bytes,
    total_lines: int,
    limits: OutputLimits,
    counter: TextCounter | None,
    prefix: str,
    exceeded: list[str],
    replaced: bool,
) -> TruncatedOutput:
    """Header and marker only (or less): what remains when no content fits the token limit."""
    marker = MARKER.format(omitted=total_lines, total=total_lines, omitted_bytes=len(data))
    for candidate in (prefix + marker, marker, ""):
        size, result_lines = _measure(candidate)
        if (
            size <= limits.max_bytes
            and result_lines <= limits.max_lines
            and _count(counter, candidate) <= limits.max_tokens
        ):
            break
    return TruncatedOutput(
        candidate,
        True,
        total_lines,
        len(data),
        size,
        total_lines,
        len(data),
        tuple(exceeded),
        replaced,
    )
