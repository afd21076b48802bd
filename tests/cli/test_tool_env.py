"""The ``tools.env_allow`` setting: from files and the environment, shown by ``config show``,
and, end to end, credentials kept out of what ``contextfold run``'s shell commands print and
out of the session store, save the ones the setting allows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextfold import ConfigError, Message, ScriptedModel, ToolCallPart
from contextfold.cli import _agent_setup as agent_setup
from contextfold.cli import app
from contextfold.config import load_settings

runner = CliRunner()

PLANTED: dict[str, str] = {
    "OPENAI_API_KEY": "fake-openai-9001",
    "DATABASE_URL": "postgresql://app:fake-db-9002@db.internal/app",
    "PGPASSWORD": "fake-pg-9003",
    "MYSQL_PWD": "fake-mysql-9004",
    "PAYMENTS_SECRET": "fake-payments-9005",
    "DEPLOY_TOKEN": "fake-deploy-9006",
    "SIGNING_KEY": "fake-signing-9007",
}
"""Credentials in the user's environment (fake values that no redactor would recognise, so
that only the tool environment can keep them out of the store)."""
ALLOWED = ("DEPLOY_TOKEN", "fake-deploy-9006")


def test_the_allow_list_comes_from_a_toml_array(tmp_path: Path) -> None:
    (tmp_path / "contextfold.toml").write_text(
        '[tools]\nenv_allow = ["GITHUB_TOKEN", "NPM_TOKEN"]\n'
    )
    settings = load_settings(cwd=tmp_path, environ={})
    assert settings.get("tools.env_allow") == ["GITHUB_TOKEN", "NPM_TOKEN"]


def test_the_allow_list_comes_from_a_comma_separated_variable(tmp_path: Path) -> None:
    environ = {"CONTEXTFOLD_TOOLS__ENV_ALLOW": " GITHUB_TOKEN, NPM_TOKEN ,"}
    settings = load_settings(cwd=tmp_path, environ=environ)
    assert settings.get("tools.env_allow") == ["GITHUB_TOKEN", "NPM_TOKEN"]
    assert settings.source("tools.env_allow") == "env CONTEXTFOLD_TOOLS__ENV_ALLOW"


@pytest.mark.parametrize("value", ["[1, 2]", '["GITHUB TOKEN"]', '["A=B"]'])
def test_a_bad_allow_list_names_the_setting_and_what_to_write(tmp_path: Path, value: str) -> None:
    (tmp_path / "contextfold.toml").write_text(f"[tools]\nenv_allow = {value}\n")
    with pytest.raises(ConfigError, match=r"tools\.env_allow: expected .*variable names"):
        load_settings(cwd=tmp_path, environ={})


def test_config_show_lists_the_setting_with_its_help(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTFOLD_TOOLS__ENV_ALLOW", "GITHUB_TOKEN")
    result = runner.invoke(app, ["config", "show", "--json"])
    assert result.exit_code == 0, result.output
    row = {r["key"]: r for r in json.loads(result.stdout)["settings"]}["tools.env_allow"]
    assert row["value"] == ["GITHUB_TOKEN"]
    assert row["source"] == "env CONTEXTFOLD_TOOLS__ENV_ALLOW"
    assert "credential" in row["help"]


def run_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """Run ``contextfold run`` whose model calls ``shell env`` (the lines of ``PATH`` and the
    planted names only: a machine's whole environment can be long enough to be offloaded, and
    the lines asked about cut from the preview): what the model read, and the raw bytes of the
    session store (every file of it) as text."""
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    names = "|".join(["PATH", *PLANTED])
    call = ToolCallPart.from_args("c_env", "shell", {"command": f"env | grep -E '^({names})='"})
    model = ScriptedModel([Message.assistant("Looking.", [call]), "Done."])
    monkeypatch.setattr(agent_setup, "model_from_name", lambda *a, **k: model)
    store = tmp_path / "store" / "sessions.db"
    store.parent.mkdir()
    args: list[Any] = ["run", "--model", "scripted", "--store", str(store), "--approval", "auto"]
    result = runner.invoke(app, [*args, "Show the environment"])
    assert result.exit_code == 0, result.output
    [shown] = model.requests[1].messages[-1].tool_results
    raw = b"".join(p.read_bytes() for p in store.parent.iterdir()).decode("latin-1")
    return shown.content, raw


@pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")
def test_run_keeps_credentials_out_of_commands_and_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in PLANTED.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CONTEXTFOLD_TOOLS__ENV_ALLOW", ALLOWED[0])
    shown, raw = run_env(tmp_path, monkeypatch)
    assert "PATH=" in shown and "exit code: 0" in shown
    assert f"{ALLOWED[0]}={ALLOWED[1]}" in shown  # the one the user allowed
    for name, value in PLANTED.items():
        if name != ALLOWED[0]:
            assert value not in shown, name
            assert value not in raw, name
