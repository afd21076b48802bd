"""What only the SQLite store does: file handling, durability settings, locking, bad files."""

from __future__ import annotations

import sqlite3
import stat
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from contextfold import ConfigError, ContextEngine, StoreCorruptError, StoreError
from contextfold.messages import Message
from contextfold.model_registry import ModelInfo
from contextfold.store import SQLiteStore, SQLiteVersionWarning, open_store
from contextfold.store import sqlite as sqlite_module

from .helpers import tool_turn


def test_a_new_database_is_private_and_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "sessions.db"
    with SQLiteStore(path) as store:
        store.append_messages(store.create_session().id, tool_turn(1))
        settings = store.pragmas()
        wal = Path(f"{path}-wal")
        assert wal.exists()
        assert stat.S_IMODE(wal.stat().st_mode) == 0o600

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert settings["journal_mode"] == "wal"
    assert settings["synchronous"] == "NORMAL"
    assert settings["foreign_keys"] == "ON"
    assert int(settings["busy_timeout_ms"]) > 0


def test_full_synchronous_is_an_option(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db", synchronous="FULL") as store:
        assert store.pragmas()["synchronous"] == "FULL"
    with pytest.raises(ConfigError, match="sqlite_synchronous"):
        SQLiteStore(tmp_path / "t.db", synchronous="OFF")


BUGGY_SQLITE = (3, 40, 1)
"""The stock SQLite of Debian 12, which has the WAL-reset bug."""


def wal_warnings(make: Callable[[], object]) -> list[str]:
    """The SQLiteVersionWarning messages ``make()`` raised, every one counted."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        made = make()
        close = getattr(made, "close", None)
        if callable(close):
            close()
    return [str(w.message) for w in caught if issubclass(w.category, SQLiteVersionWarning)]


def test_an_old_sqlite_is_warned_about_when_a_store_is_created_not_when_it_is_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module.sqlite3, "sqlite_version_info", BUGGY_SQLITE)
    first = tmp_path / "a.db"

    (created,) = wal_warnings(lambda: SQLiteStore(first))
    assert str(first) in created and "3.51.3" in created
    assert "two processes write" in created and "PostgreSQL" in created
    assert "warn_wal_reset=False" in created  # how to silence it
    assert wal_warnings(lambda: SQLiteStore(first)) == []  # the same store again: nothing
    assert len(wal_warnings(lambda: SQLiteStore(tmp_path / "b.db"))) == 1  # another new one


def test_an_empty_file_counts_as_a_new_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module.sqlite3, "sqlite_version_info", BUGGY_SQLITE)
    empty = tmp_path / "empty.db"
    empty.touch()
    assert len(wal_warnings(lambda: SQLiteStore(empty))) == 1


def test_the_warning_can_be_silenced_and_a_memory_store_never_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module.sqlite3, "sqlite_version_info", BUGGY_SQLITE)
    assert wal_warnings(lambda: SQLiteStore(tmp_path / "a.db", warn_wal_reset=False)) == []
    assert wal_warnings(lambda: open_store(tmp_path / "b.db", warn_wal_reset=False)) == []
    assert wal_warnings(lambda: SQLiteStore(":memory:")) == []  # no file, no other writer


def test_a_fixed_sqlite_is_not_warned_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module.sqlite3, "sqlite_version_info", (3, 51, 3))
    assert wal_warnings(lambda: SQLiteStore(tmp_path / "a.db")) == []


def test_the_library_warns_once_per_new_store_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ContextEngine(store=path), as the README shows it: the first engine on a path creates
    the file and warns, every later one opens it silently."""
    monkeypatch.setattr(sqlite_module.sqlite3, "sqlite_version_info", BUGGY_SQLITE)
    path = tmp_path / "sessions.db"

    def engine() -> ContextEngine:
        return ContextEngine(ModelInfo("test/model", 8_000), store=path)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        engine().close()
    (first,) = [w for w in caught if issubclass(w.category, SQLiteVersionWarning)]
    assert first.filename == __file__  # the user's line, not the store's
    assert wal_warnings(engine) == []
    assert wal_warnings(engine) == []


def test_a_file_that_is_not_sqlite_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 200)

    with pytest.raises(StoreCorruptError, match=r"notes\.db") as caught:
        SQLiteStore(path)
    assert caught.value.location == str(path)
    assert path.read_bytes().startswith(b"these are my notes")  # left as it was


def test_a_damaged_database_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with SQLiteStore(path) as store:
        store.append_messages(store.create_session().id, tool_turn(1))
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the schema page, after the file header
    path.write_bytes(bytes(data))

    with pytest.raises(StoreCorruptError, match=r"sessions\.db"):
        SQLiteStore(path)


def test_another_applications_database_is_not_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER)")
    conn.commit()
    conn.close()

    with pytest.raises(StoreCorruptError, match="not a contextfold store"):
        SQLiteStore(path)
    conn = sqlite3.connect(path)
    tables = conn.execute("SELECT name FROM sqlite_master").fetchall()
    conn.close()
    assert tables == [("invoices",)]


def test_a_folder_at_the_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=str(tmp_path)):
        SQLiteStore(tmp_path)


def test_a_writer_waits_for_another_process_lock_instead_of_failing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    sid = store.create_session().id
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    done: list[int] = []
    writer = threading.Thread(target=lambda: done.append(store.append_messages(sid, tool_turn(1))))
    writer.start()
    writer.join(0.3)
    still_waiting = writer.is_alive()
    blocker.execute("COMMIT")
    writer.join()
    blocker.close()

    assert still_waiting
    assert done == [3]
    store.close()


def test_a_lock_held_past_the_busy_timeout_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteStore(path, busy_timeout=0.05)
    sid = store.create_session().id
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreError, match=r"s\.db: database is locked.*busy_timeout"):
            store.append_messages(sid, tool_turn(1))
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert store.last_seq(sid) == 0
    store.close()


def test_one_store_serves_many_threads(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    shared = store.create_session().id
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            own = store.create_session().id
            for i in range(25):
                store.append_messages(own, [Message.user(f"{worker}-{i}")])
                store.append_messages(shared, [Message.user(f"shared {worker}-{i}")])
                store.load_view(own)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert [seq for seq, _ in store.iter_messages(shared)] == list(range(1, 201))
    assert store.check_integrity() == []
    store.close()


def test_backup_copies_a_live_database(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        sid = store.create_session(title="keep me").id
        store.append_messages(sid, tool_turn(1))
        copy = store.backup(tmp_path / "backup" / "copy.db")

    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    with open_store(copy) as restored:
        assert restored.get_session(sid).title == "keep me"
        assert [m for _, m in restored.iter_messages(sid)] == tool_turn(1)


def test_a_closed_store_says_so(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    store.close()
    store.close()  # closing twice is harmless
    with pytest.raises(StoreError, match="closed"):
        store.list_sessions()


def test_an_in_memory_store_works_for_quick_experiments() -> None:
    with open_store(":memory:") as store:
        sid = store.create_session().id
        assert store.append_messages(sid, tool_turn(1)) == 3
