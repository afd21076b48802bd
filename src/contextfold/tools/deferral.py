"""Tool descriptions as the model sees them, and keeping them within their share of the window.

:class:`ToolSpec` is the neutral description of one tool (name, description, JSON-schema
parameters and where it came from); it lives in :mod:`contextfold.tool_spec`, at the bottom of the
package, and is re-exported here with :data:`ToolSource`. The provider adapters in
:mod:`contextfold.transcripts` render it for OpenAI (``{"type": "function", "function": {...}}``)
and Anthropic (``{"name", "description", "input_schema"}``).

The engine's own tools live here too: :data:`READ_RESULT_TOOL` and its handler
:func:`read_result` (implemented in :mod:`contextfold.outputs.read_result`),
:data:`TOOL_SEARCH_TOOL` (answered by :meth:`ToolDeferral.tool_search`) and
:data:`COMPACT_CONTEXT_TOOL` (answered by the engine, which owns the session). :func:`engine_tools`
lists the ones to offer.

Tool deferral
-------------
Many MCP servers can fill a tenth of the window with tool descriptions before the first message.
:class:`ToolDeferral` (one per session) holds back descriptions past
:data:`DEFAULT_TOOL_BUDGET_SHARE` of the effective window: ``builtin`` and ``engine`` tools are
never deferred, ``client`` tools go first (a host's client sent them: the proxy's), then ``mcp``
tools, then ``skill`` tools, the least recently used first within each (ties: the smaller client
tool stays; the alphabetically later name goes first). The model gets ``tool_search`` and a note;
the tools a search finds are active until the turn ends. A client tool the model called stays
from then on, and which client tools are deferred is held until :meth:`ToolDeferral.refresh`
(the engine calls it after a compaction, which breaks the provider's cache anyway). The selection
is a pure function of the tools, the usage history and the turn's activations, and keeps the
caller's tool order, so the tool list (part of the cached prompt prefix) does not change from
one call to the next unless one of those did. Per turn, the engine does::

    deferral = ToolDeferral(session_id=sid, on_event=emit)      # once per session
    selection = deferral.select(tools, counter=counter, effective_window=window)
    # send selection.active; add selection.note to the context notes when it is not None;
    # emit selection.event(sid) when it is not None
    for call in reply_tool_calls:
        deferral.mark_used(call.name)
        if call.name == TOOL_SEARCH_TOOL.name:
            result = deferral.tool_search(call.args(), call_id=call.call_id)  # activates matches
    deferral.end_turn()                                         # when a new user message arrives

Failures
--------
A tool deferral must never cost the agent its tools, so ``select`` never raises and owns its
two degradations, each reported once through ``on_event`` as a
:class:`~contextfold.events.ComponentDegraded` event (the caller adds no wrapping of its own):

- the selection itself fails (a bug, input that is not a tool list): every tool is sent, nothing
  deferred, and :attr:`ToolSelection.fallback_reason` says why (component ``tool_deferral``,
  reported each time a selection fails);
- the token counter fails on the tools: their sizes are estimated from the length of their text,
  and deferral goes on (component ``token_counter``, reported once per counter).

A tool the counter cannot serialize (a schema holding a set) is not a failure: it is sized from
its text, silently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contextfold.events import ComponentDegraded, Event, ToolsDeferred
from contextfold.messages import ToolResultPart
from contextfold.outputs.read_result import (
    READ_RESULT_MAX_CHARS,
    READ_RESULT_PAGE_CHARS,
    read_result,
)
from contextfold.tokens.counter import TokenCounter
from contextfold.tool_spec import SchemaMemo, ToolSource, ToolSpec
from contextfold.tools.search import (
    TOOL_SEARCH_DEFAULT_LIMIT,
    TOOL_SEARCH_MAX_LIMIT,
    ToolSearchIndex,
    answer_tool_search,
    compact_schema,
)

__all__ = [
    "COMPACT_CONTEXT_TOOL",
    "DEFAULT_TOOL_BUDGET_SHARE",
    "READ_RESULT_TOOL",
    "TOOL_SEARCH_TOOL",
    "ToolDeferral",
    "ToolSelection",
    "ToolSource",
    "ToolSpec",
    "deferral_note",
    "engine_tools",
    "read_result",
]

READ_RESULT_TOOL = ToolSpec(
    name="read_result",
    description=(
        "Read a tool output that was kept out of the context. Long, cut or old outputs show a "
        "ref such as ref_0123abcd4567 in their place. Give the ref and one of: offset/limit "
        f"(a page of characters; {READ_RESULT_PAGE_CHARS} from the start by default), "
        "start_line/end_line (numbered lines, 1-based, inclusive), or pattern (a regular "
        "expression; returns the matching lines with their numbers, optionally within "
        "start_line/end_line). Every answer says where to continue."
    ),
    parameters={
        "type": "object",
        "properties": {
            "ref": {
                "type": "string",
                "description": "The ref of the stored output, e.g. ref_0123abcd4567.",
                "pattern": "^ref_[0-9a-f]{12}$",
            },
            "offset": {"type": "integer", "minimum": 0, "description": "First character."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": READ_RESULT_MAX_CHARS,
                "description": "Characters to read.",
            },
            "start_line": {"type": "integer", "minimum": 1, "description": "First line."},
            "end_line": {"type": "integer", "minimum": 1, "description": "Last line."},
            "pattern": {"type": "string", "description": "Regular expression to search for."},
        },
        "required": ["ref"],
        "additionalProperties": False,
    },
    source="engine",
)
"""The engine's tool for reading stored outputs back; answer its calls with :func:`read_result`."""

