"""``contextfold doctor``: reports the installation, hides secrets, fails only when broken."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextfold.cli import app
from contextfold.config import API_KEY_ENV_VARS
from contextfold.paths import config_dir, default_store_path

runner = CliRunner()


def test_doctor_reports_and_exits_zero() -> None:
    result = runner.invoke(app, ["doctor"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    for label in ("python", "platform", "sqlite library", "tiktoken", "o200k_base ranks"):
        assert f"  {label} " in out
    assert sqlite3.sqlite_version in out
    for package in ("openai", "anthropic", "psycopg", "psycopg_pool"):
        assert f"  {package} " in out
    assert str(default_store_path()) in out
    assert "CONTEXTFOLD_DATABASE_URL" in out
    assert out.rstrip().splitlines()[-1].startswith("ready")


def test_tokenizers_load_from_local_files() -> None:
    data = json.loads(runner.invoke(app, ["doctor", "--json"]).stdout)
    ranks = [c for c in data["checks"] if c["name"].endswith(" ranks")]
    assert {c["name"] for c in ranks} == {"o200k_base ranks", "cl100k_base ranks"}
    assert all(c["status"] == "ok" for c in ranks)  # and the network guard saw no download


def test_api_keys_are_reported_but_never_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-very-secret-value")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = runner.invoke(app, ["doctor", "--json"])
    assert "very-secret" not in result.stdout
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["OPENAI_API_KEY"]["detail"].startswith("set")
    assert checks["ANTHROPIC_API_KEY"]["detail"].startswith("not set")
    assert set(API_KEY_ENV_VARS.values()) <= set(checks)


def test_database_url_password_is_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTFOLD_DATABASE_URL", "postgresql://bob:hunter2@127.0.0.1:9/agents")
    result = runner.invoke(app, ["doctor"])
    assert "hunter2" not in result.stdout
    assert "set: postgresql://bob:***@127.0.0.1:9/agents" in result.stdout


def test_config_files_are_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    project = tmp_path / "contextfold.toml"
    project.write_text('preset = "window"\n', encoding="utf-8")
    checks = {
        c["name"]: c for c in json.loads(runner.invoke(app, ["doctor", "--json"]).stdout)["checks"]
    }
    assert checks["project file"]["detail"] == str(project)
    assert checks["user file"]["detail"].startswith(str(config_dir() / "config.toml"))


def test_broken_config_fails_the_check(tmp_path: Path) -> None:
    user_file = config_dir() / "config.toml"
    user_file.parent.mkdir(parents=True, exist_ok=True)
    user_file.write_text("thresholds = [not toml\n", encoding="utf-8")
    result = runner.invoke(app, ["doctor"])
    assert result.exit_code == 1
    assert "not valid TOML" in result.stdout
    assert "1 problem to fix" in result.stdout


POSTGRES = "postgresql://postgres@127.0.0.1:5432"


def _store_check(monkeypatch: pytest.MonkeyPatch) -> tuple[int, dict[str, str]]:
    result = runner.invoke(app, ["doctor", "--json"])
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    return result.exit_code, checks["store"]


def _postgres_is_up() -> bool:
    try:
        import psycopg

        psycopg.connect(f"{POSTGRES}/postgres", connect_timeout=3).close()
    except Exception:
        return False
    return True


def test_a_missing_postgres_database_fails_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not _postgres_is_up():
        pytest.skip(f"no PostgreSQL server at {POSTGRES}")
    monkeypatch.chdir(tmp_path)
    project = tmp_path / "contextfold.toml"
    project.write_text(f'store = "{POSTGRES}/no_such_db"\n', encoding="utf-8")
    code, check = _store_check(monkeypatch)
    assert code == 1 and check["status"] == "error"
    assert 'database "no_such_db" does not exist' in check["detail"]
    assert f"the `store` setting, from {project}" in check["detail"]
    result = runner.invoke(app, ["doctor"])
    assert "ready" not in result.stdout.rstrip().splitlines()[-1]


def test_an_existing_postgres_database_is_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    if not _postgres_is_up():
        pytest.skip(f"no PostgreSQL server at {POSTGRES}")
    monkeypatch.setenv("CONTEXTFOLD_STORE", f"{POSTGRES}/postgres")
    _, check = _store_check(monkeypatch)
    assert check["status"] == "ok", check
    assert "env CONTEXTFOLD_STORE" in check["detail"]


def test_an_unwritable_sqlite_store_fails_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    not_a_folder = tmp_path / "notes.txt"
    not_a_folder.write_text("a file where the store's folder should be\n", encoding="utf-8")
    monkeypatch.setenv("CONTEXTFOLD_STORE", str(not_a_folder / "sessions.db"))
    code, check = _store_check(monkeypatch)
    assert code == 1 and check["status"] == "error"
    assert f"{not_a_folder} is a file, not a folder" in check["detail"]
    assert "the `store` setting, from env CONTEXTFOLD_STORE" in check["detail"]


def test_no_configured_store_means_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTEXTFOLD_STORE", raising=False)
    monkeypatch.delenv("CONTEXTFOLD_DATABASE_URL", raising=False)
    _, check = _store_check(monkeypatch)
    assert check["status"] == "info" and "default store" in check["detail"]
