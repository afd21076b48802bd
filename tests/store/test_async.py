"""Conformance: the async twins give what the sync methods give (both backends)."""

from __future__ import annotations

import asyncio
import io

import pytest

from contextfold import ConcurrentWriteError, SessionNotFoundError
from contextfold.edits import ArchiveEdit
from contextfold.messages import Message
from contextfold.store import SessionStore

from .helpers import tool_turn


def test_the_async_twins_cover_a_whole_session(store: SessionStore) -> None:
    async def scenario() -> None:
        info = await store.acreate_session(title="async")
        sid = info.id
        assert (await store.aget_session(sid)).title == "async"
        assert await store.aappend_messages(sid, tool_turn(1), expected_seq=0) == 3
        assert await store.alast_seq(sid) == 3
        assert await store.aget_message(sid, "a1") == tool_turn(1)[1]
        assert [m async for _, m in store.aiter_messages(sid, after_seq=1)] == tool_turn(1)[1:]
        assert await store.aappend_edit(sid, ArchiveEdit(("u1",))) == 1
        assert [r.number async for r in store.aiter_edits(sid)] == [1]
        await store.aappend_event(sid, "note", {"n": 1})
        assert [e.data async for e in store.aiter_events(sid)] == [{"n": 1}]
        loaded = await store.aload_view(sid)
        assert [m.id for m in loaded.view] == ["a1", "t1"]
        await store.asave_snapshot(sid, loaded.view, 5, last_seq=3, last_edit=1)
        assert (await store.aload_snapshot(sid)) is not None
        ref = (await store.aput_blob(sid, "output", tool_name="sh")).ref
        assert await store.aget_blob(sid, ref) == "output"
        assert await store.aexport_jsonl(sid, io.StringIO()) > 0
        assert (await store.aupdate_session(sid, title="renamed")).title == "renamed"
        assert [s.id for s in await store.alist_sessions()] == [sid]
        await store.adelete_session(sid)
        with pytest.raises(SessionNotFoundError):
            await store.aget_session(sid)

    asyncio.run(scenario())


def test_concurrent_async_writers_get_the_same_guarantees(store: SessionStore) -> None:
    sid = store.create_session().id

    async def scenario() -> list[object]:
        return await asyncio.gather(
            *(
                store.aappend_messages(sid, [Message.user(f"w{n}")], expected_seq=0)
                for n in range(4)
            ),
            return_exceptions=True,
        )

    results = asyncio.run(scenario())

    assert results.count(1) == 1
    assert sum(isinstance(r, ConcurrentWriteError) for r in results) == 3
    assert store.last_seq(sid) == 1


def test_the_async_twins_carry_the_writer_guard(store: SessionStore) -> None:
    sid = store.create_session().id
    store.append_messages(sid, tool_turn(1))
    archive = ArchiveEdit(("u1",))

    async def scenario() -> None:
        with pytest.raises(ConcurrentWriteError):
            await store.aappend_edit(sid, archive, expected_seq=0, expected_edit=0)
        with pytest.raises(ConcurrentWriteError):
            await store.asave_snapshot(
                sid, [], 0, last_seq=0, last_edit=0, expected_seq=0, expected_edit=0
            )
        with pytest.raises(ConcurrentWriteError):
            await store.aappend_messages(sid, tool_turn(2), expected_seq=3, expected_edit=1)
        assert await store.aappend_edit(sid, archive, expected_seq=3, expected_edit=0) == 1

    asyncio.run(scenario())

    assert (store.last_seq(sid), store.load_snapshot(sid)) == (3, None)


def test_an_async_iterator_reads_a_long_session_in_order(store: SessionStore) -> None:
    sid = store.create_session().id
    store.append_messages(sid, [Message.user(str(n), id=f"m{n}") for n in range(1200)])

    async def collect() -> list[int]:
        return [seq async for seq, _ in store.aiter_messages(sid)]

    assert asyncio.run(collect()) == list(range(1, 1201))
