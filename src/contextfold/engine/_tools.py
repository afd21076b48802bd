"""The engine's own tools, answered inside the session: ``read_result``, ``compact_context``,
``tool_search``.

:func:`contextfold.tools.deferral.engine_tools` is the one list of them: :func:`with_engine_tools`
adds it to the agent's tools on every turn (``tool_search`` joins when the deferral holds tools
back), and :func:`run_engine_tool` answers a call to any of them.
"""

from __future__ import annotations

from collections.abc import Iterable

from contextfold.compaction import CompactResult
from contextfold.engine._compact import compact_now
from contextfold.engine._core import SessionCore
from contextfold.messages import ToolCallPart, ToolResultPart
from contextfold.outputs.read_result import READ_RESULT_MIN_BYTES, read_result
from contextfold.tool_spec import ToolSpec
from contextfold.tools.deferral import (
    COMPACT_CONTEXT_TOOL,
    READ_RESULT_TOOL,
    TOOL_SEARCH_TOOL,
    engine_tools,
)

__all__ = ["run_engine_tool", "with_engine_tools"]

PAGE_FIT_ATTEMPTS = 4
"""Times a ``read_result`` page is shrunk to fit the session's inline output limit."""


def with_engine_tools(tools: Iterable[ToolSpec]) -> list[ToolSpec]:
    """``tools`` and the engine's own (``tool_search`` is added by the deferral, when needed)."""
    return [*tools, *engine_tools(deferred=False)]


def run_engine_tool(core: SessionCore, call: ToolCallPart) -> ToolResultPart | None:
    """The result of an engine tool call, or ``None`` when ``call`` is for another tool."""
    if call.name == READ_RESULT_TOOL.name:
        return _read_page(core, call)
    if call.name == TOOL_SEARCH_TOOL.name:
        found: ToolResultPart = core.state.deferral.tool_search(call.args(), call_id=call.call_id)
        return found
    if call.name == COMPACT_CONTEXT_TOOL.name:
        focus = call.args().get("focus")
        result = compact_now(core, focus if isinstance(focus, str) and focus else None, "agent")
        return ToolResultPart(call.call_id, call.name, _describe(result), is_error=False)
    return None


def _describe(result: CompactResult) -> str:
    if not result.changed:
        return f"Nothing compacted: {result.unchanged_reason}."
    steps = ", ".join(result.strategies_run) or "none"
    outcome = "" if not result.failed else f" It freed less than hoped: {result.reason}."
    return (
        f"Compacted the conversation from {result.before_tokens:,} to {result.after_tokens:,} "
        f"tokens ({result.before_messages} → {result.after_messages} messages; steps: {steps})."
        f"{outcome} Earlier tool outputs stay readable with read_result and the refs shown in "
        "their place."
    )


def _read_page(core: SessionCore, call: ToolCallPart) -> ToolResultPart:
    """A ``read_result`` page that fits the session's inline output limit.

    A page over the limit would be cut again on its way into the transcript (and stored under
    a second ref), so the page is measured and shrunk until it fits.
    """
    limits, counter = core.output_limits, core.deps.counter
    page = limits.max_bytes
    result = read_result(core.blobs, core.id, call.args(), call_id=call.call_id)
    for _ in range(PAGE_FIT_ATTEMPTS):
        if limits.fits(result.content, counter) or page <= READ_RESULT_MIN_BYTES:
            break
        tokens = max(1, counter.count_text(result.content))
        size = len(result.content.encode("utf-8"))
        page = int(min(page, size) * min(1.0, limits.max_tokens / tokens) * 0.9)
        result = read_result(core.blobs, core.id, call.args(), call_id=call.call_id, max_bytes=page)
    return result
