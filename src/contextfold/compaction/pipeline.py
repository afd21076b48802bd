"""Running strategies to a target: :class:`Compactor`, :class:`CompactResult` and the presets.

:meth:`Compactor.compact` runs the COMPACT-zone strategies in order, applying each one's edits
before the next, and stops as soon as the view is at or under ``ctx.target_tokens``. A
compaction that ends above the target having freed less than ``min_progress`` of the window is a
*failure*: reported (``failed=True`` and a reason; the engine emits ``CompactionFailed``), never
retried in a loop. :meth:`Compactor.mask` runs the MASK-zone strategies (one cheap batch).
Hard mode (``hard=True``, once per overflow or in the BLOCK zone) adds ``DropOldest`` and
``ShrinkToFit`` to the chain and shrinks the protections, so the result fits whenever the
system messages do.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import ClassVar

from contextfold._exceptions import ConfigError
from contextfold.compaction._context import CompactionContext
from contextfold.compaction._protocols import TokenCounter
from contextfold.compaction._shrink import ShrinkToFit
from contextfold.compaction.restart import RestartPolicy
from contextfold.compaction.strategies import (
    DEFAULT_MASK_BATCH_SHARE,
    DEFAULT_TRUNCATE_ABOVE_TOKENS,
    DEFAULT_TRUNCATE_KEEP_TOKENS,
    DropOldest,
    MaskObservations,
    Strategy,
    Summarize,
    TruncateToolResults,
)
from contextfold.compaction.summary import StructuredSummary
from contextfold.edits import ContextEdit, SummarizeEdit, apply_edit
from contextfold.events import Event, SummarizerFellBack
from contextfold.messages import Message, SummaryPart

__all__ = ["DEFAULT_MIN_PROGRESS", "PRESETS", "CompactResult", "Compactor", "Preset", "freed_by"]

DEFAULT_MIN_PROGRESS = 0.10
"""Least share of the window a compaction that stays above its target must free (DESIGN §4)."""


@dataclass(frozen=True)
class CompactResult:
    """What a compaction did: the figures, the edits to append, and the view they give.

    ``freed_tokens`` is ``before_tokens - after_tokens``. ``edits`` are valid even when
    ``failed`` is set (they did free something); the engine decides whether to keep them.
    ``summary`` is the structured summary written, if any; ``events`` what strategies reported
    (``ObservationsMasked``, ``SummarizerFellBack``) for the engine to publish. ``cpu_seconds``
    is the CPU time of the thread that ran it. ``base_ids`` are the ids of the view it started
    from (the background worker uses them to tell whether the transcript moved on).
    """

    before_tokens: int
    after_tokens: int
    before_messages: int
    after_messages: int
    strategies_run: tuple[str, ...]
    edits: tuple[ContextEdit, ...]
    view: tuple[Message, ...]
    target_tokens: int = 0
    failed: bool = False
    reason: str = ""
    cpu_seconds: float = 0.0
    summary: StructuredSummary | None = None
    events: tuple[Event, ...] = ()
    hard: bool = False
    base_ids: tuple[str, ...] = ()

    @property
    def freed_tokens(self) -> int:
        """Tokens the compaction took out of the view."""
        return self.before_tokens - self.after_tokens

    @property
    def reached_target(self) -> bool:
        """True when the view ended at or under the target."""
        return self.after_tokens <= self.target_tokens

    @property
    def changed(self) -> bool:
        """True when there are edits to append."""
        return bool(self.edits)


def failed_result(ctx: CompactionContext, reason: str) -> CompactResult:
    """A result that changed nothing and says why (used for worker errors)."""
    tokens = ctx.tokens()
    return CompactResult(
        before_tokens=tokens,
        after_tokens=tokens,
        before_messages=len(ctx.view),
        after_messages=len(ctx.view),
        strategies_run=(),
        edits=(),
        view=tuple(ctx.view),
        target_tokens=ctx.target_tokens,
        failed=True,
        reason=reason,
        hard=ctx.hard,
        base_ids=tuple(m.id for m in ctx.view),
    )


@dataclass(frozen=True)
class Preset:
    """A named configuration: what runs in the MASK zone and in the COMPACT zone."""

    description: str
    mask: Callable[[Mapping[str, float]], tuple[Strategy, ...]]
    compact: Callable[[Mapping[str, float]], tuple[Strategy, ...]]
    restart: bool = False


def _mask_batch(o: Mapping[str, float]) -> tuple[Strategy, ...]:
    return (MaskObservations(min_batch_share=o["mask_batch_share"]),)


def _mask_first_chain(o: Mapping[str, float]) -> tuple[Strategy, ...]:
    return (
        TruncateToolResults(
            above_tokens=int(o["truncate_above_tokens"]), keep_tokens=int(o["truncate_keep_tokens"])
        ),
        MaskObservations(min_batch_share=o["mask_batch_share"]),
        Summarize(),
        DropOldest(),
    )


PRESETS: Mapping[str, Preset] = {
    "mask-first": Preset(
        "mask zone: one batch of old outputs masked; compact zone: truncate big outputs, mask, "
        "summarize, then drop the oldest units (the default)",
        _mask_batch,
        _mask_first_chain,
    ),
    "summarize": Preset(
        "no masking; compact zone: a structured summary plus the recent window (Codex / Claude "
        "Code style), dropping oldest units only if that is not enough",
        lambda o: (),
        lambda o: (Summarize(), DropOldest()),
    ),
    "window": Preset(
        "no masking, no summary: the oldest whole units leave the view (a sliding window)",
        lambda o: (),
        lambda o: (DropOldest(),),
    ),
    "restart": Preset(
        "mask zone as mask-first; at the compact zone the engine winds the session down and "
        "restarts it with a summary and the last turns; in-place compaction (the mask-first "
        "chain) only when no restart is left or on overflow",
        _mask_batch,
        _mask_first_chain,
        restart=True,
    ),
}
"""The presets by name (the ``preset`` setting)."""


@dataclass
class Compactor:
    """Runs strategies in order until the view fits its target; see the module docstring.

    ``strategies`` run in the COMPACT and BLOCK zones, ``mask_strategies`` in the MASK zone;
    hard mode appends the ``hard_extras`` the chain lacks (``DropOldest``, ``ShrinkToFit``).
    ``restart`` is the restart policy of the ``"restart"`` preset (``None`` otherwise): the engine
    reads it to restart sessions instead of compacting in place.
    """

    strategies: Sequence[Strategy]
    _: KW_ONLY
    mask_strategies: Sequence[Strategy] = ()
    min_progress: float = DEFAULT_MIN_PROGRESS
    restart: RestartPolicy | None = None
    name: str = "custom"
    hard_extras: Sequence[Strategy] = field(default_factory=lambda: (DropOldest(), ShrinkToFit()))

    PRESET_OPTIONS: ClassVar[Mapping[str, float]] = {
        "mask_batch_share": DEFAULT_MASK_BATCH_SHARE,
        "truncate_above_tokens": DEFAULT_TRUNCATE_ABOVE_TOKENS,
        "truncate_keep_tokens": DEFAULT_TRUNCATE_KEEP_TOKENS,
    }

    @classmethod
    def preset(
        cls,
        name: str,
        *,
        min_progress: float = DEFAULT_MIN_PROGRESS,
        restart: RestartPolicy | None = None,
        **options: float,
    ) -> Compactor:
        """The compactor of a named preset (:data:`PRESETS`); ``options`` tune its strategies:
        ``mask_batch_share``, ``truncate_above_tokens``, ``truncate_keep_tokens``."""
        spec = PRESETS.get(name)
        if spec is None:
            raise ConfigError("preset", f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
        unknown = set(options) - set(cls.PRESET_OPTIONS)
        if unknown:
            raise ConfigError(
                f"compaction.{sorted(unknown)[0]}",
                f"not an option of the presets; known: {sorted(cls.PRESET_OPTIONS)}",
            )
        merged = {**cls.PRESET_OPTIONS, **options}
        if spec.restart and restart is None:
            restart = RestartPolicy()
        return cls(
            spec.compact(merged),
            mask_strategies=spec.mask(merged),
            min_progress=min_progress,
            restart=restart if spec.restart else None,
            name=name,
        )

    def compact(self, ctx: CompactionContext, *, hard: bool | None = None) -> CompactResult:
        """Compact the view to ``ctx.target_tokens`` (COMPACT / BLOCK zone, or overflow with
        ``hard=True``). Never raises for lack of progress: see ``CompactResult.failed``."""
        if hard is not None:
            ctx = replace(ctx, hard=hard)
        chain = list(self.strategies)
        if ctx.hard:
            chain += [x for x in self.hard_extras if not any(type(x) is type(s) for s in chain)]
        return self._run(ctx, chain, enforce_progress=True)

    def mask(self, ctx: CompactionContext) -> CompactResult:
        """The MASK-zone step: one cheap batch (no minimum-progress rule)."""
        return self._run(ctx, list(self.mask_strategies), enforce_progress=False)

    def _run(
        self, ctx: CompactionContext, chain: Sequence[Strategy], *, enforce_progress: bool
    ) -> CompactResult:
        started = time.thread_time()
        events: list[Event] = []
        run_ctx = replace(ctx, emit=events.append)
        view: list[Message] = list(ctx.view)
        before = run_ctx.tokens()
        current = before
        edits: list[ContextEdit] = []
        ran: list[str] = []
        for strategy in chain:
            if enforce_progress and current <= ctx.target_tokens:
                break
            kept = 0
            for edit in strategy.plan(run_ctx.with_view(view)):
                after = apply_edit(view, edit)
                if freed_by(ctx.counter, view, after) > 0:  # never an edit that frees nothing
                    view = after
                    edits.append(edit)
                    kept += 1
            if not kept:
                continue
            ran.append(strategy.name)
            current = run_ctx.with_view(view).tokens()
        failed, reason = self._verdict(ctx, before, current, enforce_progress)
        return CompactResult(
            before_tokens=before,
            after_tokens=current,
            before_messages=len(ctx.view),
            after_messages=len(view),
            strategies_run=tuple(ran),
            edits=tuple(edits),
            view=tuple(view),
            target_tokens=ctx.target_tokens,
            failed=failed,
            reason=reason,
            cpu_seconds=time.thread_time() - started,
            summary=_last_summary(edits, events),
            events=tuple(events),
            hard=ctx.hard,
            base_ids=tuple(m.id for m in ctx.view),
        )

    def _verdict(
        self, ctx: CompactionContext, before: int, after: int, enforce_progress: bool
    ) -> tuple[bool, str]:
        if after <= ctx.target_tokens or not enforce_progress:
            return False, ""
        freed = before - after
        least = int(self.min_progress * ctx.window_tokens)
        if freed < least:
            return True, (
                f"freed {freed} tokens, less than the minimum progress of {least} "
                f"({self.min_progress:.0%} of a {ctx.window_tokens}-token window); the view "
                f"stays {after - ctx.target_tokens} tokens over its target of {ctx.target_tokens}"
            )
        return False, f"stopped {after - ctx.target_tokens} tokens above the target"


def freed_by(counter: TokenCounter, before: Sequence[Message], after: Sequence[Message]) -> int:
    """Tokens an edit that turned ``before`` into ``after`` freed (negative when it added).

    Only the messages it replaced are counted: an edit keeps every other message as it was.
    """
    kept = {id(m) for m in after}
    old = {id(m) for m in before}
    gone = [m for m in before if id(m) not in kept]
    new = [m for m in after if id(m) not in old]
    return counter.count_messages(gone) - counter.count_messages(new)


def _last_summary(
    edits: Sequence[ContextEdit], events: Sequence[Event]
) -> StructuredSummary | None:
    """The summary the last summary edit wrote, with the fallback reason its summarizer gave
    (the stored part keeps the sections, not how they were written)."""
    fell_back = [e.error for e in events if isinstance(e, SummarizerFellBack)]
    for edit in reversed(edits):
        if isinstance(edit, SummarizeEdit) and edit.summary.meta.kind == "summary":
            for part in edit.summary.parts_of(SummaryPart):
                summary = StructuredSummary.from_part(part)
                return replace(summary, fallback_reason=fell_back[-1] if fell_back else None)
    return None
