"""How a session's engine writes to its store, and keeps working when the store fails.

:class:`SessionWriter` appends messages and edits, saves snapshots and keeps the engine's state.
The first three carry the store's writer guard (the last seq and last edit number this writer
saw): once another writer has written to the session, each is refused with
``ConcurrentWriteError`` and nothing is written, so a writer that fell behind never forks the
transcript or the view; the error reaches the caller. When the store fails for any other
reason, the engine goes on in memory: the failure is reported once as a ``ComponentDegraded``
event and later writes are skipped. An agent in the middle of a task is worth more than the
record of it: a full disk or a dropped database connection must not end the run.

:class:`LineageBlobs` is the blob store the engine hands to outputs, compaction and
``read_result``: it writes to the session's store (or memory after a failure) and reads a ref
from the session or, failing that, from its ancestors, because a restarted session carries turns
whose refs point into its parent. It remembers which outputs it has written, and keeps the
outputs it read last, because every compaction stashes and reads back the same old outputs again
(a summary reads every output of its range; each mask batch stashes what it plans, again when
hygiene rides on it): a second write of one output, redacted and sent to the store again, cost a
third of a compaction's own time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import Any, TypeVar

from contextfold.edits import ContextEdit
from contextfold.errors import ConcurrentWriteError, RefNotFoundError, UsageError
from contextfold.events import ComponentDegraded, Event
from contextfold.lru import LRU
from contextfold.messages import Message
from contextfold.outputs.blob_store import InMemoryBlobStore
from contextfold.outputs.blobs import BlobInfo, blob_info
from contextfold.store import SessionStore

__all__ = ["LineageBlobs", "PendingBlobs", "SessionWriter"]

logger = logging.getLogger("contextfold.engine")

T = TypeVar("T")

_MAX_ANCESTORS = 32
"""How far up a restart chain ``read_result`` looks for a ref (a guard against cycles)."""
READ_CACHE_CHARS = 1_000_000
"""Most characters of stored outputs :class:`LineageBlobs` keeps after reading them (a
compaction reads an output to check that its ref is stored, then again to summarize it; a few
hundred outputs at most, far under this)."""


def _is_programming_error(exc: BaseException) -> bool:
    # A concurrent writer must surface (never a silent fork); misuse must surface too.
    return isinstance(exc, ConcurrentWriteError | UsageError)


class SessionWriter:
    """Persists one session; degrades to memory once the store fails."""

    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        *,
        last_seq: int,
        last_edit: int,
        emit: Callable[[Event], None],
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.last_seq = last_seq
        self.last_edit = last_edit
        self.store_ok = True
        self._emit = emit
        self.memory_blobs = InMemoryBlobStore()

    # -- failure handling ----------------------------------------------------------------------

    def degrade(self, action: str, exc: BaseException) -> None:
        """Go on in memory after the store failed at ``action`` (reported once); a concurrent
        writer or a misuse is raised instead."""
        if _is_programming_error(exc):
            raise exc
        if self.store_ok:
            self.store_ok = False
            logger.warning("session store failed (%s): %s; continuing in memory", action, exc)
            self._emit(
                ComponentDegraded(
                    session_id=self.session_id,
                    component="store",
                    fallback="in-memory session (nothing more is persisted)",
                    error=f"{action}: {type(exc).__name__}: {exc}",
                )
            )

    def attempt(self, action: str, write: Callable[[], T]) -> T | None:
        """What ``write()`` returns; ``None`` once the store has failed, at this ``action`` or
        before (the failure is reported once, and the session goes on in memory)."""
        if not self.store_ok:
            return None
        try:
            return write()
        except Exception as exc:  # the store's one degradation: to memory, reported once
            self.degrade(action, exc)
            return None

    @contextmanager
    def together(self) -> Iterator[None]:
        """The writes made in the block commit as one transaction, when the store offers one
        (the SQL stores' ``atomic()``): a compaction's outputs, edits and snapshot are one fact,
        and one commit costs far less than twenty. A write that fails inside it is undone alone
        and degrades the session as it would outside; a commit that fails at the end degrades
        it too (nothing of the block was kept, which leaves the store as consistent as a
        failure before the first write would)."""
        atomic: Callable[[], AbstractContextManager[None]] | None = getattr(
            self.store, "atomic", None
        )
        if atomic is None or not self.store_ok:
            yield
            return
        finished = False
        try:
            with atomic():
                yield
                finished = True
        except Exception as exc:
            if not finished:
                raise  # the block's own error, not the store's commit
            self.degrade("commit writes", exc)

    # -- writes --------------------------------------------------------------------------------

    def append(self, messages: Sequence[Message]) -> None:
        """Append ``messages`` to the transcript (or only count them once degraded)."""
        seq = self.attempt(
            "append messages",
            lambda: self.store.append_messages(
                self.session_id,
                messages,
                expected_seq=self.last_seq,
                expected_edit=self.last_edit,
            ),
        )
        self.last_seq = seq if seq is not None else self.last_seq + len(messages)

    def append_edits(self, edits: Sequence[ContextEdit]) -> None:
        """Record compaction edits in transcript order (in one write when the store takes
        several at once, as the SQL stores' ``append_edits`` does; one by one otherwise)."""
        if not edits:
            return
        many: Callable[..., int] | None = getattr(self.store, "append_edits", None)
        if many is None:
            for edit in edits:
                number = self.attempt("append edit", partial(self._append_edit, edit))
                self.last_edit = number if number is not None else self.last_edit + 1
            return
        last = self.attempt(
            "append edit",
            lambda: many(
                self.session_id, edits, expected_seq=self.last_seq, expected_edit=self.last_edit
            ),
        )
        self.last_edit = last if last is not None else self.last_edit + len(edits)

    def _append_edit(self, edit: ContextEdit) -> int:
        return self.store.append_edit(
            self.session_id, edit, expected_seq=self.last_seq, expected_edit=self.last_edit
        )

    def snapshot(self, view: Sequence[Message], token_count: int) -> None:
        """Save the view as the latest snapshot (fast resume)."""
        self.attempt(
            "save snapshot",
            lambda: self.store.save_snapshot(
                self.session_id,
                view,
                token_count,
                last_seq=self.last_seq,
                last_edit=self.last_edit,
                expected_seq=self.last_seq,
                expected_edit=self.last_edit,
            ),
        )

    def save_state(self, state: Mapping[str, Any]) -> None:
        """Keep the engine's per-session state (estimator, usage, cache tail) in the store."""
        self.attempt(
            "save engine state", lambda: self.store.save_engine_state(self.session_id, state)
        )

    def switch(self, session_id: str, *, last_seq: int, last_edit: int = 0) -> None:
        """Write to another session from now on (after a restart)."""
        self.session_id = session_id
        self.last_seq = last_seq
        self.last_edit = last_edit


class LineageBlobs:
    """The blob store of a session and its ancestors (see the module docstring)."""

    def __init__(self, writer: SessionWriter) -> None:
        self._writer = writer
        # (session id, sha256) of every output this writer stored: the store keeps one row per
        # digest and never deletes one, so writing it again would only redact it again.
        self._stored: set[tuple[str, str]] = set()
        # (session id, ref) -> content of the outputs read last, up to READ_CACHE_CHARS.
        self._read: LRU[tuple[str, str], str] = LRU(
            max_weight=READ_CACHE_CHARS, weigh=lambda _key, content: len(content)
        )

    def put_blob(self, session_id: str, content: str, *, tool_name: str | None = None) -> BlobInfo:
        """Store ``content`` for ``session_id`` (in memory once the store has failed)."""
        writer = self._writer
        if writer.store_ok:
            info = blob_info(content, tool_name)
            if (session_id, info.sha256) in self._stored:
                return info  # what the store returns for a second write of the same output
        stored = writer.attempt(
            "store output", lambda: writer.store.put_blob(session_id, content, tool_name=tool_name)
        )
        if stored is not None:
            self._stored.add((session_id, stored.sha256))
            return stored
        return writer.memory_blobs.put_blob(session_id, content, tool_name=tool_name)

    def get_blob(self, session_id: str, ref: str) -> str:
        """The content behind ``ref``: this session first, then memory, then the ancestors."""
        writer = self._writer
        # Outputs live in memory only after the store failed, and a session never restarts once
        # it has (the restart would need a new stored session): they are all this session's.
        try:
            return writer.memory_blobs.get_blob(session_id, ref)
        except LookupError:
            pass
        key = (session_id, ref)
        cached = self._read.get(key)
        if cached is not None:
            return cached
        if writer.store_ok:
            content = self._from_store(session_id, ref)
        else:
            # A store that failed to write may still read what it holds from before the
            # failure; its failure was reported once already, so a read it cannot serve is a
            # missing ref.
            try:
                content = self._from_store(session_id, ref)
            except Exception:
                raise RefNotFoundError(ref, session_id) from None
        self._read.put(key, content)  # stored rows never change: it stays true
        return content

    def _from_store(self, session_id: str, ref: str) -> str:
        writer = self._writer
        current: str | None = session_id
        for _ in range(_MAX_ANCESTORS):
            if current is None:
                break
            try:
                return writer.store.get_blob(current, ref)
            except LookupError:
                pass
            try:
                current = writer.store.get_session(current).parent_id
            except LookupError:
                break
        raise RefNotFoundError(ref, session_id)


class PendingBlobs:
    """Blob writes held back until the engine keeps the compaction that made them.

    A MASK-zone batch is planned, then dropped when it would free too little to be worth a
    cache break; the outputs it stashed would be written (and redacted) for nothing. Refs are
    content addresses, so they are known before the write: the plan sees them at once, and
    :meth:`flush` writes them when the batch is applied.
    """

    def __init__(self, blobs: LineageBlobs) -> None:
        self._blobs = blobs
        self._pending: dict[str, tuple[str, str, str | None]] = {}

    def put_blob(self, session_id: str, content: str, *, tool_name: str | None = None) -> BlobInfo:
        """The ref ``content`` will have; written by :meth:`flush`."""
        info = blob_info(content, tool_name)
        self._pending.setdefault(info.ref, (session_id, content, tool_name))
        return info

    def get_blob(self, session_id: str, ref: str) -> str:
        """A pending output, or one already stored."""
        pending = self._pending.get(ref)
        if pending is not None:
            return pending[1]
        return self._blobs.get_blob(session_id, ref)

    def flush(self) -> None:
        """Write the held-back outputs."""
        for session_id, content, tool_name in self._pending.values():
            self._blobs.put_blob(session_id, content, tool_name=tool_name)
        self._pending.clear()
