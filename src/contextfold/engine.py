"""The context engine: one object per agent, one :class:`Session` per conversation.

Each turn an agent calls ``session.prepare(system=..., tools=...)`` and sends what it returns;
contextfold guarantees that request fits the window, passes the provider's history rules and
keeps a stable, cacheable prefix. Everything the agent adds goes through the session::

    engine = ContextEngine("anthropic/claude-sonnet-4-5", store="sessions.db")
    session = engine.new_session(title="fix the parser")
    session.add_user("The parser fails on empty input; fix it.")
    while True:
        request = session.prepare(system=BASE_PROMPT, tools=my_tools)
        try:
            response = model.complete(request.to_chat_request())
        except ContextOverflowError as error:
            session.recover(error)          # learn its limit, compact hard; never resend
            continue
        session.add_assistant(response)     # anchors token counts on the reported usage
        if not response.tool_calls:
            break
        for call in response.tool_calls:
            result = session.run_engine_tool(call) or run_my_tool(call)
            session.add_tool_result(call.call_id, result.content, name=call.name)

The per-turn flow (DESIGN §3) is in :meth:`Session.prepare`; compaction, masking and offloading
append *edits* to the stored transcript, so nothing is ever deleted and every removed output stays
readable through the ``read_result`` tool. ``engine.resume(session_id)`` continues a session
from its latest snapshot without re-reading the history before it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from contextfold._engine_session import Session, engine_deferral
from contextfold._engine_types import ContextPolicy, PreparedRequest
from contextfold._engine_window import SessionWindow
from contextfold._exceptions import ConfigError
from contextfold.budget import ContextBudget
from contextfold.compaction import Compactor, ExtractiveSummarizer, Summarizer
from contextfold.events import EventBus, EventSink, JsonlSink, StoreSink
from contextfold.instructions import InstructionsLoader
from contextfold.models import ModelInfo, ModelRegistry, default_registry
from contextfold.store import SessionStore, open_store
from contextfold.tokens import TokenCounter, counter_for
from contextfold.tools import COMPACT_CONTEXT_TOOL, READ_RESULT_TOOL, ToolSpec

__all__ = ["ContextEngine", "ContextPolicy", "PreparedRequest", "Session"]


class ContextEngine:
    """Context management for one model: sessions, budgets, compaction, storage.

    ``model`` is a :class:`~contextfold.models.ModelInfo` or a registry name
    (``"anthropic/claude-sonnet-4-5"``). ``store`` is a store, a path or URL for
    :func:`~contextfold.store.open_store`, or ``None`` for ``$CONTEXTFOLD_DATABASE_URL`` / the
    default SQLite file (``":memory:"`` for a throw-away store). ``compactor`` is a preset name
    (``"mask-first"``, ``"summarize"``, ``"window"``, ``"restart"``) or a
    :class:`~contextfold.compaction.Compactor`. ``provider`` decides how prompts are cached
    (``"anthropic"`` breakpoints, ``"openai"`` cache key, anything else plain); it defaults to
    the model's provider. Events go to the store, to ``events_log`` (JSON lines) and ``sinks``.
    """

    def __init__(
        self,
        model: ModelInfo | str,
        *,
        store: SessionStore | str | Path | None = None,
        counter: TokenCounter | None = None,
        compactor: Compactor | str = "mask-first",
        policy: ContextPolicy | None = None,
        summarizer: Summarizer | None = None,
        instructions: InstructionsLoader | None = None,
        provider: str | None = None,
        registry: ModelRegistry | None = None,
        sinks: Iterable[EventSink] = (),
        events_log: str | Path | None = None,
    ) -> None:
        if isinstance(model, str):
            model = (registry or default_registry()).get(model)
        self.model = model
        self._owns_store = store is None or isinstance(store, str | Path)
        self.store: SessionStore = (
            open_store(store) if store is None or isinstance(store, str | Path) else store
        )
        self.policy = policy or ContextPolicy()
        reserve = self.policy.reserved_output
        if reserve is not None and reserve >= model.context_window:
            raise ConfigError(
                "max_output_tokens",
                f"the reply reserve ({reserve:,}) must be smaller than the context window of "
                f"{model.key} ({model.context_window:,})",
            )
        self.counter = counter or counter_for(model)
        self.compactor = (
            Compactor.preset(compactor, min_progress=self.policy.thresholds.min_progress)
            if isinstance(compactor, str)
            else compactor
        )
        self.summarizer = summarizer or ExtractiveSummarizer()
        self.instructions = instructions
        self.provider = provider or model.provider
        self.events = EventBus(StoreSink(self.store), *sinks)
        if events_log is not None:
            self.events.add(JsonlSink(events_log))
        self._sessions: list[Session] = []

    @property
    def reserved_output(self) -> int:
        """Tokens kept free for the reply (the ``max_tokens`` of every request)."""
        return ContextBudget.for_model(
            self.model, reserved_output=self.policy.reserved_output
        ).reserved_output

    @property
    def effective_window(self) -> int:
        """Tokens a request may take: the context window minus the reply reserve."""
        return self.model.context_window - self.reserved_output

    def require_room(self, *, system: str = "", tools: Iterable[ToolSpec] = ()) -> None:
        """Raise :class:`ConfigError`, naming the sizes, when ``system`` and ``tools`` (with the
        engine's own tools) and the reply reserve leave a conversation no room in the window.

        :meth:`Session.prepare` checks the same on every turn; call this first to refuse a
        window that is too small before any session is stored (the CLI does, for ``--window``).
        """
        window = SessionWindow(self.model, self.policy.reserved_output)
        counter = self.counter
        # The tools a first request would send: deferral may leave some out in a small window.
        active = (
            engine_deferral(self)
            .select(
                [*tools, READ_RESULT_TOOL, COMPACT_CONTEXT_TOOL],
                counter=counter,
                effective_window=window.effective_window,
            )
            .active
        )
        fixed = counter.count_request([], system=system, tools=active)
        window.require_room(fixed, counter.count_tools(active))

    def new_session(
        self,
        *,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        session_id: str | None = None,
        parent_id: str | None = None,
    ) -> Session:
        """Start a session in the store."""
        info = self.store.create_session(
            model=self.model.key,
            title=title,
            metadata=dict(metadata or {}),
            session_id=session_id,
            parent_id=parent_id,
        )
        session = Session(self, info, view=[], last_seq=0, last_edit=0, state=None)
        self._sessions.append(session)
        return session

    def resume(self, session_id: str) -> Session:
        """Continue a stored session from its latest snapshot plus what came after it."""
        info = self.store.get_session(session_id)
        loaded = self.store.load_view(session_id)
        state = info.metadata.get("engine")
        session = Session(
            self,
            info,
            view=loaded.view,
            last_seq=loaded.last_seq,
            last_edit=loaded.last_edit,
            state=state if isinstance(state, Mapping) else None,
        )
        self._sessions.append(session)
        return session

    def close(self) -> None:
        """Stop background work; close the store when the engine opened it."""
        for session in self._sessions:
            session.close()
        self._sessions.clear()
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> ContextEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
