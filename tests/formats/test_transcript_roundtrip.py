"""Every importer against an independent writer: neutral conversation -> file -> import."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import Message
from contextfold.transcripts import detect_format, load_transcript, load_transcripts
from contextfold.wire.chat_completions import to_openai
from tests.formats import writers
from tests.formats.writers import conversations, semantic
from tests.strategies import messages as any_messages

EXAMPLES = settings(max_examples=60, deadline=None)


@contextmanager
def folder() -> Iterator[Path]:
    # hypothesis runs the body many times; a fresh folder each time keeps examples apart.
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


def assert_ids_are_stable(path: Path, first: list[Message]) -> None:
    again = load_transcript(path).messages
    assert [m.id for m in again] == [m.id for m in first]
    assert len({m.id for m in first}) == len(first)


@EXAMPLES
@given(conversations(cache_write=False), st.booleans())
def test_mini_swe_agent_native_round_trip(conversation: list[Message], stringify: bool) -> None:
    with folder() as tmp:
        path = writers.write_json(
            tmp / "run.traj.json", writers.mini_swe_agent_native(conversation, stringify=stringify)
        )
        transcript = load_transcript(path)
        assert detect_format(path) == "mini-swe-agent"
        assert semantic(transcript.messages) == semantic(conversation)
        assert transcript.model == "deepseek/x"
        assert transcript.metadata["exit_status"] == "Submitted"
        assert all(m.meta.created_at for m in transcript.messages if m.role == "assistant")
        assert_ids_are_stable(path, transcript.messages)


@EXAMPLES
@given(conversations(system=False, thinking=True))
def test_claude_code_round_trip(conversation: list[Message]) -> None:
    with folder() as tmp:
        path = writers.write_jsonl(tmp / "session.jsonl", writers.claude_code(conversation))
        transcript = load_transcript(path)
        assert detect_format(path) == "claude-code"
        # Split responses are merged back, with the final usage counted once.
        assert semantic(transcript.messages) == semantic(conversation)
        assert transcript.session_id == "sess-1"
        assert transcript.warnings == []
        assert_ids_are_stable(path, transcript.messages)


@EXAMPLES
@given(conversations(thinking=True, cache_write=False))
def test_codex_round_trip(conversation: list[Message]) -> None:
    with folder() as tmp:
        path = writers.write_jsonl(tmp / "rollout.jsonl", writers.codex(conversation))
        transcript = load_transcript(path)
        assert detect_format(path) == "codex"
        assert semantic(transcript.messages) == semantic(conversation)
        assert transcript.model == "gpt-test"
        assert transcript.session_id == "thread-1"
        assert_ids_are_stable(path, transcript.messages)


@EXAMPLES
@given(st.lists(conversations(usage=False, errors=False), min_size=1, max_size=3))
def test_tau_bench_round_trip(runs: list[list[Message]]) -> None:
    with folder() as tmp:
        path = writers.write_json(tmp / "results.json", writers.tau_bench(runs))
        transcripts = load_transcripts(path)
        assert [semantic(t.messages) for t in transcripts] == [semantic(r) for r in runs]
        assert [t.metadata["instruction"] for t in transcripts] == [
            f"do {i}" for i in range(len(runs))
        ]
        every_id = [m.id for t in transcripts for m in t.messages]
        assert len(set(every_id)) == len(every_id)


@EXAMPLES
@given(conversations(usage=False, errors=False), st.booleans())
def test_openai_list_round_trip(conversation: list[Message], wrapped: bool) -> None:
    wire = to_openai(conversation)
    document = {"model": "gpt-x", "messages": wire} if wrapped else wire
    with folder() as tmp:
        path = writers.write_json(tmp / "chat.json", document)
        transcript = load_transcript(path)
        assert transcript.format == "openai-messages"
        assert semantic(transcript.messages, usage=False) == semantic(conversation, usage=False)
        assert transcript.model == ("gpt-x" if wrapped else None)
        assert_ids_are_stable(path, transcript.messages)


@EXAMPLES
@given(conversations(usage=False, thinking=True))
def test_anthropic_request_round_trip(conversation: list[Message]) -> None:
    with folder() as tmp:
        path = writers.write_json(tmp / "req.json", writers.anthropic_request(conversation))
        transcript = load_transcript(path)
        assert transcript.format == "anthropic-messages"
        # The system prompt travels as one parameter; everything else message by message.
        expected = [m for m in conversation if m.role != "system"]
        got = [m for m in transcript.messages if m.role != "system"]
        assert semantic(got, usage=False) == semantic(expected, usage=False)
        assert [m.text for m in transcript.messages if m.role == "system"] == [
            m.text for m in conversation if m.role == "system" and m.text
        ]


@EXAMPLES
@given(st.lists(any_messages, max_size=6, unique_by=lambda m: m.id))
def test_contextfold_export_round_trip_is_exact(stored: list[Message]) -> None:
    # The header and line kinds of contextfold.store's export.
    header = {
        "kind": "session",
        "id": "s-9",
        "parent_id": "s-1",
        "model": "m",
        "title": "t",
        "metadata": {"project": "p"},
        "message_count": len(stored),
    }
    lines: list[dict[str, object]] = [header]
    for seq, message in enumerate(stored, start=1):
        lines.append({"kind": "message", "seq": seq, "message": message.to_dict()})
        lines.append({"kind": "edit", "number": seq, "after_seq": seq, "edit": {"type": "mask"}})
    lines.append({"kind": "event", "id": 1, "event_type": "token_usage", "data": {}})
    lines.append({"kind": "blob", "ref": "ref_1", "sha256": "00", "size": 1, "content": "x"})
    with folder() as tmp:
        path = tmp / "export.jsonl"
        path.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
        transcript = load_transcript(path)
        assert transcript.format == "contextfold"
        assert (transcript.session_id, transcript.model, transcript.title) == ("s-9", "m", "t")
        assert transcript.metadata == {"project": "p", "parent_id": "s-1"}
        # Invalid arguments gain a flag; nothing else changes.
        assert [m.with_meta(flags=()) for m in transcript.messages] == [
            m.with_meta(flags=()) for m in stored
        ]
