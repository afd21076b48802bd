"""A tool as the model sees it: :class:`ToolSpec` and where it comes from (:data:`ToolSource`).

A plain value at the bottom of the package: the token counters, the provider adapters, the
transcript formats and the tool deferral all read it, so it imports nothing of contextfold's.
:mod:`contextfold.tools.deferral` re-exports both names.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = ["SchemaMemo", "ToolSource", "ToolSpec"]

ToolSource: TypeAlias = Literal["builtin", "engine", "mcp", "skill", "client"]
"""Where a tool comes from. ``builtin`` and ``engine`` tools are never deferred; ``client`` tools
(a host's client sent them: the proxy's) are deferred first, then ``mcp`` tools, then ``skill``
tools. A ``client`` tool the model called stays from then on."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the model may call: its name, description, JSON-schema parameters and source."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    source: ToolSource = "builtin"

    def to_openai(self) -> dict[str, Any]:
        """The chat-completions ``tools`` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }

    def to_anthropic(self) -> dict[str, Any]:
        """The messages-API ``tools`` entry."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.parameters),
        }

    def description_text(self) -> str:
        """What counts against the tool-description budget: name, description and schema."""
        schema = json.dumps(self.parameters, ensure_ascii=False, sort_keys=True)
        return f"{self.name}\n{self.description}\n{schema}"

    def parameter_names(self) -> list[str]:
        """Top-level parameter names from the schema (for search)."""
        props = self.parameters.get("properties", {})
        return list(props) if isinstance(props, Mapping) else []


class SchemaMemo:
    """Each tool's parameters as ``encode`` writes them (JSON), remembered per tool object.

    An agent sends the same tools every turn, and encoding their schemas again cost more than
    the rest of counting them. A :class:`ToolSpec` is frozen, but its ``parameters`` are a
    mapping its caller could still change in place; so each encoding is kept with a copy of the
    parameters it was made from (the encoding read back), and used again only while the tool's
    parameters still equal that copy (a comparison at C speed, far cheaper than encoding again).
    The copy is made the second time an object is seen: a host that builds new tool objects for
    every call pays nothing for a memory it cannot use. No lock: a lookup or a store is atomic,
    and a lost store costs an encoding.
    """

    def __init__(self, encode: Callable[[ToolSpec], str]) -> None:
        self._encode = encode
        self._known: dict[int, _Schema] = {}
        self._used: dict[int, _Schema] = {}

    def of(self, tool: ToolSpec) -> str:
        """``encode(tool)``, remembered (what ``encode`` raises, it raises)."""
        key = id(tool)
        hit = self._used.get(key) or self._known.get(key)
        if hit is not None and hit[0] is tool:
            if hit[1] is not _UNSEEN and tool.parameters == hit[1]:
                self._used[key] = hit
                return hit[2]
        else:
            hit = None
        schema = self._encode(tool)
        if type(tool) is not ToolSpec:
            return schema  # a tool-like object of a host's: nothing says it keeps its values
        copied: Any = _UNSEEN
        if hit is not None and hit[2] == schema:
            try:
                # The encoding read back is a copy of the parameters, made at C speed; it
                # equals them only when they are plain JSON (a tuple comes back a list, a set
                # or any other object a string: those never match, and are encoded each time).
                copied = json.loads(schema)
            except ValueError:  # an encoder's text for circular references
                copied = _UNSEEN
        if len(self._used) >= _SCHEMAS_REMEMBERED:
            self._known, self._used = self._used, {}
        self._used[key] = (tool, copied, schema)
        return schema


_Schema: TypeAlias = tuple[ToolSpec, Any, str]
"""A tool, a copy of its parameters, and their encoding."""

_UNSEEN: Any = object()
"""In place of the copy of a tool's parameters until its object is seen a second time."""

_SCHEMAS_REMEMBERED = 1_024
"""Tool objects whose encodings a :class:`SchemaMemo` holds before it keeps only the latest
half (an agent sends the same few tools every turn; a host that builds new objects each call
must not grow it without bound)."""
