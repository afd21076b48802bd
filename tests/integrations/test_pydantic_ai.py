"""contextfold inside pydantic-ai: the mapping round-trips, and an agent on FunctionModel with
huge tool outputs runs through an 8k window with every model input fitting and valid."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai")

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from pydantic_ai import Agent
from pydantic_ai import messages as pa
from pydantic_ai.models.function import AgentInfo, FunctionModel

from contextfold import ContextEngine, ContextPolicy, model_for_window
from contextfold.history.repair import history_rules_for, validate
from contextfold.hosts.digests import message_digest
from contextfold.integrations._pydantic_ai_mapping import HistoryMapping, _dump, _load
from contextfold.integrations.pydantic_ai import ContextFold, from_messages, to_messages
from contextfold.messages import Message, ToolResultPart
from contextfold.store import BrowsableSessionStore
from contextfold.tool_spec import ToolSpec

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pydantic_ai_example.py"

# -- round trips -----------------------------------------------------------------------------------

_text = st.text(max_size=40)
_times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
_ids = st.from_regex(r"call_[a-z0-9]{1,8}", fullmatch=True)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)

_user_items = st.lists(
    _text
    | st.builds(pa.ImageUrl, url=st.just("https://example.com/cat.png"))
    | st.builds(pa.BinaryContent, data=st.binary(max_size=16), media_type=st.just("image/png")),
    min_size=1,
    max_size=3,
)
_request_parts = st.one_of(
    st.builds(pa.SystemPromptPart, content=_text, timestamp=_times),
    st.builds(pa.UserPromptPart, content=_text | _user_items, timestamp=_times),
    st.builds(
        pa.ToolReturnPart,
        tool_name=st.sampled_from(["grep", "run"]),
        content=_text | _json_values,
        tool_call_id=_ids,
        timestamp=_times,
        outcome=st.sampled_from(["success", "failed"]),
        metadata=st.none() | st.dictionaries(_text, st.integers(), max_size=2),
    ),
)
_response_parts = st.one_of(
    st.builds(pa.TextPart, content=_text),
    st.builds(
        pa.ThinkingPart,
        content=_text,
        signature=st.none() | _text,
        provider_name=st.just("anthropic"),
    ),
    st.builds(
        pa.ToolCallPart,
        tool_name=st.sampled_from(["grep", "run"]),
        args=st.none() | st.dictionaries(_text, _json_values, max_size=3) | st.just('{"a": 1}'),
        tool_call_id=_ids,
    ),
    # No neutral type for a file the model produced: it rides along in the sidecar.
    st.builds(
        pa.FilePart,
        content=st.builds(
            pa.BinaryContent, data=st.binary(max_size=8), media_type=st.just("image/png")
        ),
    ),
)
_requests = st.builds(
    pa.ModelRequest,
    parts=st.lists(_request_parts, min_size=1, max_size=4),
    timestamp=st.none() | _times,
    instructions=st.none() | _text,
    run_id=st.none() | st.just("run-1"),
)
_responses = st.builds(
    pa.ModelResponse,
    parts=st.lists(_response_parts, max_size=4),
    timestamp=_times,
    model_name=st.none() | st.just("function:fn"),
    usage=st.builds(
        pa.RequestUsage, input_tokens=st.integers(0, 10**6), output_tokens=st.integers(0, 10**4)
    ),
)
_histories = st.lists(st.one_of(_requests, _responses), max_size=6)


@settings(max_examples=150, deadline=None)
@given(_histories)
def test_a_history_maps_to_contextfold_and_back_unchanged(history: list[pa.ModelMessage]) -> None:
    # pydantic-ai's own JSON round trip is the yardstick: it narrows a BinaryContent image to a
    # BinaryImage and normalises time zones, which no history stored by pydantic-ai escapes.
    expected = pa.ModelMessagesTypeAdapter.validate_json(
        pa.ModelMessagesTypeAdapter.dump_json(history)
    )
    neutral = to_messages(history)
    assert from_messages(neutral) == expected
    # And through the store's JSON form, as a resumed session would read it back.
    stored = [Message.from_json(m.to_json()) for m in neutral]
    assert from_messages(stored) == expected


@settings(max_examples=60, deadline=None)
@given(_histories)
def test_the_neutral_form_says_what_the_model_reads(history: list[pa.ModelMessage]) -> None:
    neutral = to_messages(history)
    calls = [p for m in history if isinstance(m, pa.ModelResponse) for p in m.tool_calls]
    assert [(c.call_id, c.name) for m in neutral for c in m.tool_calls] == [
        (c.tool_call_id, c.tool_name) for c in calls
    ]
    returns = [p for m in history if isinstance(m, pa.ModelRequest) for p in m.parts]
    returns = [p for p in returns if isinstance(p, pa.ToolReturnPart)]
    results = [r for m in neutral for r in m.tool_results]
    assert [r.content for r in results] == [p.model_response_str() for p in returns]
    assert [r.is_error for r in results] == [p.outcome != "success" for p in returns]


def _said(messages: list[Message]) -> list[tuple[bytes, object]]:
    """What neutral messages say and carry for the way back (group ids aside: fresh each time)."""
    out = []
    for m in messages:
        sidecar = dict(m.meta.provider.get("pydantic_ai", {}))
        sidecar.pop("group", None)
        out.append((message_digest(m), sidecar))
    return out


@settings(max_examples=60, deadline=None)
@given(_histories, _histories)
def test_a_growing_history_maps_as_a_whole_conversion_would(
    first: list[pa.ModelMessage], more: list[pa.ModelMessage]
) -> None:
    mapping = HistoryMapping()
    # Call after call the history grows by new objects, and keeps the ones it had.
    for history in (first, first + more, first + more):
        neutral = mapping.to_messages(history)
        assert _said(neutral) == _said(to_messages(history))
        expected = from_messages(to_messages(history))
        assert mapping.from_messages(neutral) == expected
        assert mapping.from_messages(neutral) == expected  # the second time from the memo


def _sent(messages: list[pa.ModelMessage]) -> list[object]:
    """What pydantic-ai messages say, the time a request rebuilt without its head was given
    (the time of rebuilding) aside."""
    out = []
    for message in messages:
        (dumped,) = pa.ModelMessagesTypeAdapter.dump_python([message], mode="json")
        if dumped["kind"] == "request":
            dumped.pop("timestamp", None)
            for part in dumped["parts"]:
                part.pop("timestamp", None)
        out.append(dumped)
    return out


@settings(max_examples=60, deadline=None)
@given(_histories, st.lists(st.lists(st.integers(0, 40), max_size=10), min_size=1, max_size=5))
def test_views_map_back_as_mapping_each_afresh_would(
    history: list[pa.ModelMessage], picks: list[list[int]]
) -> None:
    """Each view keeps the start of the one before and goes on with any of the history's
    messages (the engine's views grow, and drop or replace messages when it compacts): it maps
    back as mapping it alone would."""
    neutral = to_messages(history)
    if not neutral:
        return
    mapping = HistoryMapping()
    view: list[Message] = []
    for pick in picks:
        keep = pick[0] % (len(view) + 1) if pick else len(view)
        view = view[:keep] + [neutral[i % len(neutral)] for i in pick[1:]]
        assert _sent(mapping.from_messages(view)) == _sent(from_messages(view))


@settings(max_examples=100, deadline=None)
@given(_histories)
def test_a_message_loads_from_its_json_form_as_through_json_dumps(
    history: list[pa.ModelMessage],
) -> None:
    """``_load`` writes the JSON text with pydantic-core's encoder, not ``json.dumps``: the
    message read back is the same."""
    for message in history:
        data = _dump(message)
        assert _load(data) == pa.ModelMessagesTypeAdapter.validate_json(json.dumps([data]))[0]


def test_loading_keeps_what_json_dumps_writes_and_refuses_what_it_refuses() -> None:
    call = pa.ToolCallPart("run", {"big": math.inf, "small": -math.inf, "odd": math.nan}, "c1")
    data = _dump(pa.ModelResponse(parts=[call]))
    loaded = _load(data)
    expected = pa.ModelMessagesTypeAdapter.validate_json(json.dumps([data]))[0]
    assert repr(loaded) == repr(expected)  # NaN is unequal to itself: compared as written
    # A lone surrogate (output decoded with surrogateescape): refused by both encodings, and
    # then refused as json.dumps' text is.
    lone = _dump(pa.ModelRequest(parts=[pa.UserPromptPart("bad \udcff byte")]))
    with pytest.raises(ValidationError):
        pa.ModelMessagesTypeAdapter.validate_json(json.dumps([lone]))
    with pytest.raises(ValidationError):
        _load(lone)


def test_a_request_becomes_one_message_per_part_with_its_sidecar() -> None:
    """The stored form of a request's messages: one group, each part's fields, and the request's
    own fields and layout with the first message (in that order: it is what the store keeps)."""
    request = pa.ModelRequest(
        parts=[
            pa.SystemPromptPart("be brief"),
            pa.UserPromptPart("hello"),
            pa.ToolReturnPart("run", "done", "call_1"),
        ],
        instructions="answer",
    )
    system, user, tool = to_messages([request])
    sidecars = [m.meta.provider["pydantic_ai"] for m in (system, user, tool)]
    assert [list(s) for s in sidecars] == [
        ["group", "k", "part", "request", "layout"],
        ["group", "k", "part"],
        ["group", "k", "part"],
    ]
    assert len({s["group"] for s in sidecars}) == 1
    assert [s["k"] for s in sidecars] == [0, 1, 2] and sidecars[0]["layout"] == [0, 1, 2]
    assert sidecars[0]["request"]["instructions"] == "answer"
    assert [m.meta.kind for m in (system, user, tool)] == ["message", "message", "tool_result"]
    assert [m.role for m in (system, user, tool)] == ["system", "user", "tool"]
    assert from_messages([system, user, tool]) == [request]


def test_a_grown_view_gives_its_earlier_groups_again_and_builds_the_last_anew() -> None:
    history: list[pa.ModelMessage] = []
    for n in range(3):
        history.append(pa.ModelRequest(parts=[pa.UserPromptPart(f"ask {n}")]))
        history.append(pa.ModelResponse(parts=[pa.TextPart(f"answer {n}")]))
    neutral = to_messages(history)
    mapping = HistoryMapping()
    first = mapping.from_messages(neutral[:3])
    second = mapping.from_messages(neutral)
    assert second[0] is first[0] and second[1] is first[1]
    assert second[2] is not first[2]  # sent last before: pydantic-ai may have changed it
    assert second == from_messages(neutral)


def test_a_message_changed_in_place_converts_again() -> None:
    request = pa.ModelRequest(parts=[pa.UserPromptPart("first")])
    response = pa.ModelResponse(parts=[pa.TextPart("answer")])
    mapping = HistoryMapping()
    before = mapping.to_messages([request, response])
    assert mapping.to_messages([request, response])[0] is before[0]  # unchanged: remembered
    # pydantic-ai fills in run metadata and appends parts to a request it holds.
    request.run_id = "run-1"
    request.parts = [*request.parts, pa.UserPromptPart("second")]
    after = mapping.to_messages([request, response])
    assert _said(after) == _said(to_messages([request, response]))
    assert [m.text for m in after[:2]] == ["first", "second"]
    assert after[-1] is before[-1]


def test_a_part_changed_or_replaced_in_place_converts_again() -> None:
    """A part's field set anew, or a part swapped for another in the same list, is a change;
    an equal part in its place is not."""
    response = pa.ModelResponse(parts=[pa.TextPart("answer"), pa.TextPart("more")])
    mapping = HistoryMapping()
    before = mapping.to_messages([response])
    response.parts[1].content = "changed"
    assert mapping.to_messages([response])[0].text == "answer\nchanged"
    response.parts[0] = pa.ToolCallPart("bash", {"command": "ls"}, "call_1")
    (after,) = mapping.to_messages([response])
    assert _said([after]) == _said(to_messages([response]))
    response.parts[0] = pa.ToolCallPart("bash", {"command": "ls"}, "call_1")  # an equal one
    assert mapping.to_messages([response])[0] is after
    assert after is not before[0]


def test_an_output_the_engine_cut_goes_back_with_the_cut_content_and_its_own_fields() -> None:
    stamp = datetime(2026, 1, 2, tzinfo=UTC)
    original = pa.ModelRequest(
        parts=[pa.ToolReturnPart("grep", "x" * 1000, "call_1", timestamp=stamp, metadata={"k": 1})]
    )
    (message,) = to_messages([original])
    (result,) = message.tool_results
    cut = message.with_parts(
        [
            ToolResultPart(
                result.call_id, result.name, "preview ref_0123456789ab", ref="ref_0123456789ab"
            )
        ]
    )
    (request,) = from_messages([cut])
    assert isinstance(request, pa.ModelRequest)
    (part,) = request.parts
    assert isinstance(part, pa.ToolReturnPart)
    assert part.content == "preview ref_0123456789ab"
    assert (part.tool_call_id, part.timestamp, part.metadata) == ("call_1", stamp, {"k": 1})


def test_messages_the_engine_made_become_plain_parts() -> None:
    back = from_messages([Message.user("summary of earlier work"), Message.assistant("ok")])
    assert back[0] == pa.ModelRequest(
        parts=[pa.UserPromptPart("summary of earlier work", timestamp=back[0].parts[0].timestamp)]
    )  # type: ignore[union-attr]
    assert isinstance(back[1], pa.ModelResponse)
    assert [p.content for p in back[1].parts if isinstance(p, pa.TextPart)] == ["ok"]


# -- the agent -------------------------------------------------------------------------------------

LINES = 20_000
WINDOW = 8_000


def _big_output(seed: int) -> str:
    return "\n".join(f"{seed}: line {i} of the build log" for i in range(LINES))


class _ScriptedModel:
    """A model that runs ``big`` three times, reads one offloaded output back, then answers,
    checking every input it is given against the window and the history rules."""

    def __init__(self, fold: ContextFold) -> None:
        self.fold = fold
        self.calls = 0
        self.inputs_checked = 0
        self.refs: list[str] = []
        self.read_back: list[str] = []

    def __call__(self, messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
        self.check(messages, info)
        self.calls += 1
        last = messages[-1]
        for part in last.parts:
            if isinstance(part, pa.ToolReturnPart):
                if part.tool_name == "big":
                    self.refs += re.findall(r"ref_[0-9a-f]{12}", str(part.content))
                else:
                    self.read_back.append(str(part.content))
        if self.calls <= 3:
            return pa.ModelResponse(parts=[pa.ToolCallPart("big", {"seed": self.calls})])
        if self.calls == 4:
            args = {"ref": self.refs[0], "start_line": 1000, "end_line": 1002}
            return pa.ModelResponse(parts=[pa.ToolCallPart("read_result", args)])
        return pa.ModelResponse(parts=[pa.TextPart("the build log is long")])

    def check(self, messages: list[pa.ModelMessage], info: AgentInfo) -> None:
        neutral = to_messages(messages)
        system = "\n\n".join(
            [
                *(m.text for m in neutral if m.role == "system"),
                *([info.instructions] if info.instructions else []),
            ]
        )
        conversation = [m for m in neutral if m.role != "system"]
        tools = [
            ToolSpec(t.name, t.description or "", t.parameters_json_schema)
            for t in info.function_tools
        ]
        engine = self.fold.engine
        tokens = engine.counter.count_request(conversation, system=system, tools=tools)
        assert tokens <= engine.effective_window, (tokens, engine.effective_window)
        validate(conversation, provider=history_rules_for("anthropic"))
        self.inputs_checked += 1


def _agent(fold: ContextFold, model: _ScriptedModel) -> Agent[None, str]:
    agent = Agent(FunctionModel(model), system_prompt="You read build logs.", capabilities=[fold])

    @agent.tool_plain
    def big(seed: int) -> str:
        """Print the build log."""
        return _big_output(seed)

    return agent


def _engine(path: Path) -> ContextEngine:
    return ContextEngine(
        model_for_window(WINDOW, max_output_tokens=1_000),
        store=str(path),
        policy=ContextPolicy(background=False),
    )


def test_an_agent_with_huge_tool_outputs_runs_through_a_small_window(tmp_path: Path) -> None:
    store = tmp_path / "agent.db"
    engine = _engine(store)
    fold = ContextFold(engine)
    model = _ScriptedModel(fold)
    result = _agent(fold, model).run_sync("Why did the build fail?")

    assert result.output == "the build log is long"
    assert model.inputs_checked == model.calls == 5
    # The agent's own history stays whole: the capability changes only what each request sends.
    returns = [
        p
        for m in result.all_messages()
        for p in m.parts
        if isinstance(p, pa.ToolReturnPart) and p.tool_name == "big"
    ]
    assert [p.content for p in returns] == [_big_output(s) for s in (1, 2, 3)]
    # The model saw refs, and read_result gave back the offloaded lines.
    assert len(set(model.refs)) == 3
    (page,) = model.read_back
    assert "1: line 999 of the build log" in page and "1: line 1001 of the build log" in page

    # The store holds the whole transcript: each output whole, in its message or its blob.
    session_id = fold.sync.session.id
    assert isinstance(engine.store, BrowsableSessionStore)
    stored = [m for _, m in engine.store.iter_messages(session_id)]
    outputs = [
        engine.store.get_blob(session_id, r.ref) if r.ref else r.content
        for m in stored
        for r in m.tool_results
        if r.name == "big"
    ]
    assert outputs == [_big_output(s) for s in (1, 2, 3)]
    assert [m.role for m in stored].count("assistant") == 5
    history = result.all_messages()
    engine.close()

    # A new engine on the same file resumes the session and goes on from the agent's history.
    engine2 = _engine(store)
    resumed = ContextFold(engine2, engine2.resume(session_id))
    model2 = _ScriptedModel(resumed)
    model2.calls = 4  # it answers straight away
    model2.refs = model.refs
    result2 = _agent(resumed, model2).run_sync("Thanks.", message_history=history)
    assert result2.output == "the build log is long"
    assert resumed.sync.session.id == session_id  # recognised its history: no fork
    # The earlier offloaded output reads back through the resumed engine.
    assert (
        "2: line 5 of the build log"
        in engine2.resume(session_id).read_result(list(dict.fromkeys(model.refs))[1]).content
    )
    engine2.close()


def test_the_example_runs() -> None:
    subprocess.run([sys.executable, str(EXAMPLE)], check=True, timeout=120)


def test_only_a_real_providers_usage_anchors_the_engine() -> None:
    """pydantic-ai's own models guess usage from word counts (about half a real count); the
    engine would plan past the window if it trusted that."""
    from pydantic_ai.usage import RequestUsage

    usage = RequestUsage(input_tokens=1_000, output_tokens=20)
    guessed = pa.ModelResponse(parts=[pa.TextPart("hi")], usage=usage)
    reported = pa.ModelResponse(parts=[pa.TextPart("hi")], usage=usage, provider_name="openai")
    [from_function_model] = to_messages([guessed])
    [from_provider] = to_messages([reported])
    assert from_function_model.meta.usage is None
    assert from_provider.meta.usage is not None
    assert from_provider.meta.usage.input_tokens == 1_000
    assert from_messages([from_function_model]) == [guessed]  # still kept for the way back
