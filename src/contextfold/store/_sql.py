"""Everything both built-in stores do, written once: the SQL of every write, and the store's API.

A backend supplies only I/O: a transaction context that yields a :class:`Cursor`, the
statement that locks one session for writing, the names of its tables, the lock that serializes
migrations, and its engine's own integrity check. The SQL here uses ``?`` placeholders; the
PostgreSQL backend translates them.

Reading a session back (:mod:`~contextfold.store._reads`), the export and the integrity check
are handed a :class:`~contextfold.store._rows.Rows` (and migrations a
:class:`~contextfold.store._schema.Database`), never the store itself.
"""

from __future__ import annotations

import secrets
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, ClassVar, Self, TextIO

from contextfold.edits import ContextEdit
from contextfold.errors import (
    ConcurrentWriteError,
    MessageNotFoundError,
    RefNotFoundError,
    SessionNotFoundError,
    UsageError,
)
from contextfold.messages import Message, new_message_id
from contextfold.outputs.blobs import BlobInfo, blob_info
from contextfold.redaction.redactor import redact_text
from contextfold.store import _codec, _reads
from contextfold.store._async import AsyncStoreMixin
from contextfold.store._claims import Claims, ProcessClaims
from contextfold.store._export import export_session
from contextfold.store._integrity import check_rows, proxy_damage
from contextfold.store._queries import (
    ENGINE_STATE,
    NO_LIMIT,
    SESSION_SELECT,
    Cursor,
    DuplicateKeyError,
    TxMode,
    engine_state_text,
    session_info,
)
from contextfold.store._records import EditRecord, EventRecord, LoadedView, SessionInfo, Snapshot
from contextfold.store._rows import Rows
from contextfold.store._schema import Database, Dialect, migrate, schema_version
from contextfold.store.view_rebuild import snapshot_point_problem

__all__ = ["SQLStore"]

_HEADS_PER_QUERY = 500
"""Prefix hashes looked up per query: well under SQLite's limit on bound parameters."""


