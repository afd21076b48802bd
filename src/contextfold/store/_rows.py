"""How the SQL helpers (schema, export, integrity) reach a store's rows, without the store.

:class:`Rows` is all they are given: a transaction in one of the three modes, a session's head
and keyset reads in batches. The store builds it from its backend's transaction, so the helpers
never see the store's own methods and the store's modules import each other in one direction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, TypeAlias

from contextfold.errors import SessionNotFoundError
from contextfold.store._queries import HEAD, Cursor, TxMode

__all__ = ["DEFAULT_BATCH_SIZE", "Rows", "Transactions"]

DEFAULT_BATCH_SIZE = 500
"""Rows read per query by the lazy iterators: memory stays flat however long the session."""

Transactions: TypeAlias = Callable[[TxMode], AbstractContextManager[Cursor]]
"""A backend's transaction: commits on success, rolls back on error."""


class Rows:
    """A store's rows, read through its backend's transactions.

    ``batch_size`` rows are read per round trip by :meth:`batches` (the default when it is 0).
    """

    def __init__(self, transaction: Transactions, batch_size: int = 0) -> None:
        self._transaction = transaction
        self.batch_size = batch_size if batch_size > 0 else DEFAULT_BATCH_SIZE

    def transaction(self, mode: TxMode) -> AbstractContextManager[Cursor]:
        """A transaction in ``mode`` (see :data:`~contextfold.store._queries.TxMode`)."""
        return self._transaction(mode)

    def head(self, cur: Cursor, session_id: str) -> tuple[int, int]:
        """The session's last message seq and last edit number; ``SessionNotFoundError`` when
        there is no such session."""
        rows = cur.execute(HEAD, (session_id, session_id, session_id))
        if not rows:
            raise SessionNotFoundError(session_id)
        return int(rows[0][0]), int(rows[0][1])

    def batches(
        self,
        sql: str,
        session_id: str,
        after: Any,
        upto: Any,
        limit: int | None = None,
    ) -> Iterator[tuple[Any, ...]]:
        """Rows of a keyset query, a batch per read transaction, lazily.

        ``sql`` takes ``(session_id, after, upto, batch size)`` and orders by its first column,
        the key: each batch starts after the last key of the one before. ``limit`` caps the
        rows in all.
        """
        remaining = limit
        while remaining is None or remaining > 0:
            size = self.batch_size if remaining is None else min(self.batch_size, remaining)
            with self._transaction("read") as cur:
                rows = cur.execute(sql, (session_id, after, upto, size))
            yield from rows
            if len(rows) < size:
                return
            after = rows[-1][0]
            if remaining is not None:
                remaining -= len(rows)
