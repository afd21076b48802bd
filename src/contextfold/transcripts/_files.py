"""Reading the files importers read: JSON / JSON Lines with errors that name file and
line, timestamps, deterministic ids.

Importers never open files themselves; they receive a :class:`SourceFile` so that the format
detector parses each file once and every error says where the problem is.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from contextfold.errors import FormatError
from contextfold.messages import Message
from contextfold.wire.values import NESTED_TOO_DEEPLY, too_deep

__all__ = [
    "EARLIEST_TIME",
    "LATEST_TIME",
    "JsonLine",
    "SourceFile",
    "most_common",
    "parse_timestamp",
    "read_source",
    "with_ids",
]


@dataclass(frozen=True, slots=True)
class JsonLine:
    """One record of a JSON Lines file and the 1-based line it came from."""

    line: int
    value: Any


@dataclass(frozen=True)
class SourceFile:
    """A parsed file: ``document`` for a JSON file, ``lines`` for a JSON Lines file.

    ``first_line`` is where the content starts (what a complaint about the whole document names);
    ``warnings`` say what was left out while reading (an incomplete last line).
    """

    path: str
    shape: Literal["json", "jsonl"]
    document: Any = None
    lines: list[JsonLine] = field(default_factory=list)
    first_line: int = 1
    warnings: tuple[str, ...] = ()

    @property
    def stem(self) -> str:
        """The file name without its extensions (``a.traj.json`` -> ``a``): the id prefix."""
        name = Path(self.path).name
        for suffix in (".traj.json", ".jsonl", ".json"):
            if name.endswith(suffix) and len(name) > len(suffix):
                return name[: -len(suffix)]
        return name

    def objects(self) -> Iterator[tuple[int, Mapping[str, Any]]]:
        """The JSON Lines records with their line numbers; a line that is not an object raises."""
        for record in self.lines:
            if not isinstance(record.value, Mapping):
                raise FormatError(
                    f"expected a JSON object, got {type(record.value).__name__}",
                    path=self.path,
                    line=record.line,
                )
            yield record.line, record.value

    def as_lines(self) -> SourceFile:
        """This file read as JSON Lines: a one-line JSON Lines file parses as a single JSON
        object, which line-based formats read as their only record."""
        if self.shape == "json" and isinstance(self.document, Mapping):
            return replace(
                self, shape="jsonl", document=None, lines=[JsonLine(self.first_line, self.document)]
            )
        return self

    def error(self, message: str, line: int | None = None) -> FormatError:
        """A :class:`FormatError` about this file, at ``line`` or else where the content starts."""
        return FormatError(message, path=self.path, line=line or self.first_line)

    def error_at(self, message: str, keys: Sequence[str | int | None]) -> FormatError:
        """A :class:`FormatError` about the value a JSON document holds at ``keys`` (e.g.
        ``("messages", 3)``), naming the line where that value starts (where the content starts
        when it cannot be found, e.g. for an unknown index)."""
        return self.error(message, _line_of(self.path, keys))


# --------------------------------------------------------------------------------------------------
# Reading files
# --------------------------------------------------------------------------------------------------

_DECODER = json.JSONDecoder()
_WHITESPACE = re.compile(r"[ \t\n\r]*")  # what JSON itself counts as whitespace


def _skip_space(text: str, position: int, end: int | None = None) -> int:
    """The first position from ``position`` (before ``end``) that is not JSON whitespace."""
    match = _WHITESPACE.match(text, position, len(text) if end is None else end)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def read_source(path: str | os.PathLike[str]) -> SourceFile:
    """Parse ``path`` as one JSON document, or else as JSON Lines.

    A file is JSON Lines when its first line is a complete JSON value and more values follow.
    Raises :class:`FormatError` naming the file and the 1-based line of the first bad record.
    A last line that is incomplete and not ended by a newline (a file still being written) is
    left out with a warning (:attr:`SourceFile.warnings`), when complete records precede it.
    """
    name = os.fspath(path)
    text = _read_text(name)
    start = _skip_space(text, 0)
    if start == len(text):
        raise FormatError("the file is empty", path=name)
    first_line = text.count("\n", 0, start) + 1
    try:
        first, end = _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError) as exc:
        raise _json_error(exc, "invalid JSON", name, first_line) from None
    _check_nesting(first, name, first_line)
    after = _skip_space(text, end)
    if after == len(text):
        return SourceFile(name, "json", document=first, first_line=first_line)
    if text.find("\n", start, end) < 0:
        # A value that ends its line, then more: JSON Lines. (A value over several lines
        # followed by more is a document with extra data, reported below.)
        lines, warnings = _parse_lines(text, end, first_line, name)
        return SourceFile(
            name,
            "jsonl",
            lines=[JsonLine(first_line, first), *lines],
            first_line=first_line,
            warnings=warnings,
        )
    raise FormatError("invalid JSON: Extra data", path=name, line=text.count("\n", 0, after) + 1)


def _read_text(path: str) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise FormatError(f"cannot read the file: {exc.strerror or exc}", path=path) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise FormatError(f"not UTF-8 text ({exc.reason})", path=path, line=line) from None


def _json_error(exc: ValueError | RecursionError, what: str, path: str, line: int) -> FormatError:
    """The FormatError for a value the JSON reader refused, at ``line`` unless it says where."""
    if isinstance(exc, RecursionError):
        return FormatError(NESTED_TOO_DEEPLY, path=path, line=line)
    if isinstance(exc, json.JSONDecodeError):
        return FormatError(f"{what}: {exc.msg}", path=path, line=exc.lineno)
    # Not JSON's own rule: Python's limit on digits in an integer, for instance.
    return FormatError(f"{what}: {exc}", path=path, line=line)


def _parse_lines(
    text: str, position: int, line: int, path: str
) -> tuple[list[JsonLine], tuple[str, ...]]:
    """The records after the first, which ended at ``position`` on ``line``; and the warning
    about an incomplete last line, if one was left out.

    Records are decoded in place (no copy of each line), so reading holds the text and the
    values only.
    """
    records: list[JsonLine] = []
    while True:
        line_end = text.find("\n", position)
        rest_end = len(text) if line_end < 0 else line_end
        # What follows a record on its own line must be whitespace.
        start = _skip_space(text, position, rest_end)
        if start < rest_end:
            raise FormatError("invalid JSON record: Extra data", path=path, line=line)
        if line_end < 0:
            return records, ()
        # The next non-blank line.
        position = line_end + 1
        line += 1
        start = _skip_space(text, position)
        if start == len(text):
            return records, ()
        line += text.count("\n", position, start)
        line_end = text.find("\n", start)
        try:
            value, position = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            if line_end < 0:  # the first record, at least, is complete
                return records, (_incomplete_last_line(line),)
            raise FormatError(f"invalid JSON record: {exc.msg}", path=path, line=line) from None
        except (ValueError, RecursionError) as exc:
            raise _json_error(exc, "invalid JSON record", path, line) from None
        if 0 <= line_end < position:
            raise FormatError(
                "invalid JSON record: the record goes on past the end of its line",
                path=path,
                line=line,
            )
        _check_nesting(value, path, line)
        records.append(JsonLine(line, value))


def _check_nesting(value: Any, path: str, line: int) -> None:
    if too_deep(value):
        raise FormatError(NESTED_TOO_DEEPLY, path=path, line=line)


def _incomplete_last_line(line: int) -> str:
    return (
        f"line {line} is incomplete (no newline ends it: the file may still be being written); "
        f"read up to line {line - 1}"
    )


def _line_of(path: str, keys: Sequence[str | int | None]) -> int | None:
    """The line where the value at ``keys`` starts in the JSON document of ``path`` (read again:
    only errors need it); ``None`` when it cannot be found."""
    try:
        text = _read_text(path)
        position: int | None = _skip_space(text, 0)
        for key in keys:
            if position is None or key is None:
                return None
            position = _member_start(text, position, key)
    except (FormatError, ValueError, RecursionError):
        return None
    return None if position is None else text.count("\n", 0, position) + 1


def _member_start(text: str, position: int, key: str | int) -> int | None:
    """Where the member ``key`` of the object (or item ``key`` of the array) starting at
    ``position`` starts; the last one wins for a repeated key, as when the file was parsed."""
    opening = text[position : position + 1]
    if opening != ("[" if isinstance(key, int) else "{"):
        return None
    found: int | None = None
    index = 0
    position = _skip_space(text, position + 1)
    while position < len(text) and text[position] not in "]}":
        if opening == "{":
            name, position = _DECODER.raw_decode(text, position)
            position = _skip_space(text, position) + 1  # past the colon
            position = _skip_space(text, position)
            if name == key:
                found = position
        elif index == key:
            return position
        _, position = _DECODER.raw_decode(text, position)
        position = _skip_space(text, position)
        if text[position : position + 1] == ",":
            position = _skip_space(text, position + 1)
        index += 1
    return found


# --------------------------------------------------------------------------------------------------
# Values inside records
# --------------------------------------------------------------------------------------------------

EARLIEST_TIME = datetime(1, 1, 2, tzinfo=UTC).timestamp()
LATEST_TIME = datetime(9999, 12, 30, tzinfo=UTC).timestamp()
"""Times outside these (a day inside the range of Python's dates, whatever the time zone) are
read as unknown: they could not be shown as dates."""
_MILLISECONDS_ABOVE = 1e11
"""Numbers above this are milliseconds, not seconds (1e11 seconds is the year 5138)."""


def parse_timestamp(value: Any) -> float | None:
    """Seconds since the epoch from an ISO-8601 string or a number; ``None`` when unreadable or
    out of the range of dates (:data:`EARLIEST_TIME` to :data:`LATEST_TIME`)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        # Compared before any division: a huge integer does not fit a float.
        if value > _MILLISECONDS_ABOVE and value <= LATEST_TIME * 1000:
            value = value / 1000
        return float(value) if EARLIEST_TIME <= value <= LATEST_TIME else None
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    # A time without a zone is read as UTC, so the result does not depend on the machine.
    seconds = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
    return seconds if EARLIEST_TIME <= seconds <= LATEST_TIME else None


def with_ids(messages: Iterable[Message], prefix: str) -> list[Message]:
    """The messages renumbered ``<prefix>:<position>``: deterministic ids for sources that have
    none of their own."""
    return [replace(m, id=f"{prefix}:{i}") for i, m in enumerate(messages)]


def most_common(values: Iterable[str | None]) -> str | None:
    """The most frequent non-empty value (the first seen wins a tie)."""
    counts: dict[str, int] = {}
    for value in values:
        if isinstance(value, str) and value:
            counts[value] = counts.get(value, 0) + 1
    return max(counts, key=lambda v: counts[v]) if counts else None
