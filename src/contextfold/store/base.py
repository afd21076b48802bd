"""The session-store protocol, and the async twins every built-in store shares.

:class:`SessionStore` is what the engine, the agent and the CLI need from a store; a third-party
store implements the sync methods and inherits :class:`AsyncStoreMixin` for the ``a``-prefixed
twins, which run the sync method in a worker thread so the event loop never waits on disk or
network I/O.

The writer guard: every write that changes what a resume sees (``append_messages``,
``append_edit``, ``save_snapshot``) takes keyword-only ``expected_seq`` and ``expected_edit``,
the session's last message seq and last edit number as the caller last saw them. When either
has moved, another writer got there first: the store raises ``ConcurrentWriteError`` and writes
nothing, in the same locked transaction as the write, so a writer that fell behind can never
fork the transcript or the view. Both default to None (no check), so existing callers keep
working; a store for the engine must honour them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any, Protocol, Self, TextIO, TypeVar, runtime_checkable

from contextfold._blobs import BlobInfo
from contextfold.edits import ContextEdit
from contextfold.messages import Message
from contextfold.store._records import EditRecord, EventRecord, LoadedView, SessionInfo, Snapshot

__all__ = ["AsyncStoreMixin", "SessionStore", "SyncSessionStore"]

_T = TypeVar("_T")

ASYNC_ITER_CHUNK = 256
"""Items an async iterator pulls per worker-thread hop (one hop per item would dominate)."""


class SyncSessionStore(Protocol):
    """The blocking half of :class:`SessionStore`; what a third-party store writes itself."""

    def create_session(
        self,
        *,
        model: str | None = None,
        title: str | None = None,
        parent_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> SessionInfo:
        """A new, empty session (a fresh id unless ``session_id`` is given)."""
        ...

    def get_session(self, session_id: str) -> SessionInfo:
        """The session; ``SessionNotFoundError`` naming the id when there is none."""
        ...

    def list_sessions(
        self, *, limit: int | None = None, parent_id: str | None = None
    ) -> list[SessionInfo]:
        """Sessions, most recently updated first (only children of ``parent_id`` if given)."""
        ...

    def delete_session(self, session_id: str) -> None:
        """Remove a session with its messages, edits, events, snapshot and blobs."""
        ...

    def update_session(
        self,
        session_id: str,
        *,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        """Change the title and/or replace the metadata (None leaves a field as it is)."""
        ...

    def save_engine_state(self, session_id: str, state: Mapping[str, Any]) -> None:
        """Keep the engine's per-session state (JSON values), replacing the previous one whole."""
        ...

    def load_engine_state(self, session_id: str) -> dict[str, Any] | None:
        """The state saved last by :meth:`save_engine_state`, or None when none was saved."""
        ...

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        expected_seq: int | None = None,
        expected_edit: int | None = None,
    ) -> int:
        """Append to the transcript and return the new last seq.

        With ``expected_seq`` / ``expected_edit``, raise ``ConcurrentWriteError`` (writing
        nothing) unless the session's last seq / last edit number are still those values
        (the writer guard; see the module docstring).
        """
        ...

    def last_seq(self, session_id: str) -> int:
        """The seq of the session's last message (0 when it has none)."""
        ...

    def iter_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> Iterator[tuple[int, Message]]:
        """``(seq, message)`` pairs in order, read lazily in batches."""
        ...

    def get_message(self, session_id: str, message_id: str) -> Message:
        """One message by id; ``MessageNotFoundError`` when the session has none with it."""
        ...

    def append_edit(
        self,
        session_id: str,
        edit: ContextEdit,
        *,
        expected_seq: int | None = None,
        expected_edit: int | None = None,
    ) -> int:
        """Record a context edit after the session's current last message; its number.

        ``expected_seq`` / ``expected_edit``: the writer guard, as in :meth:`append_messages`.
        """
        ...

    def iter_edits(self, session_id: str, *, after: int = 0) -> Iterator[EditRecord]:
        """The session's edits numbered above ``after``, in order."""
        ...

    def append_event(self, session_id: str, event_type: str, data: Mapping[str, Any]) -> None:
        """Store one engine event (see :class:`contextfold.events.StoreSink`)."""
        ...

    def iter_events(self, session_id: str) -> Iterator[EventRecord]:
        """The session's events in the order they were stored."""
        ...

    def save_snapshot(
        self,
        session_id: str,
        view: Sequence[Message],
        token_count: int,
        *,
        last_seq: int,
        last_edit: int,
        expected_seq: int | None = None,
        expected_edit: int | None = None,
    ) -> Snapshot:
        """Keep ``view`` as the session's latest snapshot (it replaces the previous one).

        ``expected_seq`` / ``expected_edit``: the writer guard, as in :meth:`append_messages`.
        """
        ...

    def load_snapshot(self, session_id: str) -> Snapshot | None:
        """The latest snapshot, or None when the session has never been compacted."""
        ...

    def load_view(self, session_id: str) -> LoadedView:
        """The current view: the snapshot plus what the transcript gained after it."""
        ...

    def put_blob(self, session_id: str, content: str, *, tool_name: str | None = None) -> BlobInfo:
        """Keep a full tool output; identical outputs in a session share one copy."""
        ...

    def get_blob(self, session_id: str, ref: str) -> str:
        """A stored output by ref; ``RefNotFoundError`` when this session holds none."""
        ...

    def export_jsonl(self, session_id: str, out: TextIO) -> int:
        """Write the session's full record as JSON lines to ``out``; the number of lines."""
        ...

    def close(self) -> None:
        """Release connections; the store is unusable afterwards."""
        ...

    def __enter__(self) -> Self:
        """The store itself; leaving the ``with`` block closes it."""
        ...

    def __exit__(self, *exc_info: object) -> None: ...


