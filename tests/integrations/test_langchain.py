"""contextfold's middleware in a real LangChain v1 agent (``create_agent``), with a scripted fake
chat model: no network.

THE test runs tool calls producing 20,000-line outputs through an 8k window and checks every
model input; the stacking tests say what happens next to LangChain's ContextEditingMiddleware.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain.agents.middleware import (
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    SummarizationMiddleware,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from contextfold import ContextEngine, ContextPolicy, model_for_window
from contextfold.history.repair import history_rules_for, validate
from contextfold.integrations.langchain import (
    ContextFoldMiddleware,
    from_messages,
    to_messages,
    tool_spec,
)
from contextfold.messages import (
    ImagePart,
    Message,
    Meta,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from contextfold.store import BrowsableSessionStore
from contextfold.tool_spec import ToolSpec

pytestmark = pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")

LINES = 20_000
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langchain_example.py"
REF = re.compile(r"ref_[0-9a-f]{12}")


# -- a scripted chat model ------------------------------------------------------------------------

Step = Callable[[list[BaseMessage]], AIMessage]


class ScriptedChatModel(BaseChatModel):
    """Replies with the next step of its script (a function of what it was sent) and records
    every input and the tools it was bound to: the fake create_agent calls like a real model."""

    steps: list[Step]
    inputs: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[ToolSpec] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.inputs.append(list(messages))
        step = self.steps[min(len(self.inputs), len(self.steps)) - 1]
        return ChatResult(generations=[ChatGeneration(message=step(list(messages)))])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        self.bound[:] = [tool_spec(t) for t in tools]
        return self


def _call(name: str, call_id: str, **args: Any) -> Step:
    return lambda _: AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


def _read_back(call_id: str) -> Step:
    """Read line 12,345 of the latest offloaded output, by the ref the model was shown."""

    def step(messages: list[BaseMessage]) -> AIMessage:
        refs = [REF.findall(m.text) for m in messages if isinstance(m, ToolMessage)]
        ref = [r for found in refs for r in found][-1]
        args = {"ref": ref, "start_line": 12_346, "end_line": 12_346}
        return AIMessage(
            content="", tool_calls=[{"name": "read_result", "args": args, "id": call_id}]
        )

    return step


def _answer(text: str) -> Step:
    return lambda _: AIMessage(content=text)


@tool
def seq(count: int) -> str:
    """Print the numbers 0..count-1, one per line."""
    return "\n".join(f"line {i}" for i in range(count))


def _engine(path: Path | str) -> ContextEngine:
    return ContextEngine(
        model_for_window(8_000, max_output_tokens=1_000),
        store=path,
        policy=ContextPolicy(background=False),
    )


def _stored(engine: ContextEngine, session_id: str) -> list[Message]:
    store = engine.store
    assert isinstance(store, BrowsableSessionStore)
    return [m for _, m in store.iter_messages(session_id)]


def _assert_fits_and_valid(model: ScriptedChatModel, engine: ContextEngine) -> None:
    """Every input the model got is a valid history that fits the window, tools included."""
    assert model.inputs
    for sent in model.inputs:
        system = "\n\n".join(m.text for m in sent if isinstance(m, SystemMessage))
        neutral = [m for m in to_messages(sent) if m.role != "system"]
        validate(neutral, provider=history_rules_for("anthropic"))
        tokens = engine.counter.count_request(neutral, system=system, tools=model.bound)
        assert tokens <= engine.effective_window, f"{tokens} > {engine.effective_window}"


def _script() -> list[Step]:
    return [
        _call("seq", "c1", count=LINES),
        _read_back("c2"),
        _call("seq", "c3", count=LINES),
        _call("seq", "c4", count=LINES),
        _answer("Line 12,345 is there; three big outputs seen."),
    ]


# -- THE test -------------------------------------------------------------------------------------


def test_large_outputs_through_a_small_window(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    engine = _engine(db)
    model = ScriptedChatModel(steps=_script())
    middleware = ContextFoldMiddleware(engine)
    saver = InMemorySaver()
    agent = create_agent(
        model, [seq], system_prompt="You count.", middleware=[middleware], checkpointer=saver
    )
    config: Any = {"configurable": {"thread_id": "t1"}}
    state = agent.invoke({"messages": [HumanMessage("Count to 20,000.")]}, config)

    # The graph state holds the whole transcript: three full outputs of 20,000 lines.
    messages: list[BaseMessage] = state["messages"]
    outputs = [m for m in messages if isinstance(m, ToolMessage) and m.name == "seq"]
    assert [len(m.text.splitlines()) for m in outputs] == [LINES] * 3
    full_state_tokens = engine.counter.count_request(to_messages(messages), system="You count.")
    assert full_state_tokens > 10 * engine.effective_window  # what LangChain alone would send

    # Every model input fits the window and is a valid history; none carries a whole output.
    assert len(model.inputs) == 5
    _assert_fits_and_valid(model, engine)
    assert all("line 10000" not in m.text for sent in model.inputs for m in sent)
    assert "read_result" in [t.name for t in model.bound]

    # read_result (the middleware's tool, run by LangGraph's tool node) read the offloaded line.
    read = next(m for m in messages if isinstance(m, ToolMessage) and m.name == "read_result")
    assert "line 12345" in read.text and "line 12347" not in read.text

    # The store holds the whole transcript, the reply included; outputs are whole in their blobs.
    session = middleware.session("t1")
    stored = _stored(engine, session.id)
    assert [m.role for m in stored] == [m.role for m in to_messages(messages) if m.role != "system"]
    refs = [r.ref for m in stored for r in m.tool_results if r.name == "seq"]
    assert len(refs) == 3 and all(refs)
    assert refs[0] is not None and engine.store.get_blob(session.id, refs[0]) == outputs[0].text
    assert stored[-1].text == "Line 12,345 is there; three big outputs seen."
    engine.close()

    # A new engine on the same file (a restarted process) continues the same session.
    engine2 = _engine(db)
    model2 = ScriptedChatModel(steps=[_answer("Still here.")])
    middleware2 = ContextFoldMiddleware(engine2)
    agent2 = create_agent(
        model2, [seq], system_prompt="You count.", middleware=[middleware2], checkpointer=saver
    )
    agent2.invoke({"messages": [HumanMessage("Are you there?")]}, config)
    assert middleware2.session("t1").id == session.id  # recognised: not a restart
    stored2 = _stored(engine2, session.id)
    assert len(stored2) == len(stored) + 2  # exactly the new question and answer
    _assert_fits_and_valid(model2, engine2)
    engine2.close()


def test_async_runs_get_the_view_too(tmp_path: Path) -> None:
    engine = _engine(tmp_path / "async.db")
    model = ScriptedChatModel(steps=_script())
    middleware = ContextFoldMiddleware(engine)
    agent = create_agent(model, [seq], middleware=[middleware])
    state = asyncio.run(agent.ainvoke({"messages": [HumanMessage("Count.")]}))
    _assert_fits_and_valid(model, engine)
    read = next(m for m in state["messages"] if getattr(m, "name", None) == "read_result")
    assert "line 12345" in read.text
    # No thread_id: the middleware instance's own session holds the run.
    stored = _stored(engine, middleware.session().id)
    assert len(stored) == len(state["messages"])
    engine.close()


# -- stacked with LangChain's own context editing -------------------------------------------------


def _stacked_run(tmp_path: Path, contextfold_first: bool) -> tuple[Any, ...]:
    engine = _engine(tmp_path / f"stack{contextfold_first}.db")
    model = ScriptedChatModel(
        steps=[_call("seq", "c1", count=300), _call("seq", "c2", count=400), _answer("ok")]
    )
    ours = ContextFoldMiddleware(engine)
    theirs = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=200, keep=1)])
    stack = [ours, theirs] if contextfold_first else [theirs, ours]
    agent = create_agent(model, [seq], middleware=stack)
    state = agent.invoke({"messages": [HumanMessage("Count twice.")]})
    return engine, model, ours, state


def test_stacked_outside_context_editing_keeps_one_whole_transcript(tmp_path: Path) -> None:
    """contextfold first in ``middleware=[...]`` (outermost): it records the state's history
    whole in one session and hands its view to ContextEditingMiddleware, which then clears old
    tool outputs in that view (its placeholder, without a ref: the model cannot read those back,
    though the store still has them). Every input still fits; nothing is stored twice."""
    engine, model, ours, state = _stacked_run(tmp_path, contextfold_first=True)
    _assert_fits_and_valid(model, engine)
    last_input = model.inputs[-1]
    cleared = [m for m in last_input if isinstance(m, ToolMessage) and m.text == "[cleared]"]
    assert len(cleared) == 1  # context editing acted on the view: the first output cleared
    session = ours.session()
    assert engine.store.get_session(session.id).parent_id is None  # one session, never restarted
    stored = _stored(engine, session.id)
    assert len(stored) == len(state["messages"])
    first = stored[2].tool_results[0]
    assert first.ref and engine.store.get_blob(session.id, first.ref) == seq.invoke({"count": 300})
    engine.close()


def test_stacked_inside_context_editing_restarts_its_session(tmp_path: Path) -> None:
    """contextfold after ContextEditingMiddleware (inner): it is handed the edited history, in
    which an output it stored whole has become ``[cleared]``. That history no longer starts with
    what the session holds, so it continues in a child session (the parent keeps the whole
    output). It still works, but the transcript is split: put contextfold first."""
    engine, model, ours, _ = _stacked_run(tmp_path, contextfold_first=False)
    _assert_fits_and_valid(model, engine)
    child = engine.store.get_session(ours.session().id)
    assert child.parent_id is not None
    parent = _stored(engine, child.parent_id)
    first = parent[2].tool_results[0]
    assert first.ref and engine.store.get_blob(child.parent_id, first.ref) == seq.invoke(
        {"count": 300}
    )
    # The child holds the history as context editing left it: the first output cleared.
    stored = _stored(engine, child.id)
    assert any(r.content == "[cleared]" for m in stored for r in m.tool_results)
    engine.close()


def test_next_to_summarization_the_store_keeps_what_the_state_forgets(tmp_path: Path) -> None:
    """SummarizationMiddleware works in ``before_model``: it rewrites the graph state itself (the
    old messages removed, a summary in their place), wherever it sits in ``middleware=[...]``.
    contextfold sees a history that no longer starts with what its session holds, so it goes on
    in a child session; the parent keeps the whole transcript up to the summary, every output
    readable whole. Every input still fits the window. (With a 20,000-line output in what it
    summarizes, LangChain's summarizer gives up: "Previous conversation was too long to
    summarize" is all the state keeps of it.)"""
    engine = _engine(tmp_path / "summary.db")
    model = ScriptedChatModel(
        steps=[_call("seq", "c1", count=LINES), _call("seq", "c2", count=300), _answer("ok")]
    )
    summarizer = ScriptedChatModel(steps=[_answer("Summary: seq was run for 20,000 lines.")])
    ours = ContextFoldMiddleware(engine)
    theirs = SummarizationMiddleware(summarizer, trigger=("messages", 4), keep=("messages", 2))
    agent = create_agent(model, [seq], middleware=[ours, theirs])
    state = agent.invoke({"messages": [HumanMessage("Count.")]})

    _assert_fits_and_valid(model, engine)
    summary = state["messages"][0]
    assert summary.additional_kwargs.get("lc_source") == "summarization"
    assert all("line 12345" not in m.text for m in state["messages"])  # the state forgot it
    child = engine.store.get_session(ours.session().id)
    assert child.parent_id is not None
    parent = _stored(engine, child.parent_id)
    first = parent[2].tool_results[0]
    assert first.ref is not None
    assert engine.store.get_blob(child.parent_id, first.ref) == seq.invoke({"count": LINES})
    engine.close()


# -- the mapping, both ways -----------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8"), min_size=1, max_size=30)
_ids = st.from_regex(r"call_[a-z0-9]{6}", fullmatch=True)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)
_images = st.builds(
    ImagePart,
    st.sampled_from(["data:image/png;base64,iVBORw0K", "https://example.com/a.jpg"]),
    st.just("image/png"),
    st.sampled_from([None, "high"]),
)
_thinking = st.builds(ThinkingPart, _text, st.sampled_from([None, "sig=="])) | st.builds(
    lambda data: ThinkingPart("", None, data), _text
)
_calls = st.builds(
    lambda i, n, a: ToolCallPart.from_args(i, n, a), _ids, _text, st.dictionaries(_text, _json)
)
_usage = st.builds(Usage, *(st.integers(0, 10**6) for _ in range(4)))


