"""A tool as the model sees it: :class:`ToolSpec` and where it comes from (:data:`ToolSource`).

A plain value at the bottom of the package: the token counters, the provider adapters, the
transcript formats and the tool deferral all read it, so it imports nothing of contextfold's.
:mod:`contextfold.tools.deferral` re-exports both names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = ["ToolSource", "ToolSpec"]

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
