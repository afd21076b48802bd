"""Grapheme-cluster boundaries near a cut point, without scanning the whole text.

Cutting text for the model must never split a user-perceived character (an accented letter, a
flag, a family emoji) or a ``\\r\\n`` pair. The ``regex`` module's ``\\X`` finds clusters, but it
costs about a microsecond per character, so scanning a 1 MB line to cut it once is not an option.
These helpers look only at a small window around the cut: between two ASCII characters (other
than CR LF) there is always a boundary, and elsewhere a window of :data:`WINDOW` characters is
scanned after re-synchronising on the cluster grid (the first clusters of a window may start in
the middle of a real one, so their ends are not trusted). A cluster longer than the window —
only seen in deliberately stacked combining marks — falls back to a scan from the known boundary.
"""

from __future__ import annotations

import regex

__all__ = ["WINDOW", "ceil_boundary", "floor_boundary"]

WINDOW = 48
"""Characters scanned on each side of a cut. Real clusters are far shorter (emoji ZWJ sequences
reach about a dozen code points)."""

_CLUSTER = regex.compile(r"\X", regex.DOTALL)
_UNTRUSTED_MATCHES = 2
"""Cluster ends at the start of a window that may be wrong: the scan cannot see the characters
before the window that rules such as emoji ZWJ sequences look back at."""


def _is_regional_indicator(char: str) -> bool:
    return "\U0001f1e6" <= char <= "\U0001f1ff"


def _ascii_break(text: str, index: int) -> bool:
    """True when ``index`` sits between two ASCII characters that are not CR LF: always a break."""
    before, after = text[index - 1], text[index]
    return before < "\x80" and after < "\x80" and not (before == "\r" and after == "\n")


def _boundaries(text: str, lo: int, hi: int, index: int) -> list[int]:
    """Trusted cluster boundaries in a window around ``index`` (sorted)."""
    start = max(lo, index - WINDOW)
    # Regional indicators pair up from the start of their run; the window must see the whole run.
    while start > lo and _is_regional_indicator(text[start - 1]):
        start -= 1
    stop = min(hi, index + WINDOW)
    trusted_from = 0 if start == lo else _UNTRUSTED_MATCHES
    out = [start] if start == lo else []
    for number, match in enumerate(_CLUSTER.finditer(text, start, stop)):
        end = match.end()
        if number >= trusted_from and (end < stop or stop == hi):
            out.append(end)
    return out


def _full_scan(text: str, lo: int, hi: int) -> list[int]:
    return [lo, *(m.end() for m in _CLUSTER.finditer(text, lo, hi))]


def floor_boundary(text: str, index: int, lo: int = 0, hi: int | None = None) -> int:
    """A grapheme boundary at or before ``index``: the nearest one, or one a few clusters earlier
    inside runs of combining marks or regional indicators (never a split cluster).

    ``lo`` and ``hi`` must themselves be boundaries (a line start, the text's ends); the answer
    is never below ``lo``.
    """
    top = len(text) if hi is None else hi
    if index >= top:
        return top
    if index <= lo:
        return lo
    if _ascii_break(text, index):
        return index
    found = [b for b in _boundaries(text, lo, top, index) if b <= index]
    if not found:
        found = [b for b in _full_scan(text, lo, min(top, index + WINDOW)) if b <= index]
    return max(found)


def ceil_boundary(text: str, index: int, lo: int = 0, hi: int | None = None) -> int:
    """A grapheme boundary at or after ``index`` (nearest, or a few clusters later; see
    :func:`floor_boundary`)."""
    top = len(text) if hi is None else hi
    if index >= top:
        return top
    if index <= lo:
        return lo
    if _ascii_break(text, index):
        return index
    found = [b for b in _boundaries(text, lo, top, index) if b >= index]
    if not found:
        found = [b for b in _full_scan(text, lo, top) if b >= index]
    return min(found) if found else top
