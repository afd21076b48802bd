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
    monkeypatch.setenv("CONTEXTFOLD_DATABASE_URL", "postgresql://bob:hunter2@db.local/agents")
    result = runner.invoke(app, ["doctor"])
    assert "hunter2" not in result.stdout
    assert "set: postgresql://bob:***@db.local/agents" in result.stdout


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
