"""Files only their owner can read, for everything contextfold writes outside its store (the
events log, ``sessions export`` files, the chat history).

A file is created with mode :data:`PRIVATE_FILE_MODE` by ``os.open`` itself, so it is never
readable by others, not even for the moment a ``chmod`` after creating it would leave open. An
existing regular file with wider permissions (written by an older version) is narrowed before
anything is written to it; devices and pipes (``-o /dev/stdout``) are left as they are.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TextIO

__all__ = ["PRIVATE_DIR_MODE", "PRIVATE_FILE_MODE", "open_private"]

PRIVATE_FILE_MODE = 0o600
"""Read and write for the owner, nothing for anyone else."""
PRIVATE_DIR_MODE = 0o700
"""The mode of folders contextfold creates for its private files."""


def open_private(path: str | os.PathLike[str], *, append: bool, errors: str = "strict") -> TextIO:
    """``path`` opened for writing UTF-8 text (appending, or truncated), created 0600."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), PRIVATE_FILE_MODE)
    try:
        status = os.fstat(fd)
        if stat.S_ISREG(status.st_mode) and stat.S_IMODE(status.st_mode) & 0o077:
            os.fchmod(fd, PRIVATE_FILE_MODE)
        return os.fdopen(fd, "a" if append else "w", encoding="utf-8", errors=errors)
    except BaseException:
        os.close(fd)
        raise


def make_private_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` created with mode 0700 if missing (its missing parents with the default mode;
    existing folders untouched)."""
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    return folder
