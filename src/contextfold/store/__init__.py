"""Session stores: where transcripts, context edits, events, snapshots and tool outputs persist.

:func:`open_store` picks the backend from a URL or path: SQLite (the default, a file under the
user data folder) or PostgreSQL (``postgresql://...``). Both pass one conformance suite.
Everything persisted passes a secret redactor unless the store is opened with ``redact=False``.

A store of your own implements :class:`SessionStore`, the few methods the engine calls; the
built-in stores are also browsable (:class:`BrowsableSessionStore`): the CLI lists them, reads
them back and exports them.
"""

from __future__ import annotations

import os
from typing import Any

from contextfold.errors import UsageError
from contextfold.paths import default_store_path
from contextfold.redaction.redactor import redact_json, redact_text
from contextfold.store._async import AsyncStoreMixin
from contextfold.store._records import EditRecord, EventRecord, LoadedView, SessionInfo, Snapshot
from contextfold.store._schema import LATEST_VERSION
from contextfold.store.base import BrowsableSessionStore, PrefixIndex, SessionStore
from contextfold.store.postgres import DATABASE_URL_ENV, PostgresStore
from contextfold.store.sqlite import SQLiteStore, SQLiteVersionWarning

__all__ = [
    "DATABASE_URL_ENV",
    "LATEST_VERSION",
    "AsyncStoreMixin",
    "BrowsableSessionStore",
    "EditRecord",
    "EventRecord",
    "LoadedView",
    "PostgresStore",
    "PrefixIndex",
    "SQLiteStore",
    "SQLiteVersionWarning",
    "SessionInfo",
    "SessionStore",
    "Snapshot",
    "open_store",
    "redact_json",
    "redact_text",
]

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_SQLITE_SCHEME = "sqlite://"


def open_store(
    url_or_path: str | os.PathLike[str] | None = None, **options: Any
) -> SQLiteStore | PostgresStore:
    """The session store at ``url_or_path``, opened and migrated to the current schema.

    - ``None``: ``$CONTEXTFOLD_DATABASE_URL`` if set, else the default SQLite file
      (``<user data dir>/sessions.db``, under ``$CONTEXTFOLD_HOME`` when that is set);
    - ``"postgresql://..."`` (or ``postgres://``): a :class:`PostgresStore`;
    - ``"sqlite:///path/to/file.db"``, a plain path, or ``":memory:"``: a :class:`SQLiteStore`.

    ``options`` go to the store's constructor (``redact=False``, ``synchronous="FULL"``,
    ``max_size=8``, ...).
    """
    if url_or_path is None:
        url_or_path = os.environ.get(DATABASE_URL_ENV) or default_store_path()
    target = os.fspath(url_or_path)
    if target.startswith(_POSTGRES_SCHEMES):
        # psycopg is imported here, not with the package: SQLite users need not install it.
        return PostgresStore(target, **options)
    if target.startswith(_SQLITE_SCHEME):
        target = target[len(_SQLITE_SCHEME) :]
        if not target:
            raise UsageError("a sqlite:// URL needs a path: sqlite:///path/to/sessions.db")
    elif "://" in target:
        scheme = target.split("://", 1)[0]
        raise UsageError(
            f"unsupported store URL scheme {scheme!r}; use a file path, sqlite:///path, or "
            "postgresql://user@host/dbname"
        )
    return SQLiteStore(target, **options)
