"""The state a session saves: its facts and ledger are handed to the store as the same
unchangeable objects until they change (the store then does not encode them again), in the
stored form, and read back from that form unencoded (a restart's child gets ``saved()``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import pytest

from contextfold import Message, Usage
from contextfold.tokens import estimator
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


def _ids_digest(messages: list[Message]) -> str:
    """The anchor fingerprint's stored definition: sha256 of the ids joined by newlines."""
    joined = "\n".join(m.id for m in messages)
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()[:32]


def test_the_anchor_digest_kept_as_the_anchor_grows_is_the_digest_of_its_ids(
    make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The estimator hashes only the ids an anchor added to the one before: over a session
    grown through compactions and a resume, every saved digest is the one of all its ids."""
    extended = estimator._IdsHash.extended
    went_on: list[int] = []  # ids already hashed, each time a digest was computed

    def spy(self: estimator._IdsHash, messages: Sequence[Message]) -> estimator._IdsHash:
        went_on.append(self.count)
        return extended(self, messages)

    monkeypatch.setattr(estimator._IdsHash, "extended", spy)
    engine, _ = make_engine()
    driver = start(engine)
    session = driver.session
    compactions = resumed = 0
    for turn in range(90):
        request = driver.prepare()
        compactions += bool(request.compaction)
        response = driver.model.complete(request.to_chat_request())
        # A reported (not estimated) usage: the estimator anchors on it.
        session.add_assistant(response.message, Usage(request.tokens, 20))
        for call in response.tool_calls:
            session.add_tool_result(call.call_id, driver.output(len(driver.requests)))
        anchor = session._core.state.estimator._anchor
        assert anchor is not None
        saved = session._core.state.saved()["estimator"]["anchor"]
        assert saved["count"] == len(anchor.messages)
        assert saved["ids_digest"] == _ids_digest(anchor.messages)
        assert [m.id for m in anchor.messages] == [m.id for m in session.view][: saved["count"]]
        if turn == 45:  # a resumed session goes on from the digest it checked
            session = driver.session = engine.resume(session.id)
            assert session._core.state.estimator.anchored
            resumed += 1
    assert compactions >= 2 and resumed
    assert sum(count > 0 for count in went_on) >= 60  # most went on from the anchor before
