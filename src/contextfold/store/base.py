"""The session-store protocols: what the engine needs, and what the CLI reads besides.

- :class:`SessionStore` is what a third-party store implements: the synchronous methods the
  engine calls, and nothing more. :class:`~contextfold.ContextEngine` accepts any object that
  has them.
- :class:`BrowsableSessionStore` adds what the CLI and tools use to look around a store: list
  and delete sessions, read a transcript, its edits and events back, export and check it. Both
  built-in stores (:class:`~contextfold.store.SQLiteStore`,
  :class:`~contextfold.store.PostgresStore`) are browsable, and
  :func:`~contextfold.store.open_store` returns one of them.

The writer guard: every write that changes what a resume sees (``append_messages``,
``append_edit``, ``save_snapshot``) takes keyword-only ``expected_seq`` and ``expected_edit``,
the session's last message seq and last edit number as the caller last saw them. When either
has moved, another writer got there first: the store raises ``ConcurrentWriteError`` and writes
nothing, in the same locked transaction as the write, so a writer that fell behind can never
fork the transcript or the view. Both default to None (no check); a store for the engine must
honour them.

What a crash may leave: each write is all or nothing (a batch of messages, an edit, a snapshot,
an engine state, a blob), so a crash loses at most the writes that had not returned. Between
writes it may stop anywhere: messages appended whose edit, snapshot or engine state was never
saved. A resume copes with each: the view is replayed from the transcript and its edits (the
snapshot only shortens that), and an engine state a turn behind the transcript is a valid
state to go on from.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, Self, TextIO, runtime_checkable

from contextfold.edits import ContextEdit
from contextfold.messages import Message
from contextfold.outputs.blobs import BlobInfo
from contextfold.store._records import EditRecord, EventRecord, LoadedView, SessionInfo, Snapshot

__all__ = ["BrowsableSessionStore", "PrefixIndex", "SessionStore"]


@runtime_checkable
class SessionStore(Protocol):
    """Where the engine keeps sessions: transcript, edits, events, snapshot, blobs and its state.

    Every method is synchronous and may be called from more than one thread (the engine's
    background compaction), so a store serializes its own access. A missing session or ref is
    reported with the library's errors (``SessionNotFoundError``, ``RefNotFoundError``), a
    writer that fell behind with ``ConcurrentWriteError``, a misuse with ``UsageError``: those
    reach the engine's caller. Any other exception means the store failed: the engine reports
    it once and goes on in memory.
    """

    def create_session(
        self,
        *,
        model: str | None = None,
        title: str | None = None,
        parent_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> SessionInfo:
        """A new, empty session (a fresh id unless ``session_id`` is given; ``UsageError`` when
        that id is taken). ``parent_id`` names the session a restart continues."""
        ...

    def get_session(self, session_id: str) -> SessionInfo:
        """The session; ``SessionNotFoundError`` naming the id when there is none."""
        ...

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        expected_seq: int | None = None,
        expected_edit: int | None = None,
    ) -> int:
        """Append to the transcript, all or none, and return the new last seq (seqs run from
        1 without gaps; the transcript is append-only).

        With ``expected_seq`` / ``expected_edit``, raise ``ConcurrentWriteError`` (writing
        nothing) unless the session's last seq / last edit number are still those values
        (the writer guard; see the module docstring).
        """
        ...

    def append_edit(
        self,
        session_id: str,
        edit: ContextEdit,
        *,
        expected_seq: int | None = None,
        expected_edit: int | None = None,
    ) -> int:
        """Record a context edit after the session's current last message; its number (1, 2…).

        ``expected_seq`` / ``expected_edit``: the writer guard, as in :meth:`append_messages`.
        """
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
        """Keep ``view`` (the transcript's messages up to ``last_seq`` with edits up to
        ``last_edit`` applied) as the session's snapshot, replacing the previous one whole.

        ``expected_seq`` / ``expected_edit``: the writer guard, as in :meth:`append_messages`.
        """
        ...

    def load_view(self, session_id: str) -> LoadedView:
        """The view to resume with: the snapshot plus what the transcript gained after it,
        its edits applied in transcript order (the whole transcript replayed without one)."""
        ...

    def append_event(self, session_id: str, event_type: str, data: Mapping[str, Any]) -> None:
        """Store one engine event (see :class:`contextfold.events.StoreSink`)."""
        ...

    def put_blob(self, session_id: str, content: str, *, tool_name: str | None = None) -> BlobInfo:
        """Keep a full tool output; its ref is its content's address, so identical outputs in
        a session share one copy."""
        ...

    def get_blob(self, session_id: str, ref: str) -> str:
        """A stored output by ref; ``RefNotFoundError`` when this session holds none."""
        ...

    def save_engine_state(self, session_id: str, state: Mapping[str, Any]) -> None:
        """Keep the engine's per-session state (JSON values), replacing the previous one whole."""
        ...

    def load_engine_state(self, session_id: str) -> dict[str, Any] | None:
        """The state saved last by :meth:`save_engine_state`, or None when none was saved."""
        ...

    def close(self) -> None:
        """Release connections; the store is unusable afterwards."""
        ...


