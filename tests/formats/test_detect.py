"""Format detection from content, the load/iter entry points, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextfold.errors import FormatError, UnknownFormatError
from contextfold.transcripts import (
    SUPPORTED_FORMATS,
    Transcript,
    detect_format,
    iter_transcripts,
    load_transcript,
    load_transcripts,
)
from tests.formats.writers import write_json, write_jsonl

CLAUDE_RECORD = {
    "type": "user",
    "uuid": "u1",
    "parentUuid": None,
    "sessionId": "s",
    "message": {"role": "user", "content": "hello"},
}
OPENAI_CHAT = [
    {"role": "user", "content": "list files"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{bad"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
]


def test_the_name_of_a_file_does_not_decide_its_format(tmp_path: Path) -> None:
    # A Claude Code session saved under a misleading name is still read as one.
    path = write_jsonl(
        tmp_path / "rollout-2026.json", [CLAUDE_RECORD, CLAUDE_RECORD | {"uuid": "u2"}]
    )
    assert detect_format(path) == "claude-code"


def test_a_single_record_file_is_read_as_json_lines(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "one.jsonl", [CLAUDE_RECORD])
    transcript = load_transcript(path)
    assert transcript.format == "claude-code" and transcript.task == "hello"


def test_anthropic_and_openai_shapes_are_told_apart(tmp_path: Path) -> None:
    anthropic = {"system": "be brief", "messages": [{"role": "user", "content": "hi"}]}
    assert detect_format(write_json(tmp_path / "a.json", anthropic)) == "anthropic-messages"
    tools = [{"type": "function", "function": {"name": "ls", "description": "List."}}]
    wrapped = {"model": "gpt-x", "messages": OPENAI_CHAT, "tools": tools}
    transcript = load_transcript(write_json(tmp_path / "o.json", wrapped))
    assert transcript.format == "openai-messages"
    assert [t.name for t in transcript.tools] == ["ls"]
    assert transcript.model == "gpt-x"


def test_invalid_tool_arguments_are_kept_flagged_and_reported(tmp_path: Path) -> None:
    transcript = load_transcript(write_json(tmp_path / "chat.json", OPENAI_CHAT))
    [call] = transcript.tool_calls()
    assert call.arguments == "{bad"
    assert "invalid_arguments" in transcript.messages[1].meta.flags
    assert transcript.warnings == [
        "message 1 (chat:1): arguments of tool call 'c1' (ls) are not a JSON object; kept verbatim"
    ]
    assert transcript.messages[2].tool_results[0].content == "a.txt"


def test_malformed_json_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "messages": [\n    {"role": "user",, }\n  ]\n}\n', encoding="utf-8")
    with pytest.raises(FormatError) as caught:
        load_transcripts(path)
    assert (caught.value.path, caught.value.line) == (str(path), 3)
    assert str(caught.value).startswith(f"{path}:3: invalid JSON")


def test_malformed_json_lines_name_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    good = json.dumps(CLAUDE_RECORD)
    path.write_text(f"{good}\n\n{good}\n{good[:-9]}\n{good}\n", encoding="utf-8")
    with pytest.raises(FormatError, match=r"session\.jsonl:4: invalid JSON record"):
        detect_format(path)


def test_unknown_content_lists_the_supported_formats(tmp_path: Path) -> None:
    for name, content in [("pkg.json", {"name": "x", "version": "1"}), ("n.json", [1, 2])]:
        path = write_json(tmp_path / name, content)
        with pytest.raises(UnknownFormatError) as caught:
            load_transcripts(path)
        assert caught.value.supported == SUPPORTED_FORMATS
        assert all(f in str(caught.value) for f in SUPPORTED_FORMATS)
        assert caught.value.path == str(path)
    lines = write_jsonl(tmp_path / "log.jsonl", [{"level": "info"}, {"level": "warn"}])
    with pytest.raises(UnknownFormatError):
        detect_format(lines)


@pytest.mark.parametrize(
    ("content", "reason"),
    [(b"", "the file is empty"), (b"\xff\xfe{}", "not UTF-8 text")],
)
def test_unreadable_files(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(content)
    with pytest.raises(FormatError, match=reason):
        load_transcripts(path)


def test_load_transcript_refuses_a_file_with_several(tmp_path: Path) -> None:
    runs = [{"task_id": i, "traj": [{"role": "user", "content": f"q{i}"}]} for i in range(2)]
    path = write_json(tmp_path / "tau.json", runs)
    assert [t.task for t in load_transcripts(path)] == ["q0", "q1"]
    with pytest.raises(FormatError, match="holds 2 transcripts; read them with load_transcripts"):
        load_transcript(path)


def test_iter_transcripts_reports_bad_files_and_goes_on(tmp_path: Path) -> None:
    write_json(tmp_path / "a.json", OPENAI_CHAT)
    (tmp_path / "b.jsonl").write_text("{broken\n", encoding="utf-8")
    write_json(tmp_path / "c.json", {"unrelated": True})
    (tmp_path / "notes.txt").write_text("not a transcript", encoding="utf-8")
    nested = tmp_path / "deeper"
    nested.mkdir()
    write_jsonl(nested / "s.jsonl", [CLAUDE_RECORD])
    subagents = nested / "s" / "subagents"
    subagents.mkdir(parents=True)
    write_jsonl(subagents / "agent-1.jsonl", [CLAUDE_RECORD | {"isSidechain": True}])
    hidden = tmp_path / ".cache"
    hidden.mkdir()
    write_json(hidden / "h.json", OPENAI_CHAT)

    found = list(iter_transcripts(tmp_path))
    kinds = [type(item).__name__ for item in found]
    assert kinds == ["Transcript", "FormatError", "UnknownFormatError", "Transcript"]
    main = found[3]
    assert isinstance(main, Transcript) and len(main.subagents) == 1
    assert isinstance(found[1], FormatError) and found[1].line == 1

    shallow = list(iter_transcripts([tmp_path / "a.json", nested], recursive=False))
    assert [t.format for t in shallow if isinstance(t, Transcript)] == [
        "openai-messages",
        "claude-code",
    ]
    [missing] = list(iter_transcripts(tmp_path / "absent"))
    assert isinstance(missing, FormatError) and "no such file" in str(missing)


# The machine's SQLite version is not what this test is about.
@pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")
def test_a_session_exported_by_the_store_reads_back(tmp_path: Path) -> None:
    from contextfold.messages import Message, ToolCallPart, ToolResultPart
    from contextfold.store import open_store

    conversation = [
        Message.user("rename the module", id="m1"),
        Message.assistant("", [ToolCallPart("c1", "shell", '{"cmd": "git mv a b"}')], id="m2"),
        Message.tool(ToolResultPart("c1", "shell", "done"), id="m3"),
        Message.assistant("Renamed.", id="m4"),
    ]
    store = open_store(tmp_path / "sessions.db")
    try:
        session = store.create_session(model="gpt-x", title="rename", metadata={"k": 1})
        store.append_messages(session.id, conversation)
        export = tmp_path / "export.jsonl"
        with export.open("w", encoding="utf-8") as out:
            store.export_jsonl(session.id, out)
    finally:
        store.close()
    transcript = load_transcript(export)
    assert transcript.format == "contextfold"
    assert (transcript.session_id, transcript.model, transcript.title) == (
        session.id,
        "gpt-x",
        "rename",
    )
    assert [(m.id, m.role, m.parts) for m in transcript.messages] == [
        (m.id, m.role, m.parts) for m in conversation
    ]
