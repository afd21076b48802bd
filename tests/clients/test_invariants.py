"""The invariant checker on hand-made pairs (client request, upstream request): each rule fires
on the defect issue 26 saw, and stays quiet on a request passed through or fairly compacted."""

from __future__ import annotations

import copy
from typing import Any

from tests.clients.invariants import Violation, check, summarize
from tests.clients.wire import latest_turn_results, read, strip_reminders

TASK = "Refactor the cart module and run the tests."
SIG = "c2lnbmF0dXJl"


def _edit(call_id: str, old: str, new: str) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": call_id,
        "name": "Edit",
        "input": {"file_path": "/w/cart.py", "old_string": old, "new_string": new},
    }


def _result(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": text}


def anthropic_body() -> dict[str, Any]:
    """A Claude Code-like history: task, an old Edit, a reminder, the latest call and result."""
    return {
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
                    {"type": "text", "text": TASK},
                ],
            },
            {"role": "assistant", "content": [_edit("toolu_1", "a = 1", "a = 2")]},
            {"role": "user", "content": [_result("toolu_1", "updated")]},
            {"role": "system", "content": "Reminder: todo list is empty."},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "run tests next", "signature": SIG},
                    {
                        "type": "tool_use",
                        "id": "toolu_2",
                        "name": "Bash",
                        "input": {"command": "pytest -q", "description": "Run tests"},
                    },
                ],
            },
            {"role": "user", "content": [_result("toolu_2", "3 passed\n" * 50)]},
        ],
    }


def violations(upstream: dict[str, Any], client: dict[str, Any] | None = None) -> list[Violation]:
    return check("anthropic", client or anthropic_body(), "anthropic", upstream, task=TASK)


def test_a_request_passed_through_breaks_nothing() -> None:
    assert violations(anthropic_body()) == []


