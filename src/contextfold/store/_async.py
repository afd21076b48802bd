"""The ``a``-prefixed async twins of the built-in stores' methods, each in a worker thread.

Nothing in the library calls them: the engine is synchronous. They serve an application that
drives a built-in store from an event loop; an ``AsyncSessionStore`` protocol for third-party
stores waits for an async caller in the library (the proxy) to need one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any, TextIO, TypeVar

from contextfold.edits import ContextEdit
from contextfold.messages import Message
from contextfold.outputs.blobs import BlobInfo
from contextfold.store._records import EditRecord, EventRecord, LoadedView, SessionInfo, Snapshot
from contextfold.store.base import BrowsableSessionStore

__all__ = ["ASYNC_ITER_CHUNK", "AsyncStoreMixin"]

_T = TypeVar("_T")

ASYNC_ITER_CHUNK = 256
"""Items an async iterator pulls per worker-thread hop (one hop per item would dominate)."""


async def _aiterate(iterator: Iterator[_T]) -> AsyncIterator[_T]:
    """Drain a blocking iterator from worker threads, a chunk per hop."""
    while True:
        chunk = await asyncio.to_thread(lambda: list(islice(iterator, ASYNC_ITER_CHUNK)))
        for item in chunk:
            yield item
        if len(chunk) < ASYNC_ITER_CHUNK:
            return


class AsyncStoreMixin:
    """The ``a``-prefixed twins of :class:`BrowsableSessionStore`'s methods, each running in a
    worker thread.

    The sync method is the single implementation; the twin only moves the blocking call off the
    event loop (``asyncio.to_thread``), so both faces behave identically.
    """

    async def acreate_session(
        self: BrowsableSessionStore,
        *,
        model: str | None = None,
        title: str | None = None,
        parent_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> SessionInfo:
        """Async twin of ``create_session``."""
        return await asyncio.to_thread(
            lambda: self.create_session(
                model=model,
                title=title,
                parent_id=parent_id,
                metadata=metadata,
                session_id=session_id,
            )
        )

    async def aget_session(self: BrowsableSessionStore, session_id: str) -> SessionInfo:
        """Async twin of ``get_session``."""
        return await asyncio.to_thread(self.get_session, session_id)

    async def alist_sessions(
        self: BrowsableSessionStore, *, limit: int | None = None, parent_id: str | None = None
    ) -> list[SessionInfo]:
        """Async twin of ``list_sessions``."""
        return await asyncio.to_thread(lambda: self.list_sessions(limit=limit, parent_id=parent_id))

    async def adelete_session(self: BrowsableSessionStore, session_id: str) -> None:
        """Async twin of ``delete_session``."""
        await asyncio.to_thread(self.delete_session, session_id)

    async def aupdate_session(
        self: BrowsableSessionStore,
        session_id: str,
        *,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        """Async twin of ``update_session``."""
        return await asyncio.to_thread(
            lambda: self.update_session(session_id, title=title, metadata=metadata)
        )

    async def aappend_messages(
        self: BrowsableSessionStore,
        session_id: str,
        messages: Sequence[Message],
        *,
        expected_seq: int | None = None,
        expected_edit: int | None = None,
    ) -> int:
        """Async twin of ``append_messages``."""
        return await asyncio.to_thread(
            lambda: self.append_messages(
                session_id, messages, expected_seq=expected_seq, expected_edit=expected_edit
            )
        )

    async def alast_seq(self: BrowsableSessionStore, session_id: str) -> int:
        """Async twin of ``last_seq``."""
        return await asyncio.to_thread(self.last_seq, session_id)

    async def aiter_messages(
        self: BrowsableSessionStore,
        session_id: str,
        *,
        after_seq: int = 0,
        limit: int | None = None,
    ) -> AsyncIterator[tuple[int, Message]]:
        """Async twin of ``iter_messages`` (still lazy: batches are read in worker threads)."""
        iterator = await asyncio.to_thread(
            lambda: self.iter_messages(session_id, after_seq=after_seq, limit=limit)
        )
        async for item in _aiterate(iterator):
            yield item

    async def aget_message(
        self: BrowsableSessionStore, session_id: str, message_id: str
    ) -> Message:
        """Async twin of ``get_message``."""
        return await asyncio.to_thread(self.get_message, session_id, message_id)

    async def aappend_edit(
        self: BrowsableSessionStore,
        session_id: str,
        edit: ContextEdit,
        *,
        expected_seq: int | None = None,
        expected_edit: int | None = None,
    ) -> int:
        """Async twin of ``append_edit``."""
        return await asyncio.to_thread(
            lambda: self.append_edit(
                session_id, edit, expected_seq=expected_seq, expected_edit=expected_edit
            )
        )

    async def aiter_edits(
        self: BrowsableSessionStore, session_id: str, *, after: int = 0
    ) -> AsyncIterator[EditRecord]:
        """Async twin of ``iter_edits``."""
        iterator = await asyncio.to_thread(lambda: self.iter_edits(session_id, after=after))
        async for item in _aiterate(iterator):
            yield item

    async def aappend_event(
        self: BrowsableSessionStore, session_id: str, event_type: str, data: Mapping[str, Any]
    ) -> None:
        """Async twin of ``append_event``."""
        await asyncio.to_thread(self.append_event, session_id, event_type, data)

    async def aiter_events(
        self: BrowsableSessionStore, session_id: str
    ) -> AsyncIterator[EventRecord]:
        """Async twin of ``iter_events``."""
        iterator = await asyncio.to_thread(self.iter_events, session_id)
        async for item in _aiterate(iterator):
            yield item

    async def asave_snapshot(
        self: BrowsableSessionStore,
        session_id: str,
        view: Sequence[Message],
        token_count: int,
        *,
        last_seq: int,
        last_edit: int,
        expected_seq: int | None = None,
        expected_edit: int | None = None,
    ) -> Snapshot:
        """Async twin of ``save_snapshot``."""
        return await asyncio.to_thread(
            lambda: self.save_snapshot(
                session_id,
                view,
                token_count,
                last_seq=last_seq,
                last_edit=last_edit,
                expected_seq=expected_seq,
                expected_edit=expected_edit,
            )
        )

    async def aload_snapshot(self: BrowsableSessionStore, session_id: str) -> Snapshot | None:
        """Async twin of ``load_snapshot``."""
        return await asyncio.to_thread(self.load_snapshot, session_id)

    async def aload_view(self: BrowsableSessionStore, session_id: str) -> LoadedView:
        """Async twin of ``load_view``."""
        return await asyncio.to_thread(self.load_view, session_id)

    async def aput_blob(
        self: BrowsableSessionStore, session_id: str, content: str, *, tool_name: str | None = None
    ) -> BlobInfo:
        """Async twin of ``put_blob``."""
        return await asyncio.to_thread(
            lambda: self.put_blob(session_id, content, tool_name=tool_name)
        )

    async def aget_blob(self: BrowsableSessionStore, session_id: str, ref: str) -> str:
        """Async twin of ``get_blob``."""
        return await asyncio.to_thread(self.get_blob, session_id, ref)

    async def aexport_jsonl(self: BrowsableSessionStore, session_id: str, out: TextIO) -> int:
        """Async twin of ``export_jsonl``."""
        return await asyncio.to_thread(self.export_jsonl, session_id, out)

    async def aclose(self: BrowsableSessionStore) -> None:
        """Async twin of ``close``."""
        await asyncio.to_thread(self.close)
