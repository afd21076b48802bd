"""The zone step of a turn: mask a batch, compact, compact hard, or wind down and restart.

:class:`ZoneActions` is mixed into :class:`~contextfold._engine_session.Session`; it holds the
part of the per-turn flow (DESIGN §3, steps 3 and 4) that changes the view: what to do in each
zone, the compaction context it builds, applying a result (edits, snapshot, events), and the
restart of the ``"restart"`` preset.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from contextfold._engine_sizes import CompactionCounter, ViewSizes
from contextfold._engine_store import LineageBlobs, PendingBlobs, SessionWriter
from contextfold._engine_turn import Measurement
from contextfold.budget import Zone
from contextfold.compaction import (
    BackgroundCompactor,
    CompactionContext,
    CompactResult,
    MaskObservations,
    StructuredSummary,
    plan_restart,
    wind_down_message,
)
from contextfold.events import (
    CompactionFailed,
    CompactionFinished,
    CompactionStarted,
    Event,
    SessionRestarted,
    SummarizerFellBack,
)
from contextfold.messages import Message
from contextfold.store import SessionInfo
from contextfold.tokens import ContextSizeEstimator

if TYPE_CHECKING:
    from contextfold.engine import ContextEngine

__all__ = ["ZoneActions", "min_mask_batch"]


class ZoneActions:
    """What a session does to its view in each zone (see the module docstring)."""

    # Set by Session.__init__; declared here for the type checker.
    engine: ContextEngine
    info: SessionInfo
    _view: list[Message]
    _sizes: ViewSizes
    _compaction_counter: CompactionCounter
    _writer: SessionWriter
    _blobs: LineageBlobs
    _estimator: ContextSizeEstimator
    _background: BackgroundCompactor | None
    _previous_tail: int | None
    _restarts: int
    _wind_down_sent: bool
    _mask_retry_at: int | None
    _compact_retry_at: int | None
    _summary: StructuredSummary | None
    _background_started: bool
    """A background compaction was announced (CompactionStarted) and not taken yet."""

    if TYPE_CHECKING:

        @property
        def id(self) -> str: ...

        @property
        def effective_window(self) -> int: ...

        def _emit(self, event: Event) -> None: ...

        def add_message(self, message: Message) -> Message: ...

    def _act_on_zone(self, m: Measurement) -> CompactResult | None:
        zone, thresholds = m.zone, self.engine.policy.thresholds
        restart = self.engine.compactor.restart
        # A restart continues in a new stored session: with the store down, compact in place.
        can_restart = (
            restart is not None and restart.can_restart(self._restarts) and self._writer.store_ok
        )
        if not can_restart:
            self._wind_down_sent = False  # never promise a restart that will not come
        if zone in (Zone.COMPACT, Zone.BLOCK, Zone.OVERFLOW) and can_restart:
            if zone is Zone.COMPACT and not self._wind_down_sent:
                self._wind_down_sent = True  # this request carries the wind-down note
                return None
            # After the wind-down turn, or with no room left for one (BLOCK, OVERFLOW): now.
            if self._restart():
                return None
            self._wind_down_sent = False
        if zone in (Zone.BLOCK, Zone.OVERFLOW):
            return self._compact(m, trigger="block", target=thresholds.compact_target, hard=True)
        if zone is Zone.COMPACT:
            ready = self._background.take(self._view) if self._background else None
            if ready is not None:
                self._background_started = False
                if ready.changed and not ready.failed:
                    return self._apply(ready, m, trigger="background")
                # Its CompactionStarted was announced: it ends here, as failed, and the
                # foreground compaction below does the work.
                self._compaction_failed("background", m.tokens, m.tokens, _why_unused(ready))
            if self._compact_retry_at is not None and m.tokens < self._compact_retry_at:
                # The last compaction could not free the minimum; running it again every turn
                # would only break the cache again. Wait for growth, or for the BLOCK zone.
                return None
            return self._compact(m, trigger="threshold", target=thresholds.compact_target)
        result = self._mask_batch(m) if zone is Zone.MASK else None
        if self._background and m.fraction >= self.engine.policy.background_mark:
            target = thresholds.compact_target
            if self._background.maybe_start(self._context(m, target)):
                self._background_started = True
                # Announced like any compaction, so its CompactionFinished has a start.
                self._emit(
                    CompactionStarted(
                        session_id=self.id,
                        trigger="background",
                        zone=m.zone.value,
                        before_tokens=m.tokens,
                        target_tokens=int(target * self.effective_window),
                    )
                )
        return result

    def _mask_batch(self, m: Measurement) -> CompactResult | None:
        """Mask one batch of old outputs, but only a batch worth a cache break.

        Every edit invalidates the provider's cached prefix from the first changed message on.
        Once the old outputs are masked, each new turn ages only one or two more out of the
        recent window; masking those one turn at a time would break the cache every turn, so a
        batch that frees less than the mask strategies' minimum share waits for more (or for
        the COMPACT zone).
        """
        if self._mask_retry_at is not None and self._sizes.outputs < self._mask_retry_at:
            return None
        thresholds = self.engine.policy.thresholds
        pending = PendingBlobs(self._blobs)  # written only if the batch is kept
        ctx = replace(self._context(m, thresholds.mask_at), blobs=pending)
        result = self.engine.compactor.mask(ctx)
        least = min_mask_batch(self.engine.compactor.mask_strategies) * ctx.window_tokens
        if not result.changed or result.freed_tokens < least:
            # Planning reads every old output, and only outputs can be masked: plan again once
            # new tool outputs could make up the shortfall, and at least half a batch of them
            # (outputs in the recent window are not maskable yet: a small shortfall would
            # otherwise mean planning again every turn or two).
            shortfall = max(least / 2, least - result.freed_tokens)
            self._mask_retry_at = self._sizes.outputs + int(shortfall)
            return None
        pending.flush()
        return self._apply(result, m, trigger="mask")

    def _context(
        self, m: Measurement, target: float, *, hard: bool = False, focus: str | None = None
    ) -> CompactionContext:
        engine = self.engine
        return CompactionContext(
            view=tuple(self._view),
            counter=self._compaction_counter,
            target_tokens=m.conversation_target(target),
            window_tokens=m.raw_window,
            blobs=self._blobs,
            session_id=self.id,
            summarizer=engine.summarizer,
            focus=focus,
            hard=hard,
            room_tokens=m.conversation_target(1.0),  # what the conversation can be given at all
            recent=engine.policy.recent,
        )

    def _compact(
        self,
        m: Measurement,
        *,
        trigger: str,
        target: float,
        hard: bool = False,
        focus: str | None = None,
    ) -> CompactResult:
        ctx = self._context(m, target, hard=hard, focus=focus)
        self._emit(
            CompactionStarted(
                session_id=self.id,
                trigger=trigger,
                zone=m.zone.value,
                before_tokens=m.tokens,
                target_tokens=int(target * self.effective_window),
            )
        )
        compactor = self.engine.compactor
        result = compactor.compact(ctx, hard=hard)
        return self._apply(result, m, trigger=trigger)

    def _apply(self, result: CompactResult, m: Measurement, *, trigger: str) -> CompactResult:
        for event in result.events:
            self._emit(event)
        after = m.tokens
        if result.edits:
            self._writer.append_edits(result.edits)
            self._view = [x for x in result.view if x.meta.agent_visible]
            self._sizes.reset(self._view)
            self._mask_retry_at = None
            # Two estimates of the new size, and the larger wins: the old size minus what was
            # freed (on the provider's scale, from its last report), and the new view estimated
            # whole. The first is wrong when the messages removed were ones the provider counts
            # very differently from the rest (a template that leaves tool calls out), the second
            # when the calibration is off; under-estimating is what would overflow.
            after = max(
                m.after_compaction(self._sizes.total, len(self._view)),
                self._estimator.full_estimate(self._view, system=m.fixed_text, tools=m.tools),
            )
            # Stay on the provider's scale: the new size is the old one minus what was freed.
            self._estimator.rebase(self._view, after, system=m.fixed_text, tools=m.tools)
            self._previous_tail = None
            self._writer.snapshot(self._view, after)
        if result.summary is not None:
            self._summary = result.summary
        if result.failed and trigger in ("threshold", "background"):
            least = self.engine.policy.thresholds.min_progress * self.effective_window
            self._compact_retry_at = after + int(least)
        elif result.edits:
            self._compact_retry_at = None
        # Every announced compaction ends with one finished or failed event. One whose edits
        # are in the transcript finished, even short of the minimum progress (its note says
        # so); one that changed nothing has failed, whatever its strategies said.
        if result.edits:
            self._emit(
                CompactionFinished(
                    session_id=self.id,
                    trigger=trigger,
                    before_tokens=m.tokens,
                    after_tokens=after,
                    before_messages=result.before_messages,
                    after_messages=result.after_messages,
                    strategies_run=result.strategies_run,
                    edit_ids=tuple(e.id for e in result.edits),
                    cpu_seconds=result.cpu_seconds,
                    note=result.reason if result.failed else "",
                )
            )
        elif trigger != "mask":
            self._compaction_failed(trigger, m.tokens, after, _why_unused(result))
        return result

    def _compaction_failed(self, trigger: str, before: int, after: int, reason: str) -> None:
        self._emit(
            CompactionFailed(
                session_id=self.id,
                trigger=trigger,
                before_tokens=before,
                after_tokens=after,
                reason=reason,
            )
        )

    def _wind_down_note(self, m: Measurement) -> str:
        if not self._wind_down_sent:
            return ""
        return wind_down_message(m.fraction, m.remaining).text

    def _restart(self) -> bool:
        """Continue in a child session seeded with the summary and the last complete turns;
        False when the store cannot make the child (reported; the caller compacts instead)."""
        engine = self.engine
        restart = engine.compactor.restart
        assert restart is not None
        parent = self.id
        summary = self._summary
        if summary is None:
            summary = engine.summarizer.summarize(self._view, None, None)
            if summary.fallback_reason:  # as the compaction pipeline reports it
                self._emit(SummarizerFellBack(session_id=parent, error=summary.fallback_reason))
        seed = plan_restart(
            self._view,
            summary,
            restart.carry_turns,
            counter=engine.counter,
            max_carry_tokens=int(self.effective_window * restart.carry_max_share),
            session_number=self._restarts + 2,
        )
        try:
            child = engine.store.create_session(
                model=engine.model.key,
                title=self.info.title,
                parent_id=parent,
                metadata={"restart_number": self._restarts + 1},
            )
        except Exception as exc:
            self._writer.degrade("create the restarted session", exc)
            return False
        self._writer.switch(child.id, last_seq=0)
        self.info = child
        self._view = []
        self._sizes.reset(())
        self._mask_retry_at = None
        for message in seed:
            self.add_message(message)
        self._restarts += 1
        self._wind_down_sent = False
        self._estimator.invalidate()
        self._previous_tail = None
        self._summary = summary
        self._emit(
            SessionRestarted(
                session_id=child.id,
                parent_id=parent,
                child_id=child.id,
                restart_number=self._restarts,
                carried_messages=len(seed),
            )
        )
        return True


def min_mask_batch(strategies: Iterable[object]) -> float:
    """Least share of the window a MASK-zone batch must free (0 without a masking strategy)."""
    shares = [s.min_batch_share for s in strategies if isinstance(s, MaskObservations)]
    return min(shares, default=0.0)


def _why_unused(result: CompactResult) -> str:
    """Why a compaction result was not used or changed nothing, in words for its
    CompactionFailed event."""
    return result.reason or result.unchanged_reason
