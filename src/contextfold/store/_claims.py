"""Claims on sessions that last exactly as long as the process holding them.

The proxy answers a request in a session only while it holds that session's claim, taken
before the ``x-contextfold-session`` header goes out. Two identical requests at once, on two
workers or two machines sharing PostgreSQL, find the same session: one claims it, the other
forks before its header is sent, so each header names the session that will hold its reply.

A claim must never outlive its holder. A worker killed mid-request would otherwise leave its
sessions claimed, and the client's retry would fork a session nobody is answering in. So a
claim is a lock the operating system or the database server drops when the holder dies, not a
row with a timer:

- beside a SQLite file, a byte-range lock on ``<database>-claims`` (an open-file-description
  lock on Linux: owned by this store's descriptor, so two stores in one process exclude each
  other too; elsewhere a POSIX record lock, owned by the process);
- on PostgreSQL, a session-level advisory lock held on a connection of its own
  (:class:`~contextfold.store.postgres.PostgresStore` makes it);
- for a store in memory, a set: no other process can see that store.

Each session id maps to a 62-bit lock key (a SHA-256 prefix): two sessions sharing one is
astronomically unlikely, and would cost only a fork. The holder releases a claim when its
request ends, however it ends; a claim is never waited for (``claim`` answers at once).
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
import threading
from abc import ABC, abstractmethod
from pathlib import Path

from contextfold.errors import StoreError

if sys.platform != "win32":
    import fcntl

__all__ = ["Claims", "FileClaims", "ProcessClaims", "claim_key"]


def claim_key(session_id: str, namespace: str = "") -> int:
    """The lock key of ``session_id`` (a non-negative 62-bit integer)."""
    digest = hashlib.sha256(f"{namespace}\0{session_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 2


class Claims(ABC):
    """Claims on sessions, held by this store (see the module docstring). A session claimed
    here is not claimed again here until released: one request per session per store."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: set[str] = set()

    def claim(self, session_id: str) -> bool:
        """Take ``session_id``; False when a request (of this store, or of any other process
        or machine on the same database) holds it."""
        with self._lock:
            if session_id in self._held or not self._take(session_id):
                return False
            self._held.add(session_id)
            return True

    def release(self, session_id: str) -> None:
        """Give ``session_id`` back (nothing when it is not held here)."""
        with self._lock:
            if session_id in self._held:
                self._held.discard(session_id)
                self._give(session_id)

    def close(self) -> None:
        """Release every claim and what holds them."""
        with self._lock:
            self._held.clear()
            self._close()

    @abstractmethod
    def _take(self, session_id: str) -> bool:
        """The lock that other processes see; False when another holds it."""

    @abstractmethod
    def _give(self, session_id: str) -> None: ...

    def _close(self) -> None:
        return None


class ProcessClaims(Claims):
    """Claims for a store only this process can open (SQLite in memory)."""

    def _take(self, session_id: str) -> bool:
        return True

    def _give(self, session_id: str) -> None:
        return None


_OFD = sys.platform == "linux" and struct.calcsize("P") == 8 and hasattr(fcntl, "F_OFD_SETLK")
"""Open-file-description locks (Linux, 64-bit ``struct flock``): per descriptor, not per
process."""


class FileClaims(Claims):
    """Claims as byte-range locks on a file beside a SQLite database (see the module
    docstring); the file is created 0600 and stays empty. Not on Windows (no ``fcntl``)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        try:
            self._fd: int | None = os.open(path, flags, 0o600)
        except OSError as exc:
            raise StoreError(
                f"{path}: cannot open the file of the sessions' claims ({exc})"
            ) from None

    def _lock_range(self, session_id: str, kind: int) -> bool:
        if sys.platform == "win32":
            raise NotImplementedError("FileClaims needs fcntl")
        if self._fd is None:
            raise ValueError(f"{self.path}: the claims file is closed")
        start = claim_key(session_id)
        try:
            if _OFD:
                # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for OFD), padding.
                lock = struct.pack("hhqqi4x", kind, os.SEEK_SET, start, 1, 0)
                fcntl.fcntl(self._fd, fcntl.F_OFD_SETLK, lock)
            elif kind == fcntl.F_UNLCK:
                fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, start, os.SEEK_SET)
            else:
                fcntl.lockf(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, start, os.SEEK_SET)
        except (BlockingIOError, PermissionError):
            return False
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot lock a session's claim ({exc})") from None
        return True

    def _take(self, session_id: str) -> bool:
        return sys.platform != "win32" and self._lock_range(session_id, fcntl.F_WRLCK)

    def _give(self, session_id: str) -> None:
        if sys.platform != "win32":
            self._lock_range(session_id, fcntl.F_UNLCK)

    def _close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # drops every lock this descriptor held
