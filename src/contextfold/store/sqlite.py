"""The default session store: one SQLite file (stdlib ``sqlite3``), safe across processes.

Durability choices, and why:

- WAL journal: readers never block the writer, and a crash leaves committed transactions intact.
- Every write transaction starts with ``BEGIN IMMEDIATE`` (the connection runs with
  ``isolation_level=None``, so nothing begins implicitly): the write lock is taken up front,
  where the busy timeout applies, instead of on the first write, where a deferred transaction
  in WAL mode fails at once with "database is locked".
- ``synchronous=NORMAL`` by default: in WAL mode it loses no committed transaction when the
  process dies, only possibly the last ones on power loss; ``synchronous="FULL"`` closes that.
- The file is created with mode 0600 (it holds whole conversations), and it is only ever
  touched through SQLite: :meth:`SQLiteStore.backup` uses SQLite's backup API, never a file copy.
- Nothing is written to a file before it is known to be a contextfold database (or empty): a
  foreign SQLite file is refused as it was found, not switched to WAL first.
- A path that cannot hold a store (a file where a folder should be, a read-only file system, no
  permission) is refused with a ``StoreError`` that says which. ``read_only=True`` opens an
  existing store for reading only (SQLite ``mode=ro``; ``immutable`` on read-only media), which
  is how the CLI's reading commands open a store they cannot write.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from contextfold.errors import ConfigError, StoreCorruptError, StoreError
from contextfold.store._claims import Claims, FileClaims, ProcessClaims
from contextfold.store._queries import Cursor, DuplicateKeyError, TxMode
from contextfold.store._schema import refuse_foreign
from contextfold.store._sql import SQLStore
from contextfold.store.sqlite_paths import CLAIMS_SUFFIX, read_only_uri, write_problem

__all__ = [
    "DEFAULT_BUSY_TIMEOUT",
    "SAFE_SQLITE_VERSION",
    "SQLiteStore",
    "SQLiteVersionWarning",
    "has_wal_reset_bug",
    "wal_reset_explanation",
]

DEFAULT_BUSY_TIMEOUT = 30.0
"""Seconds a writer waits for another process's write transaction before giving up."""

SAFE_SQLITE_VERSION = (3, 51, 3)
"""First SQLite release with the fix for the WAL-reset bug (concurrent writers and checkpoints
could corrupt a WAL database in 3.7.0 through 3.51.2)."""

_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB (primary result codes)
_ACCESS_CODES = {8, 14}  # SQLITE_READONLY, SQLITE_CANTOPEN


class SQLiteVersionWarning(UserWarning):
    """The SQLite library Python links against has a known WAL corruption bug (said once, when
    a store's database file is created: see :func:`wal_reset_explanation`)."""


def has_wal_reset_bug() -> bool:
    """True when the SQLite library this Python uses predates :data:`SAFE_SQLITE_VERSION`."""
    return sqlite3.sqlite_version_info < SAFE_SQLITE_VERSION


def wal_reset_explanation() -> str:
    """What the WAL-reset bug is, when it matters and how to be rid of it, for a person (the
    store's warning and ``contextfold doctor`` say the same)."""
    fixed = ".".join(map(str, SAFE_SQLITE_VERSION))
    return (
        f"SQLite {sqlite3.sqlite_version}, which this Python uses, has the WAL-reset bug (fixed "
        f"in SQLite {fixed}): when two processes write to one session store at the same moment, "
        "it can rarely be corrupted. One agent at a time per store is not affected. To rule it "
        f"out, use a Python whose sqlite3 module is built with SQLite {fixed} or newer, give "
        "each agent that runs at the same time a store of its own, or use PostgreSQL for many "
        "concurrent writers."
    )


def _warn_wal_reset(location: str) -> None:
    warnings.warn(
        f"{location}: new session store. {wal_reset_explanation()} (warn_wal_reset=False "
        "silences this notice.)",
        SQLiteVersionWarning,
        stacklevel=_outside_package(),
    )


def _outside_package() -> int:
    """The ``stacklevel`` of the first caller outside contextfold (``ContextEngine(store=...)``
    or ``open_store(...)`` in the user's code), so the warning names the user's line."""
    frame = sys._getframe(2)  # the caller of warnings.warn's caller
    level = 2
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith(
        "contextfold."
    ):
        frame = frame.f_back
        level += 1
    return level


class _SQLiteCursor:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(sql, params).fetchall()

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._conn.executemany(sql, rows)


