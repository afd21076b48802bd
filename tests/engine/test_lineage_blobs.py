"""The engine's blob store (``LineageBlobs``): what it remembers so that a compaction's stashes
and read-backs do not go to the store again, and that what it answers stays what the store holds
(redacted, and each session's own); and the writer's blocks of writes that commit together."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from contextfold.engine._writer import LineageBlobs, SessionWriter
from contextfold.events import Event
from contextfold.store import SessionStore, open_store

SECRET_OUTPUT = "deploy log\nexport OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123456789AB\n"


class CountingStore:
    """A real store that counts the blob calls reaching it."""

    def __init__(self, inner: SessionStore) -> None:
        self.inner = inner
        self.puts = 0
        self.gets = 0

    def put_blob(self, *args: Any, **kwargs: Any) -> Any:
        self.puts += 1
        return self.inner.put_blob(*args, **kwargs)

    def get_blob(self, *args: Any, **kwargs: Any) -> Any:
        self.gets += 1
        return self.inner.get_blob(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _blobs(tmp_path: Path) -> tuple[LineageBlobs, CountingStore, SessionWriter, str]:
    store = CountingStore(open_store(tmp_path / "s.db", warn_wal_reset=False))
    session = store.create_session(title="t").id
    events: list[Event] = []
    writer = SessionWriter(store, session, last_seq=0, last_edit=0, emit=events.append)  # type: ignore[arg-type]
    return LineageBlobs(writer), store, writer, session


def test_an_output_is_written_once_and_the_same_info_comes_back(tmp_path: Path) -> None:
    blobs, store, _, session = _blobs(tmp_path)
    first = blobs.put_blob(session, "line\n" * 50, tool_name="bash")
    again = blobs.put_blob(session, "line\n" * 50, tool_name="bash")
    assert again == first
    assert store.puts == 1
    other = blobs.put_blob(session, "other output", tool_name="bash")
    assert other.ref != first.ref and store.puts == 2


def test_another_session_gets_its_own_row(tmp_path: Path) -> None:
    blobs, store, _, session = _blobs(tmp_path)
    child = store.create_session(title="child", parent_id=session).id
    info = blobs.put_blob(session, "output", tool_name="bash")
    blobs.put_blob(child, "output", tool_name="bash")
    assert store.puts == 2
    assert store.inner.get_blob(child, info.ref) == "output"


def test_a_read_is_served_again_without_the_store_and_stays_redacted(tmp_path: Path) -> None:
    blobs, store, _, session = _blobs(tmp_path)
    ref = blobs.put_blob(session, SECRET_OUTPUT, tool_name="bash").ref
    stored = store.inner.get_blob(session, ref)
    assert "sk-proj-" not in stored  # the store redacts what it keeps
    assert blobs.get_blob(session, ref) == stored
    assert blobs.get_blob(session, ref) == stored
    assert store.gets == 1


def test_a_parent_ref_is_read_through_the_lineage_and_remembered(tmp_path: Path) -> None:
    blobs, store, writer, session = _blobs(tmp_path)
    ref = blobs.put_blob(session, "parent output", tool_name="bash").ref
    child = store.create_session(title="child", parent_id=session).id
    writer.switch(child, last_seq=0)
    assert blobs.get_blob(child, ref) == "parent output"
    gets = store.gets
    assert blobs.get_blob(child, ref) == "parent output"
    assert store.gets == gets


def test_after_the_store_failed_outputs_go_to_memory(tmp_path: Path) -> None:
    blobs, store, writer, session = _blobs(tmp_path)
    writer.degrade("test", OSError("disk full"))
    info = blobs.put_blob(session, "kept in memory", tool_name="bash")
    assert store.puts == 0
    assert blobs.get_blob(session, info.ref) == "kept in memory"


# --------------------------------------------------------------------------------------------------
# Writes that commit together (a compaction's outputs, edits and snapshot)
# --------------------------------------------------------------------------------------------------


class FailingCommitStore(CountingStore):
    """A real store whose atomic blocks fail when they commit (a disk that fills up then)."""

    def __init__(self, inner: SessionStore) -> None:
        super().__init__(inner)
        self.blocks = 0

    @contextmanager
    def atomic(self) -> Iterator[None]:
        self.blocks += 1
        with self.inner.atomic():  # type: ignore[attr-defined]
            yield
            raise sqlite3.OperationalError("database or disk is full")


def test_writes_in_a_together_block_share_one_transaction(tmp_path: Path) -> None:
    blobs, _, writer, session = _blobs(tmp_path)
    with writer.together():
        ref = blobs.put_blob(session, "inside", tool_name="bash").ref
        # Another connection sees nothing before the block commits.
        other = open_store(tmp_path / "s.db", warn_wal_reset=False)
        with pytest.raises(LookupError):
            other.get_blob(session, ref)
    assert other.get_blob(session, ref) == "inside"


def test_a_failed_commit_degrades_the_session_and_keeps_nothing_of_the_block(
    tmp_path: Path,
) -> None:
    inner = open_store(tmp_path / "s.db", warn_wal_reset=False)
    store = FailingCommitStore(inner)
    session = store.create_session(title="t").id
    events: list[Event] = []
    writer = SessionWriter(store, session, last_seq=0, last_edit=0, emit=events.append)  # type: ignore[arg-type]
    blobs = LineageBlobs(writer)
    with writer.together():
        ref = blobs.put_blob(session, "lost with the commit", tool_name="bash").ref
    assert store.blocks == 1
    assert not writer.store_ok
    assert [type(e).__name__ for e in events] == ["ComponentDegraded"]
    with pytest.raises(LookupError):
        inner.get_blob(session, ref)


def test_an_error_of_the_block_itself_is_raised_not_taken_for_the_store(tmp_path: Path) -> None:
    _, _, writer, _ = _blobs(tmp_path)
    with pytest.raises(ZeroDivisionError), writer.together():
        raise ZeroDivisionError
    assert writer.store_ok
