"""One :class:`~contextfold.ContextEngine` per model a client asks for, all on one store."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Protocol

from contextfold.engine import ContextEngine, ContextPolicy
from contextfold.errors import UnknownModelError
from contextfold.model_registry import ModelInfo, Provider, default_registry
from contextfold.outputs.truncate import OutputLimits
from contextfold.proxy._breaker import Breaker
from contextfold.proxy._kept_sessions import KeptSessions
from contextfold.proxy._tally import TokenTally
from contextfold.proxy._wire import ClientError
from contextfold.proxy.config import ProxyConfig
from contextfold.store import BrowsableSessionStore, PrefixIndex
from contextfold.tools.deferral import DEFAULT_TOOL_BUDGET_SHARE

__all__ = ["CLIENT_OUTPUT_SHARE", "CLIENT_TOOL_SHARE", "Engines", "ModelEngine", "ProxyStore"]

CLIENT_OUTPUT_SHARE = 0.25
"""The share of the window one tool output the client sent may take and still go up whole.
The newest results are what the model must read next (a library agent's 5 % cut Claude Code's
Read of a 9k-token log to 756 characters at 64k); older ones are masked as the window fills."""

_WHOLE_OUTPUTS = OutputLimits(
    max_lines=1_000_000,
    max_bytes=64 * 1024 * 1024,
    max_tokens=10_000_000,
    offload_above_bytes=64 * 1024 * 1024,
)
"""Output limits that leave the share of the window the only one (clients cut their tools'
outputs themselves: Claude Code keeps Bash outputs over ~30 KB out of its own requests)."""

CLIENT_TOOL_SHARE = 0.5
"""The share of the window a client's tool definitions may take before the proxy defers those
the conversation has not used (behind ``tool_search``, which the proxy answers itself). Claude
Code's 26 tools take ~18.6k tokens: all sent from a 40k window on, deferred below. A refusal
would be worse than a deferral. ``--defer-tools`` holds them to the engine's default share."""


class ProxyStore(BrowsableSessionStore, PrefixIndex, Protocol):
    """A browsable store that also offers the index of conversation prefixes
    (:class:`~contextfold.store.PrefixIndex`), atomic writes and claims (both built-in stores
    do)."""

    def add_to_metadata(self, session_id: str, key: str, counts: Mapping[str, int]) -> None: ...
    def atomic(self) -> AbstractContextManager[None]: ...
    def claim_session(self, session_id: str) -> bool: ...
    def release_session(self, session_id: str) -> None: ...


@dataclass(frozen=True)
class ModelEngine:
    """The engine of one model, and the sessions this worker keeps for it between requests."""

    engine: ContextEngine
    kept: KeptSessions
    breaker: Breaker


class Engines:
    """The engines of one proxy, made on first use and shared by its requests.

    A request's model decides the window and the tokenizer: ``config.model`` names a registry
    entry for every request, else the client's model is looked up; ``config.window`` overrides
    the window, and makes models the registry does not know usable.
    """

    def __init__(self, config: ProxyConfig, store: ProxyStore) -> None:
        self.config = config
        self.store = store
        self._engines: dict[tuple[Provider, str], ModelEngine] = {}
        self.client_tokens = TokenTally()
        self._lock = threading.Lock()

    def for_model(self, client_model: str, provider: Provider) -> ModelEngine:
        """The engine for ``client_model``; :class:`ClientError` when its window is unknown."""
        key = (provider, client_model)
        with self._lock:
            made = self._engines.get(key)
            if made is None:
                made = ModelEngine(self._make(client_model, provider), KeptSessions(), Breaker())
                self._engines[key] = made
            return made

    def _model(self, client_model: str, provider: Provider) -> ModelInfo:
        config = self.config
        registry = default_registry()
        try:
            info: ModelInfo | None = registry.get(config.model or client_model)
        except UnknownModelError:
            if config.model or config.window is None:
                raise ClientError(
                    f"contextfold proxy does not know the context window of model "
                    f"{config.model or client_model!r}: start it with --window TOKENS (or "
                    "--model NAME for a model it knows)"
                ) from None
            info = None
        if info is None:
            assert config.window is not None
            return ModelInfo(
                name=client_model,
                given_name=client_model,
                context_window=config.window,
                provider=provider,
                # The most a reply may take; each session's reserve is sized from its own
                # replies (proxy/_conversation.py).
                max_output_tokens=max(1, config.window // 4),
                # Claude's tokenizer family for the Messages protocol; else the common one.
                tokenizer="anthropic" if provider == "anthropic" else "o200k_base",
            )
        # Requests go where the client sends them: the cache style and history rules are the
        # upstream protocol's, whoever made the model.
        # ... and the store records the model as it was named (qwen3:8b), not as it was found.
        info = replace(info, provider=provider, given_name=config.model or client_model)
        if config.window is not None:
            info = replace(
                info,
                context_window=config.window,
                max_output_tokens=min(info.max_output_tokens, max(1, config.window // 4)),
            )
        return info

    def _make(self, client_model: str, provider: Provider) -> ContextEngine:
        config = self.config
        policy = ContextPolicy(
            # Stateless between requests: a compaction runs inside the request that needs it,
            # never on a thread that would outlive it.
            background=False,
            tool_budget_share=DEFAULT_TOOL_BUDGET_SHARE
            if config.defer_tools
            else CLIENT_TOOL_SHARE,
            # Agents resend their own standing instructions with every request (Claude Code's
            # CLAUDE.md reminders are full of "always" and "never"): pinning them would send
            # each one twice, and change the system prompt the client wrote.
            extract_pins=False,
            output_limits=_WHOLE_OUTPUTS,
            output_max_share=CLIENT_OUTPUT_SHARE,
            # The newest output goes up whole whenever the window holds it.
            output_fills_room=True,
            # ... and a view that cannot hold the latest turn whole is refused, not sent.
            keep_latest_turn=True,
        )
        return ContextEngine(
            self._model(client_model, provider),
            store=self.store,
            compactor=config.compactor,
            policy=policy,
            provider=provider,
        )

    def close(self) -> None:
        with self._lock:
            for made in self._engines.values():
                made.engine.close()
            self._engines.clear()
