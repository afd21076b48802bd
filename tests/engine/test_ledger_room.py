"""The ledger gives way when the request would not fit with it (a compaction as hard as it goes
can leave a request that the ledger pushes over the window)."""

from __future__ import annotations

from dataclasses import replace

from contextfold.retention.ledger import Ledger, LedgerItem
from tests.engine.helpers import EngineFactory, start


def test_a_ledger_that_would_push_the_request_over_the_window_shrinks_until_it_fits(
    make_engine: EngineFactory,
) -> None:
    engine, _ = make_engine(window=8_000)
    driver = start(engine)
    driver.until(lambda request: request.tokens > engine.effective_window * 0.75)
    # A ledger far larger than the room the request has left (as one could be after the window
    # was learned smaller than the one it was bounded for).
    items = tuple(
        LedgerItem("command", f"pytest tests/test_module_{n}.py -k case_{n} --maxfail=1", None)
        for n in range(200)
    )
    core = driver.session._core
    core.state = replace(core.state, ledger=Ledger(items))
    before = core.state.ledger.tokens()
    request = driver.prepare()
    assert request.tokens <= engine.effective_window
    after = core.state.ledger
    assert before > 0 and after.tokens() < before