def _user() -> st.SearchStrategy[Message]:
    parts = st.lists(st.builds(TextPart, _text) | _images, min_size=1, max_size=3)
    return st.builds(lambda p: Message("user", tuple(p)), parts)


def _assistant() -> st.SearchStrategy[Message]:
    def build(
        thinking: list[Part], text: list[Part], calls: list[Part], usage: Usage | None
    ) -> Message:
        meta = Meta(usage=usage) if usage else Meta()
        return Message("assistant", (*thinking, *text, *calls), meta=meta)

    return st.builds(
        build,
        st.lists(_thinking, max_size=2),
        st.lists(st.builds(TextPart, _text), max_size=2),
        st.lists(_calls, max_size=3, unique_by=lambda c: c.call_id),
        st.none() | _usage,
    )


def _tool() -> st.SearchStrategy[Message]:
    result = st.builds(
        ToolResultPart,
        _ids,
        _text,
        st.text(max_size=50),
        st.booleans(),
        st.tuples() | st.tuples(_images),
    )
    return st.builds(Message.tool, result)


@settings(max_examples=150, deadline=None)
@given(st.one_of(_user(), _assistant(), _tool(), st.builds(Message.system, _text)))
def test_contextfold_messages_survive_langchain_and_back(message: Message) -> None:
    back = to_messages(from_messages([message]))
    assert len(back) == 1
    assert back[0].role == message.role
    assert back[0].parts == message.parts
    assert back[0].meta.usage == message.meta.usage


