"""The files the CLI writes for you are redacted and readable only by you: ``sessions export``
output and the chat's prompt history."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextfold.cli import app
from contextfold.cli._history import PrivateFileHistory
from contextfold.cli._repl import HISTORY_FILE, _history
from contextfold.paths import data_dir
from tests.cli.conftest import PopulatedStore
from tests.test_private_files import KEY, file_mode, wide_umask  # noqa: F401 (a fixture)

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("wide_umask")


def _export(store: PopulatedStore, target: Path) -> None:
    args = ["sessions", "export", store.session_id, "-o", str(target), "--store", str(store.path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output


def test_an_export_file_is_created_private(populated_store: PopulatedStore, tmp_path: Path) -> None:
    target = tmp_path / "session.jsonl"
    _export(populated_store, target)
    assert file_mode(target) == 0o600
    assert target.read_text(encoding="utf-8").startswith('{"kind":"session"')


def test_an_export_over_a_world_readable_file_narrows_it_first(
    populated_store: PopulatedStore, tmp_path: Path
) -> None:
    target = tmp_path / "session.jsonl"
    target.write_text("stale export line\n", encoding="utf-8")
    target.chmod(0o644)
    _export(populated_store, target)
    assert file_mode(target) == 0o600 and "stale" not in target.read_text(encoding="utf-8")


def test_the_chat_history_file_is_redacted_and_private(tmp_path: Path) -> None:
    path = tmp_path / "data" / "chat_history"
    history = PrivateFileHistory(path)
    history.append_string(f"use the key {KEY} for the deploy")
    history.append_string("run the tests\nthen commit")

    text = path.read_text(encoding="utf-8")
    assert KEY not in text and "+use the key [REDACTED:api-key] for the deploy" in text
    assert file_mode(path) == 0o600 and file_mode(path.parent) == 0o700
    # prompt_toolkit reads it back as before: newest first, multi-line entries whole.
    assert list(PrivateFileHistory(path).load_history_strings()) == [
        "run the tests\nthen commit",
        "use the key [REDACTED:api-key] for the deploy",
    ]


def test_a_history_an_older_version_wrote_in_clear_is_scrubbed_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "chat_history"
    path.write_text(f"\n# 2025-01-01 10:00:00\n+export OPENAI_API_KEY={KEY}\n", encoding="utf-8")
    path.chmod(0o644)

    PrivateFileHistory(path)

    assert KEY not in path.read_text(encoding="utf-8") and file_mode(path) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["chat_history"]  # no temporary file left


def test_the_chat_keeps_its_history_in_a_private_file_of_the_user_data_folder() -> None:
    history = _history()
    assert isinstance(history, PrivateFileHistory)
    assert history.path == data_dir() / HISTORY_FILE
