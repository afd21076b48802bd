"""Reading values out of untrusted JSON: the defensive reads every wire codec and importer
shares (text, ids, token counts, nested objects, tool definitions), and errors that show the
value without flooding the message.
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Mapping
from typing import Any

from contextfold.errors import FormatError
from contextfold.tool_spec import ToolSpec

__all__ = [
    "MAX_NESTING",
    "MAX_REPORTED_TOKENS",
    "NESTED_TOO_DEEPLY",
    "MessageError",
    "as_id",
    "as_text",
    "child",
    "shown",
    "string",
    "token_count",
    "too_deep",
    "tool_specs",
]


class MessageError(FormatError):
    """A message of a list could not be read; ``index`` is its position in the list, so that an
    importer can name the line where it starts (:meth:`SourceFile.error_at`)."""

    def __init__(self, message: str, *, index: int | None, path: str | None = None) -> None:
        self.index = index
        prefix = f"message {index}: " if index is not None else ""
        super().__init__(prefix + message, path=path)


MAX_NESTING = 128
"""Deepest nesting of arrays and objects a file may hold. Real transcripts stay near 10 levels;
the bound leaves Python's recursion (about 1,000 levels in all) room for every later step that
recurses into a value: writing it as JSON, showing it, storing it."""


NESTED_TOO_DEEPLY = f"nested too deeply (more than {MAX_NESTING} levels of arrays and objects)"


def too_deep(value: Any) -> bool:
    """Whether ``value`` nests arrays and objects deeper than :data:`MAX_NESTING` (walked without
    recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            return True
        for item in node.values() if isinstance(node, dict) else node:
            if isinstance(item, dict | list):
                stack.append((item, depth + 1))
    return False


MAX_REPORTED_TOKENS = 10**12
"""A reported token count above this is not a count (no window comes near a trillion tokens)."""


def token_count(value: Any) -> int | None:
    """A token count a transcript reported: a whole number from 0 to
    :data:`MAX_REPORTED_TOKENS` (a float or a string of digits is accepted); ``None`` for
    anything else."""
    if isinstance(value, str):
        digits = value.strip()
        value = int(digits) if digits.isdecimal() and len(digits) <= _COUNT_DIGITS else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    # NaN fails both comparisons; infinities and huge integers fail the second.
    return int(value) if 0 <= value <= MAX_REPORTED_TOKENS else None


_COUNT_DIGITS = len(str(MAX_REPORTED_TOKENS))


def shown(value: Any) -> str:
    """A short repr of a value from a file, for error messages (deep or long values elided)."""
    return _SHORT_REPR.repr(value)


def _short_repr() -> reprlib.Repr:
    short = reprlib.Repr()
    short.maxlevel, short.maxstring, short.maxother = 2, 40, 40
    short.maxlist = short.maxdict = short.maxtuple = 3
    return short


_SHORT_REPR = _short_repr()


def as_text(value: Any) -> str:
    """A field that should hold text, as text: a string as it is, nothing as ``""``, a number as
    written, and a list or object as compact JSON (never Python's repr)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def as_id(value: Any) -> str | None:
    """An id or a name from a file: a non-empty string, or a whole number as text; ``None``
    for anything else."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def string(parent: Any, key: str) -> str | None:
    """``parent[key]`` when ``parent`` is a JSON object and the value a string, else ``None``:
    for reading fields that must be text (types, roles, ids) from records that may hold anything."""
    if not isinstance(parent, Mapping):
        return None
    value = parent.get(key)
    return value if isinstance(value, str) else None


def tool_specs(raw_tools: Any) -> list[ToolSpec]:
    """Tool definitions from an OpenAI (``{"type": "function", "function": {...}}``) or Anthropic
    (``{"name", "description", "input_schema"}``) ``tools`` list; other entries are skipped."""
    if not isinstance(raw_tools, list):
        return []
    specs: list[ToolSpec] = []
    for raw in raw_tools:
        if not isinstance(raw, Mapping):
            continue
        function = child(raw, "function") or raw
        name = function.get("name")
        if not isinstance(name, str) or not name:
            continue
        schema = function.get("parameters", function.get("input_schema"))
        if not isinstance(schema, Mapping):
            schema = {"type": "object", "properties": {}}
        specs.append(ToolSpec(name, str(function.get("description") or ""), dict(schema)))
    return specs


_EMPTY: Mapping[str, Any] = {}


def child(parent: Any, key: str) -> Mapping[str, Any]:
    """``parent[key]`` when both are JSON objects, else an empty mapping (for defensive reads of
    nested records)."""
    if not isinstance(parent, Mapping):
        return _EMPTY
    value = parent.get(key)
    return value if isinstance(value, Mapping) else _EMPTY