class SQLiteStore(SQLStore):
    """Sessions in a SQLite file (``":memory:"`` for a throw-away store).

    ``synchronous`` is ``"NORMAL"`` (default) or ``"FULL"``; ``busy_timeout`` is in seconds;
    ``redact=False`` stores text exactly as given; ``read_only=True`` opens an existing store
    for reading only (every write raises ``StoreError``). One connection serves every thread of
    the process (the engine's background worker, ``asyncio.to_thread``), each call under a lock.

    When this open creates the database file and the SQLite library has the WAL-reset bug, a
    :class:`SQLiteVersionWarning` says so once for that file (opening it again says nothing);
    ``warn_wal_reset=False`` silences it.
    """

    dialect = "sqlite"
    _exclusive_database = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["NORMAL", "FULL"] | str = "NORMAL",
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        redact: bool = True,
        batch_size: int = 0,
        read_only: bool = False,
        warn_wal_reset: bool = True,
    ) -> None:
        self.path = str(path) if str(path) == ":memory:" else Path(path).expanduser()
        super().__init__(location=str(self.path), redact=redact, batch_size=batch_size)
        self.read_only = read_only
        mode = str(synchronous).upper()
        if mode not in ("NORMAL", "FULL"):
            raise ConfigError("sqlite_synchronous", f"{synchronous!r} is not NORMAL or FULL")
        self.synchronous = mode
        self.busy_timeout = busy_timeout
        # Only a writer can set the WAL-reset bug off, and a warning on every open would be
        # noise: it is said when the file is new (or empty), i.e. once per store.
        new_file = isinstance(self.path, Path) and not read_only and _is_new(self.path)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        with self._translate_errors():
            self._conn = self._connect()
        try:
            self._migrate()
        except BaseException:
            self.close()
            raise
        if new_file and warn_wal_reset and has_wal_reset_bug():
            _warn_wal_reset(self.location)

    def _connect(self) -> sqlite3.Connection:
        target: str | Path = self.path
        if isinstance(self.path, Path):
            target = self._read_only_uri(self.path) if self.read_only else self._create(self.path)
        conn = sqlite3.connect(
            target,
            timeout=self.busy_timeout,
            isolation_level=None,
            check_same_thread=False,
            uri=self.read_only,
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            if isinstance(self.path, Path) and not self.read_only:
                tables = self._table_names(_SQLiteCursor(conn))
                refuse_foreign(self.location, tables, exclusive=self._exclusive_database)
                self._enable_wal(conn)
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            conn.close()
            raise
        return conn

    def _create(self, path: Path) -> Path:
        """``path``, created (private) with its folders unless it exists; a ``StoreError``
        saying why when the store cannot be written there."""
        problem = write_problem(path)
        if problem is None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                _create_private(path)
                return path
            except OSError as exc:
                problem = write_problem(path) or exc.strerror or str(exc)
        raise StoreError(
            f"{self.location}: cannot write the session store here: {problem}. Choose a "
            "writable location (--store, the `store` setting or CONTEXTFOLD_DATABASE_URL); to "
            "only read an existing store, open it read-only (the CLI's reading commands do)"
        )

    def _read_only_uri(self, path: Path) -> str:
        """The URI that opens the existing ``path`` for reading only (``StoreError`` if none)."""
        if not path.is_file():
            raise StoreError(f"{self.location}: no database file to open read-only")
        uri, problem = read_only_uri(path)
        if problem:
            raise StoreError(f"{self.location}: cannot read the store: {problem}")
        return uri

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        # Switching the journal mode needs a moment alone with the file; another process opening
        # the same new database at once may hold it, and this pragma does not always wait.
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
                continue
            if str(mode).lower() != "wal":
                raise StoreError(
                    f"{self.location}: SQLite refused WAL mode (got {mode!r}); the file system "
                    "may not support it (network drives do not)"
                )
            return

    # -- the backend half ------------------------------------------------------------------------

    @contextmanager
    def _begin(self, mode: TxMode) -> Iterator[Cursor]:
        with self._lock, self._translate_errors():
            conn = self._conn
            if conn is None:
                raise StoreError(f"{self.location}: the store is closed")
            if mode == "read":
                yield _SQLiteCursor(conn)
                return
            if mode == "write" and self.read_only:
                raise StoreError(self._read_only_message())
            conn.execute("BEGIN IMMEDIATE" if mode == "write" else "BEGIN")
            try:
                yield _SQLiteCursor(conn)
            except BaseException:
                if conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass  # the original error says more than a failed rollback
                raise
            conn.execute("COMMIT")

    @contextmanager
    def _translate_errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.IntegrityError as exc:
            if "UNIQUE" in str(exc) or "PRIMARY KEY" in str(exc):
                raise DuplicateKeyError(f"{self.location}: {exc}") from exc
            raise StoreError(f"{self.location}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
            if code in _CORRUPT_CODES or "not a database" in str(exc) or "malformed" in str(exc):
                raise StoreCorruptError(
                    self.location,
                    f"not a readable SQLite database ({exc}); move the file aside (or restore a "
                    "backup) and contextfold will start a new one",
                ) from exc
            if code in _ACCESS_CODES and isinstance(self.path, Path):
                raise StoreError(self._access_message(self.path, exc)) from exc
            if "locked" in str(exc):
                raise StoreError(
                    f"{self.location}: database is locked: another process held the write lock "
                    f"for more than {self.busy_timeout:g} s (busy_timeout)"
                ) from exc
            raise StoreError(f"{self.location}: {exc}") from exc
        except sqlite3.Error as exc:
            raise StoreError(f"{self.location}: {exc}") from exc

    def _read_only_message(self) -> str:
        reason = write_problem(self.path) if isinstance(self.path, Path) else None
        if reason is None:
            return f"{self.location}: the store is open read-only (as asked); it cannot be changed"
        return (
            f"{self.location}: the store is open read-only ({reason}), so it cannot be changed; "
            "copy it to a writable folder to change it"
        )

    def _access_message(self, path: Path, exc: sqlite3.Error) -> str:
        reason = write_problem(path) or "check the permissions of the file and its folder"
        action = "read" if self.read_only else "write"
        return f"{self.location}: SQLite cannot {action} the store ({exc}): {reason}"

    def _table_names(self, cur: Cursor) -> set[str]:
        return {
            str(r[0]) for r in cur.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }

    def _engine_integrity(self) -> list[str]:
        with self._transaction("read") as cur:
            rows = cur.execute("PRAGMA integrity_check")
            fk = cur.execute("PRAGMA foreign_key_check")
        problems = [str(r[0]) for r in rows if str(r[0]) != "ok"]
        problems += [f"foreign key broken: {tuple(r)}" for r in fk]
        return [f"{self.location}: {p}" for p in problems]

    # -- SQLite-only -------------------------------------------------------------------------------

    def pragmas(self) -> dict[str, str]:
        """The settings in force on the connection (for ``contextfold doctor`` and tests)."""
        names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
        with self._transaction("read") as cur:
            return {
                "journal_mode": str(cur.execute("PRAGMA journal_mode")[0][0]).lower(),
                "synchronous": names.get(int(cur.execute("PRAGMA synchronous")[0][0]), "?"),
                "busy_timeout_ms": str(cur.execute("PRAGMA busy_timeout")[0][0]),
                "foreign_keys": "ON" if cur.execute("PRAGMA foreign_keys")[0][0] else "OFF",
                "sqlite_version": sqlite3.sqlite_version,
            }

    def backup(self, path: str | os.PathLike[str]) -> Path:
        """Copy the database to ``path`` with SQLite's online backup API (safe while in use)."""
        target = Path(path).expanduser()
        target.parent.mkdir(parents=True, exist_ok=True)
        _create_private(target)
        with self._lock, self._translate_errors():
            if self._conn is None:
                raise StoreError(f"{self.location}: the store is closed")
            dest = sqlite3.connect(target)
            try:
                self._conn.backup(dest)
            finally:
                dest.close()
        return target

    def _make_claims(self) -> Claims:
        if not isinstance(self.path, Path) or sys.platform == "win32":
            return ProcessClaims()  # in memory: no other process sees this store
        return FileClaims(self.path.with_name(self.path.name + CLAIMS_SUFFIX))

    def close(self) -> None:
        """Close the connection (committed data is already safe); further calls fail clearly."""
        self._close_claims()
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _is_new(path: Path) -> bool:
    """True when ``path`` holds no database yet (missing, or an empty file)."""
    try:
        return path.stat().st_size == 0
    except OSError:
        return True


def _create_private(path: Path) -> None:
    """Create an empty file readable by its owner only, unless it exists.

    An empty file is a valid empty SQLite database; creating it ourselves is the only way to
    set its mode without a window in which another user could open it.
    """
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    os.close(fd)