_lc_text_content = _text | st.lists(
    st.fixed_dictionaries({"type": st.just("text"), "text": _text}), min_size=2, max_size=3
)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        st.builds(lambda c: HumanMessage(content=c), _lc_text_content),
        st.builds(lambda c: SystemMessage(content=c), _lc_text_content),
        st.builds(
            lambda c, calls: AIMessage(content=c, tool_calls=calls),
            _text,
            st.lists(
                st.builds(
                    lambda i, n, a: {"name": n, "args": a, "id": i},
                    _ids,
                    _text,
                    st.dictionaries(_text, _json),
                ),
                max_size=2,
                unique_by=lambda c: c["id"],
            ),
        ),
        st.builds(
            lambda c, i, n, s: ToolMessage(content=c, tool_call_id=i, name=n, status=s),
            st.text(max_size=40),
            _ids,
            _text,
            st.sampled_from(["success", "error"]),
        ),
    )
)
def test_langchain_messages_survive_contextfold_and_back(message: BaseMessage) -> None:
    back = from_messages(to_messages([message]))
    assert len(back) == 1
    assert type(back[0]) is type(message)
    assert back[0].content == message.content
    if isinstance(message, AIMessage):
        assert isinstance(back[0], AIMessage)
        assert back[0].tool_calls == message.tool_calls
    if isinstance(message, ToolMessage):
        assert isinstance(back[0], ToolMessage)
        assert (back[0].tool_call_id, back[0].name, back[0].status) == (
            message.tool_call_id,
            message.name,
            message.status,
        )