TOOL_SEARCH_TOOL = ToolSpec(
    name="tool_search",
    description=(
        "Find tools that are not in your tool list. To save context, some tools are "
        "deferred; a note says how many. Describe what you want to do "
        'in a few words ("create github issue", "post slack message") or give exact tool '
        "names. The matching tools are added to your tool list for the rest of this turn; the "
        "result shows their descriptions and parameters."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "Keywords for the task, or tool names separated by spaces.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": TOOL_SEARCH_MAX_LIMIT,
                "description": f"Most tools to return (default {TOOL_SEARCH_DEFAULT_LIMIT}).",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    source="engine",
)
"""The engine's tool for finding deferred tools; answer its calls with
:meth:`ToolDeferral.tool_search`. :meth:`ToolDeferral.select` adds it when anything is deferred."""

COMPACT_CONTEXT_TOOL = ToolSpec(
    name="compact_context",
    description=(
        "Free space in your context window: older turns are summarized and old tool outputs "
        "put aside (nothing is lost; put-aside outputs stay readable with read_result). Call it "
        "before a large operation (reading many files, a long build or test log) or when a "
        "[Context: …% used] note says the window is filling up. Give a focus to say what the "
        "summary must keep in detail (e.g. the bug you are fixing and the files involved). "
        "Returns how much space was freed."
    ),
    parameters={
        "type": "object",
        "properties": {
            "focus": {
                "type": "string",
                "description": "What the summary must preserve in detail (optional).",
            },
        },
        "additionalProperties": False,
    },
    source="engine",
)
"""The model's way to ask for a compaction; the engine answers it (it needs the session)."""


def engine_tools(*, deferred: bool) -> list[ToolSpec]:
    """The engine's own tools to offer the model: ``read_result`` and ``compact_context``, and
    ``tool_search`` when ``deferred`` (some tools were held back)."""
    tools = [READ_RESULT_TOOL, COMPACT_CONTEXT_TOOL]
    return [*tools, TOOL_SEARCH_TOOL] if deferred else tools


# --------------------------------------------------------------------------------------------------
# Tool deferral
# --------------------------------------------------------------------------------------------------

DEFAULT_TOOL_BUDGET_SHARE = 0.10
"""Share of the effective window that tool descriptions may take. A few MCP servers can fill a
tenth of the window before the first message; past this share the least needed descriptions wait
behind ``tool_search``, and the rest of the window stays the conversation's."""

_DEFER_RANK: dict[str, int] = {"skill": 0, "mcp": 1, "client": 2}
"""Deferrable sources, kept in this order: skills stay longer than MCP tools, and both longer
than a host's client tools (the proxy's: they are most of a coding agent's request)."""

_CLIENT = "client"

_FALLBACK_CHARS_PER_TOKEN = 3
"""Used only when the counter fails on a tool: errs high (real text is ~4 chars/token)."""

_ODD_TOOL_ERRORS: tuple[type[Exception], ...] = (AttributeError, TypeError, ValueError)
"""What counting tools raises when one of them is odd: a schema that is not JSON (a set, an
object, a circular reference), or something that is not a :class:`ToolSpec`. Such a tool is sized
from its text instead, which is no failure of the counter."""

_PREAMBLE_PROBE = ToolSpec("probe", "probe")


def _name(tool: Any) -> str:
    name = getattr(tool, "name", "")
    return name if isinstance(name, str) else str(name)


@dataclass(frozen=True, slots=True)
class ToolSelection:
    """The tools to send this call, the ones held back, and the note that tells the model."""

    active: tuple[ToolSpec, ...]
    """Tools to send, in the caller's order; ``tool_search`` last when it was added."""
    deferred: tuple[ToolSpec, ...]
    """Tools held back, in the caller's order."""
    description_tokens: int
    """Tokens the active tools' definitions take in the request."""
    budget_tokens: int
    """The tool-description budget; exceeded only by never-deferred and searched-for tools."""
    note: str | None
    """The line for the model when anything is deferred, e.g. ``[12 tools deferred …]``."""
    fallback_reason: str | None = None
    """Why selection failed and every tool was kept; None when it worked."""

    @property
    def deferred_names(self) -> tuple[str, ...]:
        """Names of the deferred tools, in the caller's order."""
        return tuple(_name(t) for t in self.deferred)

    def event(self, session_id: str | None = None) -> ToolsDeferred | None:
        """The :class:`~contextfold.events.ToolsDeferred` event, or None when nothing is."""
        if not self.deferred:
            return None
        return ToolsDeferred(
            session_id=session_id,
            count=len(self.deferred),
            names=self.deferred_names,
            description_tokens=self.description_tokens,
            budget_tokens=self.budget_tokens,
        )


def deferral_note(count: int) -> str:
    """The line that tells the model ``count`` tools are held back and how to reach them."""
    tools = "tool" if count == 1 else "tools"
    return (
        f"[{count} {tools} deferred to save context; call {TOOL_SEARCH_TOOL.name} with a few "
        "words about what you need to load them]"
    )


class ToolDeferral:
    """Chooses, each call, which tool descriptions to send within the budget (one per session).

    State: when each tool was last used (a use counter, not a clock) and the tools activated by
    ``tool_search`` this turn. Not thread-safe: a session makes one call at a time.

    ``on_event`` receives the :class:`~contextfold.events.ComponentDegraded` events of the
    module docstring's "Failures", stamped with ``session_id``; without it they are not reported
    (the fallbacks happen all the same).
    """

    def __init__(
        self,
        budget_share: float = DEFAULT_TOOL_BUDGET_SHARE,
        *,
        session_id: str | None = None,
        on_event: Callable[[Event], None] | None = None,
    ) -> None:
        if not 0.0 < budget_share <= 1.0:
            raise ValueError(f"budget_share must be in (0, 1], got {budget_share!r}")
        self.budget_share = budget_share
        self.session_id = session_id
        self.on_event = on_event
        self._counter_failed = False
        """Whether the current counter's failure was reported (once per counter)."""
        self._uses = 0
        self._last_used: dict[str, int] = {}
        self._activated: set[str] = set()
        self._searchable: tuple[ToolSpec, ...] = ()
        self._index: ToolSearchIndex | None = None
        self._costs: dict[tuple[str, str, str], int] = {}
        self._cost_counter: TokenCounter | None = None
        self._preamble = 0
        self._held: frozenset[str] | None = None
        """The client tools the latest full selection deferred; they stay deferred (and the
        others stay sent) until :meth:`refresh`, so the tool list does not change between
        calls: it opens the provider's cached prefix."""
        self._squeezed_total: tuple[tuple[TokenCounter, tuple[str, ...]], int] | None = None
        """:meth:`squeezed_tokens`' latest count, by counter and tool names (asked for each
        output the session takes in)."""
        self._squeezed = False
        """Set by :meth:`squeeze`: from then on only the client tools the model called are
        sent (the rest wait behind ``tool_search``)."""
        self.last: ToolSelection | None = None
        """The latest selection (None before the first)."""
        self._schemas = SchemaMemo(_schema_of)

    # -- the turn --------------------------------------------------------------------------------

    @property
    def activated(self) -> frozenset[str]:
        """Names activated this turn by ``tool_search`` or :meth:`activate`."""
        return frozenset(self._activated)

    def mark_used(self, name: str) -> None:
        """Record that the model called ``name``: it becomes the most recently used tool."""
        self._uses += 1
        self._last_used[name] = self._uses

    def activate(self, names: Iterable[str]) -> None:
        """Keep these tools active, whatever the budget, until :meth:`end_turn`."""
        self._activated.update(names)

    def end_turn(self) -> None:
        """Forget this turn's activations (call when a new user message arrives)."""
        self._activated.clear()

    def refresh(self) -> None:
        """Choose the client tools to defer afresh on the next :meth:`select` (call where the
        provider's cache breaks anyway: after a compaction rewrote the view). After a
        :meth:`squeeze` the unused client tools stay deferred."""
        if not self._squeezed:
            self._held = None

    def squeeze(self, tools: Iterable[ToolSpec]) -> bool:
        """Make room for the conversation before it is compacted: defer every client tool the
        model has not called, from now on. The conversation has shown which tools it uses (a
        coding agent's Bash, Read, Edit); the rest of a host's tool list (Claude Code's cron,
        worktree and workflow tools: half of its 18k tokens) is what gives way first, rather
        than the newest tool result. False (nothing done) before the model called any client
        tool, or when every unused one is deferred already."""
        client = [_name(t) for t in tools if getattr(t, "source", None) == _CLIENT]
        used = {n for n in client if n in self._last_used}
        unused = frozenset(n for n in client if n not in used and n not in self._activated)
        if not used or not unused or (self._squeezed and unused <= (self._held or frozenset())):
            return False
        self._squeezed = True
        self._held = unused
        return True

    def squeezed_tokens(self, counter: TokenCounter) -> int | None:
        """What the latest selection's tools would take after a :meth:`squeeze` (what a
        squeeze could not change: the tools as they are); ``None`` before any selection."""
        last = self.last
        if last is None:
            return None
        tools = [*last.active, *last.deferred]
        client = [_name(t) for t in tools if getattr(t, "source", None) == _CLIENT]
        if not any(n in self._last_used for n in client):
            return last.description_tokens  # nothing used: a squeeze would do nothing
        keep = [
            t
            for t in tools
            if getattr(t, "source", None) != _CLIENT
            or _name(t) in self._last_used
            or _name(t) in self._activated
        ]
        if not any(_name(t) == TOOL_SEARCH_TOOL.name for t in keep):
            keep.append(TOOL_SEARCH_TOOL)
        key = (counter, tuple(_name(t) for t in keep))
        if self._squeezed_total is None or self._squeezed_total[0] != key:
            self._squeezed_total = (key, self._safe_total(keep, counter))
        return min(last.description_tokens, self._squeezed_total[1])

    def state(self) -> dict[str, Any]:
        """What a resumed session needs to defer the same tools: the use order, this turn's
        activations (JSON values)."""
        return {
            "uses": self._uses,
            "last_used": dict(self._last_used),
            "activated": sorted(self._activated),
            "held": None if self._held is None else sorted(self._held),
            "squeezed": self._squeezed,
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Take back what :meth:`state` returned; anything malformed is ignored (it only ranks
        tools), so an old or foreign state never stops a resume."""
        last_used = state.get("last_used")
        if isinstance(last_used, Mapping):
            self._last_used = {
                str(name): int(use) for name, use in last_used.items() if isinstance(use, int)
            }
        uses = state.get("uses")
        self._uses = max(
            uses if isinstance(uses, int) else 0, max(self._last_used.values(), default=0)
        )
        activated = state.get("activated")
        if isinstance(activated, list):
            self._activated = {str(name) for name in activated}
        held = state.get("held")
        self._held = frozenset(str(name) for name in held) if isinstance(held, list) else None
        self._squeezed = state.get("squeezed") is True

    # -- selection -------------------------------------------------------------------------------

    def select(
        self,
        tools: Iterable[ToolSpec],
        *,
        counter: TokenCounter,
        effective_window: int,
        activated: Iterable[str] = (),
    ) -> ToolSelection:
        """The tools to send for this call, within the budget; never raises.

        When selecting fails, every tool is kept, :attr:`ToolSelection.fallback_reason` says why
        and one ``ComponentDegraded`` event goes to ``on_event`` (see the module docstring).

        ``tools`` should not include ``tool_search``: it is added, last, when anything is
        deferred. ``activated`` adds names to keep active for this call only, on top of
        :attr:`activated`.
        """
        listed: list[ToolSpec] = []
        try:
            listed = list(tools)
            budget = max(0, int(self.budget_share * effective_window))
            selection = self._select(listed, counter, budget, {*self._activated, *activated})
        except Exception as exc:  # designed degradation: send every tool, never break the turn
            reason = f"{type(exc).__name__}: {exc}"
            selection = ToolSelection(
                active=tuple(listed),
                deferred=(),
                description_tokens=self._safe_total(listed, counter),
                budget_tokens=0,
                note=None,
                fallback_reason=reason,
            )
            self._searchable = ()
            self._degraded("tool_deferral", "all tools sent", reason)
        self._index = None  # rebuilt on the next search, from this selection's tools
        self.last = selection
        return selection

    def _select(
        self, tools: list[ToolSpec], counter: TokenCounter, budget: int, forced: set[str]
    ) -> ToolSelection:
        costs = self._marginal_costs(tools, counter)
        preamble = self._preamble if tools else 0
        searchable = [i for i, t in enumerate(tools) if getattr(t, "source", None) in _DEFER_RANK]
        forced = forced | self._client_kept(tools)
        candidates = [i for i in searchable if _name(tools[i]) not in forced]
        # While a selection is held, the client tools it deferred stay deferred even if
        # everything would fit now.
        held = self._held is not None and any(tools[i].source == _CLIENT for i in candidates)
        if not candidates or (not held and preamble + sum(costs) <= budget):
            self._searchable = ()
            self._hold(tools, ())
            total = self._safe_total(tools, counter)
            return ToolSelection(tuple(tools), (), total, budget, None)

        fixed = set(range(len(tools))) - set(candidates)
        has_search = any(_name(tools[i]) == TOOL_SEARCH_TOOL.name for i in fixed)
        used = preamble + sum(costs[i] for i in fixed)
        if not has_search:
            used += self._marginal_costs([TOOL_SEARCH_TOOL], counter)[0]
        # Strict priority: keep the longest prefix that fits, never a smaller tool further
        # down, so that no skill is deferred while an MCP tool stays (and no older tool
        # stays while a more recent one of its kind is deferred).
        kept: list[int] = []
        for i in sorted(candidates, key=lambda i: self._keep_key(tools[i], i, costs[i])):
            if held and tools[i].source == _CLIENT:
                break  # the held client tools stay deferred (they are ranked last)
            if used + costs[i] > budget:
                break
            used += costs[i]
            kept.append(i)

        def build(keep: set[int]) -> tuple[list[ToolSpec], list[ToolSpec]]:
            active = [t for i, t in enumerate(tools) if i in fixed or i in keep]
            deferred = [t for i, t in enumerate(tools) if i not in fixed and i not in keep]
            return ([*active, TOOL_SEARCH_TOOL] if not has_search else active), deferred

        active, deferred = build(set(kept))
        total = self._safe_total(active, counter)
        # A counter whose total is not the sum of its parts: shed kept tools until it fits.
        while kept and total > budget:
            kept.pop()
            active, deferred = build(set(kept))
            total = self._safe_total(active, counter)
        kept_set = set(kept)
        self._searchable = tuple(tools[i] for i in searchable if i not in kept_set)
        self._hold(tools, deferred)
        return ToolSelection(
            tuple(active), tuple(deferred), total, budget, deferral_note(len(deferred))
        )

    def _keep_key(self, tool: ToolSpec, index: int, cost: int) -> tuple[int, int, int, str, int]:
        """Which deferrable tool stays first: by source, the most recently used, then (client
        tools, where nothing says which the agent needs) the smallest, so that more of them
        fit; then by name."""
        name = _name(tool)
        smallest = cost if tool.source == _CLIENT else 0
        return (_DEFER_RANK[tool.source], -self._last_used.get(name, 0), smallest, name, index)

    def _client_kept(self, tools: Sequence[ToolSpec]) -> set[str]:
        """Client tools that are sent whatever the budget: those the model called (they stay
        from then on) and, while a selection is held, those it did not defer."""
        client = [_name(t) for t in tools if getattr(t, "source", None) == _CLIENT]
        used = {n for n in client if n in self._last_used}
        if self._held is None:
            return used
        return used | {n for n in client if n not in self._held}

    def _hold(self, tools: Sequence[ToolSpec], deferred: Sequence[ToolSpec]) -> None:
        """Remember which client tools this selection deferred, until :meth:`refresh`."""
        if self._held is None and any(getattr(t, "source", None) == _CLIENT for t in tools):
            self._held = frozenset(_name(t) for t in deferred if t.source == _CLIENT)

    def _marginal_costs(self, tools: Sequence[ToolSpec], counter: TokenCounter) -> list[int]:
        """Each tool's tokens beyond the shared tools preamble (cached while the counter stays)."""
        if counter is not self._cost_counter:
            self._costs = {}
            self._cost_counter = counter
            self._counter_failed = False
            one = self._counted(lambda: counter.count_tools([_PREAMBLE_PROBE]))
            two = self._counted(lambda: counter.count_tools([_PREAMBLE_PROBE] * 2))
            self._preamble = 0 if one is None or two is None else max(0, 2 * one - two)
        costs = []
        for tool in tools:
            key = (_name(tool), str(getattr(tool, "description", "")), self._schemas.of(tool))
            cost = self._costs.get(key)
            if cost is None:
                cost = self._costs[key] = self._tool_tokens(tool, key, counter) - self._preamble
            costs.append(max(0, cost))
        return costs

    def _safe_total(self, tools: Sequence[ToolSpec], counter: TokenCounter) -> int:
        """Tokens of ``tools`` as the counter counts them, or the sum of estimates when it fails
        (which never raises: the estimates fall back on the text's length)."""
        total = self._counted(lambda: counter.count_tools(tools), odd_tools=_ODD_TOOL_ERRORS)
        if total is not None:
            return total
        return self._preamble + sum(self._marginal_costs(tools, counter)) if tools else 0

    def _tool_tokens(self, tool: ToolSpec, key: tuple[str, str, str], counter: TokenCounter) -> int:
        """Tokens of one tool's definition; estimated from its text when the counter cannot."""
        tokens = self._counted(lambda: counter.count_tools([tool]), odd_tools=_ODD_TOOL_ERRORS)
        if tokens is not None:
            return tokens
        text = "\n".join(key)
        tokens = self._counted(lambda: counter.count_text(text))
        return tokens if tokens is not None else len(text) // _FALLBACK_CHARS_PER_TOKEN + 1

    def _counted(
        self, count: Callable[[], int], *, odd_tools: tuple[type[Exception], ...] = ()
    ) -> int | None:
        """``count()``, or None when it fails, and the caller estimates instead.

        An error of a type in ``odd_tools`` is the tools' own doing (a schema that is not JSON)
        and passes silently; any other is the counter failing, reported once per counter.
        """
        try:
            return count()
        except Exception as exc:  # designed degradation: a pluggable counter may fail any way
            if not isinstance(exc, odd_tools) and not self._counter_failed:
                self._counter_failed = True
                reason = f"{type(exc).__name__}: {exc}"
                self._degraded("token_counter", "tool sizes estimated from their text", reason)
            return None

    def _degraded(self, component: str, fallback: str, reason: str) -> None:
        if self.on_event is not None:
            self.on_event(
                ComponentDegraded(
                    session_id=self.session_id, component=component, fallback=fallback, error=reason
                )
            )

    # -- tool_search -----------------------------------------------------------------------------

    def search(self, query: str, *, limit: int = TOOL_SEARCH_DEFAULT_LIMIT) -> list[ToolSpec]:
        """The deferred tools best matching ``query`` (BM25), best first; activates nothing."""
        return self._search_index().search(query, limit)

    def tool_search(self, arguments: Mapping[str, Any], *, call_id: str = "") -> ToolResultPart:
        """Answer one ``tool_search`` call and activate the tools it found for this turn.

        Searches the tools deferred by the latest :meth:`select` (and those already activated
        this turn). Mistakes (no query, a bad limit) come back as ``is_error`` results that tell
        the model what to do, never as exceptions.
        """
        text, is_error, found = answer_tool_search(self._search_index(), arguments)
        self.activate(_name(t) for t in found)
        return ToolResultPart(call_id, TOOL_SEARCH_TOOL.name, text, is_error)

    def _search_index(self) -> ToolSearchIndex:
        if self._index is None:
            self._index = ToolSearchIndex(self._searchable)
        return self._index


def _schema_of(tool: ToolSpec) -> str:
    return compact_schema(getattr(tool, "parameters", None))
