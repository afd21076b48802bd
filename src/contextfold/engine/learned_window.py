"""The window a session plans against: the registry's, or the smaller one a provider showed.

A server can hold less than the registry says: a llama.cpp or Ollama server started with a small
context, a proxy with a lower limit. When a provider refuses a request as too long and says its
limit, the session learns that limit (:meth:`SessionWindow.learn`), keeps it in its saved state,
and plans every later request against ``min(registry window, learned limit)`` minus the reply
reserve.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from contextfold.budget import MAX_OUTPUT_RESERVE_SHARE, ContextBudget
from contextfold.errors import ConfigError, ContextOverflowError
from contextfold.model_registry import ModelInfo

__all__ = ["SessionWindow", "stored_learned_window"]


@dataclass
class SessionWindow:
    """The context window and reply reserve of one session.

    ``reserve`` is the policy's reply reserve (``None``: the model's default). Against a learned
    limit the reserve is capped at :data:`~contextfold.budget.MAX_OUTPUT_RESERVE_SHARE` of it,
    since a reserve chosen for the registry's window can leave a small server nothing for the
    prompt.
    """

    model: ModelInfo
    reserve: int | None = None
    learned: int | None = None
    """The provider's own limit, when it refused a request and said so."""
    _reserved: tuple[int | None, int | None, int] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """:attr:`reserved_output` with the ``learned`` and ``reserve`` it was computed for (asked
    several times a turn; it changes only with them)."""

    @property
    def context_window(self) -> int:
        """Tokens one request may hold, prompt and reply together."""
        if self.learned is None:
            return self.model.context_window
        return min(self.model.context_window, self.learned)

    @property
    def model_for_budget(self) -> ModelInfo:
        """The model, with the window requests are planned against."""
        if self.context_window == self.model.context_window:
            return self.model
        return replace(self.model, context_window=self.context_window)

    @property
    def reserved_output(self) -> int:
        """Tokens kept free for the reply (every request's ``max_tokens``)."""
        memo = self._reserved
        if memo is None or memo[0] != self.learned or memo[1] != self.reserve:
            memo = self._reserved = (self.learned, self.reserve, self._reserve())
        return memo[2]

    def _reserve(self) -> int:
        model = self.model_for_budget
        if model is self.model:
            return ContextBudget.for_model(model, reserved_output=self.reserve).reserved_output
        cap = math.floor(model.context_window * MAX_OUTPUT_RESERVE_SHARE)
        reserve = self.reserve if self.reserve is not None else model.max_output_tokens
        return max(1, min(reserve, cap))

    @property
    def effective_window(self) -> int:
        """Tokens the prompt may take: the window minus the reply reserve."""
        return self.context_window - self.reserved_output

    def learn(self, limit: int | None) -> bool:
        """Take a provider's stated limit; True when it makes the window smaller."""
        if limit is None or limit <= 0 or limit >= self.context_window:
            return False
        self.learned = limit
        return True

    def require_room(self, fixed_tokens: int, tools_tokens: int, *, provider: str = "") -> None:
        """Raise when the fixed part of a request (system prompt and tools, ``fixed_tokens`` in
        all) and the reply reserve leave the conversation nothing.

        Against the model's window that is a setting to change (:class:`ConfigError`, e.g.
        ``--window 256``); against a limit a provider stated, a request that cannot be sent
        (:class:`ContextOverflowError`, with the figures).
        """
        if fixed_tokens < self.effective_window:
            return
        sizes = (
            f"the system prompt takes about {fixed_tokens - tools_tokens:,} tokens and the tool "
            f"definitions {tools_tokens:,}, and {self.reserved_output:,} are kept for the reply"
        )
        if self.learned is not None and self.learned < self.model.context_window:
            raise ContextOverflowError(
                f"nothing fits the provider's window of {self.context_window:,} tokens: {sizes}. "
                "Use a model (or server) with a larger context, a shorter system prompt or "
                "fewer tools.",
                provider=provider,
                prompt_tokens=fixed_tokens,
                limit=self.context_window,
            )
        raise ConfigError(
            "window",
            f"a window of {self.context_window:,} tokens is too small: {sizes}. Give a window "
            f"of at least {self._window_for(2 * fixed_tokens):,} tokens (that leaves the "
            "conversation as much as the system prompt and tools take), a shorter system "
            "prompt, or fewer tools.",
        )

    def _window_for(self, prompt_tokens: int) -> int:
        """The smallest window whose prompt may take ``prompt_tokens`` after the reply reserve
        (which grows with the window unless the policy sets it)."""
        if self.reserve is not None:
            return prompt_tokens + self.reserve
        by_share = math.ceil(prompt_tokens / (1 - MAX_OUTPUT_RESERVE_SHARE))
        return min(by_share, prompt_tokens + self.model.max_output_tokens)

    def state(self) -> dict[str, Any]:
        """The learned limit, for the session's saved state."""
        return {"learned_window": self.learned}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Continue with the limit a saved state holds."""
        learned = state.get("learned_window")
        self.learned = int(learned) if isinstance(learned, int) and learned > 0 else None


def stored_learned_window(state: Mapping[str, Any] | None) -> int | None:
    """The limit a stored session learned from a provider, read from the engine state the store
    keeps for it (``load_engine_state``), for tools that read the store without resuming."""
    if state is None:
        return None
    window = SessionWindow(ModelInfo("stored", 1))
    window.restore(state)
    return window.learned