def test_provider_spellings_of_images_and_reasoning_map_to_the_same_parts() -> None:
    """OpenAI's image_url and Anthropic's source/thinking blocks, as providers return them."""
    human = HumanMessage(
        content=[
            {
                "type": "image_url",
                "image_url": {"url": "data:image/png;base64,AAA", "detail": "low"},
            },
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "AAA"},
            },
        ]
    )
    ai = AIMessage(
        content=[
            {"type": "thinking", "thinking": "hmm", "signature": "s1"},
            {"type": "redacted_thinking", "data": "xyz"},
            {"type": "text", "text": "Calling."},
            {"type": "tool_use", "id": "c1", "name": "seq", "input": {"count": 2}},
        ],
        tool_calls=[{"name": "seq", "args": {"count": 2}, "id": "c1"}],
        invalid_tool_calls=[
            {"name": "seq", "args": "{oops", "id": "c2", "error": None, "type": "invalid_tool_call"}
        ],
    )
    user, assistant = to_messages([human, ai])
    assert user.parts == (
        ImagePart("data:image/png;base64,AAA", "image/png", "low"),
        ImagePart("data:image/png;base64,AAA", "image/png"),
    )
    assert assistant.parts == (
        ThinkingPart("hmm", "s1"),
        ThinkingPart("", None, "xyz"),
        TextPart("Calling."),
        ToolCallPart("c1", "seq", '{"count":2}'),
        ToolCallPart("c2", "seq", "{oops"),
    )
    (back,) = from_messages([assistant])
    assert isinstance(back, AIMessage)
    assert back.invalid_tool_calls[0]["args"] == "{oops"
    assert back.content[0] == {"type": "thinking", "thinking": "hmm", "signature": "s1"}


