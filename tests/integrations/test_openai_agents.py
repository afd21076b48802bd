"""The OpenAI Agents SDK integration: item mapping, the Session protocol, and a real run.

THE test runs an ``Agent`` with the SDK's own ``ScriptedModel`` (no network): a tool returns
20,000 lines on every call, the window is 8k, and every input the model gets must fit and be
valid, ``read_result`` must return what was offloaded, and the store must hold it all and resume.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, Runner, function_tool
from agents.memory import Session as SDKSession
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from contextfold import ContextEngine, ContextPolicy, Message, model_for_window
from contextfold.history.repair import history_rules_for, validate
from contextfold.hosts.digests import message_digest
from contextfold.integrations._openai_agents_items import (
    RAW_ITEMS_KEY,
    Item,
    ItemsToMessages,
    MessagesToItems,
    _HistoryItems,
    copy_plan,
    json_copy,
    plain_item,
    planned_copy,
    raw_items_by_digest,
)
from contextfold.integrations.openai_agents import (
    ContextfoldSession,
    items_from_messages,
    messages_from_items,
    tool_specs,
)
from contextfold.messages import ImagePart, Part, TextPart, ToolCallPart, ToolResultPart
from contextfold.store import SQLiteStore

pytestmark = pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")

WINDOW = 8_000
LINES = 20_000
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "openai_agents_example.py"


def _listing(directory: str) -> str:
    return "\n".join(f"{directory}/module_{i}.py" for i in range(LINES))


def _engine(path: Path) -> ContextEngine:
    return ContextEngine(
        model_for_window(WINDOW, max_output_tokens=1_000),
        store=SQLiteStore(path, warn_wal_reset=False),
        policy=ContextPolicy(background=False),
    )


# -- the mapping ---------------------------------------------------------------------------------

_text = st.text(max_size=30)
_ids = st.text("abcdef0123456789", min_size=1, max_size=8)
_args = st.dictionaries(st.text("abc", min_size=1, max_size=3), st.integers(), max_size=3).map(
    json.dumps
)


@st.composite
def _user_item(draw: st.DrawFn) -> Item:
    role = draw(st.sampled_from(["user", "developer"]))
    if draw(st.booleans()):
        return {"role": role, "content": draw(_text)}
    content: list[dict[str, Any]] = [{"type": "input_text", "text": draw(_text)}]
    if draw(st.booleans()):
        url = "data:image/png;base64," + draw(_ids)
        content.append({"type": "input_image", "image_url": url, "detail": "low"})
    return {"type": "message", "role": role, "content": content}


@st.composite
def _reply(draw: st.DrawFn) -> list[Item]:
    """One model reply: optional reasoning and text, then calls each answered by an output."""
    items: list[Item] = []
    if draw(st.booleans()):
        summary = [{"type": "summary_text", "text": draw(_text)}]
        items.append({"type": "reasoning", "id": "rs_" + draw(_ids), "summary": summary})
    if draw(st.booleans()):
        text = {"type": "output_text", "text": draw(_text), "annotations": []}
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_" + draw(_ids),
                "status": "completed",
                "content": [text],
            }
        )
    if draw(st.booleans()):
        items.append({"type": "web_search_call", "id": "ws_" + draw(_ids), "status": "completed"})
    calls = draw(st.lists(_ids, max_size=3, unique=True))
    for call_id in calls:
        item = {
            "type": "function_call",
            "call_id": call_id,
            "name": "tool",
            "arguments": draw(_args),
        }
        items.append(item)
    for call_id in calls:
        output: object = draw(_text)
        if draw(st.booleans()):
            output = [{"type": "input_text", "text": output}]
        items.append({"type": "function_call_output", "call_id": call_id, "output": output})
    return items


_histories = st.lists(st.one_of(_user_item().map(lambda i: [i]), _reply()), max_size=6).map(
    lambda groups: [item for group in groups for item in group]
)


@given(_histories)
@settings(max_examples=200, deadline=None)
def test_items_round_trip_exactly_through_messages(items: list[Item]) -> None:
    messages = messages_from_items(items)
    assert items_from_messages(messages) == items
    # The way the filter uses it: the messages stripped of their meta, the items known apart.
    bare = [Message(m.role, m.parts) for m in messages]
    assert items_from_messages(bare, raw_items_by_digest(messages)) == items


def _said(messages: list[Message]) -> list[tuple[str, object, object]]:
    return [(m.role, m.parts, m.meta.provider) for m in messages]


@given(_histories, _histories, st.integers(0, 8))
@settings(max_examples=200, deadline=None)
def test_a_growing_history_converts_as_a_whole_conversion_would(
    first: list[Item], more: list[Item], dropped: int
) -> None:
    """Call after call the SDK hands new dicts holding the same items and the new ones, or a
    history the session rewrote (popped items); what is new is converted, the rest taken again,
    and the result is that of converting it all."""
    converter, view = ItemsToMessages(), MessagesToItems()
    grown = first + more
    rewritten = grown[: max(0, len(grown) - dropped)] + more
    for items in (first, grown, json.loads(json.dumps(grown)), rewritten, first):
        messages = converter.convert(json.loads(json.dumps(items)))
        assert _said(messages) == _said(messages_from_items(items))
        bare = [Message(m.role, m.parts) for m in messages]
        assert view.items(bare, messages) == items
        assert view.items(bare, messages) == items  # the second time from what it remembered


@given(st.lists(st.tuples(_histories, st.integers(0, 8)), min_size=1, max_size=5))
@settings(max_examples=200, deadline=None)
def test_the_history_index_kept_call_after_call_equals_the_index_made_afresh(
    steps: list[tuple[list[Item], int]],
) -> None:
    """The view's mapping indexes the history's items by digest, reading only what the history
    gained (and taking out what it lost) since the call before: each step drops some of the
    last history's messages and appends new ones, and the index must be the one made afresh."""
    index, converter = _HistoryItems(), ItemsToMessages()
    items: list[Item] = []
    for more, dropped in steps:
        items = items[: max(0, len(items) - dropped)] + more
        history = converter.convert(json.loads(json.dumps(items)))
        assert index.known(history) == raw_items_by_digest(history)
        # A history of other objects saying the same (another source of it).
        assert index.known(messages_from_items(items)) == raw_items_by_digest(history)