class SQLStore(AsyncStoreMixin, ABC):
    """The shared implementation of :class:`~contextfold.store.BrowsableSessionStore` over SQL.

    ``location`` names the database in errors (a path, or a URL without its password);
    ``redact`` turns secret redaction of persisted text on (the default) or off.
    """

    dialect: ClassVar[Dialect]
    _lock_session_sql: ClassVar[str] = "SELECT id FROM sessions WHERE id = ?"
    _exclusive_database: ClassVar[bool] = False
    """True when the database belongs to one application (a SQLite file): any table that is
    not ours means the path points at someone else's database."""
    read_only: bool = False
    """True when the store was opened for reading only: every write raises ``StoreError``."""

    def __init__(self, *, location: str, redact: bool = True, batch_size: int = 0) -> None:
        self.location = location
        self.redact = redact
        self._encoded = _codec.EncodedMessages(redact=redact)
        self._held = threading.local()  # this thread's atomic transaction, inside atomic()
        self._states = _codec.EncodedStates(redact=redact)
        self._claims: Claims | None = None  # made at the first claim (see _claims)
        self._claims_lock = threading.Lock()
        # What the schema, export and integrity helpers are given instead of the store.
        self._rows = Rows(self._transaction, batch_size)

    # -- what a backend provides -------------------------------------------------------------------

    @abstractmethod
    def _begin(self, mode: TxMode) -> AbstractContextManager[Cursor]:
        """A transaction in ``mode`` that commits on success and rolls back on error."""

    @abstractmethod
    def _translate_errors(self) -> AbstractContextManager[None]:
        """The backend's errors as contextfold's (``StoreError``, ``DuplicateKeyError``)."""

    @abstractmethod
    def _table_names(self, cur: Cursor) -> set[str]:
        """The tables the store's database (or schema) holds."""

    @abstractmethod
    def _engine_integrity(self) -> list[str]:
        """Problems the database engine itself finds (empty when it finds none)."""

    @abstractmethod
    def close(self) -> None:
        """Release connections; the store is unusable afterwards."""

    def _transaction(
        self, mode: TxMode, *, one_statement: bool = False
    ) -> AbstractContextManager[Cursor]:
        """A transaction in ``mode``; inside :meth:`atomic` on this thread, a part of the
        atomic one (a savepoint: its failure undoes only itself, as its own transaction's
        would), so every write in the block commits together.

        ``one_statement``: inside :meth:`atomic`, the block changes the database with one
        statement at most (reads aside). On SQLite such a block needs no savepoint of its own: a
        failed SQLite statement undoes itself and leaves the transaction as it was, so the
        block's failure has nothing else to undo (PostgreSQL's would abort the whole
        transaction: there the savepoint stays). That is two statements fewer for each such
        write in a block (the proxy makes several per request)."""
        held: Cursor | None = getattr(self._held, "cursor", None)
        if held is None:
            return self._begin(mode)
        if (mode == "read" or one_statement) and self.dialect == "sqlite":
            return self._joined(held)  # a read has nothing to undo either
        return self._savepoint(held)

    @contextmanager
    def _joined(self, cur: Cursor) -> Iterator[Cursor]:
        """The atomic block's cursor, as it is: what fails in it raises as the store's errors,
        as a transaction's or a savepoint's failure would."""
        with self._translate_errors():
            yield cur

    @contextmanager
    def _savepoint(self, cur: Cursor) -> Iterator[Cursor]:
        depth = self._held.depth = self._held.depth + 1
        name = f"contextfold_{depth}"
        try:
            with self._translate_errors():
                cur.execute(f"SAVEPOINT {name}")
                touched = dict(self._held.touched)
                try:
                    yield cur
                except BaseException:
                    # What the savepoint undid may have made a session exist: check again.
                    self._held.sessions.clear()
                    self._held.touched = touched  # nor are its writes activity any more
                    cur.execute(f"ROLLBACK TO SAVEPOINT {name}")
                    cur.execute(f"RELEASE SAVEPOINT {name}")
                    raise
                cur.execute(f"RELEASE SAVEPOINT {name}")
        finally:
            self._held.depth = depth - 1

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Every write this thread makes in the block commits together, or none does.

        For writes that are one fact but several calls: the proxy appends a turn and records
        where its conversation stands, or copies a whole history into a fork, so that a crash
        leaves all of it or nothing. Inside the block, this thread reads what it wrote; other
        threads and processes see nothing of it until the block ends (on SQLite they wait for
        it: keep the block short, and never call a model inside it). A block inside another
        is part of it.
        """
        if getattr(self._held, "cursor", None) is not None:
            yield
            return
        with self._begin("write") as cur:
            self._held.cursor, self._held.depth = cur, 0
            self._held.sessions = set()
            self._held.touched = {}  # sessions the block's appends made active, in order
            try:
                yield
                now = time.time()
                for session_id in self._held.touched:
                    self._touch(cur, session_id, now)
            finally:
                self._held.cursor = None

    # -- claims on sessions (the proxy's: see _claims) --------------------------------------------

    def claim_session(self, session_id: str) -> bool:
        """Take ``session_id`` for one request; False at once when another request holds it, in
        this process or any other on the same database. The claim lasts until
        :meth:`release_session`, or until its holder dies (see :mod:`._claims`)."""
        claims = self._session_claims()
        with self._translate_errors():
            return claims.claim(session_id)

    def release_session(self, session_id: str) -> None:
        """Give back a claim :meth:`claim_session` took (nothing when none is held)."""
        claims = self._session_claims()
        with self._translate_errors():
            claims.release(session_id)

    def _session_claims(self) -> Claims:
        with self._claims_lock:
            if self._claims is None:
                with self._translate_errors():
                    self._claims = self._make_claims()
            return self._claims

    def _make_claims(self) -> Claims:
        """The backend's claims (what a store only this process can open needs)."""
        return ProcessClaims()

    def _close_claims(self) -> None:
        with self._claims_lock:
            claims, self._claims = self._claims, None
        if claims is not None:
            claims.close()

    def _migration_lock(self, cur: Cursor) -> None:
        """Serialize migrations across processes (a SQLite write transaction already does)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- schema ------------------------------------------------------------------------------------

    def _migrate(self) -> None:
        """Bring the schema to the latest version (backends call this once connected)."""
        database = Database(
            location=self.location,
            dialect=self.dialect,
            read_only=self.read_only,
            exclusive=self._exclusive_database,
            table_names=self._table_names,
            migration_lock=self._migration_lock,
        )
        migrate(self._rows, database)

    def schema_version(self) -> int:
        """The schema version the database is at."""
        with self._transaction("read") as cur:
            return schema_version(cur)

    # -- sessions ----------------------------------------------------------------------------------

    def create_session(
        self,
        *,
        model: str | None = None,
        title: str | None = None,
        parent_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> SessionInfo:
        """A new, empty session (a fresh ``ses_...`` id unless ``session_id`` is given)."""
        sid = session_id if session_id is not None else new_message_id("ses")
        _check_id(sid)
        now = time.time()
        meta_json = _codec.encode_json(dict(metadata or {}), redact=self.redact)
        title, model = self._redact_text(title), self._redact_text(model)
        try:
            with self._transaction("write", one_statement=True) as cur:
                if parent_id is not None:
                    self._require_session(cur, parent_id)
                cur.execute(
                    "INSERT INTO sessions (id, parent_id, model, title, created, updated, "
                    "metadata) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (sid, parent_id, model, title, now, now, meta_json),
                )
        except DuplicateKeyError:
            raise UsageError(
                f"a session with id {sid!r} already exists; omit session_id for a fresh one"
            ) from None
        return SessionInfo(sid, parent_id, model, title, now, now, _codec.decode_mapping(meta_json))

    def get_session(self, session_id: str) -> SessionInfo:
        """The session; ``SessionNotFoundError`` naming the id when there is none."""
        with self._transaction("read") as cur:
            rows = cur.execute(SESSION_SELECT + " WHERE s.id = ?", (session_id,))
        if not rows:
            raise SessionNotFoundError(session_id)
        return session_info(rows[0])

    def list_sessions(
        self, *, limit: int | None = None, parent_id: str | None = None
    ) -> list[SessionInfo]:
        """Sessions, most recently updated first (only children of ``parent_id`` if given)."""
        sql, params = SESSION_SELECT, list[Any]()
        if parent_id is not None:
            sql += " WHERE s.parent_id = ?"
            params.append(parent_id)
        sql += " ORDER BY s.updated DESC, s.id DESC LIMIT ?"
        params.append(NO_LIMIT if limit is None else max(0, limit))
        with self._transaction("read") as cur:
            rows = cur.execute(sql, params)
        return [session_info(row) for row in rows]

    def delete_session(self, session_id: str) -> None:
        """Remove a session and everything it holds; its child sessions lose their parent link."""
        with self._transaction("write", one_statement=True) as cur:
            self._require_session(cur, session_id)
            cur.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
            self._forget_checked()
        self._encoded.forget(session_id)
        self._states.forget(session_id)

    def update_session(
        self,
        session_id: str,
        *,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        """Change the title and/or replace the metadata (None leaves a field as it is)."""
        sets, params = ["updated = ?"], list[Any]([time.time()])
        if title is not None:
            sets.append("title = ?")
            params.append(self._redact_text(title))
        if metadata is not None:
            sets.append("metadata = ?")
            params.append(_codec.encode_json(dict(metadata), redact=self.redact))
        with self._transaction("write", one_statement=True) as cur:
            self._require_session(cur, session_id)
            cur.execute(
                f"UPDATE sessions SET {', '.join(sets)} WHERE id = ?", [*params, session_id]
            )
        return self.get_session(session_id)

    def add_to_metadata(self, session_id: str, key: str, counts: Mapping[str, int]) -> None:
        """Add ``counts`` to the numbers kept under ``metadata[key]`` (missing ones start at 0),
        in one write transaction under the session's lock: concurrent adders never lose one."""
        with self._transaction("write", one_statement=True) as cur:
            self._require_session(cur, session_id)
            [(text,)] = cur.execute("SELECT metadata FROM sessions WHERE id = ?", (session_id,))
            metadata = _codec.decode_mapping(text)
            kept = metadata.get(key)
            numbers = dict(kept) if isinstance(kept, Mapping) else {}
            for name, value in counts.items():
                before = numbers.get(name, 0)
                numbers[name] = (before if isinstance(before, int) else 0) + value
            metadata[key] = numbers
            cur.execute(
                "UPDATE sessions SET metadata = ?, updated = ? WHERE id = ?",
                (_codec.encode_json(metadata, redact=self.redact), time.time(), session_id),
            )

    # -- the engine's state ------------------------------------------------------------------------

    def save_engine_state(self, session_id: str, state: Mapping[str, Any]) -> None:
        """Keep the engine's per-session state, replacing the one saved before.

        One write transaction: a crash leaves the previous state or this one, never a mix. The
        state is stored part by part (its top-level keys, one row each), redacted like every
        other row. A part unchanged since this store's last save of the session is neither
        redacted again (:class:`~._codec.EncodedStates`) nor written again, as long as the
        session still holds that save's token: when another store (or process) has saved the
        session since, or this store's last save was rolled back, every part is written.
        """
        parts = self._states.encode(session_id, state)
        before = self._states.written(session_id)
        token = secrets.randbits(62)  # fits a signed 64-bit column
        self._states.wrote(session_id, None)  # unknown until this save commits
        with self._transaction("write") as cur:
            self._lock_row(cur, session_id)
            rows = cur.execute("SELECT state_token FROM sessions WHERE id = ?", (session_id,))
            if not rows:
                raise SessionNotFoundError(session_id)
            self._found(session_id)
            [(stored_token,)] = rows
            if (
                before is not None
                and stored_token == before.token
                and list(before.parts) == list(parts)  # the same parts, in the same order
            ):
                changed = [
                    (value, session_id, key)
                    for key, value in parts.items()
                    if before.parts[key] != value
                ]
                if changed:
                    cur.executemany(
                        "UPDATE engine_state_parts SET value = ? WHERE session_id = ? AND part = ?",
                        changed,
                    )
            else:
                cur.execute("DELETE FROM engine_state_parts WHERE session_id = ?", (session_id,))
                if parts:
                    cur.executemany(
                        "INSERT INTO engine_state_parts (session_id, part, position, value) "
                        "VALUES (?, ?, ?, ?)",
                        [
                            (session_id, key, position, value)
                            for position, (key, value) in enumerate(parts.items())
                        ],
                    )
            # Saving state is activity: the session moves up in ``list_sessions``.
            cur.execute(
                "UPDATE sessions SET updated = ?, state_token = ? WHERE id = ?",
                (time.time(), token, session_id),
            )
        # Inside atomic() this is committed only with the block; a block undone leaves the
        # token before it, which no later save of this store will take for this one's.
        self._states.wrote(session_id, _codec.WrittenState(token, parts))

    def load_engine_state(self, session_id: str) -> dict[str, Any] | None:
        """The engine state saved last for the session, or None when none was saved."""
        with self._transaction("read") as cur:
            rows = cur.execute(ENGINE_STATE, (session_id,))
        if not rows:
            raise SessionNotFoundError(session_id)
        text = engine_state_text(rows)
        return None if text is None else _codec.decode_mapping(text)

    # -- the proxy's index of conversations ------------------------------------------------------

    def record_proxy_head(
        self, tenant: str, head: str, session_id: str, messages: int, seq: int
    ) -> None:
        """Note that ``session_id`` holds the conversation prefix ``head`` (a hash chain over
        the first ``messages`` client messages) for ``tenant``, its transcript then ending at
        ``seq``; a newer session takes the prefix over from an older one."""
        with self._transaction("write", one_statement=True) as cur:
            self._require_session(cur, session_id)
            cur.execute(
                "INSERT INTO proxy_heads (tenant, head, session_id, messages, seq, created) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, head) DO UPDATE SET "
                "session_id = excluded.session_id, messages = excluded.messages, "
                "seq = excluded.seq, created = excluded.created",
                (tenant, head, session_id, messages, seq, time.time()),
            )

    def find_proxy_heads(self, tenant: str, heads: Sequence[str]) -> dict[str, tuple[str, int]]:
        """Of ``heads``, those ``tenant`` has recorded: each with its session id and the seq
        the session's transcript ended at then."""
        found: dict[str, tuple[str, int]] = {}
        with self._transaction("read") as cur:
            for start in range(0, len(heads), _HEADS_PER_QUERY):
                chunk = list(heads[start : start + _HEADS_PER_QUERY])
                marks = ", ".join("?" * len(chunk))
                rows = cur.execute(
                    f"SELECT head, session_id, seq FROM proxy_heads WHERE tenant = ? "
                    f"AND head IN ({marks})",
                    [tenant, *chunk],
                )
                found.update((str(head), (str(sid), int(seq))) for head, sid, seq in rows)
        return found

    # -- transcript --------------------------------------------------------------------------------

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        expected_seq: int | None = None,
        expected_edit: int | None = None,
    ) -> int:
        """Append to the transcript and return the new last seq.

        With ``expected_seq`` (and ``expected_edit``), raise ``ConcurrentWriteError`` (writing
        nothing) unless the session's last seq (and last edit number) are still those values:
        the check and the insert share one locked transaction, so two writers can never both
        extend the same seq.
        """
        ids = [m.id for m in messages]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise UsageError(f"message id {dup!r} appears twice in one append")
        # Serialize (and redact) before taking the lock: CPU work never extends a write lock.
        encoded = [(m.id, m.role, self._encoded.encode(session_id, m)[0]) for m in messages]
        tokens = [m.meta.tokens for m in messages]
        try:
            with self._transaction("write", one_statement=len(encoded) == 1) as cur:
                last, _ = self._locked_head(cur, session_id, expected_seq, expected_edit)
                if encoded:
                    cur.executemany(
                        "INSERT INTO messages (session_id, seq, id, role, data, tokens) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        [
                            (session_id, last + i, mid, role, data, tok)
                            for i, ((mid, role, data), tok) in enumerate(
                                zip(encoded, tokens, strict=True), start=1
                            )
                        ],
                    )
                    self._appended(cur, session_id)
        except DuplicateKeyError:
            raise UsageError(self._duplicate_ids_message(session_id, ids)) from None
        return last + len(encoded)

    def _duplicate_ids_message(self, session_id: str, ids: Sequence[str]) -> str:
        for message_id in ids:
            with self._transaction("read") as cur:
                rows = cur.execute(
                    "SELECT seq FROM messages WHERE session_id = ? AND id = ?",
                    (session_id, message_id),
                )
            if rows:
                return (
                    f"session {session_id!r} already holds message {message_id!r} (seq "
                    f"{rows[0][0]}); the transcript is append-only, append each message once"
                )
        return f"session {session_id!r}: a message id collided with another writer's"

    def session_head(self, session_id: str) -> tuple[int, int]:
        """The session's last message seq and last edit number (0 for none), in one read."""
        with self._transaction("read") as cur:
            return self._rows.head(cur, session_id)

    def last_seq(self, session_id: str) -> int:
        """The seq of the session's last message (0 when it has none)."""
        with self._transaction("read") as cur:
            return self._rows.head(cur, session_id)[0]

    def iter_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> Iterator[tuple[int, Message]]:
        """``(seq, message)`` pairs with seq above ``after_seq``, read lazily in batches.

        The session is looked up now (``SessionNotFoundError`` at the call, not at the first
        item); rows are then read a batch at a time, never all at once.
        """
        self.last_seq(session_id)
        return _reads.messages(self._rows, session_id, after_seq, NO_LIMIT, limit)

    def get_message(self, session_id: str, message_id: str) -> Message:
        """One message by id; ``MessageNotFoundError`` when the session has none with it."""
        with self._transaction("read") as cur:
            rows = cur.execute(
                "SELECT data FROM messages WHERE session_id = ? AND id = ?",
                (session_id, message_id),
            )
            if not rows:
                self._require_session(cur, session_id, lock=False)
                raise MessageNotFoundError(message_id, session_id)
        return _codec.decode_message(rows[0][0])

    def append_edit(
        self,
        session_id: str,
        edit: ContextEdit,
        *,
        expected_seq: int | None = None,
        expected_edit: int | None = None,
    ) -> int:
        """Record a context edit after the session's current last message; its number (1, 2…).

        With ``expected_seq`` and ``expected_edit``, raise ``ConcurrentWriteError`` (writing
        nothing) unless the session is still at that last seq and last edit number: an edit
        made from a view another writer has moved on from would fork what a resume sees.
        """
        return self.append_edits(
            session_id, [edit], expected_seq=expected_seq, expected_edit=expected_edit
        )

    def append_edits(
        self,
        session_id: str,
        edits: Sequence[ContextEdit],
        *,
        expected_seq: int | None = None,
        expected_edit: int | None = None,
    ) -> int:
        """Record ``edits`` in order after the session's current last message, in one
        transaction (all of them or none); the number of the last one (the last edit number
        as it was when ``edits`` is empty).

        What :meth:`append_edit` does for each, but with the writer lock taken and the head
        read once: a compaction's edits are one fact.
        """
        # A summary edit's messages are encoded once, for it and the snapshot after it.
        encoded = [(e.id, e.edit_kind, self._encoded.encode_edit(session_id, e)) for e in edits]
        with self._transaction("write", one_statement=len(encoded) == 1) as cur:
            after_seq, last_edit = self._locked_head(cur, session_id, expected_seq, expected_edit)
            if encoded:
                now = time.time()
                cur.executemany(
                    "INSERT INTO edits (session_id, num, id, kind, after_seq, data, created) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [
                        (session_id, number, edit_id, kind, after_seq, data, now)
                        for number, (edit_id, kind, data) in enumerate(encoded, last_edit + 1)
                    ],
                )
                self._appended(cur, session_id)
        return last_edit + len(encoded)

    def iter_edits(self, session_id: str, *, after: int = 0) -> Iterator[EditRecord]:
        """The session's edits numbered above ``after``, in order, read lazily."""
        self.last_seq(session_id)
        return _reads.edits(self._rows, session_id, after, NO_LIMIT)

    # -- events ------------------------------------------------------------------------------------

    def append_event(self, session_id: str, event_type: str, data: Mapping[str, Any]) -> None:
        """Store one engine event (see :class:`contextfold.events.StoreSink`)."""
        payload = _codec.encode_json(dict(data), redact=self.redact)
        with self._transaction("write", one_statement=True) as cur:
            self._require_session(cur, session_id, lock=False)
            cur.execute(
                "INSERT INTO events (session_id, event_type, data, created) VALUES (?, ?, ?, ?)",
                (session_id, self._redact_text(event_type), payload, time.time()),
            )

    def iter_events(self, session_id: str) -> Iterator[EventRecord]:
        """The session's events in the order they were stored, read lazily."""
        self.last_seq(session_id)
        return _reads.events(self._rows, session_id, NO_LIMIT)

    # -- snapshots and resume ----------------------------------------------------------------------

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
        """Keep ``view`` as the session's snapshot, replacing the previous one.

        ``view`` must be the transcript's messages ``1..last_seq`` with edits ``1..last_edit``
        applied. A snapshot pointing past the transcript, or at a point transcript order never
        passed through (an edit recorded before ``last_seq`` left out), is refused with
        ``UsageError``: resuming from it would silently lose or reorder history. With
        ``expected_seq`` and ``expected_edit``, it is refused with ``ConcurrentWriteError``
        unless the session is still at that last seq and last edit number.
        """
        # Mostly the messages appended (and encoded) before: only what compaction replaced is
        # encoded now.
        data, redacted = self._encoded.encode_view(session_id, view)
        now = time.time()
        with self._transaction("write", one_statement=True) as cur:
            current_seq, current_edit = self._locked_head(
                cur, session_id, expected_seq, expected_edit
            )
            rows = cur.execute(
                "SELECT num, after_seq FROM edits WHERE session_id = ? AND num IN (?, ?)",
                (session_id, last_edit, last_edit + 1),
            )
            problem = snapshot_point_problem(
                last_seq, last_edit, current_seq, current_edit, dict(rows)
            )
            if problem:
                raise UsageError(
                    f"snapshot of session {session_id!r} at last_seq={last_seq}, "
                    f"last_edit={last_edit}: {problem}"
                )
            cur.execute(
                "INSERT INTO snapshots (session_id, view, token_count, last_seq, last_edit, "
                "created) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
                "view = excluded.view, token_count = excluded.token_count, "
                "last_seq = excluded.last_seq, last_edit = excluded.last_edit, "
                "created = excluded.created",
                (session_id, data, token_count, last_seq, last_edit, now),
            )
        self._encoded.keep_only(session_id, view)  # what the next snapshot will mostly repeat
        # What was stored is ``view`` itself unless a secret was redacted out of it.
        stored = _codec.decode_view(data) if redacted else tuple(view)
        return Snapshot(session_id, stored, token_count, last_seq, last_edit, now)

    def load_snapshot(self, session_id: str) -> Snapshot | None:
        """The latest snapshot, or None when the session has never been compacted."""
        with self._transaction("snapshot") as cur:
            self._require_session(cur, session_id, lock=False)
            return _reads.read_snapshot(cur, session_id)

    def load_view(self, session_id: str) -> LoadedView:
        """The view to resume with: the snapshot plus only what the transcript gained after it.

        Reads O(snapshot + tail) rows, never the pre-snapshot transcript. Without a snapshot
        it is the whole transcript with every edit applied in transcript order.
        """
        return _reads.load_view(self._rows, session_id)

    # -- blobs -------------------------------------------------------------------------------------

    def put_blob(self, session_id: str, content: str, *, tool_name: str | None = None) -> BlobInfo:
        """Keep a full tool output and return its ref; identical outputs share one row.

        The ref and digest are those of ``content`` as given; what is stored is redacted.
        """
        info = blob_info(content, tool_name)
        stored = _codec.encode_blob(content, redact=self.redact)
        with self._transaction("write", one_statement=True) as cur:
            self._require_session(cur, session_id, lock=False)
            cur.execute(
                "INSERT INTO blobs (session_id, sha256, ref, tool_name, content, size, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, sha256) DO NOTHING",
                (
                    session_id,
                    info.sha256,
                    info.ref,
                    self._redact_text(tool_name),
                    stored,
                    info.size_bytes,
                    time.time(),
                ),
            )
        return info

    def get_blob(self, session_id: str, ref: str) -> str:
        """A stored output by ref; ``RefNotFoundError`` unless this session holds it."""
        with self._transaction("read") as cur:
            rows = cur.execute(
                "SELECT content FROM blobs WHERE session_id = ? AND ref = ? LIMIT 1",
                (session_id, ref),
            )
            if not rows:
                self._require_session(cur, session_id, lock=False)
                raise RefNotFoundError(ref, session_id)
        return _codec.decode_blob(rows[0][0])

    # -- export and checks -------------------------------------------------------------------------

    def export_jsonl(self, session_id: str, out: TextIO) -> int:
        """Write the session's full record as JSON lines to ``out``; the number of lines.

        One ``session`` line, then ``message`` and ``edit`` lines in transcript order, then
        ``event`` lines, then ``blob`` lines (stored outputs, which the transcript only names).
        """
        return export_session(self._rows, session_id, out, redact=self.redact)

    def check_integrity(self) -> list[str]:
        """Problems found in the whole database; an empty list when it is sound.

        The engine's own check, then the store's invariants: contiguous seqs and edit numbers
        from 1, every stored JSON row parses into its type, message rows agree with their JSON,
        no edit or snapshot points past its transcript.
        """
        problems = self._engine_integrity()
        if problems:
            return problems
        return check_rows(self._rows)

    def repair(self) -> list[str]:
        """Remove what a crash left half-made, in one transaction: partial sessions and proxy
        heads that point nowhere (see :func:`~contextfold.store._integrity.proxy_damage`).
        Complete sessions are never touched. What was removed, in words (empty: nothing)."""
        with self.atomic():
            partial, dangling = proxy_damage(self._rows)
            with self._transaction("write") as cur:
                for session_id in partial:
                    cur.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
                self._forget_checked()
                for tenant, head, _, _ in dangling:
                    cur.execute(
                        "DELETE FROM proxy_heads WHERE tenant = ? AND head = ?", (tenant, head)
                    )
        for session_id in partial:
            self._encoded.forget(session_id)
        removed = [f"removed partial session {sid!r}" for sid in partial]
        removed.extend(
            f"removed proxy head {head[:12]}… (pointed at session {sid!r}, seq {seq})"
            for _, head, sid, seq in dangling
        )
        return removed

    # -- helpers ---------------------------------------------------------------------------------

    def _require_session(self, cur: Cursor, session_id: str, *, lock: bool = True) -> None:
        """``SessionNotFoundError`` unless the session exists; with ``lock``, its row is locked
        for writing (on PostgreSQL) until the transaction ends. Inside :meth:`atomic`, a session
        found and locked once is not looked up again: the lock holds to the block's end, and
        only this thread could have deleted the row since (a delete or an undone savepoint
        forgets what was found)."""
        held = getattr(self._held, "cursor", None)
        if held is not None and session_id in self._held.sessions:
            return
        sql = self._lock_session_sql if lock else "SELECT id FROM sessions WHERE id = ?"
        if not cur.execute(sql, (session_id,)):
            raise SessionNotFoundError(session_id)
        if held is not None and lock:
            self._held.sessions.add(session_id)

    def _lock_row(self, cur: Cursor, session_id: str) -> None:
        """Take the session's writer lock before a write reads the session's row.

        On SQLite the write transaction holds the database's lock from its start: nothing to
        take, and the caller's read of the row finds the session (or that there is none) as a
        lookup would, one statement fewer. PostgreSQL locks the row in a statement of its own,
        before the read: a statement that waited for the lock reads with the snapshot it
        started with, which misses the rows the lock's holder committed."""
        if self.dialect != "sqlite":
            self._require_session(cur, session_id)

    def _found(self, session_id: str) -> None:
        """The session was found (and locked) in this thread's atomic block, if in one."""
        if getattr(self._held, "cursor", None) is not None:
            self._held.sessions.add(session_id)

    def _forget_checked(self) -> None:
        """Sessions were deleted in this thread's atomic block: look each one up again."""
        if getattr(self._held, "cursor", None) is not None:
            self._held.sessions.clear()

    def _locked_head(
        self,
        cur: Cursor,
        session_id: str,
        expected_seq: int | None,
        expected_edit: int | None,
    ) -> tuple[int, int]:
        """Take the session's writer lock, then read its last seq and last edit number (fresh,
        under the lock); ``ConcurrentWriteError`` when either is not what the caller expected.

        On SQLite one statement does (see :meth:`_lock_row`)."""
        self._lock_row(cur, session_id)
        seq, edit = self._rows.head(cur, session_id)
        self._found(session_id)
        if (expected_seq is not None and seq != expected_seq) or (
            expected_edit is not None and edit != expected_edit
        ):
            raise ConcurrentWriteError(
                session_id,
                seq if expected_seq is None else expected_seq,
                seq,
                expected_edit=expected_edit,
                actual_edit=edit,
            )
        return seq, edit

    @staticmethod
    def _touch(cur: Cursor, session_id: str, now: float | None = None) -> None:
        cur.execute(
            "UPDATE sessions SET updated = ? WHERE id = ?",
            (time.time() if now is None else now, session_id),
        )

    def _appended(self, cur: Cursor, session_id: str) -> None:
        """An append is activity: the session moves up in ``list_sessions``. Inside
        :meth:`atomic` the session is touched once, when the block ends (the proxy appends
        twice a request): an append of one row is then one statement, with no savepoint of its
        own (see :meth:`_transaction`)."""
        if getattr(self._held, "cursor", None) is None:
            self._touch(cur, session_id)
        else:
            self._held.touched[session_id] = None

    def _redact_text(self, text: str | None) -> str | None:
        if text is None or not self.redact:
            return text
        return redact_text(text)


def _check_id(session_id: str) -> None:
    if not isinstance(session_id, str) or not session_id:
        raise UsageError(f"a session id is a non-empty string, not {session_id!r}")