@runtime_checkable
class SessionStore(SyncSessionStore, Protocol):
    """A place where sessions persist: transcript, edits, events, snapshot and blobs.

    Every method has an ``a``-prefixed async twin with the same arguments and result.
    """

    async def acreate_session(
        self,
        *,
        model: str | None = None,
        title: str | None = None,
        parent_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> SessionInfo: ...
    async def aget_session(self, session_id: str) -> SessionInfo: ...
    async def alist_sessions(
        self, *, limit: int | None = None, parent_id: str | None = None
    ) -> list[SessionInfo]: ...
    async def adelete_session(self, session_id: str) -> None: ...
    async def aupdate_session(
        self,
        session_id: str,
        *,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo: ...
    async def aappend_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        expected_seq: int | None = None,
        expected_edit: int | None = None,
    ) -> int: ...
    async def alast_seq(self, session_id: str) -> int: ...
    def aiter_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> AsyncIterator[tuple[int, Message]]: ...
    async def aget_message(self, session_id: str, message_id: str) -> Message: ...
    async def aappend_edit(
        self,
        session_id: str,
        edit: ContextEdit,
        *,
        expected_seq: int | None = None,
        expected_edit: int | None = None,
    ) -> int: ...
    def aiter_edits(self, session_id: str, *, after: int = 0) -> AsyncIterator[EditRecord]: ...
    async def aappend_event(
        self, session_id: str, event_type: str, data: Mapping[str, Any]
    ) -> None: ...
    def aiter_events(self, session_id: str) -> AsyncIterator[EventRecord]: ...
    async def asave_snapshot(
        self,
        session_id: str,
        view: Sequence[Message],
        token_count: int,
        *,
        last_seq: int,
        last_edit: int,
        expected_seq: int | None = None,
        expected_edit: int | None = None,
    ) -> Snapshot: ...
    async def aload_snapshot(self, session_id: str) -> Snapshot | None: ...
    async def aload_view(self, session_id: str) -> LoadedView: ...
    async def aput_blob(
        self, session_id: str, content: str, *, tool_name: str | None = None
    ) -> BlobInfo: ...
    async def aget_blob(self, session_id: str, ref: str) -> str: ...
    async def aexport_jsonl(self, session_id: str, out: TextIO) -> int: ...
    async def aclose(self) -> None: ...


async def _aiterate(iterator: Iterator[_T]) -> AsyncIterator[_T]:
    """Drain a blocking iterator from worker threads, a chunk per hop."""
    while True:
        chunk = await asyncio.to_thread(lambda: list(islice(iterator, ASYNC_ITER_CHUNK)))
        for item in chunk:
            yield item
        if len(chunk) < ASYNC_ITER_CHUNK:
            return


class AsyncStoreMixin:
    """The ``a``-prefixed twins of :class:`SyncSessionStore`, each running in a worker thread.

    The sync method is the single implementation; the twin only moves the blocking call off the
    event loop (``asyncio.to_thread``), so both faces behave identically.
    """

    async def acreate_session(
        self: SyncSessionStore,
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

    async def aget_session(self: SyncSessionStore, session_id: str) -> SessionInfo:
        """Async twin of ``get_session``."""
        return await asyncio.to_thread(self.get_session, session_id)

    async def alist_sessions(
        self: SyncSessionStore, *, limit: int | None = None, parent_id: str | None = None
    ) -> list[SessionInfo]:
        """Async twin of ``list_sessions``."""
        return await asyncio.to_thread(lambda: self.list_sessions(limit=limit, parent_id=parent_id))

    async def adelete_session(self: SyncSessionStore, session_id: str) -> None:
        """Async twin of ``delete_session``."""
        await asyncio.to_thread(self.delete_session, session_id)

    async def aupdate_session(
        self: SyncSessionStore,
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
        self: SyncSessionStore,
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

    async def alast_seq(self: SyncSessionStore, session_id: str) -> int:
        """Async twin of ``last_seq``."""
        return await asyncio.to_thread(self.last_seq, session_id)

    async def aiter_messages(
        self: SyncSessionStore, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> AsyncIterator[tuple[int, Message]]:
        """Async twin of ``iter_messages`` (still lazy: batches are read in worker threads)."""
        iterator = await asyncio.to_thread(
            lambda: self.iter_messages(session_id, after_seq=after_seq, limit=limit)
        )
        async for item in _aiterate(iterator):
            yield item

    async def aget_message(self: SyncSessionStore, session_id: str, message_id: str) -> Message:
        """Async twin of ``get_message``."""
        return await asyncio.to_thread(self.get_message, session_id, message_id)

    async def aappend_edit(
        self: SyncSessionStore,
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
        self: SyncSessionStore, session_id: str, *, after: int = 0
    ) -> AsyncIterator[EditRecord]:
        """Async twin of ``iter_edits``."""
        iterator = await asyncio.to_thread(lambda: self.iter_edits(session_id, after=after))
        async for item in _aiterate(iterator):
            yield item

    async def aappend_event(
        self: SyncSessionStore, session_id: str, event_type: str, data: Mapping[str, Any]
    ) -> None:
        """Async twin of ``append_event``."""
        await asyncio.to_thread(self.append_event, session_id, event_type, data)

    async def aiter_events(self: SyncSessionStore, session_id: str) -> AsyncIterator[EventRecord]:
        """Async twin of ``iter_events``."""
        iterator = await asyncio.to_thread(self.iter_events, session_id)
        async for item in _aiterate(iterator):
            yield item

    async def asave_snapshot(
        self: SyncSessionStore,
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

    async def aload_snapshot(self: SyncSessionStore, session_id: str) -> Snapshot | None:
        """Async twin of ``load_snapshot``."""
        return await asyncio.to_thread(self.load_snapshot, session_id)

    async def aload_view(self: SyncSessionStore, session_id: str) -> LoadedView:
        """Async twin of ``load_view``."""
        return await asyncio.to_thread(self.load_view, session_id)

    async def aput_blob(
        self: SyncSessionStore, session_id: str, content: str, *, tool_name: str | None = None
    ) -> BlobInfo:
        """Async twin of ``put_blob``."""
        return await asyncio.to_thread(
            lambda: self.put_blob(session_id, content, tool_name=tool_name)
        )

    async def aget_blob(self: SyncSessionStore, session_id: str, ref: str) -> str:
        """Async twin of ``get_blob``."""
        return await asyncio.to_thread(self.get_blob, session_id, ref)

    async def aexport_jsonl(self: SyncSessionStore, session_id: str, out: TextIO) -> int:
        """Async twin of ``export_jsonl``."""
        return await asyncio.to_thread(self.export_jsonl, session_id, out)

    async def aclose(self: SyncSessionStore) -> None:
        """Async twin of ``close``."""
        await asyncio.to_thread(self.close)
