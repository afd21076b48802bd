from __future__ import annotations

import dataclasses
import json
import threading

import pytest
from hypothesis import given

from contextfold.messages import (
    Message,
    Meta,
    SummaryPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
    new_message_id,
)
from tests.strategies import messages


@given(messages)
def test_json_round_trip_is_exact(message: Message) -> None:
    assert Message.from_json(message.to_json()) == message
    assert Message.from_dict(json.loads(json.dumps(message.to_dict()))) == message


def test_values_are_immutable() -> None:
    message = Message.user("hello")
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.role = "assistant"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.parts[0].text = "x"  # type: ignore[misc]


def test_parts_are_stored_as_tuple() -> None:
    message = Message("user", [TextPart("a")])  # type: ignore[arg-type]
    assert isinstance(message.parts, tuple)


def test_unknown_role_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown role 'robot'"):
        Message("robot", ())  # type: ignore[arg-type]


def test_invalid_arguments_are_kept_verbatim() -> None:
    call = ToolCallPart("c1", "bash", '{"command": "ls"')
    assert not call.arguments_valid
    assert call.args() == {}
    assert Message.from_json(Message.assistant("", [call]).to_json()).tool_calls[0] == call


def test_summary_is_its_own_part_not_user_text() -> None:
    summary = Message(
        "user", (SummaryPart("## Session Intent\n- fix the bug"),), meta=Meta(kind="summary")
    )
    restored = Message.from_json(summary.to_json())
    assert isinstance(restored.parts[0], SummaryPart)
    assert restored.text.startswith("## Session Intent")


def test_helpers() -> None:
    result = ToolResultPart("c1", "bash", "ok")
    tool = Message.tool(result)
    assert tool.meta.kind == "tool_result"
    assert tool.tool_results == (result,)
    assert Message.assistant("x").tool_calls == ()
    assert tool.with_meta(turn=3).meta.turn == 3
    assert Usage(1, 2, 3, 4) + Usage(1, 1, 1, 1) == Usage(2, 3, 4, 5)
    assert Usage(10, 5).total_tokens == 15


def test_ids_sort_by_creation_time() -> None:
    # 5,000 ids come out far faster than one per microsecond, so this catches a clock that ties.
    ids = [new_message_id() for _ in range(5_000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == 5_000


def test_ids_stay_unique_and_ordered_per_thread_across_threads() -> None:
    per_thread: list[list[str]] = [[] for _ in range(4)]

    def make(bucket: list[str]) -> None:
        bucket.extend(new_message_id() for _ in range(2_000))

    threads = [threading.Thread(target=make, args=(bucket,)) for bucket in per_thread]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for bucket in per_thread:
        assert bucket == sorted(bucket)
    assert len({i for bucket in per_thread for i in bucket}) == 8_000


def test_from_dict_names_the_missing_field() -> None:
    with pytest.raises(ValueError, match="'parts'"):
        Message.from_dict({"id": "x", "role": "user"})


@pytest.mark.parametrize(
    "arguments", ['{"command": "ls", "n": [1, {"a": "b"}]}', "[1]", "{bad", "3"]
)
def test_shared_args_are_args_decoded_once(arguments: str) -> None:
    call = ToolCallPart("c1", "bash", arguments)
    shared = call.shared_args()
    assert shared == call.args()
    assert call.shared_args() is shared
    assert call == ToolCallPart("c1", "bash", arguments)  # the cache is not part of the value
    assert hash(call) == hash(ToolCallPart("c1", "bash", arguments))
    changed = dataclasses.replace(call, arguments='{"command": "pwd"}')
    assert changed.shared_args() == {"command": "pwd"}
