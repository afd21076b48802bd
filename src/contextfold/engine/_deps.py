"""What a session works with, bundled once: :class:`SessionDeps`.

A :class:`~contextfold.engine.ContextEngine` builds one bundle and hands it to every session it
makes; a test hands a session its own (fakes included) without any engine. The bundle is frozen:
a session never changes what it was given, only its own state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from contextfold.budget import ContextBudget
from contextfold.compaction import Compactor, Summarizer
from contextfold.engine.policy import ContextPolicy
from contextfold.events import Event, EventBus
from contextfold.model_registry import ModelInfo, Provider
from contextfold.prompt.instructions import InstructionsLoader
from contextfold.store import SessionStore
from contextfold.tokens.counter import TokenCounter
from contextfold.tools.deferral import ToolDeferral

__all__ = ["SessionDeps"]


@dataclass(frozen=True, slots=True)
class SessionDeps:
    """The model, policy, counter, compactor, store and event bus a session uses.

    ``provider`` is who the requests are rendered for: its cache style (``"anthropic"``
    breakpoints, ``"openai"`` cache key, anything else plain) and its history rules
    (:func:`~contextfold.history.repair.history_rules_for`).
    """

    model: ModelInfo
    policy: ContextPolicy
    counter: TokenCounter
    compactor: Compactor
    summarizer: Summarizer
    store: SessionStore
    events: EventBus
    provider: Provider
    instructions: InstructionsLoader | None = None

    @property
    def reserved_output(self) -> int:
        """Tokens kept free for the reply against the model's window."""
        return ContextBudget.for_model(
            self.model, reserved_output=self.policy.reserved_output
        ).reserved_output

    @property
    def effective_window(self) -> int:
        """Tokens a request may take against the model's window (minus the reply reserve)."""
        return self.model.context_window - self.reserved_output

    def tool_deferral(
        self, session_id: str | None = None, on_event: Callable[[Event], None] | None = None
    ) -> ToolDeferral:
        """A fresh per-session tool deferral with the policy's budget share; it reports its own
        degradations to ``on_event`` (none without it)."""
        return ToolDeferral(self.policy.tool_budget_share, session_id=session_id, on_event=on_event)
