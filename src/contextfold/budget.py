"""How full the context window is, by component, and what that calls for.

:class:`ContextBudget` splits the tokens of a request into system prompt, instructions, tool
descriptions and conversation, against an *effective window*: the model's window minus the tokens
reserved for its reply. :class:`Thresholds` turns the used fraction into a :class:`Zone` (mask,
compact, block...), and :meth:`ContextBudget.marks` gives the same thresholds in tokens.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from contextfold.errors import ConfigError
from contextfold.model_registry import ModelInfo

__all__ = [
    "MAX_OUTPUT_RESERVE_SHARE",
    "BudgetMarks",
    "ContextBudget",
    "Thresholds",
    "Zone",
    "reserved_output_tokens",
]

MAX_OUTPUT_RESERVE_SHARE = 0.25
"""The reply reserve never takes more than this share of the window. A model's max output is
often large next to a small local window (Qwen3's 8K output in an 8K Ollama context would leave
nothing for the prompt); a quarter keeps the prompt at least three quarters of the window."""


def reserved_output_tokens(model: ModelInfo, *, max_share: float = MAX_OUTPUT_RESERVE_SHARE) -> int:
    """Tokens to keep free for the reply: the model's max output, capped to ``max_share`` of
    its window."""
    if not 0 < max_share < 1:
        raise ConfigError("budget.max_output_share", f"must be between 0 and 1, got {max_share}")
    return min(model.max_output_tokens, math.floor(model.context_window * max_share))


class Zone(enum.Enum):
    """What the context's fullness calls for, from nothing to too late."""

    OK = "ok"
    """Below the mask threshold: nothing to do."""
    MASK = "mask"
    """Mask old observations (cheap, keeps the reasoning)."""
    COMPACT = "compact"
    """Compact down to the target (a finished background compaction, or now)."""
    BLOCK = "block"
    """Compaction is forced before the next call."""
    OVERFLOW = "overflow"
    """More than the effective window: the request would fail as is."""


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Fractions of the effective window where each action starts: cheap masking first, a
    compaction well below the limit down to a target far enough under it that one buys many turns,
    and a forced one just before the window is full.

    Invalid combinations raise :class:`ConfigError` naming the setting, e.g.
    ``thresholds.compact_target``.
    """

    mask_at: float = 0.60
    """Mask old tool observations in one batch: as good as summarizing at half the cost."""
    compact_at: float = 0.80
    """Compact down to ``compact_target``."""
    compact_target: float = 0.50
    """Where a compaction aims: far below ``compact_at`` so one buys many turns (hysteresis)."""
    block_at: float = 0.95
    """Compact before the next call, whatever it costs."""
    awareness_at: float = 0.80
    """Tell the model how full its context is (it may call ``compact_context`` itself)."""
    min_progress: float = 0.10
    """A compaction that frees less than this share of the window counts as failed."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
                raise ConfigError(f"thresholds.{f.name}", f"must be a number, got {value!r}")
        self._check("mask_at", 0 < self.mask_at < self.compact_at, "must be > 0 and < compact_at")
        self._check("compact_at", self.compact_at <= self.block_at, "must be <= block_at")
        self._check("block_at", self.block_at <= 1, "must be <= 1")
        self._check(
            "compact_target",
            0 < self.compact_target < self.compact_at,
            "must be > 0 and < compact_at",
        )
        self._check("awareness_at", 0 < self.awareness_at <= 1, "must be > 0 and <= 1")
        self._check("min_progress", 0 < self.min_progress < 1, "must be > 0 and < 1")

    def _check(self, setting: str, ok: bool, rule: str) -> None:
        if not ok:
            raise ConfigError(f"thresholds.{setting}", f"{rule} (got {getattr(self, setting)})")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Thresholds:
        """Thresholds from a settings table (``[thresholds]`` in ``contextfold.toml``); keys not
        given keep their defaults, unknown keys raise :class:`ConfigError`."""
        known = {f.name for f in fields(cls)}
        for key in data:
            if key not in known:
                raise ConfigError(
                    f"thresholds.{key}", f"unknown setting; expected one of {sorted(known)}"
                )
        return cls(**dict(data))

    def zone(self, fraction: float) -> Zone:
        """The zone for a used fraction of the effective window (each threshold belongs to the
        zone it starts; above 1.0 is :attr:`Zone.OVERFLOW`)."""
        if fraction > 1:
            return Zone.OVERFLOW
        if fraction >= self.block_at:
            return Zone.BLOCK
        if fraction >= self.compact_at:
            return Zone.COMPACT
        if fraction >= self.mask_at:
            return Zone.MASK
        return Zone.OK

    def wants_awareness_note(self, fraction: float) -> bool:
        """True when the model should be told how full its context is."""
        return fraction >= self.awareness_at