@runtime_checkable
class BrowsableSessionStore(SessionStore, Protocol):
    """A :class:`SessionStore` that can also be looked around: what the CLI uses."""

    def list_sessions(
        self, *, limit: int | None = None, parent_id: str | None = None
    ) -> list[SessionInfo]:
        """Sessions, most recently updated first (only children of ``parent_id`` if given)."""
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

    def delete_session(self, session_id: str) -> None:
        """Remove a session with everything it holds; its children lose their parent link."""
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

    def iter_edits(self, session_id: str, *, after: int = 0) -> Iterator[EditRecord]:
        """The session's edits numbered above ``after``, in order."""
        ...

    def iter_events(self, session_id: str) -> Iterator[EventRecord]:
        """The session's events in the order they were stored."""
        ...

    def load_snapshot(self, session_id: str) -> Snapshot | None:
        """The latest snapshot, or None when the session has never been compacted."""
        ...

    def export_jsonl(self, session_id: str, out: TextIO) -> int:
        """Write the session's full record as JSON lines to ``out``; the number of lines."""
        ...

    def check_integrity(self) -> list[str]:
        """Problems found in the whole store; an empty list when it is sound."""
        ...

    def repair(self) -> list[str]:
        """Remove what a crash left half-made (partial sessions, proxy heads that point
        nowhere), never a complete session; what was removed, in words."""
        ...

    def __enter__(self) -> Self:
        """The store itself; leaving the ``with`` block closes it."""
        ...

    def __exit__(self, *exc_info: object) -> None: ...


@runtime_checkable
class PrefixIndex(Protocol):
    """What a store offers, optionally, to recognise histories that hosts resend whole (the
    proxy's clients): which session holds which prefix of a conversation, per tenant.

    A prefix is named by a head (:func:`contextfold.hosts.prefixes.chain_heads`); a session
    holding it is continued while its transcript still ends where it did when the prefix was
    recorded (:meth:`session_head`). Both built-in stores offer it; any
    :class:`SessionStore` can, and ``contextfold proxy`` needs one that does.
    """

    def record_proxy_head(
        self, tenant: str, head: str, session_id: str, messages: int, seq: int
    ) -> None:
        """Note that ``session_id`` holds the prefix ``head`` (the first ``messages``
        messages) for ``tenant``, its transcript then ending at ``seq``; a newer record of the
        same head takes it over."""
        ...

    def find_proxy_heads(self, tenant: str, heads: Sequence[str]) -> dict[str, tuple[str, int]]:
        """Of ``heads``, those ``tenant`` recorded: each with its session and seq."""
        ...

    def session_head(self, session_id: str) -> tuple[int, int]:
        """Where the session's transcript stands: its last message seq and last edit id."""
        ...
