"""Carrying out a zone's action, and the compactions asked for by name.

:func:`act` takes the :class:`~._zones.ZoneAction` that :func:`~._zones.decide` chose and does
it: mask a batch, compact (or take a finished background compaction), restart, or start the
background worker. :func:`apply_result` is the one place a compaction's result enters the
session: its edits go to the store, the view and its sizes are replaced, the estimate is
rebased, and exactly one finished or failed event closes what was announced. :func:`compact_now`
(``/compact``, the ``compact_context`` tool) and :func:`recover` (a provider's overflow) use the
same steps.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from contextfold.compaction import CompactionContext, CompactResult, MaskObservations
from contextfold.engine._core import SessionCore
from contextfold.engine._measure import Measurement
from contextfold.engine._recovery import ENGINE_PROVIDER, OVERFLOW_RETRY_SHARE, RefusedRequest
from contextfold.engine._restart import restart
from contextfold.engine._schedule import compacts_early, expectation, open_settlement
from contextfold.engine._state import TurnState
from contextfold.engine._writer import PendingBlobs
from contextfold.engine._zones import ZoneAction, decide
from contextfold.errors import ContextOverflowError
from contextfold.events import (
    CompactionFailed,
    CompactionFinished,
    CompactionStarted,
    Event,
    OverflowRecovered,
    Trigger,
)
from contextfold.retention.ledger import token_budget

__all__ = [
    "Applied",
    "act",
    "apply_result",
    "compact_now",
    "compaction_failed",
    "min_mask_batch",
    "recover",
]


@dataclass(frozen=True, slots=True)
class Applied:
    """What carrying out an action did: the state it leaves, the compaction that ran (if any),
    the events it made (already sent to the sinks) and whether the view changed."""

    state: TurnState
    compaction: CompactResult | None = None
    events: tuple[Event, ...] = ()
    view_changed: bool = False

    def then(self, later: Applied) -> Applied:
        """This, followed by ``later`` (which started from this one's state)."""
        return Applied(
            later.state,
            later.compaction or self.compaction,
            self.events + later.events,
            self.view_changed or later.view_changed,
        )


def act(core: SessionCore, state: TurnState, m: Measurement) -> Applied:
    """Decide what measurement ``m`` calls for and do it."""
    policy = core.deps.policy
    restart_policy = core.deps.compactor.restart
    # A restart continues in a new stored session: with the store down, compact in place.
    can_restart = (
        restart_policy is not None
        and restart_policy.can_restart(state.restarts)
        and core.writer.store_ok
    )
    early = compacts_early(core, state, m)
    action = decide(m, state, policy, can_restart=can_restart, compact_early=early)
    if action.kind == "restart":
        assert restart_policy is not None
        restarted = restart(core, state, restart_policy)
        if restarted is not None:
            return Applied(restarted.state, events=restarted.events, view_changed=True)
        action = decide(m, state, policy, can_restart=False, compact_early=early)
    if state.wind_down_sent != action.wind_down_sent:
        state = replace(state, wind_down_sent=action.wind_down_sent)
    if action.kind == "compact":
        return _compact_zone(core, state, m, action)
    done = _mask_batch(core, state, m) if action.kind == "mask" else Applied(state)
    if action.start_background:
        done = done.then(_start_background(core, done.state, m))
    return done


def _compact_zone(
    core: SessionCore, state: TurnState, m: Measurement, action: ZoneAction
) -> Applied:
    background = core.background
    done = Applied(state)
    if action.take_background and background is not None:
        ready = background.take(core.view)
        if ready is not None:
            state = replace(state, background_started=False)
            if ready.changed and not ready.failed:
                return apply_result(core, state, ready, m, trigger="background")
            # Its CompactionStarted was announced: it ends here, as failed, and the
            # foreground compaction below does the work.
            failed = compaction_failed(core, "background", m.tokens, m.tokens, _why_unused(ready))
            done = Applied(state, events=(failed,))
    if action.wait or action.trigger is None:
        return done
    return done.then(
        _compact(
            core, done.state, m, trigger=action.trigger, target=action.target, hard=action.hard
        )
    )


def _start_background(core: SessionCore, state: TurnState, m: Measurement) -> Applied:
    background = core.background
    if background is None:
        return Applied(state)
    target = core.deps.policy.thresholds.compact_target
    if not background.maybe_start(_context(core, state, m, target)):
        return Applied(state)
    # Announced like any compaction, so its CompactionFinished has a start.
    started = CompactionStarted(
        session_id=core.id,
        trigger="background",
        zone=m.zone.value,
        before_tokens=m.tokens,
        target_tokens=int(target * core.effective_window),
    )
    return Applied(replace(state, background_started=True), events=(core.emit(started),))


def _mask_batch(core: SessionCore, state: TurnState, m: Measurement) -> Applied:
    """Mask one batch of old outputs, but only a batch worth a cache break.

    Every edit invalidates the provider's cached prefix from the first changed message on.
    Once the old outputs are masked, each new turn ages only one or two more out of the
    recent window; masking those one turn at a time would break the cache every turn, so a
    batch that frees less than the mask strategies' minimum share waits for more (or for
    the COMPACT zone).
    """
    compactor = core.deps.compactor
    if state.mask_retry_at is not None and core.sizes.outputs < state.mask_retry_at:
        return Applied(state)
    pending = PendingBlobs(core.blobs)  # written only if the batch is kept
    ctx = replace(_context(core, state, m, core.deps.policy.thresholds.mask_at), blobs=pending)
    result = compactor.mask(ctx)
    least = min_mask_batch(compactor.mask_strategies) * ctx.window_tokens
    if not result.changed or result.freed_tokens < least:
        # Planning reads every old output, and only outputs can be masked: plan again once
        # new tool outputs could make up the shortfall, and at least half a batch of them
        # (outputs in the recent window are not maskable yet: a small shortfall would
        # otherwise mean planning again every turn or two).
        shortfall = max(least / 2, least - result.freed_tokens)
        return Applied(replace(state, mask_retry_at=core.sizes.outputs + int(shortfall)))
    return apply_result(core, state, result, m, trigger="mask", pending=pending)


def _context(
    core: SessionCore,
    state: TurnState,
    m: Measurement,
    target: float,
    *,
    hard: bool = False,
    focus: str | None = None,
) -> CompactionContext:
    deps = core.deps
    # What the compaction takes out may go into the ledger, a system-prompt section: the
    # conversation leaves room for it to grow to its bound, or the request after a compaction
    # aimed at the last token (an overflow's retry) would not fit.
    ledger_room = max(0, token_budget(state.window.context_window) - state.ledger.tokens())
    return CompactionContext(
        view=tuple(core.view),
        counter=core.compaction_counter,
        target_tokens=max(0, m.conversation_target(target) - ledger_room),
        window_tokens=m.raw_window,
        blobs=core.blobs,
        session_id=core.id,
        summarizer=deps.summarizer,
        focus=focus,
        hard=hard,
        # What the conversation can be given at all.
        room_tokens=max(0, m.conversation_target(1.0) - ledger_room),
        recent=deps.policy.recent,
        keep_latest_turn=deps.policy.keep_latest_turn,
    )


def _compact(
    core: SessionCore,
    state: TurnState,
    m: Measurement,
    *,
    trigger: Trigger,
    target: float,
    hard: bool = False,
    focus: str | None = None,
) -> Applied:
    # Outputs the compaction stashes are written with its edits, in one transaction.
    pending = PendingBlobs(core.blobs)
    ctx = replace(_context(core, state, m, target, hard=hard, focus=focus), blobs=pending)
    started = core.emit(
        CompactionStarted(
            session_id=core.id,
            trigger=trigger,
            zone=m.zone.value,
            before_tokens=m.tokens,
            target_tokens=int(target * core.effective_window),
        )
    )
    result = core.deps.compactor.compact(ctx, hard=hard)
    return Applied(state, events=(started,)).then(
        apply_result(core, state, result, m, trigger=trigger, pending=pending)
    )


def apply_result(
    core: SessionCore,
    state: TurnState,
    result: CompactResult,
    m: Measurement,
    *,
    trigger: Trigger,
    pending: PendingBlobs | None = None,
) -> Applied:
    """Let ``result`` enter the session (see the module docstring). ``pending`` holds the
    outputs its run stashed, written (before the edits that cite them) only when it changed
    something."""
    if not result.edits:
        return _entered(core, state, result, m, trigger, pending)
    # Its outputs, edits and snapshot, the state with the ledger they refreshed, and the events
    # that report them: one transaction (one commit, and a crash keeps all of it or none).
    with core.writer.together():
        applied = _entered(core, state, result, m, trigger, pending)
        core.writer.save_state(applied.state.saved())
    return applied


def _entered(
    core: SessionCore,
    state: TurnState,
    result: CompactResult,
    m: Measurement,
    trigger: Trigger,
    pending: PendingBlobs | None,
) -> Applied:
    events = [core.emit(event) for event in result.events]
    after = m.tokens
    if result.edits:
        after = _take_edits(core, state, result, m, pending)
        # A new view: a declined mask batch is planned again, the cache plan starts over.
        state = replace(state, mask_retry_at=None, previous_tail=None)
    if result.summary is not None:
        state = replace(state, summary=result.summary)
    if result.failed and trigger in ("threshold", "background", "cost"):
        least = core.deps.policy.thresholds.min_progress * core.effective_window
        state = replace(state, compact_retry_at=after + int(least))
    elif result.edits:
        state = replace(state, compact_retry_at=None)
    # Every announced compaction ends with one finished or failed event. One whose edits
    # are in the transcript finished, even short of the minimum progress (its note says
    # so); one that changed nothing has failed, whatever its strategies said.
    if result.edits:
        saving, horizon, settlement = expectation(core, state, m, result, after)
        finished = CompactionFinished(
            session_id=core.id,
            trigger=trigger,
            before_tokens=m.tokens,
            after_tokens=after,
            before_messages=result.before_messages,
            after_messages=result.after_messages,
            strategies_run=result.strategies_run,
            edit_ids=tuple(e.id for e in result.edits),
            cpu_seconds=result.cpu_seconds,
            note=result.reason if result.failed else "",
            expected_saving_usd=saving,
            horizon_requests=horizon,
        )
        events.append(core.emit(finished))
        state, loss = state.accounted(result, trigger, core.id, core.read_stored)
        events.append(core.emit(loss))
        events += open_settlement(core, state, finished, settlement)
    elif trigger != "mask":
        events.append(compaction_failed(core, trigger, m.tokens, after, _why_unused(result)))
    return Applied(state, result, tuple(events), view_changed=bool(result.edits))


def _take_edits(
    core: SessionCore,
    state: TurnState,
    result: CompactResult,
    m: Measurement,
    pending: PendingBlobs | None,
) -> int:
    """Take ``result``'s view and record it: the outputs its edits cite, the edits and the
    snapshot of the new view, in one transaction (one fact, one commit; a crash keeps all of
    it or none). The view's estimated size."""
    core.replace_view(result.view)
    # Two estimates of the new size, and the larger wins: the old size minus what was freed
    # (on the provider's scale, from its last report), and the new view estimated whole. The
    # first is wrong when the messages removed were ones the provider counts very differently
    # from the rest (a template that leaves tool calls out), the second when the calibration is
    # off; under-estimating is what would overflow.
    view = core.view
    after = max(
        m.after_compaction(core.sizes.total, len(view)),
        state.estimator.full_estimate(view, system=m.fixed_text, tools=m.tools),
    )
    # Stay on the provider's scale: the new size is the old one minus what was freed.
    state.estimator.rebase(view, after, system=m.fixed_text, tools=m.tools)
    with core.writer.together():
        if pending is not None:
            pending.flush()
        core.writer.append_edits(result.edits)
        core.writer.snapshot(view, after)
    return after


def compaction_failed(
    core: SessionCore, trigger: Trigger, before: int, after: int, reason: str
) -> Event:
    """End an announced compaction that changed nothing (the event, sent)."""
    return core.emit(
        CompactionFailed(
            session_id=core.id,
            trigger=trigger,
            before_tokens=before,
            after_tokens=after,
            reason=reason,
        )
    )


def compact_now(core: SessionCore, focus: str | None, trigger: Trigger) -> CompactResult:
    """Compact on request: to the usual target, or to half the current usage when that is
    already below it (whoever asks explicitly wants room now, before a large read say)."""
    m = core.measure_now()
    target = min(core.deps.policy.thresholds.compact_target, m.fraction / 2)
    done = _compact(core, core.state, m, trigger=trigger, target=target, focus=focus)
    core.state = done.state  # saved with the edits it wrote, if it wrote any (apply_result)
    assert done.compaction is not None
    return done.compaction


def recover(core: SessionCore, error: ContextOverflowError) -> CompactResult:
    """Answer a provider's overflow: learn its limit, rebase the estimate, compact hard.

    See :meth:`contextfold.engine.Session.recover` for when it raises instead.
    """
    if error.provider == ENGINE_PROVIDER:
        raise error  # nothing was sent: prepare() already compacted as hard as it could
    state = core.state
    if state.refused is not None:
        raise ContextOverflowError(
            f"the provider still rejects the request after a hard compaction: {error}",
            provider=error.provider,
            status=error.status,
            prompt_tokens=error.prompt_tokens,
            limit=error.limit,
        ) from error
    refused = state.last
    state = replace(state, refused=RefusedRequest.of(refused, error))
    learned = state.window.learn(error.limit)
    if refused is not None and error.prompt_tokens:  # its own count of what it refused
        state.estimator.rebase(
            state.last_view(), error.prompt_tokens, system=state.fixed_text, tools=refused.tools
        )
    m = core.measure_now()
    state.window.require_room(m.fixed_tokens, m.budget.tools, provider=error.provider)
    # Against the (possibly learned) window, the usual target; but a request the provider
    # refused although it fits by our count means our count is off by an unknown amount:
    # the retry then aims at a share of what was refused.
    target = min(core.deps.policy.thresholds.compact_target, m.fraction * OVERFLOW_RETRY_SHARE)
    done = _compact(core, state, m, trigger="overflow", target=target, hard=True)
    core.state = done.state
    core.save_state()
    core.emit(
        OverflowRecovered(
            session_id=core.id,
            before_tokens=error.prompt_tokens or m.tokens,
            after_tokens=core.measure_now().tokens,
            provider_message=str(error)[:500],
            limit=error.limit,
            window=state.window.context_window,
            learned_window=learned,
        )
    )
    assert done.compaction is not None
    return done.compaction


def min_mask_batch(strategies: Iterable[object]) -> float:
    """Least share of the window a MASK-zone batch must free (0 without a masking strategy)."""
    shares = [s.min_batch_share for s in strategies if isinstance(s, MaskObservations)]
    return min(shares, default=0.0)


def _why_unused(result: CompactResult) -> str:
    """Why a compaction result was not used or changed nothing, in words for its
    CompactionFailed event."""
    return result.reason or result.unchanged_reason
