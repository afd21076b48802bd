"""Opening stores: choosing the backend, migrations, and databases from the future."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextfold import SchemaVersionError, StoreError, UsageError
from contextfold.paths import default_store_path
from contextfold.store import LATEST_VERSION, SQLiteStore, _schema, open_store

from .conftest import StoreTarget
from .helpers import tool_turn


def test_with_nothing_given_the_default_file_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    with open_store() as store:
        assert isinstance(store, SQLiteStore)
        store.create_session(session_id="here")
    assert default_store_path().exists()  # under CONTEXTFOLD_HOME, which tests point at tmp


def test_the_environment_variable_names_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTEXTFOLD_DATABASE_URL", f"sqlite://{tmp_path}/from-env.db")
    with open_store() as store:
        store.create_session()
    assert (tmp_path / "from-env.db").exists()
    assert not default_store_path().exists()


def test_paths_and_sqlite_urls_open_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with open_store(path) as store:
        store.create_session(session_id="one")
    with open_store(f"sqlite://{path}") as store:
        assert store.get_session("one").id == "one"
    with open_store(str(path), redact=False, synchronous="FULL") as store:
        assert store.get_session("one").id == "one"


def test_an_unknown_url_scheme_lists_what_works() -> None:
    with pytest.raises(UsageError, match=r"'mysql'.*postgresql://"):
        open_store("mysql://localhost/db")
    with pytest.raises(UsageError, match="needs a path"):
        open_store("sqlite://")


def test_a_new_database_is_at_the_latest_schema(store: object) -> None:
    assert store.schema_version() == LATEST_VERSION  # type: ignore[attr-defined]


def test_reopening_keeps_the_data_and_migrates_nothing(target: StoreTarget) -> None:
    first = target.open()
    sid = first.create_session().id
    first.append_messages(sid, tool_turn(1))
    first.close()

    again = target.open()
    assert again.last_seq(sid) == 3
    versions = target.raw("SELECT version FROM schema_migrations ORDER BY version")
    assert versions == [(m.version,) for m in _schema.MIGRATIONS]  # each recorded once
    assert versions[-1] == (LATEST_VERSION,)


def test_a_database_from_a_newer_contextfold_is_refused_by_name(target: StoreTarget) -> None:
    target.open().close()
    target.raw(
        "INSERT INTO schema_migrations (version, name, applied) VALUES (?, ?, ?)",
        (LATEST_VERSION + 1, "from the future", 0.0),
    )

    with pytest.raises(SchemaVersionError) as caught:
        target.open()
    assert caught.value.found == LATEST_VERSION + 1
    assert caught.value.supported == LATEST_VERSION
    location = target.url.split("@")[-1] if target.backend == "postgres" else target.url
    assert location in str(caught.value)


def test_a_failing_migration_leaves_the_previous_version_intact(
    target: StoreTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    target.open().close()
    broken = _schema.Migration(
        LATEST_VERSION + 1,
        "half-done",
        ("CREATE TABLE half_done (x INTEGER)", "THIS IS NOT SQL"),
    )
    monkeypatch.setattr(_schema, "MIGRATIONS", (*_schema.MIGRATIONS, broken))
    monkeypatch.setattr(_schema, "LATEST_VERSION", LATEST_VERSION + 1)

    with pytest.raises(StoreError):
        target.open()

    monkeypatch.undo()
    assert target.open().schema_version() == LATEST_VERSION
    tables = target.raw(
        "SELECT COUNT(*) FROM schema_migrations WHERE version > ?", (LATEST_VERSION,)
    )
    assert tables == [(0,)]
    with pytest.raises(Exception, match="half_done"):
        target.raw("SELECT * FROM half_done")