def test_the_example_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], check=True, timeout=120, capture_output=True, text=True
    )
    assert "tokens" in done.stdout


def _history(turns: int, start: int = 0) -> list[BaseMessage]:
    history: list[BaseMessage] = [HumanMessage("count the lines")]
    for i in range(start, start + turns):
        call = {"name": "seq", "args": {"count": i % 3}, "id": f"call_{i}", "type": "tool_call"}
        history.append(AIMessage(content="again" if i % 2 else "", tool_calls=[call]))
        # Every third output repeats one already given: the later one holds the key.
        history.append(ToolMessage(f"line {i % 3}", tool_call_id=f"call_{i}", name="seq"))
    return history


def test_the_map_of_a_growing_history_equals_the_map_made_afresh(tmp_path: Path) -> None:
    """The middleware extends the map of the call before when the history grew by appending,
    and makes it again when the history was rewritten: either way it equals the map made from
    the whole history (last message of a key wins)."""
    from contextfold.integrations.langchain import _unchanged_key

    middleware = ContextFoldMiddleware(_engine(tmp_path / "s.db"))
    full, rewritten = _history(12), _history(6, start=40)
    # The middleware converts each message object once: the same history, the same objects.
    converted = dict(zip(map(id, full + rewritten), to_messages(full + rewritten), strict=True))
    calls = [full[:3], full[:9], full[:9], full, rewritten, [*rewritten, *full[1:4]]]
    extended = []
    previous: object = None
    for history in calls:
        neutral = [converted[id(m)] for m in history]
        fresh = {_unchanged_key(c): o for c, o in zip(neutral, history, strict=True)}
        got = middleware._originals(history, neutral)
        assert got.keys() == fresh.keys()
        assert all(got[k] is fresh[k] for k in fresh)
        extended.append(got is previous)
        previous = got
    assert extended == [False, True, True, True, False, True]


def test_a_grown_history_converts_as_the_whole_history_does(tmp_path: Path) -> None:
    """Each message object is converted once; what a call returns is what converting its whole
    history gives (a tool result named by the call before it), grown, repeated or rewritten."""
    middleware = ContextFoldMiddleware(_engine(tmp_path / "s.db"))
    full, rewritten = _history(12), _history(6, start=40)
    for i, message in enumerate(full):
        if isinstance(message, ToolMessage):  # named only by its call, as some hosts send them
            full[i] = ToolMessage(message.content, tool_call_id=message.tool_call_id)
    calls = [full[:3], full[:9], full[:9], full, rewritten, [*rewritten, *full[1:4]], full[:5]]
    before: dict[int, Message] = {}
    for history in calls:
        got = middleware._neutral(history)
        whole = to_messages(history)
        assert [(m.role, m.parts, m.meta) for m in got] == [
            (m.role, m.parts, m.meta) for m in whole
        ]
        for message, neutral in zip(history, got, strict=True):
            if id(message) in before:  # converted by the call before: the same object
                assert neutral is before[id(message)]
        before = {id(m): n for m, n in zip(history, got, strict=True)}


def test_a_reply_is_stored_with_the_next_calls_messages(tmp_path: Path) -> None:
    """A model call's reply reaches the store with the tool results the next call brings, in
    that call's one transaction; the run's last reply when the run ends. The store holds the
    whole run, as the graph state does."""
    engine = _engine(tmp_path / "commits.db")
    store = engine.store
    atomic = store.atomic  # type: ignore[attr-defined]
    commits: list[int] = []
    depth = [0]

    @contextmanager
    def counted() -> Iterator[None]:
        depth[0] += 1
        try:
            with atomic():
                yield
        finally:
            depth[0] -= 1
        commits.extend([1] if depth[0] == 0 else [])

    store.atomic = counted  # type: ignore[attr-defined]
    model = ScriptedChatModel(
        steps=[_call("seq", "c1", count=3), _call("seq", "c2", count=4), _answer("done")]
    )
    middleware = ContextFoldMiddleware(engine)
    agent = create_agent(model, [seq], middleware=[middleware])
    state = agent.invoke({"messages": [HumanMessage("Count.")]})
    assert len(model.inputs) == 3
    assert len(commits) == len(model.inputs) + 1  # one per call, and the last reply's
    stored = _stored(engine, middleware.session().id)
    assert [m.role for m in stored] == [m.role for m in to_messages(state["messages"])]
    assert stored[-1].text == "done"
    engine.close()
