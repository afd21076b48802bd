"""Where a SQLite store file can live: why a path cannot hold one, and how to only read it.

A SQLite store writes its file and, in WAL mode, two files beside it (``-wal``, ``-shm``), and
a proxy serving from it a third (``-claims``, empty: the locks of its sessions' claims), so it
needs its folder writable too. :func:`write_problem` says in words what stops that (a file
where a folder should be, a read-only file system, no permission), so the store can refuse with
a message instead of SQLite's "unable to open database file". :func:`read_only_uri` opens a
store that cannot be written for reading only.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

__all__ = ["CLAIMS_SUFFIX", "on_read_only_media", "read_only_uri", "write_problem"]

CLAIMS_SUFFIX = "-claims"
"""The file beside a store whose byte ranges a proxy locks to claim sessions (``store._claims``)."""

_WAL_SUFFIX = "-wal"
_SHM_SUFFIX = "-shm"


def write_problem(path: Path) -> str | None:
    """What stops a SQLite store at ``path`` from being created or written, or None."""
    if path.is_dir():
        return f"{path} is a folder, not a database file"
    existing = _nearest_existing(path.parent)
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    if on_read_only_media(existing):
        return f"{existing} is on a read-only file system"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"no permission to write in the folder {existing}"
    if path.exists() and not os.access(path, os.W_OK):
        return f"no permission to write the file {path}"
    return None


def on_read_only_media(path: Path) -> bool:
    """True when ``path`` (which exists) is on a file system mounted read-only."""
    return bool(os.statvfs(path).f_flag & os.ST_RDONLY)


def read_only_uri(path: Path) -> tuple[str, str | None]:
    """The SQLite URI that opens ``path`` for reading only, or why it cannot be read.

    ``mode=ro`` never writes; on read-only media ``immutable=1`` as well, because SQLite cannot
    create the ``-shm`` file a WAL database needs there. An immutable open ignores a ``-wal``
    file, so one that holds changes while no ``-shm`` exists is reported instead: reading
    without it would silently miss the latest writes.
    """
    uri = "file:" + quote(str(path.absolute())) + "?mode=ro"
    if not on_read_only_media(path.parent):
        return uri, None
    wal = _beside(path, _WAL_SUFFIX)
    if not wal.exists() or wal.stat().st_size == 0:
        return uri + "&immutable=1", None
    if _beside(path, _SHM_SUFFIX).exists():
        return uri, None  # SQLite reads the WAL through the existing -shm
    return uri, (
        f"its write-ahead log {wal.name} holds changes that cannot be read on read-only media "
        f"without {path.name}{_SHM_SUFFIX}; copy the database with its -wal file to a writable "
        "folder and read it there"
    )


def _beside(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists (file or folder)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path
