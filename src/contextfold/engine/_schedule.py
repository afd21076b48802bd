"""The cache-aware schedule: the session's figures put to :mod:`._economics`.

- :func:`compacts_early` — between ``compact_from`` and the compact threshold, whether making
  the current size the one the session compacts at costs less than any later one;
- :func:`expectation` — the expected saving a finished compaction carries, and the settlement
  that will say what it came to;
- :func:`request_sent` — the pace after each request, and the settlement that came due.

Every function reads the session's state and the measurement and returns a decision, a figure or
the events it sent; the dollars are those of the session's model (:meth:`CachePrices.for_model`).
The pace tracker (``state.pace``) keeps the counts these decisions read.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from contextfold.budget import Zone
from contextfold.compaction import CompactResult
from contextfold.engine._core import SessionCore
from contextfold.engine._economics import (
    CachePrices,
    EarlyQuestion,
    Plan,
    Settlement,
    early_compaction_pays,
    edit_saving,
)
from contextfold.engine._measure import Measurement
from contextfold.engine._state import TurnState
from contextfold.events import CompactionFinished, CompactionSettled, Event
from contextfold.messages import Message

__all__ = ["compacts_early", "expectation", "open_settlement", "request_sent"]

EARLY_MARGIN = 0.25
"""An early compaction must be expected to save at least this share of what one compaction
costs: the play-forward's floor and pace are estimates, and a compaction that only breaks even
on paper costs more in practice (measured on the replay corpus, benchmarks/RESULTS.md)."""
RECHECK_SHARE = 0.02
"""After a "no", the question is asked again once the view grew by this share of the window
(or the cache went cold): asked every turn, it cost a couple of milliseconds a turn, and a
turn's growth rarely changes the answer."""
SUMMARY_TOKENS_GUESS = 1_000
"""What a summary is expected to take, before the session's first summary shows its size."""


def prices(core: SessionCore) -> CachePrices:
    """The session model's cache prices, with the policy's cache life and summary price."""
    policy = core.deps.policy
    return CachePrices.for_model(
        core.deps.model,
        ttl_seconds=policy.cache_ttl_seconds,
        summary_share=policy.summary_price_share,
    )


def now(view: Sequence[Message]) -> float:
    """The time of the request about to be made: its newest message's, when it carries one
    (a replayed transcript keeps its own clock), else the wall clock."""
    stamp = view[-1].meta.created_at if view else None
    return stamp if stamp is not None else time.time()


def _plan(core: SessionCore, state: TurnState, m: Measurement) -> Plan:
    """Where compaction happens if nothing comes early: at the compact threshold, down to what
    a compaction leaves: the fixed part, the task, the recent window and a summary.

    The recent window and the task are read from the view's units kept as it grows
    (:class:`~._recent.GrowingView`), so asking costs what was appended since the last time."""
    policy = core.deps.policy
    sizes = core.sizes
    growing = sizes.growing
    start = growing.recent_window_start(
        core.view,
        sizes.messages,
        sizes.generation,
        turns=policy.recent.turns,
        max_tokens=policy.recent.max_tokens(m.raw_window),
    )
    task = growing.task_index()
    kept = growing.tokens_from(start)
    if task is not None and task < start:
        kept += sizes.messages[task]
    summary = SUMMARY_TOKENS_GUESS
    if state.summary is not None:
        summary = core.compaction_counter.count_summary(state.summary.render())
    floor = m.fixed_tokens + int(kept * m.calibration) + summary
    return Plan(
        upper=policy.thresholds.compact_at * m.effective_window, floor=floor, summary=summary
    )


def compacts_early(core: SessionCore, state: TurnState, m: Measurement) -> bool:
    """Whether to compact now although the view is under the compact threshold.

    Only with the cost schedule on, past ``compact_from``, in the OK or MASK zone, and when
    compacting at this size from now on is expected to cost less than compacting at any later
    one up to the threshold (summaries priced, the cache re-written from the start of the
    conversation each time; :func:`early_compaction_saving`, asked as
    :func:`early_compaction_pays`).
    """
    policy = core.deps.policy
    if not policy.cost_schedule or m.zone not in (Zone.OK, Zone.MASK):
        return False
    if m.fraction < policy.compact_from or core.deps.compactor.restart is not None:
        return False
    pace = state.pace
    warm = pace.warm(now(core.view), policy.cache_ttl_seconds)
    if warm and pace.recheck_at is not None and m.tokens < pace.recheck_at:
        return False  # answered "no" lately, and the view has hardly grown since
    recheck = m.tokens + int(RECHECK_SHARE * m.effective_window)
    plan = _plan(core, state, m)
    if m.tokens - plan.floor < policy.thresholds.min_progress * m.effective_window:
        pace.recheck_at = recheck
        return False  # it would free less than a compaction must: not worth a cache break
    cache = prices(core)
    one = cache.summary(m.tokens - plan.floor + plan.summary) + cache.request(plan.floor, 0)
    question = EarlyQuestion(m.tokens, m.fixed_tokens, warm, pace.pace, plan, cache)
    if early_compaction_pays(question, EARLY_MARGIN * one):
        return True
    pace.recheck_at = recheck
    return False


def expectation(
    core: SessionCore, state: TurnState, m: Measurement, result: CompactResult, after: int
) -> tuple[float, int, Settlement]:
    """The expected saving of the compaction ``result`` (already taken: the view is the new
    one, ``after`` its size) and the requests it looks ahead; the settlement to follow it."""
    policy = core.deps.policy
    pace = state.pace
    plan = _plan(core, state, m)
    summary_tokens = max(0, m.tokens - after) + plan.summary if result.summary is not None else 0
    pace.recheck_at = None  # a new view: the next turn asks again
    warm = pace.warm(now(core.view), policy.cache_ttl_seconds)
    kept = m.fixed_tokens  # the old view is gone: a compaction is taken as changing it early
    saving = edit_saving(
        tokens=m.tokens,
        after=after,
        kept_prefix=kept,
        summary_tokens=summary_tokens,
        warm=warm,
        pace=pace.pace,
        plan=plan,
        prices=prices(core),
    )
    settlement = Settlement(
        expected=saving,
        before=m.tokens,
        plan=plan,
        warm=warm,
        horizon=pace.pace.remaining,
        summary_tokens=summary_tokens,
        first_kept=kept,
    )
    return saving, pace.pace.remaining, settlement


def open_settlement(
    core: SessionCore, state: TurnState, finished: CompactionFinished, settlement: Settlement
) -> list[Event]:
    """Follow ``finished``'s effect from the next request on (settling the one before, if any,
    with what it has: the view it was measured on is gone); the settlement event sent."""
    pace = state.pace
    events = []
    if pace.settlement is not None and pace.settlement.sizes:
        events.append(_settle(core, pace.settlement))
    settlement.edit_ids = finished.edit_ids
    settlement.trigger = finished.trigger
    pace.settlement = settlement
    return events


def request_sent(
    core: SessionCore, state: TurnState, tokens: int, view: Sequence[Message]
) -> list[Event]:
    """Record the request just prepared; the settlement event it completed, if any (sent)."""
    due = state.pace.sent(tokens, now(view))
    return [_settle(core, due)] if due is not None else []


def _settle(core: SessionCore, settlement: Settlement) -> Event:
    cache = prices(core)
    return core.emit(
        CompactionSettled(
            session_id=core.id,
            trigger=settlement.trigger,
            edit_ids=settlement.edit_ids,
            expected_saving_usd=settlement.expected,
            realized_saving_usd=settlement.realized(cache),
            requests=len(settlement.sizes),
            nominal=cache.nominal,
        )
    )
