"""The ``tool_search`` tool: the model finds deferred tools by describing what it needs.

:class:`ToolSearchIndex` ranks tools with BM25 (:mod:`contextfold.tools.bm25`) over their name
(split into words and counted :data:`NAME_WEIGHT` times: names are the densest evidence),
description and parameter names. A query naming tools exactly (``"github_create_issue"`` or several
names separated by spaces or commas) puts those tools first. :func:`answer_tool_search` turns one
call's arguments into the text the model reads; :class:`~contextfold.tools.deferral.ToolDeferral`
wraps it and activates what was found.

Every odd input (a schema that is not JSON, a description that is not a string) is tolerated: a
search must never fail because one MCP server sent a strange tool.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from contextfold.tool_spec import ToolSpec
from contextfold.tools.bm25 import BM25Index, search_terms

__all__ = [
    "NAME_WEIGHT",
    "TOOL_SEARCH_DEFAULT_LIMIT",
    "TOOL_SEARCH_DESCRIPTION_CHARS",
    "TOOL_SEARCH_MAX_LIMIT",
    "TOOL_SEARCH_NAMES_LISTED",
    "TOOL_SEARCH_SCHEMA_CHARS",
    "ToolSearchIndex",
    "answer_tool_search",
    "compact_schema",
]

TOOL_SEARCH_DEFAULT_LIMIT = 5
"""Tools one search returns when the model gives no ``limit``."""
TOOL_SEARCH_MAX_LIMIT = 10
"""Most tools one search returns: each brings its schema into the window."""
TOOL_SEARCH_DESCRIPTION_CHARS = 600
"""A longer description is cut (with a marker) in the search result; the tool list has it whole."""
TOOL_SEARCH_SCHEMA_CHARS = 1_500
"""A longer compact JSON schema is cut (with a marker) in the search result."""
TOOL_SEARCH_NAMES_LISTED = 30
"""Deferred tool names (or name families, when there are more) listed when a search finds
nothing, so the model can try again."""
NAME_WEIGHT = 2
"""How many times a tool's name words count in its document (BM25F-style field weight)."""

_NAME_SEPARATORS = re.compile(r"[\s,;]+")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _parameter_names(tool: ToolSpec) -> list[str]:
    try:
        return [str(name) for name in tool.parameter_names()]
    except (AttributeError, TypeError):  # parameters that are not a mapping, or not a ToolSpec
        return []


def compact_schema(parameters: Any) -> str:
    """The parameters as compact JSON (``repr`` for what JSON cannot hold)."""
    try:
        return json.dumps(parameters, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):  # circular references
        return repr(parameters)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + "… [cut]"


class ToolSearchIndex:
    """Ranks a fixed set of tools against free-text queries (built once per deferred set)."""

    def __init__(self, tools: Sequence[ToolSpec]) -> None:
        self.tools = tuple(tools)
        documents = []
        for tool in self.tools:
            name_terms = search_terms(_text(getattr(tool, "name", "")))
            parameter_terms = [t for p in _parameter_names(tool) for t in search_terms(p)]
            description_terms = search_terms(_text(getattr(tool, "description", "")))
            documents.append(name_terms * NAME_WEIGHT + description_terms + parameter_terms)
        self._index = BM25Index(documents)

    def search(self, query: str, limit: int = TOOL_SEARCH_DEFAULT_LIMIT) -> list[ToolSpec]:
        """The best matches for ``query``, best first; ties keep the index's order."""
        wanted = {w.lower() for w in _NAME_SEPARATORS.split(query) if w}
        exact = [i for i, t in enumerate(self.tools) if _text(t.name).lower() in wanted]
        scores = self._index.scores(search_terms(query))
        ranked = sorted(
            (i for i, score in enumerate(scores) if score > 0.0 and i not in exact),
            key=lambda i: -scores[i],
        )
        return [self.tools[i] for i in (exact + ranked)[: max(0, limit)]]


def _limit(value: Any) -> int:
    """The ``limit`` argument, clamped; raises ValueError with a message for the model."""
    if value is None or value == "":
        return TOOL_SEARCH_DEFAULT_LIMIT
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())  # weak models send numbers as strings
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ValueError(f"limit must be a whole number, got {value!r}")
    return min(TOOL_SEARCH_MAX_LIMIT, max(1, int(value)))


def _prefix(name: str) -> str:
    """The family a tool name belongs to: ``mcp__github__x`` → ``mcp__github__``, ``slack_x`` →
    ``slack_`` (MCP clients prefix tool names with their server)."""
    if "__" in name.strip("_"):
        return name[: name.rindex("__") + 2]
    head, sep, _ = name.partition("_")
    return head + sep if sep else name


def _listing(tools: Sequence[ToolSpec]) -> str:
    """A sentence naming the deferred tools, or their families with counts when there are many."""
    names = [_text(t.name) for t in tools]
    if len(names) <= TOOL_SEARCH_NAMES_LISTED:
        return f"Deferred tools: {', '.join(names)}."
    families: dict[str, int] = {}
    for name in names:
        families[_prefix(name)] = families.get(_prefix(name), 0) + 1
    shown = list(families.items())[:TOOL_SEARCH_NAMES_LISTED]
    listed = ", ".join(f"{prefix}* ({count})" if count > 1 else prefix for prefix, count in shown)
    more = len(families) - len(shown)
    rest = f" and {more} more" if more else ""
    return f"The {len(names)} deferred tools by name: {listed}{rest}."


def _render_matches(query: str, matches: Sequence[ToolSpec], deferred: int) -> str:
    count = len(matches)
    lines = [
        f'Best {count} of {deferred} deferred tools for "{query}". '
        f"{'It is' if count == 1 else 'They are'} now in your tool list for this turn; "
        f"call {'it' if count == 1 else 'them'} directly.",
    ]
    for tool in matches:
        description = _cut(" ".join(_text(tool.description).split()), TOOL_SEARCH_DESCRIPTION_CHARS)
        lines.append("")
        lines.append(f"## {_text(tool.name)}")
        lines.append(description or "(no description)")
        lines.append(
            f"parameters: {_cut(compact_schema(tool.parameters), TOOL_SEARCH_SCHEMA_CHARS)}"
        )
    return "\n".join(lines)


def answer_tool_search(
    index: ToolSearchIndex, arguments: Mapping[str, Any]
) -> tuple[str, bool, list[ToolSpec]]:
    """(text for the model, is_error, tools found) for one ``tool_search`` call."""
    if not index.tools:
        return (
            "No tools are deferred: every tool is already in your tool list. Call it directly.",
            False,
            [],
        )
    query = arguments.get("query")
    query = " ".join(query.split()) if isinstance(query, str) else ""
    try:
        limit = _limit(arguments.get("limit"))
    except ValueError as exc:
        return (
            f"{exc}. Call tool_search again with a limit from 1 to {TOOL_SEARCH_MAX_LIMIT}.",
            True,
            [],
        )
    if not query:
        return (
            "tool_search needs a query: a few words for what you want to do (e.g. "
            f'"create issue", "send message") or a tool name. {_listing(index.tools)}',
            True,
            [],
        )
    matches = index.search(query, limit)
    if not matches:
        return (
            f'No deferred tool matches "{query}". Try other words (the service, the action, '
            f"the object) or a tool name. {_listing(index.tools)}",
            False,
            [],
        )
    return _render_matches(query, matches, len(index.tools)), False, matches
