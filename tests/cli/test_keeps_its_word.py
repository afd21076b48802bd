"""The CLI keeps its word (issue 30): ids are accepted by any unique prefix, a missing input is an
error rather than an empty result, an empty task is refused, a failed run leaves no session,
the proxy's preset option is called --preset, help examples look like real ids, and the HTML
report is written 0600."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from contextfold.cli import app
from contextfold.cli._store import resolve_session_id
from contextfold.errors import UsageError
from contextfold.store import open_store

runner = CliRunner()
ENV = {"NO_COLOR": "1", "COLUMNS": "200"}


def _said(result: Result) -> str:
    """What the command printed, with the error the CLI's boundary would print."""
    return result.output + str(result.exception or "")


def _store_with_sessions(path: Path, count: int) -> list[str]:
    store = open_store(path)
    try:
        return [store.create_session(title=f"session {i}").id for i in range(count)]
    finally:
        store.close()


def test_any_unique_prefix_names_a_session(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    ids = _store_with_sessions(path, 3)
    first = ids[0]
    unique = next(
        first[:n] for n in range(5, len(first)) if sum(i.startswith(first[:n]) for i in ids) == 1
    )
    for command in (["sessions", "show"], ["inspect"], ["sessions", "export"]):
        result = runner.invoke(app, [*command, unique, "--store", str(path)], env=ENV)
        assert result.exit_code == 0, result.output
        assert first in result.stdout or '"session_id"' in result.stdout
    store = open_store(path)
    try:
        with pytest.raises(UsageError, match="give more of the id"):
            resolve_session_id(store, "ses_")  # the start of every id
        assert resolve_session_id(store, "ses_nothing") == "ses_nothing"  # for the lookup
    finally:
        store.close()


def test_sessions_list_prints_ids_whole_at_80_columns(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    ids = _store_with_sessions(path, 2)
    result = runner.invoke(
        app, ["sessions", "list", "--store", str(path)], env={**ENV, "COLUMNS": "80"}
    )
    assert result.exit_code == 0, result.output
    for session_id in ids:
        assert session_id in result.stdout


def test_a_store_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "s.db"
    result = runner.invoke(app, ["sessions", "list", "--store", str(missing)], env=ENV)
    assert result.exit_code == 1
    assert "no session store at" in _said(result)
    assert not missing.exists()


def test_replay_of_a_missing_folder_is_an_error(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    result = runner.invoke(app, ["replay", "--report", str(report), str(tmp_path / "missing")])
    assert result.exit_code == 1, result.output
    assert "no such file or folder" in _said(result)
    assert not report.exists()  # no empty report


def test_an_empty_task_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    for task in ("", "   "):
        result = runner.invoke(app, ["run", task, "--model", "scripted/x", "--store", str(store)])
        assert result.exit_code == 1
        assert "the task is empty" in _said(result)
    assert not store.exists()


def test_a_failed_run_leaves_no_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "s.db"
    args = ["run", "say hello", "--model", "openai-compatible/qwen3", "--store", str(store)]
    args += ["--base-url", "http://127.0.0.1:9/v1", "--window", "8000"]
    result = runner.invoke(app, args, env={**ENV, "OPENAI_API_KEY": "sk-test"})
    assert result.exit_code == 1, result.output
    listed = runner.invoke(app, ["sessions", "list", "--store", str(store), "--json"], env=ENV)
    assert listed.stdout.strip() in ("[]", "")


def test_the_proxy_takes_preset_and_hides_the_old_name() -> None:
    result = runner.invoke(app, ["proxy", "--help"], env=ENV)
    assert "--preset" in result.stdout
    assert "--compactor" not in result.stdout


def test_help_examples_use_ids_that_look_real() -> None:
    for command in (["inspect"], ["sessions", "show"], ["sessions", "delete"]):
        result = runner.invoke(app, [*command, "--help"], env=ENV)
        assert "sess_" not in result.stdout
        assert "ses_" in result.stdout


def test_the_html_report_is_private(tmp_path: Path) -> None:
    example_path = Path(__file__).resolve().parents[2] / "examples" / "coding_session.json"
    report = tmp_path / "report.html"
    result = runner.invoke(app, ["replay", str(example_path), "--report", str(report)], env=ENV)
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(report.stat().st_mode) == 0o600


def test_a_wrong_provider_is_the_first_thing_said() -> None:
    """Not "pass --window": the window of a provider that does not exist is beside the point."""
    result = runner.invoke(app, ["run", "--model", "nosuch/model", "hi"], env=ENV)
    assert result.exit_code != 0
    said = _said(result)
    assert "names no known provider" in said and "--window" not in said


def test_a_bad_window_is_reported_as_the_variable_that_set_it() -> None:
    result = runner.invoke(
        app, ["run", "--model", "scripted/x", "hi"], env={**ENV, "CONTEXTFOLD_WINDOW": "-5"}
    )
    assert result.exit_code != 0
    said = " ".join(_said(result).split())
    assert "CONTEXTFOLD_WINDOW" in said and "-5" in said and "models." not in said


def test_sessions_list_keeps_the_model_column_at_80_columns(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = open_store(path)
    try:
        store.create_session(title="a long title " * 5, model="anthropic/claude-sonnet-4-5")
    finally:
        store.close()
    result = runner.invoke(
        app, ["sessions", "list", "--store", str(path)], env={**ENV, "COLUMNS": "80"}
    )
    assert result.exit_code == 0, result.output
    header = result.stdout.splitlines()[0].split()
    assert header == ["id", "title", "model", "messages", "updated"]
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