@given(st.lists(st.tuples(_histories, st.integers(0, 8)), min_size=1, max_size=5))
@settings(max_examples=200, deadline=None)
def test_the_session_log_and_the_sdk_input_convert_as_a_whole_conversion_would(
    steps: list[tuple[list[Item], int]],
) -> None:
    """One converter serves the session's item log (``owned``: the same item objects call
    after call, which are not compared again) and the SDK's input (new dicts each call). Each
    step pops some items off the log and appends new ones; either source, converted in turn,
    gives what converting it all would."""
    converter = ItemsToMessages()
    log: list[Item] = []
    for more, dropped in steps:
        log = log[: max(0, len(log) - dropped)] + json.loads(json.dumps(more))
        expected = _said(messages_from_items(log))
        assert _said(converter.convert(log, owned=True)) == expected
        assert _said(converter.convert(json.loads(json.dumps(log)))) == expected
        assert _said(converter.convert(log, owned=True)) == expected
    if log:  # an item replaced by another object (not changed in place) is compared again
        log = [*log[:-1], {**log[-1], "extra": "field"}]
        assert _said(converter.convert(log, owned=True)) == _said(messages_from_items(log))


@given(_histories, st.lists(st.integers(0, 12), max_size=6, unique=True))
@settings(max_examples=200, deadline=None)
def test_view_items_follow_a_view_that_keeps_drops_and_reorders_its_messages(
    items: list[Item], picks: list[int]
) -> None:
    """The view's items are remembered by message object: a view that keeps the last one's
    messages, loses some in the middle (a compaction) or holds them in another order gives what
    a whole conversion gives."""
    history = ItemsToMessages().convert(items)
    # Messages saying the same take their items in view order, which a reordered view changes.
    assume(len({message_digest(m) for m in history}) == len(history))
    bare = [Message(m.role, m.parts) for m in history]
    view = MessagesToItems()
    views = [bare, bare[: len(bare) // 2], bare]
    views += [[bare[i] for i in picks if i < len(bare)]]
    views += [bare[1:] + bare[:1], bare]
    for shown in views:
        expected = items_from_messages(shown, raw_items_by_digest(history))
        assert view.items(shown, history) == expected


def test_a_message_keeps_copies_of_the_sdk_input_and_the_log_items_themselves() -> None:
    """The SDK's input items may change after the call: a message made from them keeps copies.
    The session's item log is copies already, never changed in place: kept as they are."""
    item: Item = {"role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
    (from_input,) = ItemsToMessages().convert([item])
    (kept,) = from_input.meta.provider[RAW_ITEMS_KEY]
    assert kept == item and kept is not item and kept["content"] is not item["content"]
    (from_log,) = ItemsToMessages().convert([item], owned=True)
    assert from_log.meta.provider[RAW_ITEMS_KEY][0] is item


def test_a_reply_that_goes_on_is_converted_again() -> None:
    call = {"type": "function_call", "call_id": "c1", "name": "tool", "arguments": "{}"}
    second = {"type": "function_call", "call_id": "c2", "name": "tool", "arguments": "{}"}
    converter = ItemsToMessages()
    assert len(converter.convert([{"role": "user", "content": "go"}, call])) == 2
    messages = converter.convert([{"role": "user", "content": "go"}, call, second])
    assert [len(m.tool_calls) for m in messages] == [0, 2]  # one reply with both calls


def test_the_view_items_are_copies_each_call() -> None:
    """The SDK gets its own copies of the view's items on every call (flat ones and nested
    ones): what it changes in them is not what the next call hands out."""
    items: list[Item] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
        {"type": "function_call", "call_id": "c1", "name": "tool", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "done"},
    ]
    messages = ItemsToMessages().convert(json.loads(json.dumps(items)))
    view = MessagesToItems()
    first = view.items(messages, messages)
    assert first == items
    for item in first:
        item["touched"] = True
        for value in item.values():
            if isinstance(value, list):
                value.append({"type": "output_text", "text": "more"})
    assert view.items(messages, messages) == items


@st.composite
def _conversation(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = []
    for turn in range(draw(st.integers(1, 4))):
        parts: list[Part] = [TextPart(draw(_text))]
        if draw(st.booleans()):
            parts.append(ImagePart("data:image/png;base64," + draw(_ids), detail="high"))
        messages.append(Message("user", tuple(parts)))
        calls = [
            ToolCallPart(f"{turn}_{i}", draw(st.sampled_from(["bash", "read"])), draw(_args))
            for i in range(draw(st.integers(0, 2)))
        ]
        text = draw(_text)
        messages.append(Message.assistant(text, calls) if text or calls else Message.user("x"))
        messages += [Message.tool(ToolResultPart(c.call_id, c.name, draw(_text))) for c in calls]
    return messages


@given(_conversation())
@settings(max_examples=200, deadline=None)
def test_messages_round_trip_through_items(messages: list[Message]) -> None:
    again = messages_from_items(items_from_messages(messages))
    assert [(m.role, m.parts) for m in again] == [(m.role, m.parts) for m in messages]


# -- the Session protocol ------------------------------------------------------------------------


def test_session_keeps_items_exactly_pops_clears_and_resumes(tmp_path: Path) -> None:
    async def scenario() -> None:
        engine = _engine(tmp_path / "s.db")
        session = ContextfoldSession("s1", engine)
        assert isinstance(session, SDKSession)
        assert await session.get_items() == []
        assert await session.pop_item() is None
        first: list[Any] = [
            {"role": "user", "content": "hi"},
            {
                "type": "message",
                "role": "assistant",
                "id": "m1",
                "status": "completed",
                "content": [{"type": "output_text", "text": "hello", "annotations": []}],
            },
        ]
        await session.add_items(first)
        await session.add_items([{"role": "user", "content": "bye"}])
        assert await session.get_items() == [*first, {"role": "user", "content": "bye"}]
        assert await session.get_items(limit=1) == [{"role": "user", "content": "bye"}]
        assert await session.get_items(limit=0) == []
        assert await session.pop_item() == {"role": "user", "content": "bye"}
        assert await session.get_items() == first
        # The transcript is append-only: the popped item stays until the history moves on.
        before = session.sync.session
        assert [m.text for m in before.view] == ["hi", "hello", "bye"]

        # A new engine on the same file: same items; the list differs from the transcript
        # after the pop, so it goes on in a child session holding exactly the items' messages.
        resumed = ContextfoldSession("s1", _engine(tmp_path / "s.db"))
        assert await resumed.get_items() == first
        await resumed.add_items([{"role": "user", "content": "again"}])
        assert resumed.sync.session.info.parent_id == before.id
        assert [m.text for m in resumed.sync.session.view] == ["hi", "hello", "again"]

        resumed_view = resumed.sync.session.id
        await resumed.clear_session()
        assert await resumed.get_items() == []
        await resumed.add_items([{"role": "user", "content": "fresh"}])
        moved = resumed.sync.session
        assert moved.info.parent_id == resumed_view  # a rewritten list goes on in a child
        assert [m.text for m in moved.view] == ["fresh"]
        third = ContextfoldSession("s1", _engine(tmp_path / "s.db"))
        assert third.sync.session.id == moved.id
        assert await third.get_items() == [{"role": "user", "content": "fresh"}]

    asyncio.run(scenario())


# -- THE test: a real run through a small window -------------------------------------------------


@function_tool
def list_files(directory: str) -> str:
    """List every file under a directory, one path per line."""
    return _listing(directory)


def _last_ref(call: ModelCall) -> str:
    refs = re.findall(r"ref_[0-9a-f]{12}", json.dumps(call.input))
    assert refs, "the engine left no ref in the model's input"
    return str(refs[-1])


def _read_call(call: ModelCall) -> list[Any]:
    args = {"ref": _last_ref(call), "start_line": LINES - 2, "end_line": LINES}
    return [function_call("read_result", args, call_id="read_1")]


def _check_input(call: ModelCall, engine: ContextEngine, agent: Agent[Any]) -> int:
    """The model's input fits the window and is a valid history; its token count."""
    messages = messages_from_items(call.input)
    assert all(m.role != "system" for m in messages)
    validate(messages, provider=history_rules_for("anthropic"))
    seen_calls: set[str] = set()
    for item in call.input:
        if item.get("type") == "function_call":
            seen_calls.add(item["call_id"])
        if item.get("type") == "function_call_output":
            assert item["call_id"] in seen_calls  # the Responses API's own rule
    tokens = engine.counter.count_request(
        messages, system=call.system_instructions or "", tools=tool_specs(agent.tools)
    )
    assert tokens <= engine.effective_window
    return tokens


def test_agent_run_through_a_small_window(tmp_path: Path) -> None:
    async def scenario() -> None:
        engine = _engine(tmp_path / "run.db")
        session = ContextfoldSession("run", engine)
        steps: list[Any] = [
            [function_call("list_files", {"directory": f"src{i}"}, call_id=f"call_{i}")]
            for i in range(6)
        ]
        steps += [ModelStep.respond(_read_call), [assistant_message("Done.")]]
        model = ScriptedModel(steps)
        agent = Agent(
            name="explorer",
            instructions="You explore repositories.",
            model=model,
            tools=[list_files, session.read_result_tool()],
        )
        config = session.run_config(tracing_disabled=True)
        result = await Runner.run(agent, "List src0..src5.", session=session, run_config=config)
        model.assert_complete()
        assert result.final_output == "Done."

        assert len(model.calls) == 8
        for call in model.calls:
            _check_input(call, engine, agent)
            assert call.system_instructions == "You explore repositories."
        # The SDK's whole history is ~100 times the window; the model never saw a listing whole.
        items = [plain_item(i) for i in await session.get_items()]
        whole = engine.counter.count_request(messages_from_items(items))
        assert whole > 50 * WINDOW
        assert all(_listing("src5") not in json.dumps(c.input) for c in model.calls)

        # read_result answered with the offloaded lines, and the model got that answer.
        read = next(i for i in items if i.get("call_id") == "read_1" and "output" in i)
        assert "src5/module_19999.py" in str(read["output"])
        assert "src5/module_19999.py" in json.dumps(model.calls[-1].input)

        # The SDK's items are what it added, exactly: the store's item log and a full transcript.
        outputs = [i["output"] for i in items if i.get("type") == "function_call_output"]
        assert outputs[:6] == [_listing(f"src{i}") for i in range(6)]
        store = engine.store
        assert isinstance(store, SQLiteStore)
        transcript = [m for _, m in store.iter_messages(session.sync.session.id)]
        # One contextfold session all along (the filter and add_items agreed on every item),
        # holding each message once.
        assert session.sync.session.id == "run"
        assert len(transcript) == len(messages_from_items(items))
        results = [r for m in transcript for r in m.tool_results]
        full = [
            store.get_blob(session.sync.session.id, r.ref) if r.ref else r.content for r in results
        ]
        assert full[:6] == [_listing(f"src{i}") for i in range(6)]

        # A new engine on the same file resumes: same items, same view session, and a second
        # run goes on from there within the window.
        engine2 = _engine(tmp_path / "run.db")
        resumed = ContextfoldSession("run", engine2)
        assert [plain_item(i) for i in await resumed.get_items()] == items
        assert resumed.sync.session.id == session.sync.session.id
        model2 = ScriptedModel(
            [
                [function_call("list_files", {"directory": "lib"}, call_id="call_lib")],
                [assistant_message("lib listed.")],
            ]
        )
        agent2 = agent.clone(model=model2, tools=[list_files, resumed.read_result_tool()])
        await Runner.run(
            agent2,
            "And lib?",
            session=resumed,
            run_config=resumed.run_config(tracing_disabled=True),
        )
        model2.assert_complete()
        for call in model2.calls:
            _check_input(call, engine2, agent2)
        assert resumed.sync.session.id == session.sync.session.id  # appended, not restarted
        assert len(await resumed.get_items()) == len(items) + 4  # question, call, output, answer

    asyncio.run(scenario())


def test_example_runs() -> None:
    subprocess.run([sys.executable, str(EXAMPLE)], check=True, timeout=120)


class _Dict(OrderedDict[Any, Any]):
    """A dict subclass: json_copy makes a plain dict of it (and a flat one was copied as is)."""


_json_leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5)
_json_trees = st.recursive(
    _json_leaves | st.tuples(st.integers()),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3)
        | st.dictionaries(st.text(max_size=3), inner, max_size=2).map(_Dict)
    ),
    max_leaves=12,
)


def _containers(value: object) -> list[object]:
    if isinstance(value, dict):
        return [value, *(c for v in value.values() for c in _containers(v))]
    if isinstance(value, list):
        return [value, *(c for v in value for c in _containers(v))]
    return []


_items = st.dictionaries(st.text(max_size=3), _json_trees, max_size=4)


@settings(max_examples=300, deadline=None)
@given(_items | _items.map(_Dict))
def test_a_planned_copy_is_the_json_copy(item: dict[str, Any]) -> None:
    """MessagesToItems copies each item of the view by a plan made once: the same copy as
    before (a flat item's shallow copy, else json_copy), sharing no dict or list with it."""
    plan = copy_plan(item)
    copied = planned_copy(item, plan)
    flat = not any(isinstance(v, dict | list) for v in item.values())
    expected = item.copy() if flat else json_copy(item)
    assert repr(copied) == repr(expected)  # equal, with the same types (and NaN as NaN)
    originals = {id(c) for c in _containers(item)}
    assert not any(id(c) in originals for c in _containers(copied))
    assert planned_copy(item, plan) is not copied  # a fresh copy every time
