"""The PostgreSQL session store, for many agent workers on many machines.

psycopg 3 with a connection pool (the ``postgres`` extra, from a checkout ``pip install
".[postgres]"``; imported only when a :class:`PostgresStore` is created). The schema and
semantics are the SQLite store's, from the same shared code. What differs:

- One writer per session: every write transaction first locks the session's row
  (``SELECT ... FOR NO KEY UPDATE``), then reads the last seq, so the ``expected_seq`` check and
  the insert cannot interleave with another writer's. The lock mode still lets other sessions'
  writers and foreign-key checks through.
- Multi-statement reads (resume, export) run in one ``REPEATABLE READ READ ONLY`` transaction.
- JSON is stored as ``text``, not ``jsonb``: the stored form stays byte-exact, and tool output
  with NUL characters (which ``jsonb`` refuses as ``\\u0000``) stores fine. The store never
  queries inside the JSON; the columns it filters on are real columns.
- ``schema=`` keeps the tables in a PostgreSQL schema of their own (created when missing).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from contextfold.errors import ConfigError, MissingDependencyError, StoreError
from contextfold.store._claims import Claims, claim_key
from contextfold.store._queries import Cursor, DuplicateKeyError, TxMode
from contextfold.store._sql import SQLStore

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = ["DATABASE_URL_ENV", "DEFAULT_POOL_MAX", "DEFAULT_POOL_MIN", "PostgresStore"]

DATABASE_URL_ENV = "CONTEXTFOLD_DATABASE_URL"
DEFAULT_POOL_MIN = 1
"""Connections kept open while idle."""
DEFAULT_POOL_MAX = 4
"""Connections at most: one per thread using the store at the same moment is plenty."""
DEFAULT_CONNECT_TIMEOUT = 10.0
"""Seconds to wait for the first connection before reporting the server unreachable."""
DEFAULT_POOL_TIMEOUT = 30.0
"""Seconds a call waits for a free pooled connection."""

_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
# Any constant works; this one is "contextfold" folded into a signed 64-bit integer.
_MIGRATION_LOCK_KEY = 0x636F6E74657874


def _import_psycopg() -> tuple[Any, Any]:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        name = "psycopg_pool" if "pool" in str(exc) else "psycopg"
        raise MissingDependencyError(name, "postgres") from exc
    return psycopg, psycopg_pool


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages and logs)."""
    url = re.sub(r"(://[^:/@\s]*):[^@\s]*@", r"\1:***@", url)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", url)


@lru_cache(maxsize=256)
def _placeholders(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


class _PgCursor:
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cur = self._conn.execute(_placeholders(sql), params)
        return list(cur.fetchall()) if cur.description is not None else []

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._conn.cursor() as cur:
            cur.executemany(_placeholders(sql), rows)


class _AdvisoryClaims(Claims):
    """Claims as session-level advisory locks, on a connection of their own: the server drops
    them when that connection ends, with its process (see :mod:`._claims`)."""

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], namespace: str) -> None:
        super().__init__()
        self._connect = connect
        self._namespace = namespace
        self._conn: psycopg.Connection[Any] | None = None

    def _execute(self, sql: str, session_id: str) -> bool:
        if self._conn is None or self._conn.closed:
            # A new connection holds none of the old one's locks: they ended with it.
            self._conn = self._connect()
        row = self._conn.execute(sql, (claim_key(session_id, self._namespace),)).fetchone()
        return bool(row and row[0])

    def _take(self, session_id: str) -> bool:
        return self._execute("SELECT pg_try_advisory_lock(%s)", session_id)

    def _give(self, session_id: str) -> None:
        self._execute("SELECT pg_advisory_unlock(%s)", session_id)

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            # Given back before closing: the server frees a closed connection's locks only
            # once its backend has ended, a moment later.
            conn.execute("SELECT pg_advisory_unlock_all()")
            conn.close()


