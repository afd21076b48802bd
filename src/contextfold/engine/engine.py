"""The context engine: one object per agent, one :class:`Session` per conversation."""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from contextfold.compaction import Compactor, ExtractiveSummarizer, Summarizer
from contextfold.compaction.pipeline import preset_named
from contextfold.engine._deps import SessionDeps
from contextfold.engine._tools import with_engine_tools
from contextfold.engine.learned_window import SessionWindow
from contextfold.engine.policy import ContextPolicy
from contextfold.engine.session import Session
from contextfold.errors import ConfigError
from contextfold.events import EventBus, EventSink, JsonlSink, StoreSink
from contextfold.model_registry import (
    ModelInfo,
    ModelRegistry,
    Provider,
    default_registry,
    provider_named,
)
from contextfold.prompt.instructions import InstructionsLoader
from contextfold.store import SessionStore, open_store
from contextfold.tokens.counters import TokenCounter, counter_for
from contextfold.tool_spec import ToolSpec

__all__ = ["ContextEngine"]


class ContextEngine:
    """Context management for one model: sessions, budgets, compaction, storage.

    ``model`` is a :class:`~contextfold.model_registry.ModelInfo` or a registry name
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
        provider: Provider | str | None = None,
        registry: ModelRegistry | None = None,
        sinks: Iterable[EventSink] = (),
        events_log: str | Path | None = None,
    ) -> None:
        if isinstance(model, str):
            model = (registry or default_registry()).get(model)
        policy = policy or ContextPolicy()
        reserve = policy.reserved_output
        if reserve is not None and reserve >= model.context_window:
            raise ConfigError(
                "max_output_tokens",
                f"the reply reserve ({reserve:,}) must be smaller than the context window of "
                f"{model.key} ({model.context_window:,})",
            )
        # A store given as an object is the caller's to close; one opened here is ours.
        self._owns_store = store is None or isinstance(store, str | Path)
        opened = open_store(store) if store is None or isinstance(store, str | Path) else store
        events = EventBus(StoreSink(opened), *sinks)
        if events_log is not None:
            events.add(JsonlSink(events_log))
        self.deps = SessionDeps(
            model=model,
            policy=policy,
            counter=counter or counter_for(model),
            compactor=Compactor.preset(
                preset_named(compactor), min_progress=policy.thresholds.min_progress
            )
            if isinstance(compactor, str)
            else compactor,
            summarizer=summarizer or ExtractiveSummarizer(),
            store=opened,
            events=events,
            provider=provider_named(provider) if provider else model.provider,
            instructions=instructions,
        )
        """What every session of this engine works with, bundled once (the properties below
        read it, so there is one copy of each)."""
        # Held weakly: the engine closes the sessions still alive when it closes, and a
        # long-running host (the proxy resumes a session per request) must not accumulate them.
        self._sessions: weakref.WeakSet[Session] = weakref.WeakSet()

    @property
    def model(self) -> ModelInfo:
        return self.deps.model

    @property
    def store(self) -> SessionStore:
        return self.deps.store

    @property
    def policy(self) -> ContextPolicy:
        return self.deps.policy

    @property
    def counter(self) -> TokenCounter:
        return self.deps.counter

    @property
    def compactor(self) -> Compactor:
        return self.deps.compactor

    @property
    def summarizer(self) -> Summarizer:
        return self.deps.summarizer

    @property
    def instructions(self) -> InstructionsLoader | None:
        return self.deps.instructions

    @property
    def provider(self) -> Provider:
        """Who requests are rendered for (cache style, history rules)."""
        return self.deps.provider

    @property
    def events(self) -> EventBus:
        return self.deps.events

    @property
    def reserved_output(self) -> int:
        """Tokens kept free for the reply (the ``max_tokens`` of every request)."""
        return self.deps.reserved_output

    @property
    def effective_window(self) -> int:
        """Tokens a request may take: the context window minus the reply reserve."""
        return self.deps.effective_window

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
            self.deps.tool_deferral()
            .select(
                with_engine_tools(tools), counter=counter, effective_window=window.effective_window
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
            model=self.model.stored_name,
            title=title,
            metadata=dict(metadata or {}),
            session_id=session_id,
            parent_id=parent_id,
        )
        session = Session(self.deps, info, owner=self)
        self._sessions.add(session)
        return session

    def resume(self, session_id: str) -> Session:
        """Continue a stored session from its latest snapshot plus what came after it."""
        info = self.store.get_session(session_id)
        loaded = self.store.load_view(session_id)
        session = Session(
            self.deps,
            info,
            view=loaded.view,
            last_seq=loaded.last_seq,
            last_edit=loaded.last_edit,
            state=self.store.load_engine_state(session_id),
            owner=self,
        )
        self._sessions.add(session)
        return session

    def close(self) -> None:
        """Stop background work; close the store when the engine opened it."""
        for session in list(self._sessions):
            session.close()
        self._sessions.clear()
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> ContextEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