def test_cache_control_and_key_order_do_not_count() -> None:
    upstream = anthropic_body()
    upstream["messages"][-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    call = upstream["messages"][4]["content"][1]
    call["input"] = {"description": "Run tests", "command": "pytest -q"}
    assert violations(upstream) == []


def test_a_missing_newest_result_and_its_call() -> None:
    upstream = anthropic_body()
    del upstream["messages"][4:]
    found = violations(upstream)
    # The whole latest turn went: its thinking with it.
    assert summarize(found) == {"newest_result": 1, "call_of_result": 1, "thinking": 1}


def test_a_cut_newest_result() -> None:
    upstream = anthropic_body()
    upstream["messages"][-1]["content"][0]["content"] = "3 passed\n[cut; read_result ref_1]"
    assert summarize(violations(upstream)) == {"newest_result": 1}


def test_a_newest_result_too_large_for_the_room_may_be_cut_with_a_ref() -> None:
    """The whole result would not have fit the room the request left: a cut with a ref to
    the whole is fair; without a ref, or when it would have fit, it is a break."""
    upstream = anthropic_body()
    fair = "3 passed\n[cut; read_result ref_0123456789ab]"
    upstream["messages"][-1]["content"][0]["content"] = fair

    def by_chars(text: str) -> int:
        return len(text)

    client = anthropic_body()
    tight = check("anthropic", client, "anthropic", upstream, task=TASK, room=20, count=by_chars)
    assert tight == []
    roomy = check(
        "anthropic", client, "anthropic", upstream, task=TASK, room=10_000, count=by_chars
    )
    assert summarize(roomy) == {"newest_result": 1}
    upstream["messages"][-1]["content"][0]["content"] = "3 passed\n[cut]"
    bare = check("anthropic", client, "anthropic", upstream, task=TASK, room=20, count=by_chars)
    assert summarize(bare) == {"newest_result": 1}


def test_the_task_cut_to_a_placeholder() -> None:
    upstream = anthropic_body()
    upstream["messages"][0]["content"][1]["text"] = "[text cut to fit; read_result ref_2]"
    found = violations(upstream)
    assert summarize(found) == {"latest_user": 1, "task": 1}


def test_reminders_around_the_task_may_go() -> None:
    upstream = anthropic_body()
    del upstream["messages"][0]["content"][0]
    assert violations(upstream) == []


def test_an_old_edit_whose_input_became_empty() -> None:
    upstream = anthropic_body()
    upstream["messages"][1]["content"][0]["input"] = {}
    assert summarize(violations(upstream)) == {"empty_input": 1}


def test_a_large_field_may_be_cut_but_small_ones_stay() -> None:
    big = "x = 0\n" * 100
    client = anthropic_body()
    client["messages"][1]["content"][0] = _edit("toolu_1", big, "y = 0")
    upstream = copy.deepcopy(client)
    upstream["messages"][1]["content"][0]["input"]["old_string"] = "x = 0 [cut: ref_3]"
    assert violations(upstream, client) == []
    upstream["messages"][1]["content"][0]["input"]["file_path"] = "[cut]"
    found = violations(upstream, client)
    assert summarize(found) == {"small_field": 1}
    assert "'file_path'" in found[0].detail


def test_a_field_at_its_schema_default_may_be_left_out() -> None:
    """Claude Code resends Edit with ``replace_all: false`` added; the upstream may see the
    call as the model wrote it. Any other value of the field still counts."""
    client = anthropic_body()
    client["tools"] = [
        {
            "name": "Edit",
            "input_schema": {
                "type": "object",
                "properties": {"replace_all": {"type": "boolean", "default": False}},
            },
        }
    ]
    client["messages"][1]["content"][0]["input"] = {
        "replace_all": False,
        **client["messages"][1]["content"][0]["input"],
    }
    assert violations(anthropic_body(), client) == []
    client["messages"][1]["content"][0]["input"]["replace_all"] = True
    found = violations(anthropic_body(), client)
    assert summarize(found) == {"small_field": 1}
    assert "'replace_all'" in found[0].detail


def test_the_latest_thinking_dropped_or_its_signature_changed() -> None:
    upstream = anthropic_body()
    del upstream["messages"][4]["content"][0]
    assert summarize(violations(upstream)) == {"thinking": 1}
    upstream = anthropic_body()
    upstream["messages"][4]["content"][0]["signature"] = "other"
    assert summarize(violations(upstream)) == {"thinking": 1}


def test_a_sandwich_the_proxy_made() -> None:
    upstream = anthropic_body()
    note = {"role": "system", "content": "[context: 80% used]"}
    upstream["messages"].insert(3, note)  # result -> note -> reminder: not a sandwich yet
    upstream["messages"].insert(1, {"role": "user", "content": "x"})
    upstream["messages"].insert(1, note)  # user -> note -> user
    assert "sandwich" in summarize(violations(upstream))


def test_a_sandwich_the_client_sent_is_allowed() -> None:
    client = anthropic_body()
    client["messages"].insert(1, {"role": "system", "content": "skills"})
    client["messages"].insert(2, {"role": "user", "content": "more"})
    assert check("anthropic", client, "anthropic", client) == []


def test_repeated_reminders_in_a_rewritten_request() -> None:
    client = anthropic_body()
    client["messages"].insert(1, {"role": "system", "content": "Reminder: todo list is empty."})
    assert violations(client, client) == []  # passed through as the client sent it
    upstream = copy.deepcopy(client)
    upstream["messages"][-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    del upstream["messages"][0]["content"][0]  # rewritten: the repetition must go
    assert summarize(violations(upstream, client)) == {"repeated_reminder": 1}


def test_chat_completions_and_responses_are_read_alike() -> None:
    chat = {
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": TASK},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        ]
    }
    responses = {
        "instructions": "sys",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": TASK}]},
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "bash",
                "arguments": '{"command":"ls"}',
            },
            {"type": "function_call_output", "call_id": "c1", "output": "a.py"},
        ],
    }
    assert check("openai", chat, "responses", responses, task=TASK) == []
    _, messages = read("responses", responses)
    assert [p.call_id for p in latest_turn_results(messages)] == ["c1"]
    bridged = copy.deepcopy(responses)
    bridged["input"][2]["output"] = "[masked]"
    assert summarize(check("openai", chat, "responses", bridged)) == {"newest_result": 1}


def test_strip_reminders() -> None:
    assert strip_reminders("<system-reminder>\nx\n</system-reminder>\nhello ") == "hello"


def test_tools_added_to_a_request_without_tools() -> None:
    title = {"messages": [{"role": "user", "content": "Generate a title"}]}
    grown = {**title, "tools": [{"type": "function", "function": {"name": "read_result"}}]}
    assert check("openai", title, "openai", title) == []
    found = check("openai", title, "openai", grown)
    assert summarize(found) == {"tools_added": 1}
    assert "read_result" in found[0].detail
