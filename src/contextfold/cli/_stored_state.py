"""What a stored session's engine state says, for a person: calls, tokens, cost, turns, restarts
and the window learned from a provider.

The engine saves its state in the store (``save_engine_state``) so a resumed session goes on where
it stopped; ``sessions show`` and ``inspect`` read it without resuming (``load_engine_state``).
The figures are read back through the classes that wrote them
(:class:`~contextfold.usage.UsageTracker`,
:func:`~contextfold.engine.learned_window.stored_learned_window`), so this module never re-parses
their format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from contextfold.cli._render import plural
from contextfold.engine.learned_window import stored_learned_window
from contextfold.model_registry import ModelInfo
from contextfold.usage import UsageTracker

__all__ = ["StoredUsage", "learned_window_line"]


@dataclass(frozen=True, slots=True)
class StoredUsage:
    """A session's model calls and tokens so far, as its saved engine state holds them."""

    calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    last_request_tokens: int | None
    """Prompt tokens of the last call, as the provider reported them."""
    cost: float | None
    """USD at the model's prices; ``None`` when the model has none."""
    turns: int
    restarts: int

    @classmethod
    def from_state(cls, state: Mapping[str, Any] | None) -> StoredUsage | None:
        """The usage in a saved engine state; ``None`` when the engine saved none."""
        if state is None:
            return None
        usage = state.get("usage")
        tracker = UsageTracker(ModelInfo("stored", 1))  # the model only prices new calls
        tracker.restore(usage if isinstance(usage, Mapping) else {})
        total, last = tracker.total, tracker.last
        return cls(
            calls=tracker.calls,
            input_tokens=total.input_tokens,
            output_tokens=total.output_tokens,
            cache_read_tokens=total.cache_read_tokens,
            cache_write_tokens=total.cache_write_tokens,
            last_request_tokens=last.input_tokens if last is not None else None,
            cost=tracker.cost,
            turns=_count(state.get("turn")),
            restarts=_count(state.get("restarts")),
        )

    def usage_line(self) -> str:
        """``13 model calls · 48,550 tokens in, 2,744 out · 30,000 read from cache · last
        request 4,222 tokens · cost $0.42`` (the parts that are known)."""
        parts = [
            plural(self.calls, "model call"),
            f"{self.input_tokens:,} tokens in, {self.output_tokens:,} out",
        ]
        if self.cache_read_tokens:
            parts.append(f"{self.cache_read_tokens:,} read from cache")
        if self.last_request_tokens is not None:
            parts.append(f"last request {self.last_request_tokens:,} tokens")
        if self.cost is not None:
            parts.append(f"cost ${self.cost:.4f}" if self.cost < 0.01 else f"cost ${self.cost:.2f}")
        return " · ".join(parts)

    def turns_line(self) -> str:
        """``9`` or ``9 · 1 restart``."""
        restarts = f" · {plural(self.restarts, 'restart')}" if self.restarts else ""
        return f"{self.turns:,}{restarts}"

    def to_json(self) -> dict[str, Any]:
        """The figures as JSON values."""
        return asdict(self)


def learned_window_line(state: Mapping[str, Any] | None) -> str | None:
    """The window a provider's refusal taught the session (its saved engine ``state`` holds it),
    in words; ``None`` when none."""
    learned = stored_learned_window(state)
    if learned is None:
        return None
    return (
        f"{learned:,} tokens, learned from the provider's refusal of a longer request "
        "(requests are planned against it)"
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and value > 0 else 0