class PostgresStore(SQLStore):
    """Sessions in PostgreSQL.

    ``url`` is a ``postgresql://`` URL (default: ``$CONTEXTFOLD_DATABASE_URL``). ``min_size`` and
    ``max_size`` size the pool; ``connect_timeout`` bounds the wait for the server at open,
    ``pool_timeout`` the wait for a free connection later. ``schema`` puts the tables in that
    PostgreSQL schema.
    """

    dialect = "postgres"
    _lock_session_sql = "SELECT id FROM sessions WHERE id = ? FOR NO KEY UPDATE"

    def __init__(
        self,
        url: str | None = None,
        *,
        min_size: int = DEFAULT_POOL_MIN,
        max_size: int = DEFAULT_POOL_MAX,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
        schema: str | None = None,
        redact: bool = True,
        batch_size: int = 0,
    ) -> None:
        url = url or os.environ.get(DATABASE_URL_ENV)
        if not url:
            raise ConfigError("store", f"no PostgreSQL URL given and {DATABASE_URL_ENV} is not set")
        if max_size <= 0 or not 0 <= min_size <= max_size:
            raise ConfigError(
                "store", f"pool sizes must be 0 <= min ({min_size}) <= max ({max_size})"
            )
        if schema is not None and not _SCHEMA_NAME.fullmatch(schema):
            raise ConfigError("store", f"schema name {schema!r} is not a plain SQL identifier")
        super().__init__(location=redact_url(url), redact=redact, batch_size=batch_size)
        self._psycopg, self._psycopg_pool = _import_psycopg()
        self.schema = schema
        self._url, self._connect_timeout = url, max(1, int(connect_timeout))
        self._pool: ConnectionPool[Any] | None = self._psycopg_pool.ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=pool_timeout,
            kwargs={"autocommit": True, "connect_timeout": max(1, int(connect_timeout))},
            configure=self._configure if schema else None,
            open=False,
            name="contextfold",
        )
        try:
            with self._translate_errors():
                # One plain connection first: a bad URL or a down server then reports the
                # server's own reason at once, not a pool timeout after retries.
                self._psycopg.connect(
                    url, autocommit=True, connect_timeout=max(1, int(connect_timeout))
                ).close()
                self._pool.open(wait=True, timeout=connect_timeout)
            if schema:
                self._create_schema(schema)
            self._migrate()
        except BaseException:
            self.close()
            raise

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(f'SET search_path TO "{self.schema}"')

    def _create_schema(self, schema: str) -> None:
        with self._transaction("write") as cur:
            # Two processes creating the same schema at once would collide without the lock.
            self._migration_lock(cur)
            cur.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')

    # -- the backend half ------------------------------------------------------------------------

    @contextmanager
    def _begin(self, mode: TxMode) -> Iterator[Cursor]:
        with self._translate_errors():
            if self._pool is None:
                raise StoreError(f"{self.location}: the store is closed")
            with self._pool.connection() as conn:
                if mode == "read":
                    yield _PgCursor(conn)
                    return
                with conn.transaction():
                    if mode == "snapshot":
                        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    yield _PgCursor(conn)

    @contextmanager
    def _translate_errors(self) -> Iterator[None]:
        psycopg, pool_module = self._psycopg, self._psycopg_pool
        try:
            yield
        except psycopg.errors.UniqueViolation as exc:
            raise DuplicateKeyError(f"{self.location}: {exc}") from exc
        except pool_module.PoolTimeout as exc:
            raise StoreError(
                f"{self.location}: no database connection within the timeout ({exc}); is the "
                "server up and the URL right?"
            ) from exc
        except psycopg.Error as exc:
            raise StoreError(f"{self.location}: {exc}") from exc

    def _migration_lock(self, cur: Cursor) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK_KEY,))

    def _table_names(self, cur: Cursor) -> set[str]:
        rows = cur.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
        return {str(r[0]) for r in rows}

    def _engine_integrity(self) -> list[str]:
        # PostgreSQL guards its own pages (and amcheck is an extension we may not assume);
        # the store's invariants are checked by the shared code.
        return []

    def _make_claims(self) -> Claims:
        def connect() -> psycopg.Connection[Any]:
            conn: psycopg.Connection[Any] = self._psycopg.connect(
                self._url, autocommit=True, connect_timeout=self._connect_timeout
            )
            return conn

        return _AdvisoryClaims(connect, namespace=self.schema or "")

    def close(self) -> None:
        """Close the pool's connections; further calls fail clearly."""
        if hasattr(self, "_claims_lock"):
            self._close_claims()
        pool, self._pool = getattr(self, "_pool", None), None
        if pool is not None:
            pool.close()
