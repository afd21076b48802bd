"""Two engines on one stored session: the one that fell behind is refused, the view never forks.

Each test resumes one session in two engines (two handles on one database, as two processes
would), lets engine A write, then has engine B, now behind, write too. B must get
``ConcurrentWriteError`` with nothing written, and a fresh resume must equal a full replay of
the transcript and its edits. Runs on SQLite and on PostgreSQL (see ``tests/store/conftest.py``).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest

from contextfold import ConcurrentWriteError, ContextEngine, ContextPolicy, model_for_window
from contextfold.events import ComponentDegraded, MemorySink
from contextfold.messages import Message
from contextfold.store import SessionStore
from contextfold.store.view_rebuild import replay
from tests.engine.helpers import WINDOW, Driver, start
from tests.store import conftest as store_fixtures
from tests.store.conftest import StoreTarget

# The store tests' fixtures, borrowed so that these tests run on every backend too.
target = store_fixtures.target
postgres_database = store_fixtures.postgres_database

pytestmark = pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")

TURNS_BEFORE_RESUME = 12
"""Agent turns engine A runs first: enough tool output for a manual compaction to act on."""


class Pair:
    """Engine A, which made the session, and engine B, which resumed it on another handle."""

    def __init__(self, target: StoreTarget) -> None:
        self.target = target
        self.a_store: SessionStore = target.open()
        self.b_store: SessionStore = target.open()
        self.a = _engine(self.a_store)
        self.b_sink = MemorySink()
        self.b = _engine(self.b_store, self.b_sink)
        self.driver: Driver = start(self.a)
        for _ in range(TURNS_BEFORE_RESUME):
            self.driver.turn()
        self.stale = self.b.resume(self.driver.session.id)

    @property
    def session_id(self) -> str:
        return self.driver.session.id

    def heads(self) -> tuple[int, int]:
        """The stored (last seq, number of edits) of the session."""
        store = self.target.open()
        return store.last_seq(self.session_id), len(list(store.iter_edits(self.session_id)))

    def close(self) -> None:
        self.a.close()
        self.b.close()


def _engine(store: SessionStore, sink: MemorySink | None = None) -> ContextEngine:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # this machine's SQLite warns about the WAL bug
        return ContextEngine(
            model_for_window(WINDOW, max_output_tokens=1_000),
            store=store,
            sinks=[sink] if sink else [],
            policy=ContextPolicy(background=False),
        )


@pytest.fixture
def pair(target: StoreTarget) -> Iterator[Pair]:
    opened = Pair(target)
    yield opened
    opened.close()


def full_replay(store: SessionStore, session_id: str) -> list[Message]:
    """The view rebuilt from the whole transcript and every edit, ignoring any snapshot."""
    view, _ = replay((), store.iter_messages(session_id), list(store.iter_edits(session_id)))
    return view


def assert_resume_equals_replay(pair: Pair) -> None:
    fresh = pair.target.open()
    resumed = fresh.load_view(pair.session_id)
    assert resumed.snapshot is not None  # the check below is about the snapshot path
    assert [m.id for m in resumed.view] == [m.id for m in full_replay(fresh, pair.session_id)]
    assert list(resumed.view) == full_replay(fresh, pair.session_id)
    assert fresh.check_integrity() == []


def assert_refused_cleanly(pair: Pair, before: tuple[int, int]) -> None:
    assert pair.heads() == before  # nothing B tried was written
    assert pair.stale.persisted  # B was told, not silently moved to memory
    assert not pair.b_sink.of_type(ComponentDegraded)


def test_a_writer_behind_an_append_cannot_compact(pair: Pair) -> None:
    pair.driver.session.add_user("Engine A goes on: run the tests now.")
    before = pair.heads()

    with pytest.raises(ConcurrentWriteError):
        pair.stale.compact()

    assert_refused_cleanly(pair, before)
    assert pair.driver.session.compact().edits  # A's next compaction writes a snapshot
    assert_resume_equals_replay(pair)


def test_a_writer_behind_a_compaction_cannot_compact(pair: Pair) -> None:
    assert pair.driver.session.compact().edits
    before = pair.heads()

    with pytest.raises(ConcurrentWriteError):
        pair.stale.compact()

    assert_refused_cleanly(pair, before)
    assert_resume_equals_replay(pair)


def test_a_writer_behind_a_compaction_cannot_append(pair: Pair) -> None:
    assert pair.driver.session.compact().edits
    before = pair.heads()

    with pytest.raises(ConcurrentWriteError):
        pair.stale.add_user("Engine B still sees the view from before A compacted.")

    assert_refused_cleanly(pair, before)
    assert pair.driver.session.add_user("Engine A goes on.")  # the up-to-date writer may
    assert_resume_equals_replay(pair)


def test_the_writer_that_is_up_to_date_keeps_writing(pair: Pair) -> None:
    # B resumed last and nobody wrote since: B is the current writer, and A is the stale one.
    pair.stale.add_user("Engine B takes over.")
    assert pair.stale.compact().edits
    assert_resume_equals_replay(pair)
    with pytest.raises(ConcurrentWriteError):
        pair.driver.session.add_user("Engine A did not see B's turn.")
