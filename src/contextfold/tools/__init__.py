"""Tools as the model sees them: kept within their share of the window, deferred tools found
again through ``tool_search``, and the engine's own tools.

- :mod:`~contextfold.tools.deferral` — :class:`ToolDeferral` and the engine tools' specs;
- :mod:`~contextfold.tools.search` — the ``tool_search`` tool;
- :mod:`~contextfold.tools.bm25` — the ranking it uses.
"""

from __future__ import annotations

from contextfold.tools.deferral import (
    COMPACT_CONTEXT_TOOL,
    DEFAULT_TOOL_BUDGET_SHARE,
    READ_RESULT_TOOL,
    TOOL_SEARCH_TOOL,
    ToolDeferral,
    ToolSelection,
    ToolSource,
    ToolSpec,
    deferral_note,
    engine_tools,
    read_result,
)
from contextfold.tools.search import (
    ToolSearchIndex,
    answer_tool_search,
)

__all__ = [
    "COMPACT_CONTEXT_TOOL",
    "DEFAULT_TOOL_BUDGET_SHARE",
    "READ_RESULT_TOOL",
    "TOOL_SEARCH_TOOL",
    "ToolDeferral",
    "ToolSearchIndex",
    "ToolSelection",
    "ToolSource",
    "ToolSpec",
    "answer_tool_search",
    "deferral_note",
    "engine_tools",
    "read_result",
]
