"""The exact-string replacement behind ``edit_file``: find, check, apply, and explain a miss.

Kept apart from the tool so that the matching rules can be read (and tested) on their own:

- ``old_string`` must occur exactly; several occurrences need ``replace_all``;
- a file with Windows line endings still matches an ``old_string`` written with ``\\n``
  (models rarely send ``\\r``), and the replacement gets the file's line endings;
- a miss explains itself: the line-number prefixes of ``read_file`` pasted into ``old_string``,
  a difference in whitespace only, or the closest lines in the file.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from contextfold.agent._outcome import ToolError
from contextfold.agent.text import numbered

__all__ = ["EditPlan", "describe_ranges", "plan_edit"]

EDIT_SIMILAR_SCAN_LINES = 20_000
"""Lines compared when looking for the text closest to a missed ``old_string`` (keeps it cheap)."""
EDIT_SIMILAR_MIN_RATIO = 0.6
"""How alike a line must be to the first line of ``old_string`` to be shown as the closest."""
EDIT_HINT_LINES = 8
"""Most lines shown from the closest text after a miss."""
EDIT_LISTED_MATCHES = 20
"""Most line numbers named when ``old_string`` occurs several times."""

_LINE_PREFIX = re.compile(r"^\s*\d+\t", re.M)


@dataclass(frozen=True, slots=True)
class EditPlan:
    """A checked replacement: the new text and where it changed."""

    new_text: str
    replacements: int
    old_ranges: tuple[tuple[int, int], ...]
    """1-based inclusive line ranges replaced, in the file before the edit."""
    new_ranges: tuple[tuple[int, int], ...]
    """The same ranges in the file after the edit."""
    old_string: str
    new_string: str


def plan_edit(
    text: str, old_string: str, new_string: str, *, replace_all: bool, path: str
) -> EditPlan:
    """The replacement of ``old_string`` by ``new_string`` in ``text``, or a :class:`ToolError`
    saying why it cannot be made (no match, several matches, nothing to change)."""
    if old_string == "":
        raise ToolError(
            "old_string is empty; copy the exact text to replace from the file (include a "
            "neighbouring line to insert text next to it), or use write_file for a new file",
            kind="invalid_arguments",
        )
    if old_string == new_string:
        raise ToolError(
            "old_string and new_string are identical, so there is nothing to change",
            kind="invalid_arguments",
        )
    count = text.count(old_string)
    if count == 0 and "\r\n" in text and "\r" not in old_string:
        crlf_old = old_string.replace("\n", "\r\n")
        if crlf_old != old_string and text.count(crlf_old):
            old_string, new_string = crlf_old, new_string.replace("\n", "\r\n")
            count = text.count(old_string)
    if count == 0:
        raise ToolError(_miss_message(text, old_string, path), kind="no_match")
    starts = _occurrences(text, old_string)
    if count > 1 and not replace_all:
        lines = [text.count("\n", 0, i) + 1 for i in starts]
        listed = ", ".join(map(str, lines[:EDIT_LISTED_MATCHES]))
        hidden = len(lines) - EDIT_LISTED_MATCHES
        more = f" and {hidden} more" if hidden > 0 else ""
        raise ToolError(
            f"old_string occurs {count} times in {path} (at lines {listed}{more}). Include more "
            "of the surrounding lines in old_string so that it matches exactly once, or pass "
            "replace_all=true to replace every occurrence.",
            kind="several_matches",
        )
    return _apply(text, old_string, new_string, starts)


def _occurrences(text: str, needle: str) -> list[int]:
    # Non-overlapping, left to right: the positions str.replace acts on.
    found: list[int] = []
    position = text.find(needle)
    while position >= 0:
        found.append(position)
        position = text.find(needle, position + len(needle))
    return found


def _apply(text: str, old: str, new: str, starts: list[int]) -> EditPlan:
    old_span = old.count("\n")
    new_span = new.count("\n")
    old_ranges: list[tuple[int, int]] = []
    new_ranges: list[tuple[int, int]] = []
    shift = 0
    line = 1
    scanned = 0
    for start in starts:
        line += text.count("\n", scanned, start)
        scanned = start
        old_ranges.append((line, line + old_span))
        new_ranges.append((line + shift, line + shift + new_span))
        shift += new_span - old_span
    return EditPlan(
        new_text=text.replace(old, new),
        replacements=len(starts),
        old_ranges=tuple(old_ranges),
        new_ranges=tuple(new_ranges),
        old_string=old,
        new_string=new,
    )


def _miss_message(text: str, old: str, path: str) -> str:
    message = (
        f"old_string was not found in {path}. It must match the file exactly, including "
        "whitespace, indentation and line breaks; read the file again if it may have changed."
    )
    if _LINE_PREFIX.search(old) and all(
        _LINE_PREFIX.match(line) for line in old.splitlines() if line.strip()
    ):
        return (
            f"{message} old_string seems to start its lines with the line numbers that read_file "
            "shows (number, tab); leave those prefixes out."
        )
    lines = text.splitlines()
    wanted = [line.strip() for line in old.splitlines()]
    loose = _whitespace_match(lines, wanted)
    if loose is not None:
        shown = lines[loose : loose + min(len(wanted), EDIT_HINT_LINES)]
        return (
            f"{message} Lines {loose + 1}-{loose + len(wanted)} match it except for whitespace; "
            f"their exact text is:\n{numbered(shown, loose + 1)}"
        )
    closest = _closest_line(lines, wanted)
    if closest is None:
        return message
    shown = lines[closest : closest + min(max(len(wanted), 1), EDIT_HINT_LINES)]
    return f"{message} The closest text is at line {closest + 1}:\n{numbered(shown, closest + 1)}"


def _whitespace_match(lines: list[str], wanted: list[str]) -> int | None:
    """The first line where ``wanted`` (stripped lines) matches the file's stripped lines."""
    if not any(wanted):
        return None
    stripped = [line.strip() for line in lines[:EDIT_SIMILAR_SCAN_LINES]]
    size = len(wanted)
    for index in range(len(stripped) - size + 1):
        if stripped[index] == wanted[0] and stripped[index : index + size] == wanted:
            return index
    return None


def _closest_line(lines: list[str], wanted: list[str]) -> int | None:
    """Where the text most like ``wanted`` starts, judged by its first non-blank line."""
    offset, needle = next(((i, w) for i, w in enumerate(wanted) if w), (0, ""))
    if not needle:
        return None
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(needle)
    best, best_ratio = None, EDIT_SIMILAR_MIN_RATIO
    for index, line in enumerate(lines[:EDIT_SIMILAR_SCAN_LINES]):
        matcher.set_seq1(line.strip())
        # The quick upper bounds skip most lines without the full comparison.
        if matcher.real_quick_ratio() <= best_ratio or matcher.quick_ratio() <= best_ratio:
            continue
        ratio = matcher.ratio()
        if ratio > best_ratio:
            best, best_ratio = index, ratio
    if best is None:
        return None
    return max(best - offset, 0)


def describe_ranges(ranges: tuple[tuple[int, int], ...]) -> str:
    """``"line 4"``, ``"lines 4-6"``, ``"lines 4, 10-11 and 20"`` for the model and the user."""
    parts = [str(a) if a == b else f"{a}-{b}" for a, b in ranges]
    word = "line" if len(ranges) == 1 and ranges[0][0] == ranges[0][1] else "lines"
    if len(parts) > 1:
        return f"{word} {', '.join(parts[:-1])} and {parts[-1]}"
    return f"{word} {parts[0]}"
