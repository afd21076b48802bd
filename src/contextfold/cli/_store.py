"""Which session store a command reads: ``--store``, else the ``store`` setting, else the default.

Reading commands never create a database: a SQLite file that does not exist yet means there is
nothing to show, and the messages say which file was looked for. A SQLite file they cannot write
(read-only media, no permission) is opened read-only, so it can still be listed, shown and
exported; a command that would change it gets a ``StoreError`` saying why it cannot.

The SQLite WAL-reset warning is said once, when a command creates the store's file (and by
``contextfold doctor``), unless the ``sqlite.warn_wal_reset`` setting is false.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from contextfold.cli._render import print_error
from contextfold.config import Settings, load_settings
from contextfold.errors import StoreError, UsageError
from contextfold.paths import default_store_path
from contextfold.store import (
    BrowsableSessionStore,
    SessionStore,
    SQLiteVersionWarning,
    open_store,
)
from contextfold.store.postgres import redact_url
from contextfold.store.sqlite import wal_reset_explanation
from contextfold.store.sqlite_paths import write_problem

__all__ = [
    "WAL_RESET_ENV",
    "WAL_RESET_SETTING",
    "WAL_RESET_SILENCE",
    "SessionArgument",
    "StoreLocation",
    "StoreOption",
    "browsable",
    "missing_session",
    "open_existing_store",
    "print_store_warnings",
    "resolve_session_id",
    "store_location",
    "wal_reset_notice",
    "warn_wal_reset",
]

_SQLITE_SCHEME = "sqlite://"

WAL_RESET_SETTING = "sqlite.warn_wal_reset"
"""The setting that silences the WAL-reset warning on store creation."""
WAL_RESET_ENV = "CONTEXTFOLD_SQLITE__WARN_WAL_RESET"
"""The environment variable for :data:`WAL_RESET_SETTING`."""
WAL_RESET_SILENCE = (
    f"set {WAL_RESET_SETTING} = false (in contextfold.toml: [sqlite] warn_wal_reset = false) "
    f"or {WAL_RESET_ENV}=0"
)
"""How to stop the WAL-reset warning a new store gives, in words that follow "to stop it,"."""

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
    typer.Argument(
        metavar="SESSION",
        help="The session id, or any unique start of it (see `contextfold sessions list`).",
    ),
]
"""The session id argument of those commands."""


class StoreLocation:
    """Where the store is: the target ``open_store`` takes, and the SQLite file, if any."""

    def __init__(self, target: str, *, warn_wal_reset: bool = True, named: bool = False) -> None:
        self.target = target
        self.warn_wal_reset = warn_wal_reset
        self.named = named
        """The user named this store (``--store`` or the ``store`` setting): a missing file is
        a mistake to report, not an empty default store."""
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
    settings = load_settings()
    named = option or settings.get("store")
    target = named or str(default_store_path())
    return StoreLocation(str(target), warn_wal_reset=warn_wal_reset(settings), named=bool(named))


def warn_wal_reset(settings: Settings) -> bool:
    """Whether creating a SQLite store may say that this SQLite has the WAL-reset bug."""
    return bool(settings.get(WAL_RESET_SETTING, True))


def wal_reset_notice() -> str:
    """The WAL-reset bug in the CLI's words, as a new store announces it: what it is, when it
    matters, the fix, and how to stop the notice (``doctor`` reports it whatever the setting)."""
    return (
        f"{wal_reset_explanation()} To stop this notice, {WAL_RESET_SILENCE}; "
        "`contextfold doctor` still reports it."
    )


def print_store_warnings(caught: Sequence[warnings.WarningMessage], where: object) -> None:
    """Print the warnings opening the store at ``where`` raised, each as one clean line (as the
    CLI prints its errors) instead of Python's source-line format."""
    for warning in caught:
        if issubclass(warning.category, SQLiteVersionWarning):
            notice = f"created a new session store at {where}. {wal_reset_notice()}"
            print_error(notice, warning=True)
        else:
            print_error(str(warning.message), warning=True)


@contextmanager
def open_existing_store(location: StoreLocation) -> Iterator[BrowsableSessionStore]:
    """The store at ``location``, closed afterwards; the caller checked that it exists.

    A SQLite file that cannot be written is opened read-only (see the module docstring).
    """
    options: dict[str, Any] = {}
    if location.file is not None:
        options["warn_wal_reset"] = location.warn_wal_reset  # an empty file becomes a store
        if write_problem(location.file) is not None:
            options["read_only"] = True
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SQLiteVersionWarning)
        store = open_store(location.target, **options)
    print_store_warnings(caught, location)
    try:
        yield store
    finally:
        store.close()


def browsable(store: SessionStore) -> BrowsableSessionStore:
    """The engine's store as one the CLI can look around (the CLI opens a built-in one, which
    is); a ``UsageError`` for a store that only offers what the engine needs."""
    if isinstance(store, BrowsableSessionStore):
        return store
    raise UsageError(
        f"{type(store).__name__} offers only what the engine needs; listing sessions and "
        "reading a transcript back need a built-in store (open_store)"
    )


def missing_session(session_id: str, location: StoreLocation) -> StoreError:
    """The error for a session looked up in a store that does not exist yet."""
    return StoreError(f"no session with id {session_id!r}: there is no session store at {location}")


def resolve_session_id(store: BrowsableSessionStore, given: str) -> str:
    """The id of the session ``given`` names: the id itself, or the one session whose id starts
    with it (ids are long; any unique prefix is accepted wherever an id is taken). An unknown
    id is returned as given, for the lookup to report; a prefix of several ids is an error
    that lists them."""
    try:
        return store.get_session(given).id
    except LookupError:
        pass
    matches = [info.id for info in store.list_sessions() if info.id.startswith(given)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        shown = ", ".join(matches[:_LISTED_MATCHES])
        more = (
            f" and {len(matches) - _LISTED_MATCHES} more" if len(matches) > _LISTED_MATCHES else ""
        )
        raise UsageError(
            f"{given!r} starts {len(matches)} session ids ({shown}{more}); give more of the id"
        )
    return given


_LISTED_MATCHES = 5
"""Session ids an ambiguous prefix's error lists."""
