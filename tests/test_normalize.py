"""History repair: whatever the view holds, OpenAI and Anthropic accept what repair returns.

The provider checkers below encode the rules behind the providers' own 400 errors (their messages
are quoted), applied to what :func:`to_openai` and :func:`to_anthropic` actually send.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold import HistoryError
from contextfold.history.repair import ABORTED_RESULT_TEXT, LEADING_USER_TEXT, repair, validate
from contextfold.messages import (
    ImagePart,
    Message,
    Meta,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from contextfold.transcripts import Transcript, iter_transcripts
from contextfold.wire import to_anthropic, to_openai
from tests.conftest import shared_path

# --------------------------------------------------------------------------------------------------
# Provider rules, from the providers' error messages
# --------------------------------------------------------------------------------------------------

OPENAI_MISSING = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
    "'tool_call_id'. The following tool_call_ids did not have response messages: {ids}"
)
OPENAI_ORPHAN = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
    "'tool_calls'."
)
ANTHROPIC_MISSING = (
    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
    "{ids}. Each `tool_use` block must have a corresponding `tool_result` block in the next "
    "message."
)
ANTHROPIC_UNEXPECTED = (
    "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. "
    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
)
ANTHROPIC_FIRST_USER = 'messages: first message must use the "user" role'
ANTHROPIC_UNIQUE = "messages.{i}.content.{j}: `tool_use` ids must be unique"
ANTHROPIC_ID_PATTERN = (
    "messages.{i}.content.{j}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
)
ANTHROPIC_ALTERNATE = 'messages: roles must alternate between "user" and "assistant"'
ANTHROPIC_EMPTY = "messages.{i}: all messages must have non-empty content"
ANTHROPIC_EMPTY_TEXT = "messages: text content blocks must be non-empty"
ANTHROPIC_BLANK_TEXT = "messages: text content blocks must contain non-whitespace text"
_ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def openai_errors(wire: list[dict[str, Any]]) -> list[str]:
    """What the chat-completions API would reject in ``wire``."""
    errors: list[str] = []
    awaiting: set[str] | None = None
    for message in [*wire, {"role": "end"}]:
        if message["role"] == "tool":
            if awaiting is None or message["tool_call_id"] not in awaiting:
                errors.append(OPENAI_ORPHAN)
            else:
                awaiting.discard(message["tool_call_id"])
            continue
        if awaiting:
            errors.append(OPENAI_MISSING.format(ids=", ".join(sorted(awaiting))))
        awaiting = None
        if message["role"] == "assistant":
            ids = [c["id"] for c in message.get("tool_calls") or []]
            if ids:
                awaiting = set(ids)
                if len(awaiting) != len(ids):
                    errors.append("duplicate tool_call id in one message")
            elif message.get("content") is None:
                errors.append("'content' is required for assistant messages without tool_calls")
    return errors


def anthropic_errors(messages: list[dict[str, Any]]) -> list[str]:
    """What the messages API would reject in ``messages``."""
    errors: list[str] = []
    if messages and messages[0]["role"] != "user":
        errors.append(ANTHROPIC_FIRST_USER)
    seen: set[str] = set()
    for i, message in enumerate(messages):
        role, content = message["role"], message["content"]
        if i and messages[i - 1]["role"] == role:
            errors.append(ANTHROPIC_ALTERNATE)
        if not content:
            errors.append(ANTHROPIC_EMPTY.format(i=i))
        for j, block in enumerate(content):
            if block["type"] == "text" and block["text"] == "":
                errors.append(ANTHROPIC_EMPTY_TEXT)
            elif block["type"] == "text" and block["text"].isspace():
                errors.append(ANTHROPIC_BLANK_TEXT)
            elif block["type"] == "tool_use":
                if block["id"] in seen:
                    errors.append(ANTHROPIC_UNIQUE.format(i=i, j=j))
                if not _ANTHROPIC_ID.match(block["id"]):
                    errors.append(ANTHROPIC_ID_PATTERN.format(i=i, j=j))
                seen.add(block["id"])
            elif block["type"] in ("thinking", "redacted_thinking") and role != "assistant":
                errors.append(f"messages.{i}.content.{j}: thinking in a {role} message")
        if role == "assistant":
            uses = [b["id"] for b in content if b["type"] == "tool_use"]
            following = messages[i + 1] if i + 1 < len(messages) else {"role": "", "content": []}
            answered = {
                b["tool_use_id"]
                for b in following["content"]
                if following["role"] == "user" and b["type"] == "tool_result"
            }
            missing = [u for u in uses if u not in answered]
            if missing:
                errors.append(ANTHROPIC_MISSING.format(i=i, ids=", ".join(missing)))
        else:
            previous = messages[i - 1] if i else {"role": "", "content": []}
            allowed = {
                b["id"]
                for b in previous["content"]
                if previous["role"] == "assistant" and b["type"] == "tool_use"
            }
            answered_here: set[str] = set()
            for j, block in enumerate(content):
                if block["type"] != "tool_result":
                    continue
                call_id = block["tool_use_id"]
                if call_id not in allowed or call_id in answered_here:
                    errors.append(ANTHROPIC_UNEXPECTED.format(i=i, j=j, id=call_id))
                answered_here.add(call_id)
    return errors


def provider_errors(view: list[Message]) -> list[str]:
    return openai_errors(to_openai(view)) + anthropic_errors(to_anthropic(view).messages)


# --------------------------------------------------------------------------------------------------
# Messy histories
# --------------------------------------------------------------------------------------------------

CALL_IDS = ["call_a", "call_b", "call_c", "toolu.x", ""]


@st.composite
def messy_histories(draw: st.DrawFn) -> list[Message]:
    """Views as crashes, windowing and bad logs leave them: every rule broken somewhere."""
    out: list[Message] = []
    for k in range(draw(st.integers(0, 14))):
        kind = draw(
            st.sampled_from(
                [
                    "user", "assistant", "calls", "calls", "tool", "tool", "system",
                    "thinking", "empty", "blank", "hidden", "stray", "image",
                ]
            )
        )  # fmt: skip
        mid = f"m{k}"
        if kind == "user":
            out.append(Message.user("question", id=mid))
        elif kind == "assistant":
            out.append(Message.assistant("answer", id=mid))
        elif kind == "calls":
            parts: list[Part] = []
            if draw(st.booleans()):
                parts.append(ThinkingPart("plan", signature="sig"))
            if draw(st.booleans()):
                parts.append(TextPart(draw(st.sampled_from(["", " \n", "Let me look."]))))
            for _ in range(draw(st.integers(1, 3))):
                parts.append(ToolCallPart(draw(st.sampled_from(CALL_IDS)), "bash", '{"cmd":"ls"}'))
            out.append(Message("assistant", tuple(parts), id=mid))
        elif kind == "tool":
            results = [
                ToolResultPart(draw(st.sampled_from(CALL_IDS)), "bash", "out")
                for _ in range(draw(st.integers(1, 2)))
            ]
            out.append(Message.tool(*results, id=mid))
        elif kind == "system":
            out.append(Message.system("be brief", id=mid))
        elif kind == "thinking":
            out.append(Message("assistant", (ThinkingPart("hmm", signature="s"),), id=mid))
        elif kind == "empty":
            role = draw(st.sampled_from(["user", "assistant", "tool", "system"]))
            out.append(Message(role, (), id=mid))
        elif kind == "blank":
            out.append(Message.user("  \n", id=mid))
        elif kind == "hidden":
            out.append(Message.user("not for the model", id=mid, meta=Meta(agent_visible=False)))
        elif kind == "stray":
            parts = [TextPart("q"), ToolCallPart("call_a", "x"), ThinkingPart("z")]
            out.append(Message("user", tuple(parts), id=mid))
        else:
            image = ImagePart("https://example.com/a.png")
            out.append(Message("assistant", (TextPart("see"), image), id=mid))
    return out


PROVIDERS = ["any", "openai", "anthropic"]


@settings(max_examples=400, deadline=None)
@given(history=messy_histories(), provider=st.sampled_from(PROVIDERS))
def test_repair_output_passes_validate_and_the_provider_rules(
    history: list[Message], provider: str
) -> None:
    view, report = repair(history, provider=provider)  # type: ignore[arg-type]
    validate(view, provider=provider)  # type: ignore[arg-type]
    if provider in ("any", "openai"):
        assert openai_errors(to_openai(view)) == []
    if provider in ("any", "anthropic"):
        assert anthropic_errors(to_anthropic(view).messages) == []
    assert report.messages_out == len(view)
    # Ids that break no rule are never renamed.
    ids = Counter(
        p.call_id
        for m in history
        if m.role == "assistant" and m.meta.agent_visible
        for p in m.parts
        if isinstance(p, ToolCallPart)
    )
    fine = {i for i, n in ids.items() if n == 1 and re.fullmatch(r"[A-Za-z0-9_-]+", i)}
    assert fine <= {c.call_id for m in view for c in m.tool_calls}


@settings(max_examples=300, deadline=None)
@given(history=messy_histories(), provider=st.sampled_from(PROVIDERS))
def test_repair_is_idempotent_and_deterministic(history: list[Message], provider: str) -> None:
    once, _ = repair(history, provider=provider)  # type: ignore[arg-type]
    twice, report = repair(once, provider=provider)  # type: ignore[arg-type]
    assert twice == once and not report
    again, _ = repair(list(history), provider=provider)  # type: ignore[arg-type]
    assert again == once  # same ids: prompt caches survive a repeated repair


@settings(max_examples=200, deadline=None)
@given(history=messy_histories())
def test_every_problem_is_reported_and_a_valid_history_is_untouched(
    history: list[Message],
) -> None:
    view, report = repair(history)
    if view == history:
        assert not report
    else:
        assert report and report.summary() != "no repairs"
    try:
        validate(history)
    except HistoryError:
        assert report
    else:
        assert not report and all(a is b for a, b in zip(view, history, strict=True))


# --------------------------------------------------------------------------------------------------
# Each rule, as a user sees it
# --------------------------------------------------------------------------------------------------


def call(call_id: str, name: str = "bash") -> ToolCallPart:
    return ToolCallPart(call_id, name, '{"command": "ls"}')


def result(call_id: str, text: str = "ok") -> ToolResultPart:
    return ToolResultPart(call_id, "bash", text)


def test_a_dangling_call_gets_an_aborted_result_right_after_it() -> None:
    history = [
        Message.user("fix it", id="u1"),
        Message.assistant("", [call("c1")], id="a1"),
        Message.user("are you there?", id="u2"),
    ]
    view, report = repair(history)
    assert [m.id for m in view] == ["u1", "a1", "synthetic-result-c1", "u2"]
    synthetic = view[2]
    assert synthetic.tool_results == (
        ToolResultPart("c1", "bash", ABORTED_RESULT_TEXT, is_error=True),
    )
    assert synthetic.meta.kind == "synthetic" and "synthesized" in synthetic.meta.flags
    assert report.counts == {"synthesized_result": 1}
    assert (report.changes[0].index, report.changes[0].call_id) == (1, "c1")


def test_calls_of_one_response_stay_together_with_the_missing_ones_answered() -> None:
    history = [
        Message.user("go", id="u1"),
        Message.assistant("", [call("c1"), call("c2"), call("c3")], id="a1"),
        Message.tool(result("c2"), id="t2"),
        Message.user("next", id="u2"),
    ]
    view, report = repair(history)
    assert [m.id for m in view] == [
        "u1", "a1", "t2", "synthetic-result-c1", "synthetic-result-c3", "u2"
    ]  # fmt: skip
    assert view[1] is history[1]
    assert report.counts == {"synthesized_result": 2}


def test_a_result_without_its_call_leaves_the_view_but_not_the_transcript() -> None:
    history = [
        Message.tool(result("gone"), id="t0"),
        Message.user("hello", id="u1"),
        Message.assistant("hi", id="a1"),
    ]
    view, report = repair(history)
    assert [m.id for m in view] == ["u1", "a1"]
    assert report.counts == {"dropped_orphan_result": 1}
    assert len(history) == 3  # the caller's list (the transcript) is not touched


def test_a_second_result_for_one_call_is_dropped_keeping_the_first() -> None:
    history = [
        Message.user("go", id="u1"),
        Message.assistant("", [call("c1")], id="a1"),
        Message.tool(result("c1", "first"), id="t1"),
        Message.tool(result("c1", "second"), id="t2"),
    ]
    view, report = repair(history)
    assert [m.id for m in view] == ["u1", "a1", "t1"]
    assert report.counts == {"dropped_duplicate_result": 1}


def test_a_displaced_result_is_moved_right_after_its_call() -> None:
    history = [
        Message.user("go", id="u1"),
        Message.assistant("", [call("c1")], id="a1"),
        Message.user("(interrupt)", id="u2"),
        Message.tool(result("c1"), id="t1"),
    ]
    view, report = repair(history)
    assert [m.id for m in view] == ["u1", "a1", "t1", "u2"]
    assert report.counts == {"moved_result": 1}


def test_results_match_the_nearest_earlier_call_with_their_id() -> None:
    history = [
        Message.user("go", id="u1"),
        Message.assistant("", [call("call_0")], id="a1"),
        Message.tool(result("call_0", "one"), id="t1"),
        Message.assistant("", [call("call_0")], id="a2"),
        Message.tool(result("call_0", "two"), id="t2"),
        Message.assistant("", [call("call_1")], id="a3"),
        Message.tool(result("call_1", "three"), id="t3"),
    ]
    openai_view, openai_report = repair(history, provider="openai")
    assert openai_view == history and not openai_report
    view, report = repair(history, provider="anthropic")
    assert report.counts == {"renamed_call_id": 1}
    assert view[3].tool_calls[0].call_id == "call_0_2"
    assert view[4].tool_results == (ToolResultPart("call_0_2", "bash", "two"),)
    assert view[5:] == history[5:]  # ids used once are left alone
    assert anthropic_errors(to_anthropic(view).messages) == []


def test_ids_anthropic_would_refuse_are_renamed_with_their_results() -> None:
    history = [
        Message.user("go", id="u1"),
        Message.assistant("", [call("functions.bash:0")], id="a1"),
        Message.tool(result("functions.bash:0"), id="t1"),
    ]
    view, report = repair(history, provider="anthropic")
    assert view[1].tool_calls[0].call_id == "functions_bash_0"
    assert view[2].tool_results[0].call_id == "functions_bash_0"
    assert report.counts == {"renamed_call_id": 1}


def test_thinking_stays_with_its_tool_loop_and_keeps_its_signature() -> None:
    thinking = ThinkingPart("I should list files", signature="EqQBCkgIARABGAIiQL")
    history = [
        Message.user("go", id="u1"),
        Message("assistant", (thinking,), id="a0"),  # recorded as its own entry
        Message.assistant("", [call("c1")], id="a1"),
        Message.tool(result("c1"), id="t1"),
    ]
    view, report = repair(history)
    assert view[1].id == "a1" and view[1].parts == (thinking, call("c1"))
    assert report.counts == {"merged_thinking": 1}
    wire = to_anthropic(view).messages
    assert wire[1]["content"][0] == {
        "type": "thinking",
        "thinking": "I should list files",
        "signature": "EqQBCkgIARABGAIiQL",
    }


def test_thinking_with_nothing_after_it_leaves_the_view() -> None:
    history = [
        Message.user("go", id="u1"),
        Message("assistant", (ThinkingPart("hmm", signature="s"),), id="a1"),
        Message.user("still there?", id="u2"),
    ]
    view, report = repair(history)
    assert [m.id for m in view] == ["u1", "u2"]
    assert report.counts == {"dropped_thinking": 1}


def test_anthropic_views_start_with_a_user_turn() -> None:
    history = [Message.system("rules", id="s1"), Message.assistant("Welcome back.", id="a1")]
    view, report = repair(history)
    assert [m.id for m in view] == ["s1", "synthetic-user-a1", "a1"]
    assert view[1].text == LEADING_USER_TEXT and view[1].meta.kind == "synthetic"
    assert not view[1].meta.user_visible
    assert report.counts == {"inserted_user_turn": 1}
    openai_view, _ = repair(history, provider="openai")
    assert openai_view == history


def test_empty_messages_and_blank_text_leave_the_view() -> None:
    history = [
        Message.user("go", id="u1"),
        Message("assistant", (TextPart("\n\n"), call("c1")), id="a1"),
        Message.tool(result("c1"), id="t1"),
        Message("user", (), id="u2"),
        Message.user("   ", id="u3"),
        Message.assistant("done", id="a2"),
    ]
    view, report = repair(history)
    assert [m.id for m in view] == ["u1", "a1", "t1", "a2"]
    assert view[1].parts == (call("c1"),)
    assert report.counts == {"dropped_blank_text": 1, "dropped_empty_message": 2}


def test_messages_hidden_from_the_model_are_passed_through_and_ignored() -> None:
    hidden = Message.user("note to self", id="h1", meta=Meta(agent_visible=False))
    history = [
        Message.user("go", id="u1"),
        Message.assistant("", [call("c1")], id="a1"),
        hidden,
        Message.tool(result("c1"), id="t1"),
    ]
    view, report = repair(history)
    assert view == history and not report


def test_validate_names_the_message_and_the_call() -> None:
    dangling = [Message.user("go"), Message.assistant("", [call("c7")]), Message.user("?")]
    with pytest.raises(HistoryError) as caught:
        validate(dangling)
    assert (caught.value.index, caught.value.call_id) == (1, "c7")
    assert "message 1, call 'c7'" in str(caught.value)
    orphan = [Message.user("go"), Message.tool(result("c9"))]
    with pytest.raises(HistoryError) as caught:
        validate(orphan)
    assert (caught.value.index, caught.value.call_id) == (1, "c9")


def test_the_report_counts_changes_per_kind() -> None:
    history = [
        Message.tool(result("x"), id="t0"),
        Message.user("go", id="u1"),
        Message.assistant("", [call("c1"), call("c2")], id="a1"),
    ]
    _, report = repair(history)
    assert report.counts == {"dropped_orphan_result": 1, "synthesized_result": 2}
    assert report.summary() == "1 dropped_orphan_result, 2 synthesized_result"
    assert [c.index for c in report.changes] == [0, 2, 2]


# --------------------------------------------------------------------------------------------------
# Real transcripts
# --------------------------------------------------------------------------------------------------


@pytest.mark.shared_data
def test_every_imported_view_is_valid_after_repair() -> None:
    folder = shared_path("trajectories")
    kinds: Counter[str] = Counter()
    views = 0
    for item in iter_transcripts(folder):
        assert isinstance(item, Transcript), item
        for transcript in item.walk():
            view, report = repair(transcript.messages)
            validate(view)
            assert provider_errors(view) == [], transcript.path
            kinds.update(report.counts)
            views += 1
    assert views >= 295
    # The corpus holds the cases repair exists for: sessions that end on an unanswered call.
    assert kinds["synthesized_result"] > 0
