"""A set of tools the agent may call: their specs for the model, and running their calls.

The agent loop hands every :class:`~contextfold.ToolCallPart` to :meth:`Toolbox.run` and gets a
:class:`ToolOutcome` back, always: an unknown tool, arguments that are not JSON or miss a required
name, a refused approval and an exception inside a handler all come back as ``is_error`` outcomes
whose text tells the model what went wrong. Only ``KeyboardInterrupt`` and other
``BaseException`` s pass through, so that the user can still stop the agent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeAlias

from contextfold.agent._arguments import parse_arguments, validate_arguments
from contextfold.agent._outcome import ToolError, ToolOutcome
from contextfold.errors import UsageError
from contextfold.messages import ToolCallPart, ToolResultPart
from contextfold.tool_spec import ToolSpec

__all__ = ["ToolHandler", "Toolbox"]

ToolHandler: TypeAlias = Callable[[dict[str, Any]], ToolOutcome | ToolResultPart | str]
"""Runs one call from its checked arguments. A plain string is a successful outcome; a
:class:`ToolResultPart` (what :func:`contextfold.read_result` returns) is taken as it is."""


class Toolbox:
    """Tool specs and their handlers, in registration order."""

    def __init__(self) -> None:
        self._tools: dict[str, tuple[ToolSpec, ToolHandler]] = {}

    def register(self, spec: ToolSpec, handler: ToolHandler, *, replace: bool = False) -> None:
        """Add a tool; a second one of the same name is a :class:`UsageError` unless ``replace``."""
        if spec.name in self._tools and not replace:
            raise UsageError(
                f"a tool named {spec.name!r} is already registered; pass replace=True to swap it"
            )
        self._tools[spec.name] = (spec, handler)

    def unregister(self, name: str) -> None:
        """Remove a tool; unknown names are a :class:`UsageError`."""
        if self._tools.pop(name, None) is None:
            raise UsageError(f"no tool named {name!r}; registered: {', '.join(self._tools)}")

    def specs(self) -> list[ToolSpec]:
        """The specs to offer the model, in registration order."""
        return [spec for spec, _ in self._tools.values()]

    def names(self) -> list[str]:
        """The registered tool names, in registration order."""
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self.specs())

    def __len__(self) -> int:
        return len(self._tools)

    def run(self, call: ToolCallPart) -> ToolOutcome:
        """Run ``call`` and return what the model should read; never raises for a bad call."""
        entry = self._tools.get(call.name)
        if entry is None:
            return ToolOutcome.error(
                f"there is no tool named {call.name!r}; the available tools are: "
                f"{', '.join(self._tools) or '(none)'}",
                error="unknown_tool",
            )
        spec, handler = entry
        try:
            arguments = parse_arguments(call.name, call.arguments, spec.parameters)
            return self._call(spec, handler, arguments)
        except ToolError as exc:
            return ToolOutcome.error(str(exc), error=exc.kind)

    def run_with(self, name: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Run tool ``name`` on already-parsed ``arguments`` (for scripts and tests)."""
        return self.run(ToolCallPart.from_args("direct", name, arguments))

    @staticmethod
    def _call(spec: ToolSpec, handler: ToolHandler, arguments: dict[str, Any]) -> ToolOutcome:
        checked = validate_arguments(spec.name, arguments, spec.parameters)
        try:
            result = handler(checked)
        except ToolError:
            raise
        except Exception as exc:  # a bug or an OS error: the model reads it, the loop goes on
            return ToolOutcome.error(
                f"{spec.name} failed: {type(exc).__name__}: {exc}",
                error="exception",
                exception=type(exc).__name__,
            )
        if isinstance(result, ToolOutcome):
            return result
        if isinstance(result, ToolResultPart):
            return ToolOutcome.from_result(result)
        return ToolOutcome(str(result))
