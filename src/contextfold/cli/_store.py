"""Which session store a command reads: ``--store``, else the ``store`` setting, else the default.

Reading commands never create a database: a SQLite file that does not exist yet means there is
nothing to show, and the messages say which file was looked for. A SQLite file they cannot write
(read-only media, no permission) is opened read-only, so it can still be listed, shown and
exported; a command that would change it gets a ``StoreError`` saying why it cannot.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from contextfold._exceptions import StoreError
from contextfold._paths import default_store_path
from contextfold.cli._render import print_error
from contextfold.config import load_settings
from contextfold.store import SessionStore, SQLiteVersionWarning, open_store
from contextfold.store._sqlite_paths import write_problem
from contextfold.store.postgres import redact_url

__all__ = [
    "SessionArgument",
    "StoreLocation",
    "StoreOption",
    "missing_session",
    "open_existing_store",
    "store_location",
]

_SQLITE_SCHEME = "sqlite://"

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        metavar="PATH|URL",
        help="SQLite path or postgresql:// URL. Default: the `store` setting (config files, "
        "or CONTEXTFOLD_DATABASE_URL), else the SQLite file in the user data folder.",
        show_default=False,
    ),
]
"""The ``--store`` option of every command that reads stored sessions."""

SessionArgument = Annotated[
    str,
    typer.Argument(metavar="SESSION", help="The session id (see `contextfold sessions list`)."),
]
"""The session id argument of those commands."""


class StoreLocation:
    """Where the store is: the target ``open_store`` takes, and the SQLite file, if any."""

    def __init__(self, target: str) -> None:
        self.target = target
        path = target[len(_SQLITE_SCHEME) :] if target.startswith(_SQLITE_SCHEME) else target
        is_file = "://" not in path and path != ":memory:"
        self.file: Path | None = Path(path).expanduser() if is_file else None

    @property
    def exists(self) -> bool:
        """False only for a SQLite file that has not been created yet."""
        return self.file is None or self.file.exists()

    def __str__(self) -> str:
        return str(self.file) if self.file is not None else redact_url(self.target)


def store_location(option: str | None) -> StoreLocation:
    """``--store``, else the ``store`` setting (files, ``CONTEXTFOLD_DATABASE_URL``), else the
    default SQLite file."""
    target = option or load_settings().get("store") or str(default_store_path())
    return StoreLocation(str(target))


@contextmanager
def open_existing_store(location: StoreLocation) -> Iterator[SessionStore]:
    """The store at ``location``, closed afterwards; the caller checked that it exists.

    A SQLite file that cannot be written is opened read-only (see the module docstring).
    """
    read_only = location.file is not None and write_problem(location.file) is not None
    options = {"read_only": True} if read_only else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SQLiteVersionWarning)
        store = open_store(location.target, **options)
    for warning in caught:
        # One clean line, as the CLI prints its errors, instead of Python's source-line format.
        print_error(str(warning.message), warning=True)
    try:
        yield store
    finally:
        store.close()


def missing_session(session_id: str, location: StoreLocation) -> StoreError:
    """The error for a session looked up in a store that does not exist yet."""
    return StoreError(f"no session with id {session_id!r}: there is no session store at {location}")
