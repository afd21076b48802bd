"""Malformed input gets a FormatError naming file and line: each site the importer fuzz found
(``benchmarks/format_fuzz.py``), and a JSON Lines file whose last line is still being written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextfold.errors import FormatError, UnknownFormatError
from contextfold.transcripts import (
    load_chat,
    load_claude_code,
    load_codex,
    load_mini_swe_agent,
    load_tau_bench,
    load_transcript,
    load_transcripts,
)
from tests.formats.test_detect import CLAUDE_RECORD
from tests.formats.writers import write_json, write_jsonl

DEEP = 100_000
"""Nesting far beyond what Python's JSON reader can recurse into."""


def _error(path: Path, load=load_transcripts) -> FormatError:  # type: ignore[no-untyped-def]
    with pytest.raises(FormatError) as caught:
        load(path)
    assert caught.value.path == str(path)
    return caught.value


def _claude(n: int, **changes: object) -> dict[str, object]:
    record = dict(CLAUDE_RECORD, uuid=f"u{n}", parentUuid=f"u{n - 1}" if n > 1 else None)
    return record | changes


# -- JSON itself -----------------------------------------------------------------------------------


def test_deep_nesting_in_a_json_document_is_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"messages":\n' + "[" * DEEP + "]" * DEEP + "}", encoding="utf-8")
    error = _error(path)
    assert error.line == 1 and "nested too deeply" in error.reason


def test_deep_nesting_in_a_json_lines_record_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    good = json.dumps(_claude(1))
    path.write_text(f"{good}\n{good}\n" + "[" * DEEP + "]" * DEEP + "\n", encoding="utf-8")
    error = _error(path)
    assert error.line == 3 and "nested too deeply" in error.reason


def test_a_number_too_long_to_read_is_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    record = json.dumps(_claude(2)).replace('"sessionId"', '"n": ' + "9" * 5_000 + ', "sessionId"')
    path.write_text(json.dumps(_claude(1)) + "\n" + record + "\n", encoding="utf-8")
    error = _error(path)
    assert error.line == 2 and "digits" in error.reason


def test_an_undecodable_byte_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(json.dumps(_claude(1)).encode() + b'\n{"type": "\xff"}\n')
    error = _error(path)
    assert error.line == 2 and "not UTF-8" in error.reason


# -- values of the wrong type ----------------------------------------------------------------------


@pytest.mark.parametrize("role", [[], {}, ["user"], None, 3])
def test_a_role_that_is_not_a_string(tmp_path: Path, role: object) -> None:
    path = write_json(tmp_path / "chat.json", [{"role": role}])
    detected = _error(path)
    assert isinstance(detected, UnknownFormatError)
    direct = _error(path, load_chat)
    assert direct.line == 1 and "message 0: unknown role" in direct.reason


def test_an_unknown_role_names_the_line_of_its_message(tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yes"}]
    document = {"model": "gpt-4o", "messages": [*messages, {"role": "wizard"}]}
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    error = _error(path, load_chat)
    assert error.reason == "message 2: unknown role 'wizard'"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert '"wizard"' in lines[error.line] or '"wizard"' in lines[error.line - 1]
    assert lines[error.line - 1].strip() == "{"  # the line where that message starts


def test_the_role_in_an_error_is_shown_short(tmp_path: Path) -> None:
    path = write_json(tmp_path / "chat.json", [{"role": "user"}, {"role": ["x" * 5_000]}])
    error = _error(path, load_chat)
    assert error.reason.startswith("message 1: unknown role [")
    assert len(error.reason) < 200


def test_a_tau_bench_message_error_names_its_line(tmp_path: Path) -> None:
    runs = [{"task_id": 1, "traj": [{"role": "user", "content": "q"}, 7]}]
    path = tmp_path / "tau.json"
    path.write_text(json.dumps(runs, indent=1), encoding="utf-8")
    error = _error(path, load_tau_bench)
    assert error.reason == "run 0: message 1: expected an object, got int"
    assert path.read_text(encoding="utf-8").splitlines()[error.line - 1].strip() == "7"


@pytest.mark.parametrize(
    "usage", [[1, 2], "120", 7, {"prompt_tokens": [1]}, {"prompt_tokens": 1e999}]
)
def test_an_openai_usage_of_the_wrong_shape_is_no_usage(tmp_path: Path, usage: object) -> None:
    trajectory = {
        "info": {"mini_version": "2.0"},
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "done", "extra": {"response": {"usage": usage}}},
        ],
    }
    path = tmp_path / "t.traj.json"
    path.write_text(json.dumps(trajectory), encoding="utf-8")
    transcript = load_mini_swe_agent(path)
    usage_read = transcript.messages[1].meta.usage
    assert usage_read is None or usage_read.input_tokens == 0


@pytest.mark.parametrize(
    "usage", [[1], "x", {"input_tokens": "many"}, {"input_tokens": {}, "output_tokens": -5}]
)
def test_an_anthropic_usage_of_the_wrong_shape_is_no_usage(tmp_path: Path, usage: object) -> None:
    message = {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "ok"}]}
    record = _claude(2, type="assistant", message=message | {"usage": usage})
    transcript = load_claude_code(write_jsonl(tmp_path / "s.jsonl", [_claude(1), record]))
    read = transcript.messages[1].meta.usage
    assert read is None or (read.input_tokens, read.output_tokens) == (0, 0)


