"""The ledger rides with the latest summary: the message that carries both is the stored summary
with the rendered ledger as its last part, and it is the same object from one steady turn to the
next (made once per compaction, not once per turn)."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

from contextfold import PreparedRequest
from contextfold.messages import Message, SummaryPart, TextPart
from tests.engine.helpers import EngineFactory, start


def _summary_of(messages: tuple[Message, ...] | list[Message]) -> Message | None:
    found = [m for m in messages if any(isinstance(p, SummaryPart) for p in m.parts)]
    return found[-1] if found else None


def test_the_summary_carrying_the_ledger_equals_it_made_afresh_and_is_made_once(
    make_engine: EngineFactory,
) -> None:
    engine, _ = make_engine(compactor="summarize")
    driver = start(engine)
    carried: list[tuple[PreparedRequest, Message, Message]] = []
    for _ in range(400):
        request = driver.turn()
        session = driver.session
        stored = _summary_of(session.view)
        ledger = session.ledger.render()
        if stored is None or not ledger:
            continue
        sent = _summary_of(request.messages)
        assert sent is not None
        # The full computation: the stored summary with the ledger as one more part.
        assert sent == replace(stored, parts=(*stored.parts, TextPart(ledger)))
        assert _summary_of(session.view) is stored  # the stored one is left as it was
        carried.append((request, stored, sent))
        if len(carried) >= 12:
            break
    assert len(carried) >= 12, "the session never carried its ledger with a summary"
    steady = [(a, b) for a, b in pairwise(carried) if b[0].compaction is None and a[1] is b[1]]
    assert steady
    for (_, _, before), (_, _, after) in steady:
        assert after is before
