"""What a turn does about the zone it is in, decided without doing it: :func:`decide`.

The decision reads the measurement, the session's state and the policy, and returns a
:class:`ZoneAction`; it changes nothing and does no I/O, so every case is a plain function call
in a test. :mod:`._compact` and :mod:`._restart` carry the action out.

- OK: nothing (a background compaction may start past the policy's mark); but past the
  policy's ``compact_from``, a compaction comes early when the cache-aware schedule expects it
  to cost less than waiting (``compact_early``, decided by :mod:`._schedule`).
- MASK: mask one batch of old outputs (and maybe start the background compaction).
- COMPACT: compact to the target, taking a finished background compaction if one is ready;
  after a compaction that could not free the minimum, wait for the context to grow.
- BLOCK, OVERFLOW: compact hard.
- With the ``restart`` preset and a store that can make a child session, the COMPACT zone first
  sends one request that warns the model (the wind-down), then restarts; BLOCK and OVERFLOW
  leave no room for the warning and restart at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from contextfold.budget import Zone
from contextfold.engine._measure import Measurement
from contextfold.engine._state import TurnState
from contextfold.engine.policy import ContextPolicy
from contextfold.events import Trigger

__all__ = ["ZoneAction", "decide"]

ActionKind: TypeAlias = Literal["none", "mask", "compact", "wind_down", "restart"]


@dataclass(frozen=True, slots=True)
class ZoneAction:
    """What the turn does to the view before it renders the request."""

    kind: ActionKind
    trigger: Trigger | None = None
    """What started the compaction (``"threshold"``, ``"block"``), for its events."""
    target: float = 0.0
    """Share of the effective window the compaction aims at."""
    hard: bool = False
    """Compact with every strategy, as far as it goes."""
    take_background: bool = False
    """Use a finished background compaction first, when one is ready."""
    wait: bool = False
    """The last compaction freed too little: do nothing unless a background one is ready."""
    start_background: bool = False
    """Start preparing a compaction in the background (after a mask batch, if any)."""
    wind_down_sent: bool = False
    """Whether the request carries the wind-down note (the state keeps it for the next turn)."""


def decide(
    m: Measurement,
    state: TurnState,
    policy: ContextPolicy,
    *,
    can_restart: bool,
    compact_early: bool = False,
) -> ZoneAction:
    """The action for measurement ``m`` (see the module docstring).

    ``can_restart`` is true when the compactor restarts (the ``restart`` preset), has restarts
    left, and the store can make the child session. When a restart is tried and fails, the
    caller decides again with ``can_restart=False``. ``compact_early``: the cost schedule
    found compacting now, under the compact threshold, cheaper than waiting.
    """
    zone, thresholds = m.zone, policy.thresholds
    full = zone in (Zone.COMPACT, Zone.BLOCK, Zone.OVERFLOW)
    if full and can_restart:
        if zone is Zone.COMPACT and not state.wind_down_sent:
            return ZoneAction("wind_down", wind_down_sent=True)
        # After the wind-down turn, or with no room left for one (BLOCK, OVERFLOW): now.
        return ZoneAction("restart")
    # Never promise a restart that will not come: without one, no wind-down note.
    if zone in (Zone.BLOCK, Zone.OVERFLOW):
        return ZoneAction("compact", trigger="block", target=thresholds.compact_target, hard=True)
    if zone is Zone.COMPACT:
        retry_at = state.compact_retry_at
        return ZoneAction(
            "compact",
            trigger="threshold",
            target=thresholds.compact_target,
            take_background=True,
            # The last compaction could not free the minimum; running it again every turn
            # would only break the cache again. Wait for growth, or for the BLOCK zone.
            wait=retry_at is not None and m.tokens < retry_at,
        )
    retry_at = state.compact_retry_at
    if compact_early and (retry_at is None or m.tokens >= retry_at):
        # Under the threshold the usual target may be above the view: aim at half of it.
        target = min(thresholds.compact_target, m.fraction / 2)
        return ZoneAction("compact", trigger="cost", target=target, take_background=True)
    start = policy.background and m.fraction >= policy.background_mark
    return ZoneAction(
        "mask" if zone is Zone.MASK else "none",
        start_background=start,
        # A wind-down already sent stays promised while the restart can still come.
        wind_down_sent=state.wind_down_sent and can_restart,
    )
