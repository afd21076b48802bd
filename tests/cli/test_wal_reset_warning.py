"""The SQLite WAL-reset warning: said once, when a command creates the store; always by doctor;
silenced by ``sqlite.warn_wal_reset``.

The version of SQLite is set by the tests (the stock 3.40.1 of Debian 12, or a fixed 3.51.3), so
they pass the same on a machine with any SQLite.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextfold import ScriptedModel
from contextfold.cli import _agent_setup as agent_setup
from contextfold.cli import app
from contextfold.store import sqlite as sqlite_module

runner = CliRunner()

WARNING = "WAL-reset bug"


@pytest.fixture
def buggy_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_module.sqlite3, "sqlite_version_info", (3, 40, 1))
    monkeypatch.setattr(sqlite_module.sqlite3, "sqlite_version", "3.40.1")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    model = ScriptedModel(default=lambda request: "done")
    monkeypatch.setattr(agent_setup, "model_from_name", lambda *a, **k: model)
    return tmp_path / "sessions.db"


def chat(store: Path, *lines: str, env: dict[str, str] | None = None) -> Any:
    text = "".join(line + "\n" for line in lines)
    args = ["chat", "--model", "scripted", "--store", str(store)]
    result = runner.invoke(app, args, input=text, env={"NO_COLOR": "1", **(env or {})})
    assert result.exit_code == 0, result.output
    return result


def doctor_check() -> dict[str, Any]:
    result = runner.invoke(app, ["doctor", "--json"])
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    return dict(checks["sqlite library"])


@pytest.mark.usefixtures("buggy_sqlite")
def test_the_command_that_creates_the_store_warns_and_the_next_ones_do_not(store: Path) -> None:
    first = chat(store, "hello", "/quit")
    assert f"warning: created a new session store at {store}." in first.stderr
    assert WARNING in first.stderr and "3.51.3" in first.stderr
    assert "two processes write to one session store at the same moment" in first.stderr
    assert "PostgreSQL" in first.stderr  # the fix for many writers
    assert "sqlite.warn_wal_reset = false" in first.stderr  # how to stop it
    assert first.stderr.count(WARNING) == 1

    second = chat(store, "again", "/quit")
    assert WARNING not in second.stderr
    for command in (["sessions", "list"], ["config", "show"]):
        assert WARNING not in runner.invoke(app, [*command, "--store", str(store)]).stderr


@pytest.mark.usefixtures("buggy_sqlite")
def test_the_environment_variable_silences_it(store: Path) -> None:
    result = chat(store, "/quit", env={"CONTEXTFOLD_SQLITE__WARN_WAL_RESET": "0"})
    assert store.exists()
    assert WARNING not in result.stderr


@pytest.mark.usefixtures("buggy_sqlite")
def test_the_config_file_silences_it(store: Path) -> None:
    (store.parent / "contextfold.toml").write_text("[sqlite]\nwarn_wal_reset = false\n")
    assert WARNING not in chat(store, "/quit").stderr
    shown = json.loads(runner.invoke(app, ["config", "show", "--json"]).stdout)
    row = next(r for r in shown["settings"] if r["key"] == "sqlite.warn_wal_reset")
    assert (row["value"], row["default"]) == (False, True)
    assert row["source"] == str(store.parent / "contextfold.toml")


def test_config_show_lists_the_setting() -> None:
    out = runner.invoke(app, ["config", "show"], env={"COLUMNS": "200"}).stdout
    (line,) = [line for line in out.splitlines() if line.startswith("sqlite.warn_wal_reset")]
    assert line.split()[1:3] == ["true", "default"]


@pytest.mark.usefixtures("buggy_sqlite")
def test_doctor_always_reports_it_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    check = doctor_check()
    assert check["status"] == "warn"
    assert WARNING in check["detail"] and "3.40.1" in check["detail"]
    assert "One agent at a time per store is not affected" in check["detail"]
    assert "SQLite 3.51.3 or newer" in check["detail"] and "PostgreSQL" in check["detail"]
    assert "CONTEXTFOLD_SQLITE__WARN_WAL_RESET=0" in check["detail"]

    # Silenced elsewhere, doctor still says it, as a note that no longer counts as a warning.
    monkeypatch.setenv("CONTEXTFOLD_SQLITE__WARN_WAL_RESET", "false")
    silenced = doctor_check()
    assert silenced["status"] == "info" and WARNING in silenced["detail"]
    assert "sqlite.warn_wal_reset is false" in silenced["detail"]


def test_doctor_is_content_with_a_fixed_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_module.sqlite3, "sqlite_version_info", (3, 51, 3))
    check = doctor_check()
    assert check["status"] == "ok" and WARNING not in check["detail"]
