"""The SQLite store on bad ground: paths that cannot hold it, read-only media, a foreign file.

Each bad path gets a ``StoreError`` that names the path and says what is wrong with it, never
an ``OSError`` or SQLite's "unable to open database file". Read-only media are a read-only bind
mount (these tests skip, with the reason, where mounting is impossible); an unwritable folder is
tried by a child process that dropped root, since permission bits do not stop root.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextfold import StoreCorruptError, StoreError
from contextfold.edits import ArchiveEdit
from contextfold.store import SQLiteStore, SQLiteVersionWarning
from contextfold.store import sqlite as sqlite_module

from .helpers import as_unprivileged, read_only_view, tool_turn

ADVICE = "Choose a writable location"


def open_error(path: Path) -> str:
    """The message of the ``StoreError`` that opening a store at ``path`` for writing raises."""
    with pytest.raises(StoreError) as caught:
        SQLiteStore(path)
    assert not isinstance(caught.value, StoreCorruptError)
    return str(caught.value)


def make_store(path: Path) -> str:
    """A closed store at ``path`` holding one session (two turns, an edit); its id."""
    with SQLiteStore(path) as store:
        sid = store.create_session(session_id="on-media").id
        store.append_messages(sid, tool_turn(1))
        store.append_edit(sid, ArchiveEdit(("u1",)))
        store.append_messages(sid, tool_turn(2))
    return sid


@pytest.fixture
def media(tmp_path: Path) -> Path:
    """A folder to fill and then see through a read-only mount."""
    folder = tmp_path / "media"
    folder.mkdir()
    return folder


# -- paths that cannot hold a store ----------------------------------------------------------------


def test_a_path_under_a_file_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("my notes", encoding="utf-8")

    for path in (blocker / "sessions.db", blocker / "deeper" / "sessions.db"):
        message = open_error(path)
        assert message.startswith(str(path))
        assert f"{blocker} is a file, not a folder" in message
        assert ADVICE in message
    assert blocker.read_text(encoding="utf-8") == "my notes"


@pytest.fixture
def locked_folder() -> Iterator[Path]:
    """A folder nobody but root may write in (under a parent anyone may enter)."""
    base = Path(tempfile.mkdtemp(prefix="contextfold-locked-"))
    base.chmod(0o755)
    locked = base / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    yield locked
    shutil.rmtree(base)


def test_an_unwritable_folder_is_a_clear_error(locked_folder: Path) -> None:
    def attempt() -> str:
        lines = []
        for path in (locked_folder / "sessions.db", locked_folder / "sub" / "sessions.db"):
            try:
                SQLiteStore(path).close()
            except StoreError as exc:
                lines.append(f"StoreError: {exc}")
            else:
                lines.append(f"opened {path}")
        return "\n".join(lines)

    outcomes = as_unprivileged(attempt).splitlines()

    assert len(outcomes) == 2
    for outcome in outcomes:
        assert outcome.startswith("StoreError: "), outcome
        assert f"no permission to write in the folder {locked_folder}" in outcome
        assert ADVICE in outcome
    assert list(locked_folder.iterdir()) == []


def test_a_read_only_file_system_is_a_clear_error(media: Path, tmp_path: Path) -> None:
    with read_only_view(media, tmp_path / "ro") as ro:
        for path in (ro / "sessions.db", ro / "sub" / "sessions.db"):
            message = open_error(path)
            assert f"{ro} is on a read-only file system" in message
            assert ADVICE in message


# -- an existing store on read-only media ----------------------------------------------------------


def test_a_store_on_read_only_media_opens_read_only(media: Path, tmp_path: Path) -> None:
    sid = make_store(media / "sessions.db")
    before = (media / "sessions.db").read_bytes()

    with read_only_view(media, tmp_path / "ro") as ro:
        path = ro / "sessions.db"
        assert f"{ro} is on a read-only file system" in open_error(path)
        with SQLiteStore(path, read_only=True) as store:
            assert [m.id for _, m in store.iter_messages(sid)] == [
                "u1", "a1", "t1", "u2", "a2", "t2",
            ]  # fmt: skip
            assert [m.id for m in store.load_view(sid).view] == ["a1", "t1", "u2", "a2", "t2"]
            assert store.check_integrity() == []
            with pytest.raises(StoreError, match=r"open read-only .*read-only file system"):
                store.append_messages(sid, tool_turn(3))
            with pytest.raises(StoreError, match="open read-only"):
                store.create_session()

    assert (media / "sessions.db").read_bytes() == before
    assert sorted(p.name for p in media.iterdir()) == ["sessions.db"]


def test_changes_still_in_the_write_ahead_log_are_read_on_read_only_media(
    media: Path, tmp_path: Path
) -> None:
    # A store copied while its writer was still open: the last turn lives in the -wal file.
    source = tmp_path / "live.db"
    sid = make_store(source)
    with SQLiteStore(source) as writer:
        writer.append_messages(sid, tool_turn(3))
        for suffix in ("", "-wal", "-shm"):
            shutil.copyfile(f"{source}{suffix}", media / f"sessions.db{suffix}")
    assert (media / "sessions.db-wal").stat().st_size > 0

    with (
        read_only_view(media, tmp_path / "ro") as ro,
        SQLiteStore(ro / "sessions.db", read_only=True) as store,
    ):
        assert store.last_seq(sid) == 9


def test_a_write_ahead_log_that_cannot_be_read_is_reported(media: Path, tmp_path: Path) -> None:
    source = tmp_path / "live.db"
    sid = make_store(source)
    with SQLiteStore(source) as writer:
        writer.append_messages(sid, tool_turn(3))
        for suffix in ("", "-wal"):  # no -shm: SQLite cannot read the WAL on read-only media
            shutil.copyfile(f"{source}{suffix}", media / f"sessions.db{suffix}")

    with (
        read_only_view(media, tmp_path / "ro") as ro,
        pytest.raises(StoreError, match=r"write-ahead log sessions\.db-wal holds changes"),
    ):
        SQLiteStore(ro / "sessions.db", read_only=True)


def test_a_read_only_store_sees_what_a_writer_adds(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    sid = make_store(path)
    with SQLiteStore(path) as writer, SQLiteStore(path, read_only=True) as reader:
        writer.append_messages(sid, tool_turn(3))
        assert reader.last_seq(sid) == 9
        with pytest.raises(StoreError, match="open read-only"):
            reader.delete_session(sid)
        assert writer.last_seq(sid) == 9


def test_read_only_never_creates_or_migrates(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(StoreError, match="no database file to open read-only"):
        SQLiteStore(missing, read_only=True)
    assert not missing.exists()

    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(StoreError, match=r"empty .* open read-only"):
        SQLiteStore(empty, read_only=True)
    assert empty.read_bytes() == b""


def test_a_reader_is_not_warned_about_the_writers_wal_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "sessions.db"
    make_store(path)
    monkeypatch.setattr(sqlite_module.sqlite3, "sqlite_version_info", (3, 45, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error", SQLiteVersionWarning)
        SQLiteStore(path, read_only=True).close()


# -- someone else's SQLite file --------------------------------------------------------------------


def test_a_foreign_sqlite_file_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    path = tmp_path / "invoices.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices (total) VALUES (12.5)")
    conn.commit()
    conn.close()
    before = path.read_bytes()

    with pytest.raises(StoreCorruptError, match="not a contextfold store"):
        SQLiteStore(path)

    assert path.read_bytes() == before  # its header still says rollback journal, not WAL
    assert sorted(p.name for p in tmp_path.iterdir()) == ["invoices.db"]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()
