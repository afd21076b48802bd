"""Per-session token and cost accounting: what ``Session.usage()`` reports.

Every model call's reported usage is added up (input, output, cache reads and writes) and priced
at the model's rates. The *growth* per call (how much the prompt grew from one call to the next,
averaged over recent calls; compactions, which shrink it, are left out) gives the number of calls
left before the window is full at the current rate.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contextfold.messages import Usage
from contextfold.model_registry import ModelInfo

__all__ = ["GROWTH_WINDOW_CALLS", "SessionUsage", "UsageTracker"]

GROWTH_WINDOW_CALLS = 10
"""How many recent calls the average growth per call is taken over."""


@dataclass(frozen=True, slots=True)
class SessionUsage:
    """Tokens and cost of a session so far, and how much room is left."""

    calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    context_tokens: int
    """Estimated prompt tokens of the next request."""
    window: int
    """The effective window (context window minus the reply reserve)."""
    average_growth: float
    """Average prompt growth per call over the last :data:`GROWTH_WINDOW_CALLS` calls."""
    cost: float | None
    """USD at the model's prices; ``None`` when the model has no prices."""
    last: Usage | None = None

    @property
    def fraction(self) -> float:
        """Share of the effective window the next request takes."""
        return self.context_tokens / self.window if self.window else 0.0

    @property
    def turns_left(self) -> int | None:
        """Calls left before the window is full at the current growth (``None`` if unknown)."""
        if self.average_growth <= 0:
            return None
        return max(0, int((self.window - self.context_tokens) / self.average_growth))

    @property
    def cache_hit_rate(self) -> float:
        """Share of all prompt tokens that were read from the provider's cache."""
        return self.cache_read_tokens / self.input_tokens if self.input_tokens else 0.0


class UsageTracker:
    """Adds up reported usage for one session (see the module docstring)."""

    def __init__(self, model: ModelInfo) -> None:
        self.model = model
        self.calls = 0
        self.total = Usage()
        self.cost: float | None = 0.0 if model.cost(Usage()) is not None else None
        self.last: Usage | None = None
        self._growth: deque[int] = deque(maxlen=GROWTH_WINDOW_CALLS)

    def add(self, usage: Usage) -> None:
        """Count one call's reported usage."""
        if self.last is not None:
            growth = usage.input_tokens - self.last.input_tokens
            if growth > 0:  # a compaction in between shrinks the prompt: not a growth sample
                self._growth.append(growth)
        self.calls += 1
        self.total = self.total + usage
        self.last = usage
        price = self.model.cost(usage)
        if self.cost is not None and price is not None:
            self.cost += price

    @property
    def average_growth(self) -> float:
        """Mean prompt growth per call over the recent calls."""
        return sum(self._growth) / len(self._growth) if self._growth else 0.0

    def report(self, context_tokens: int, window: int) -> SessionUsage:
        """The session's figures, with the current context size."""
        total = self.total
        return SessionUsage(
            calls=self.calls,
            input_tokens=total.input_tokens,
            output_tokens=total.output_tokens,
            cache_read_tokens=total.cache_read_tokens,
            cache_write_tokens=total.cache_write_tokens,
            context_tokens=context_tokens,
            window=window,
            average_growth=self.average_growth,
            cost=self.cost,
            last=self.last,
        )

    def state(self) -> dict[str, Any]:
        """JSON values for :meth:`restore`."""
        return {
            "calls": self.calls,
            "total": self.total.to_dict(),
            "cost": self.cost,
            "last": self.last.to_dict() if self.last else None,
            "growth": list(self._growth),
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state`."""
        self.calls = int(state.get("calls", 0))
        self.total = Usage.from_dict(state.get("total", {}))
        cost = state.get("cost")
        self.cost = float(cost) if cost is not None else None
        last = state.get("last")
        self.last = Usage.from_dict(last) if last else None
        self._growth = deque((int(g) for g in state.get("growth", ())), maxlen=GROWTH_WINDOW_CALLS)