@pytest.mark.parametrize(
    "timestamp", [10**400, -(10**30), 1e308, "0001-01-01T00:00:00+14:00", [2026], True]
)
def test_a_timestamp_out_of_range_is_no_time(tmp_path: Path, timestamp: object) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", [_claude(1, timestamp=timestamp), _claude(2)])
    transcript = load_claude_code(path)
    assert transcript.messages[0].meta.created_at is None


@pytest.mark.parametrize("kind", [["response_item"], {"a": 1}, 5])
def test_a_codex_record_whose_type_is_not_a_string_is_skipped(tmp_path: Path, kind: object) -> None:
    lines = [
        {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "t"}},
        {"timestamp": "2026-01-01T00:00:01Z", "type": kind, "payload": {"type": "message"}},
        {
            "timestamp": "2026-01-01T00:00:02Z",
            "type": "response_item",
            "payload": {"type": kind, "role": "user", "content": "hi"},
        },
        {
            "timestamp": "2026-01-01T00:00:03Z",
            "type": "response_item",
            "payload": {"type": "message", "role": kind, "content": "hello"},
        },
    ]
    transcript = load_codex(write_jsonl(tmp_path / "rollout.jsonl", lines))
    assert [m.text for m in transcript.messages] == ["hello"]


@pytest.mark.parametrize("value", [["u0"], {"id": 1}, 5])
def test_claude_code_ids_that_are_not_strings(tmp_path: Path, value: object) -> None:
    message = {"id": value, "role": "assistant", "content": [{"type": "text", "text": "ok"}]}
    records = [
        _claude(1, sessionId=value),
        _claude(2, type="assistant", message=message),
        _claude(3, type="assistant", message=message, uuid=value),
        _claude(4, type="user", parentUuid=value),
    ]
    transcript = load_claude_code(write_jsonl(tmp_path / "s.jsonl", records))
    assert transcript.session_id is None
    assert transcript.messages[-1].text == "hello"


@pytest.mark.parametrize(
    "change",
    [
        {"parts": [["not", "a", "part"]]},
        {"parts": [{"part_kind": "text", "text": 5}]},
        {"parts": [{"part_kind": "tool-call", "call_id": "c", "name": {}, "arguments": "{}"}]},
        {"meta": []},
        {"meta": {"usage": {"input_tokens": "many"}}},
        {"meta": {"created_at": "yesterday"}},
        {"role": "wizard"},
    ],
)
def test_a_contextfold_export_message_of_the_wrong_shape(
    tmp_path: Path, change: dict[str, object]
) -> None:
    message = {"id": "m1", "role": "user", "parts": [{"part_kind": "text", "text": "hi"}]}
    records = [
        {"kind": "session", "id": "s1"},
        {"kind": "message", "seq": 1, "message": message},
        {"kind": "message", "seq": 2, "message": message | {"id": "m2"} | change},
    ]
    error = _error(write_jsonl(tmp_path / "export.jsonl", records))
    assert error.line == 3 and "unreadable message" in error.reason


# -- documents that are not what their format needs ------------------------------------------------


def test_whole_document_errors_name_the_first_line(tmp_path: Path) -> None:
    path = tmp_path / "t.traj.json"
    path.write_text('\n\n  {"messages": 3, "info": {}}', encoding="utf-8")
    assert _error(path, load_mini_swe_agent).line == 3
    path.write_text("[1, 2]", encoding="utf-8")
    assert _error(path, load_tau_bench).line == 1
    assert _error(path, load_claude_code).line == 1
    assert _error(path, load_codex).line == 1


# -- a JSON Lines file still being written ---------------------------------------------------------


def _live_file(tmp_path: Path, tail: str) -> Path:
    path = tmp_path / "live.jsonl"
    records = [json.dumps(_claude(1)), json.dumps(_claude(2, message={"content": "second"}))]
    path.write_text("\n".join(records) + "\n" + tail, encoding="utf-8")
    return path


def test_a_last_line_still_being_written_is_left_out_with_a_warning(tmp_path: Path) -> None:
    partial = json.dumps(_claude(3, message={"content": "third"}))[:40]
    transcript = load_transcript(_live_file(tmp_path, partial))
    assert [m.text for m in transcript.messages] == ["hello", "second"]
    assert transcript.warnings == [
        "line 3 is incomplete (no newline ends it: the file may still be being written); "
        "read up to line 2"
    ]


def test_a_broken_last_line_that_was_finished_is_still_an_error(tmp_path: Path) -> None:
    partial = json.dumps(_claude(3))[:40]
    assert _error(_live_file(tmp_path, partial + "\n")).line == 3


def test_a_broken_middle_line_is_still_an_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    good = json.dumps(_claude(1))
    path.write_text(f"{good}\n{good[:30]}\n{good}", encoding="utf-8")
    assert _error(path).line == 2


def test_a_file_holding_only_a_partial_line_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "only.jsonl"
    path.write_text(json.dumps(_claude(1))[:30], encoding="utf-8")
    assert _error(path).line == 1