@dataclass(frozen=True, slots=True)
class BudgetMarks:
    """The thresholds of a budget in tokens (of the effective window)."""

    mask_tokens: int
    compact_tokens: int
    target_tokens: int
    block_tokens: int
    awareness_tokens: int
    min_progress_tokens: int
    """Tokens a compaction must free to count as progress."""


@dataclass(frozen=True, slots=True)
class ContextBudget:
    """Tokens of one request by component, against the window left after the reply reserve."""

    context_window: int
    reserved_output: int = 0
    system: int = 0
    """The base system prompt (and memories, skills, notes rendered into it)."""
    instructions: int = 0
    """Project instructions (AGENTS.md and the like)."""
    tools: int = 0
    """Tool definitions sent with the request."""
    conversation: int = 0
    """The messages of the view."""

    def __post_init__(self) -> None:
        if self.context_window <= 0:
            raise ConfigError(
                "window", f"must be a positive number of tokens, got {self.context_window}"
            )
        if not 0 <= self.reserved_output < self.context_window:
            raise ConfigError(
                "budget.reserved_output",
                f"must be >= 0 and smaller than the window ({self.context_window}), "
                f"got {self.reserved_output}",
            )
        for name in ("system", "instructions", "tools", "conversation"):
            if getattr(self, name) < 0:
                raise ConfigError(f"budget.{name}", "a token count cannot be negative")

    @classmethod
    def for_model(
        cls,
        model: ModelInfo,
        *,
        reserved_output: int | None = None,
        system: int = 0,
        instructions: int = 0,
        tools: int = 0,
        conversation: int = 0,
    ) -> ContextBudget:
        """A budget for ``model``; the reply reserve defaults to :func:`reserved_output_tokens`."""
        if reserved_output is None:
            reserved_output = reserved_output_tokens(model)
        return cls(model.context_window, reserved_output, system, instructions, tools, conversation)

    def with_usage(self, **components: int) -> ContextBudget:
        """A copy with some components measured anew (``system=``, ``conversation=``...)."""
        return replace(self, **components)

    @property
    def effective_window(self) -> int:
        """Tokens the prompt may take: the window minus the reply reserve."""
        return self.context_window - self.reserved_output

    @property
    def used(self) -> int:
        """Tokens of the request, all components together."""
        return self.system + self.instructions + self.tools + self.conversation

    @property
    def remaining(self) -> int:
        """Tokens still free in the effective window (negative when it overflows)."""
        return self.effective_window - self.used

    @property
    def fraction(self) -> float:
        """Share of the effective window in use (above 1.0 when it overflows)."""
        return self.used / self.effective_window

    def components(self) -> dict[str, int]:
        """The components by name, for display."""
        return {
            "system": self.system,
            "instructions": self.instructions,
            "tools": self.tools,
            "conversation": self.conversation,
        }

    def zone(self, thresholds: Thresholds | None = None) -> Zone:
        """The zone this budget is in (decided on the token marks, so the two always agree)."""
        marks = self.marks(thresholds)
        used = self.used
        if used > self.effective_window:
            return Zone.OVERFLOW
        if used >= marks.block_tokens:
            return Zone.BLOCK
        if used >= marks.compact_tokens:
            return Zone.COMPACT
        if used >= marks.mask_tokens:
            return Zone.MASK
        return Zone.OK

    def marks(self, thresholds: Thresholds | None = None) -> BudgetMarks:
        """The thresholds as token counts of this budget's effective window.

        A threshold is reached when ``used >= mark``; the target is rounded down (a compaction
        must get at least that low) and the minimum progress up (it must free at least that).
        """
        t = thresholds or Thresholds()
        window = self.effective_window
        return BudgetMarks(
            mask_tokens=_mark(window, t.mask_at),
            compact_tokens=_mark(window, t.compact_at),
            target_tokens=math.floor(window * t.compact_target),
            block_tokens=_mark(window, t.block_at),
            awareness_tokens=_mark(window, t.awareness_at),
            min_progress_tokens=math.ceil(window * t.min_progress),
        )


def _mark(window: int, share: float) -> int:
    # round() first: 0.6 * 1000 is 600.0000000000001 in floating point, not a reason for 601.
    return math.ceil(round(window * share, 6))
