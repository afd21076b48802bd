"""The engine's own tools, answered inside the session: ``read_result``, ``compact_context``,
``tool_search``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextfold._read_result import READ_RESULT_MIN_BYTES, read_result
from contextfold.messages import ToolCallPart, ToolResultPart
from contextfold.tools import COMPACT_CONTEXT_TOOL, READ_RESULT_TOOL, TOOL_SEARCH_TOOL

if TYPE_CHECKING:
    from contextfold._engine_session import Session

__all__ = ["ENGINE_TOOL_NAMES", "run_engine_tool"]

PAGE_FIT_ATTEMPTS = 4
"""Times a ``read_result`` page is shrunk to fit the session's inline output limit."""

ENGINE_TOOL_NAMES = frozenset(
    {READ_RESULT_TOOL.name, COMPACT_CONTEXT_TOOL.name, TOOL_SEARCH_TOOL.name}
)


def run_engine_tool(session: Session, call: ToolCallPart) -> ToolResultPart | None:
    """The result of an engine tool call, or ``None`` when ``call`` is for another tool."""
    if call.name == READ_RESULT_TOOL.name:
        return _read_page(session, call)
    if call.name == TOOL_SEARCH_TOOL.name:
        found: ToolResultPart = session._deferral.tool_search(call.args(), call_id=call.call_id)
        return found
    if call.name == COMPACT_CONTEXT_TOOL.name:
        focus = call.args().get("focus")
        result = session.compact(
            focus if isinstance(focus, str) and focus else None, trigger="agent"
        )
        return ToolResultPart(call.call_id, call.name, _describe(result), is_error=False)
    return None


def _describe(result: object) -> str:
    from contextfold.compaction import CompactResult

    assert isinstance(result, CompactResult)
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


def _read_page(session: Session, call: ToolCallPart) -> ToolResultPart:
    """A ``read_result`` page that fits the session's inline output limit.

    A page over the limit would be cut again on its way into the transcript (and stored under
    a second ref), so the page is measured and shrunk until it fits.
    """
    limits, counter = session.output_limits, session.engine.counter
    page = limits.max_bytes
    result = read_result(session._blobs, session.id, call.args(), call_id=call.call_id)
    for _ in range(PAGE_FIT_ATTEMPTS):
        if limits.fits(result.content, counter) or page <= READ_RESULT_MIN_BYTES:
            break
        tokens = max(1, counter.count_text(result.content))
        size = len(result.content.encode("utf-8"))
        page = int(min(page, size) * min(1.0, limits.max_tokens / tokens) * 0.9)
        result = read_result(
            session._blobs, session.id, call.args(), call_id=call.call_id, max_bytes=page
        )
    return result
