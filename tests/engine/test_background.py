"""Background compaction: prepared in a worker past the background mark, swapped in at the
COMPACT zone, and never a reason for the agent's turn to wait."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from contextfold import ContextPolicy, ExtractiveSummarizer, Message, StructuredSummary, validate
from contextfold.budget import Zone
from contextfold.compaction import BackgroundCompactor
from contextfold.events import CompactionFinished, CompactionStarted
from tests.engine.helpers import EngineFactory, start


class WorkerGate:
    """A summarizer that, in the compaction worker only, waits until the test opens the gate."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.gate = threading.Event()
        self._inner = ExtractiveSummarizer()

    def summarize(
        self,
        messages: Sequence[Message],
        previous: StructuredSummary | None = None,
        focus: str | None = None,
    ) -> StructuredSummary:
        if threading.current_thread() is not threading.main_thread():
            self.entered.set()
            self.gate.wait(timeout=60)  # a guard against a hung test, not a timing assumption
        return self._inner.summarize(messages, previous, focus)


def _worker(session: object) -> BackgroundCompactor:
    background = session._core.background  # type: ignore[attr-defined]
    assert isinstance(background, BackgroundCompactor)
    return background


def test_a_ready_background_compaction_is_swapped_in(make_engine: EngineFactory) -> None:
    policy = ContextPolicy(cost_schedule=False)  # background compaction is on by default
    engine, _ = make_engine(policy=policy, compactor="summarize")
    driver = start(engine)
    worker = _worker(driver.session)
    driver.until(lambda r: worker.running or worker.ready)

    started_by = driver.requests[-1]
    assert started_by.zone in (Zone.OK, Zone.MASK)
    assert started_by.budget.fraction >= policy.background_mark
    assert all(r.budget.fraction < policy.background_mark for r in driver.requests[:-1])
    announced = [e for e in started_by.events if isinstance(e, CompactionStarted)]
    assert [e.trigger for e in announced] == ["background"]
    worker.wait()
    request = driver.until_zone(Zone.COMPACT)

    finished = [e for e in request.events if isinstance(e, CompactionFinished)]
    assert [e.trigger for e in finished] == ["background"]
    assert request.budget.fraction <= policy.thresholds.compact_target + 0.05
    assert request.tokens <= engine.effective_window


def test_the_agent_never_waits_for_the_worker_below_block(make_engine: EngineFactory) -> None:
    gate = WorkerGate()
    engine, _ = make_engine(
        policy=ContextPolicy(cost_schedule=False), compactor="summarize", summarizer=gate
    )
    driver = start(engine)
    worker = _worker(driver.session)
    try:
        driver.until(lambda r: gate.entered.is_set())  # the worker is stuck in its summary
        # The turns go on; at the COMPACT zone the engine compacts itself rather than wait.
        request = driver.until_zone(Zone.COMPACT)
        assert worker.running and not gate.gate.is_set()
        finished = [e for e in request.events if isinstance(e, CompactionFinished)]
        assert [e.trigger for e in finished] == ["threshold"]
        assert request.budget.fraction <= engine.policy.thresholds.compact_target + 0.05
    finally:
        gate.gate.set()
    worker.wait()
    # The late result was prepared on a view that has been compacted since: it is rebased on
    # the current view when taken, and later turns stay valid and fit.
    later = driver.until_zone(Zone.COMPACT)
    assert later.tokens <= engine.effective_window
    validate(list(later.messages), provider="anthropic")
    for _ in range(5):
        assert driver.turn().tokens <= engine.effective_window
