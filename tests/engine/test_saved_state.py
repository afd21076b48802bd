"""The state a session saves: its facts and ledger are handed to the store as the same
unchangeable objects until they change (the store then does not encode them again), in the
stored form, and read back from that form unencoded (a restart's child gets ``saved()``)."""

from __future__ import annotations

import json

from tests.engine.helpers import EngineFactory, start


def test_facts_and_ledger_are_saved_as_the_same_objects_and_read_back_unencoded(
    make_engine: EngineFactory,
) -> None:
    engine, _ = make_engine()
    driver = start(engine)
    driver.until(lambda _: bool(driver.session._core.state.ledger.items))
    state = driver.session._core.state
    assert state.facts and state.ledger.items
    first, again = state.saved(), state.saved()
    assert again["facts"] is first["facts"] and again["ledger"] is first["ledger"]
    # The stored JSON is the list form it always was.
    assert json.loads(json.dumps(first["facts"])) == [[p.kind, p.text] for p in state.facts]
    assert json.loads(json.dumps(first["ledger"])) == state.ledger.state()
    facts = [(p.kind, p.text) for p in state.facts]  # where a fact came from is not saved
    # As it is handed over (a restart's child), and as a store gives it back, encoded.
    for saved in (first, json.loads(json.dumps(first))):
        restored = state.restored(saved, driver.session.view)
        assert [(p.kind, p.text) for p in restored.facts] == facts
        assert restored.ledger == state.ledger
