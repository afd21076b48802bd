"""The engine runs on a store that has only :class:`SessionStore`'s methods: a third party's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contextfold.budget import Zone
from contextfold.events import ComponentDegraded
from tests.engine.helpers import SYSTEM, EngineFactory, start

from .test_protocol import EngineOnlyStore


@pytest.fixture
def make_engine() -> Iterator[EngineFactory]:
    """Engines with a MemorySink, closed after the test."""
    factory = EngineFactory()
    yield factory
    factory.close_all()


def test_a_session_on_a_third_party_store_compacts_and_resumes(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    path = str(tmp_path / "sessions.db")
    engine, sink = make_engine(store=EngineOnlyStore(path), compactor="summarize")
    driver = start(engine)
    driver.until_zone(Zone.COMPACT)
    for _ in range(3):
        driver.turn()
    session = driver.session
    assert not [e for e in sink.events if isinstance(e, ComponentDegraded)]
    assert session.persisted

    resumed_engine, resumed_sink = make_engine(store=EngineOnlyStore(path), compactor="summarize")
    resumed = resumed_engine.resume(session.id)
    original, again = driver.prepare(), resumed.prepare(system=SYSTEM)
    assert [m.to_dict() for m in again.messages] == [m.to_dict() for m in original.messages]
    assert again.tokens == original.tokens  # the engine's state came back from the store
    assert resumed.usage().calls == session.usage().calls
    assert not [e for e in resumed_sink.events if isinstance(e, ComponentDegraded)]
