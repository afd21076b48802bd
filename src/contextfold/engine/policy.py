"""How the engine manages the window: :class:`ContextPolicy`, every default named in one place."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from contextfold.budget import Thresholds
from contextfold.compaction import RecentWindow
from contextfold.config import Settings
from contextfold.engine._economics import DEFAULT_CACHE_TTL_SECONDS
from contextfold.errors import ConfigError
from contextfold.outputs.intake import OutputLimits, OutputPolicy
from contextfold.outputs.truncate import MIN_TOKENS as MIN_OUTPUT_TOKENS
from contextfold.tools.deferral import DEFAULT_TOOL_BUDGET_SHARE

__all__ = [
    "DEFAULT_CACHE_TTL_SECONDS",
    "DEFAULT_COMPACT_FROM",
    "DEFAULT_OUTPUT_MAX_SHARE",
    "ROOM_FOR_THE_REST",
    "ContextPolicy",
]

DEFAULT_OUTPUT_MAX_SHARE = 0.05
"""Most of the effective window one tool output may take inline (the rest goes behind a ref)."""
ROOM_FOR_THE_REST = 0.1
"""With ``output_fills_room``: the share of the window an output leaves for the rest of the
conversation (the task, the latest turn, a summary of the older ones)."""
DEFAULT_COMPACT_FROM = 0.25
"""Below this share of the window no compaction is timed early for cost: a view this small
is cheap to keep, and what is in it stays exact."""


@dataclass(frozen=True)
class ContextPolicy:
    """How the engine manages the window; every default is a named one, each overridable.

    ``background_at`` is the share of the window where a compaction starts being prepared in a
    worker thread (default: halfway between ``mask_at`` and ``compact_at``); ``reserved_output``
    overrides the reply reserve (default: the model's max output, capped to a quarter of the
    window); ``awareness_note`` adds ``[Context: N% used …]`` past ``thresholds.awareness_at``.
    ``output_max_share`` caps one tool output's inline tokens to a share of the effective window,
    so that the 2,500-token default does not let a few outputs fill a small local model's window.
    ``output_fills_room``: a tool output may also take all the room the latest request left
    beside its system prompt and tools (less :data:`ROOM_FOR_THE_REST` of the window), when
    that is more than ``output_max_share``: the proxy's, whose client sent the output whole
    and whose model must read the newest one whole whenever it fits.
    ``keep_latest_turn``: a compaction, even in hard mode, leaves the latest turn whole when
    it fits the window beside the least of the rest (the view may end above its target).
    ``extract_pins`` reads user messages for standing constraints and pins them
    (:mod:`contextfold.retention.pins`); explicit pins work either way.

    ``cost_schedule`` times compactions by their expected dollar effect on the provider's
    prompt cache (:mod:`contextfold.engine._economics`): between ``compact_from`` and
    ``thresholds.compact_at`` the session compacts early when compacting at its current size,
    from now on, is expected to cost less than at any later size, summaries priced and the
    cache re-written each time (often right after the cache expired, ``cache_ttl_seconds`` after
    the last request, when the next request re-writes everything anyway). The thresholds are
    then bounds: nothing is compacted for cost below ``compact_from``, and ``compact_at`` and
    ``block_at`` still compact whatever the cost. Mask batches keep to ``mask_at``: gating them
    by the same arithmetic cost more on the replay corpus (benchmarks/RESULTS.md). Off, the
    thresholds alone decide, as triggers.
    ``summary_price_share`` prices what a summary reads, as a share of the input price (1: a
    model writes it; 0: a summarizer that calls no model).
    """

    thresholds: Thresholds = field(default_factory=Thresholds)
    output_limits: OutputLimits = field(default_factory=OutputLimits)
    output_policy: OutputPolicy = field(default_factory=OutputPolicy)
    recent: RecentWindow = field(default_factory=RecentWindow)
    tool_budget_share: float = DEFAULT_TOOL_BUDGET_SHARE
    background: bool = True
    background_at: float | None = None
    awareness_note: bool = True
    reserved_output: int | None = None
    repair: bool = True
    output_max_share: float = DEFAULT_OUTPUT_MAX_SHARE
    output_fills_room: bool = False
    keep_latest_turn: bool = False
    extract_pins: bool = True
    cost_schedule: bool = True
    compact_from: float = DEFAULT_COMPACT_FROM
    cache_ttl_seconds: float = DEFAULT_CACHE_TTL_SECONDS
    summary_price_share: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.tool_budget_share <= 1:
            raise ConfigError(
                "tools.description_budget", f"must be in (0, 1], got {self.tool_budget_share}"
            )
        if self.recent.turns < 0:
            raise ConfigError("recent.turns", f"must be >= 0, got {self.recent.turns}")
        if not 0 < self.recent.max_share <= 1:
            raise ConfigError("recent.max_share", f"must be in (0, 1], got {self.recent.max_share}")
        if not 0 < self.output_max_share <= 1:
            raise ConfigError("output_max_share", f"must be in (0, 1], got {self.output_max_share}")
        if self.reserved_output is not None and self.reserved_output < 1:
            raise ConfigError(
                "max_output_tokens",
                f"must be a positive number of tokens, got {self.reserved_output}",
            )
        if not 0 < self.compact_from <= self.thresholds.compact_at:
            raise ConfigError(
                "schedule.compact_from",
                f"must be > 0 and <= compact_at ({self.thresholds.compact_at}), "
                f"got {self.compact_from}",
            )
        if not self.cache_ttl_seconds > 0:
            raise ConfigError(
                "schedule.cache_ttl",
                f"must be a positive number of seconds, got {self.cache_ttl_seconds}",
            )
        if not self.summary_price_share >= 0:
            raise ConfigError(
                "summary_price_share", f"must be >= 0, got {self.summary_price_share}"
            )
        mark = self.background_at
        if mark is not None and not 0 < mark < self.thresholds.compact_at:
            raise ConfigError(
                "background_at",
                f"must be between 0 and compact_at ({self.thresholds.compact_at}), got {mark}",
            )

    def output_limits_for(self, effective_window: int, fixed_tokens: int = 0) -> OutputLimits:
        """The output limits for a window: the token limit shrinks for small windows.
        ``fixed_tokens``: what the latest request's system prompt and tools took (used with
        ``output_fills_room``)."""
        cap = max(MIN_OUTPUT_TOKENS, int(effective_window * self.output_max_share))
        if self.output_fills_room and fixed_tokens:
            room = effective_window - fixed_tokens - int(effective_window * ROOM_FOR_THE_REST)
            cap = max(cap, room)
        if cap >= self.output_limits.max_tokens:
            return self.output_limits
        return replace(self.output_limits, max_tokens=cap)

    @property
    def background_mark(self) -> float:
        """Share of the window where background compaction starts."""
        if self.background_at is not None:
            return self.background_at
        t = self.thresholds
        return (t.mask_at + t.compact_at) / 2

    @classmethod
    def from_settings(cls, settings: Settings) -> ContextPolicy:
        """The policy a :class:`~contextfold.config.Settings` describes (unset keys: defaults)."""
        thresholds = Thresholds.from_mapping(settings.section("thresholds"))
        outputs = settings.section("outputs")
        known = {f.name for f in fields(OutputLimits)}
        limits = OutputLimits(**{k: v for k, v in outputs.items() if k in known})
        recent = RecentWindow(**settings.section("recent"))
        kwargs: dict[str, Any] = {}
        budget = settings.get("tools.description_budget")
        if budget is not None:
            kwargs["tool_budget_share"] = budget
        background = settings.get("background_compaction")
        if background is not None:
            kwargs["background"] = background
        reserved = settings.get("max_output_tokens")
        if reserved is not None:
            kwargs["reserved_output"] = reserved
        for key, name in (
            ("schedule.cost", "cost_schedule"),
            ("schedule.compact_from", "compact_from"),
            ("schedule.cache_ttl", "cache_ttl_seconds"),
        ):
            value = settings.get(key)
            if value is not None:
                kwargs[name] = value
        return cls(thresholds=thresholds, output_limits=limits, recent=recent, **kwargs)
