"""The agent loop with a scripted model: what the model receives, what the store and disk hold."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextfold import (
    ContextEngine,
    ContextOverflowError,
    ContextPolicy,
    Message,
    ScriptedModel,
    Session,
    StoreError,
    ToolCallPart,
    model_for_window,
    validate,
)
from contextfold.agent import (
    INTERRUPTED_RESULT,
    AgentHooks,
    ApprovalPolicy,
    Toolbox,
    coding_toolbox,
    restart_session,
    run_agent,
)
from contextfold.events import (
    Event,
    MemorySink,
    OutputOffloaded,
    OverflowRecovered,
    SessionRestarted,
)
from contextfold.messages import ToolResultPart
from contextfold.providers import ChatRequest
from contextfold.tools.deferral import ToolSpec

pytestmark = pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")

WINDOW = 32_000


def call(name: str, call_id: str | None = None, **args: Any) -> Message:
    """An assistant message making one tool call."""
    return Message.assistant(
        f"calling {name}", [ToolCallPart.from_args(call_id or name, name, args)]
    )


def results_in(request: ChatRequest) -> list[ToolResultPart]:
    """Every tool result the model was sent."""
    return [part for message in request.messages for part in message.tool_results]


@pytest.fixture
def sink() -> MemorySink:
    return MemorySink()


@pytest.fixture
def engine(tmp_path: Path, sink: MemorySink) -> Iterator[ContextEngine]:
    with ContextEngine(
        model_for_window(WINDOW),
        store=tmp_path / "sessions.db",
        sinks=[sink],
        policy=ContextPolicy(background=False),
    ) as engine:
        yield engine


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return root


@pytest.fixture
def toolbox(project: Path) -> Toolbox:
    return coding_toolbox(project, ApprovalPolicy.auto(), shell_timeout=10)


def test_a_multi_step_tool_session_reads_edits_and_answers(
    engine: ContextEngine, project: Path, toolbox: Toolbox
) -> None:
    model = ScriptedModel(
        [
            call("list_dir", path="pkg"),
            call("read_file", path="pkg/calc.py"),
            call("edit_file", path="pkg/calc.py", old_string="a - b", new_string="a + b"),
            call("shell", command="python3 -c 'import pkg.calc as c; print(c.add(2, 3))'"),
            "Fixed: add() subtracted; it adds now and returns 5 for (2, 3).",
        ]
    )
    seen: list[str] = []
    hooks = AgentHooks(
        on_tool_call=lambda c: seen.append(f"call {c.name}"),
        on_tool_result=lambda c, r: seen.append(f"result {r.name} error={r.is_error}"),
    )
    session = engine.new_session()

    result = run_agent(session, model, toolbox, "add() is wrong; fix it.", hooks=hooks)

    assert result.stop == "answered"
    assert result.text.startswith("Fixed")
    assert (result.steps, result.tool_calls) == (5, 4)
    assert (project / "pkg" / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert seen[:2] == ["call list_dir", "result list_dir error=False"]
    # Each request carries the results of the calls before it, in order.
    assert "calc.py" in results_in(model.requests[1])[0].content
    assert "return a - b" in results_in(model.requests[2])[1].content
    assert "5" in results_in(model.requests[4])[3].content.splitlines()[0]
    # The coding tools and the engine's own tools were offered.
    names = {t.name for t in model.requests[0].tools}
    assert {"read_file", "edit_file", "shell", "read_result", "compact_context"} <= names
    assert model.requests[0].system[0].text.startswith("You are a coding agent")


def test_tool_errors_go_back_to_the_model_and_the_loop_goes_on(
    engine: ContextEngine, toolbox: Toolbox
) -> None:
    broken = Message.assistant("", [ToolCallPart("bad", "read_file", "{not json")])
    model = ScriptedModel(
        [
            call("read_file", path="missing.py"),
            call("no_such_tool"),
            broken,
            call("read_file", path="../outside.txt"),
            "I could not read those files.",
        ]
    )

    result = run_agent(engine.new_session(), model, toolbox, "Read some files.")

    assert result.stop == "answered"
    errors = results_in(model.requests[-1])
    assert [r.is_error for r in errors] == [True, True, True, True]
    assert "missing.py" in errors[0].content
    assert "no tool named 'no_such_tool'" in errors[1].content
    assert "JSON" in errors[2].content or "json" in errors[2].content
    assert "outside" in errors[3].content


def _session_with_history(engine: ContextEngine) -> Session:
    """A session whose earlier turns left tool outputs that a hard compaction can remove."""
    session = engine.new_session()
    session.add_user("Look around the project first.")
    for i in range(6):
        session.add_assistant(call("read_file", f"old_{i}", path=f"notes_{i}.txt"))
        session.add_tool_result(f"old_{i}", f"line {i} of an old listing\n" * 120)
    return session


def test_an_overflow_is_recovered_once_and_the_call_retried(
    engine: ContextEngine, toolbox: Toolbox, sink: MemorySink
) -> None:
    overflow = ContextOverflowError("prompt is too long", provider="scripted")
    model = ScriptedModel([overflow, "Answer after recovery."])

    result = run_agent(_session_with_history(engine), model, toolbox, "Hello")

    assert (result.stop, result.text) == ("answered", "Answer after recovery.")
    assert result.recovered_overflows == 1
    refused, retry = model.requests
    assert retry != refused
    assert len(sink.of_type(OverflowRecovered)) == 1


def test_a_refused_request_with_nothing_to_compact_is_not_sent_again(
    engine: ContextEngine, toolbox: Toolbox, sink: MemorySink
) -> None:
    overflow = ContextOverflowError("prompt is too long", provider="scripted")
    model = ScriptedModel([overflow, "never reached"])

    with pytest.raises(ContextOverflowError, match="same request"):
        run_agent(engine.new_session(), model, toolbox, "Hello")
    assert len(model.requests) == 1  # resending it as it was would only be refused again


def test_a_second_overflow_in_a_row_is_raised(engine: ContextEngine, toolbox: Toolbox) -> None:
    overflow = ContextOverflowError("prompt is too long", provider="scripted")
    model = ScriptedModel([overflow, overflow, "never reached"])

    with pytest.raises(ContextOverflowError, match="still rejects"):
        run_agent(_session_with_history(engine), model, toolbox, "Hello")


def test_a_declined_approval_reaches_the_model_and_nothing_changes(
    engine: ContextEngine, project: Path
) -> None:
    asked: list[tuple[str, str]] = []

    def decline(tool: str, summary: str) -> bool:
        asked.append((tool, summary))
        return False

    toolbox = coding_toolbox(project, ApprovalPolicy.ask(decline))
    model = ScriptedModel(
        [
            call("write_file", path="notes.txt", content="hello"),
            call("shell", command="touch created.txt"),
            "The user declined; I changed nothing.",
        ]
    )

    result = run_agent(engine.new_session(), model, toolbox, "Write a note.")

    assert result.stop == "answered"
    assert [tool for tool, _ in asked] == ["write_file", "shell"]
    assert not (project / "notes.txt").exists()
    assert not (project / "created.txt").exists()
    refusals = results_in(model.requests[-1])
    assert all(r.is_error and "declined" in r.content for r in refusals)


def test_a_resumed_session_continues_the_transcript(
    tmp_path: Path, project: Path, toolbox: Toolbox
) -> None:
    store = tmp_path / "resume.db"
    with ContextEngine(model_for_window(WINDOW), store=store) as first:
        session = first.new_session(title="calc")
        model = ScriptedModel([call("read_file", path="pkg/calc.py"), "add() subtracts."])
        run_agent(session, model, toolbox, "What does add() do?")
        session_id = session.id

    with ContextEngine(model_for_window(WINDOW), store=store) as second:
        resumed = second.resume(session_id)
        model = ScriptedModel(["It should return a + b."])
        result = run_agent(resumed, model, toolbox, "And what should it do?")

    assert result.session_id == session_id
    sent = model.requests[0].messages
    texts = [m.text for m in sent if m.role in ("user", "assistant")]
    assert texts[0] == "What does add() do?"
    assert "add() subtracts." in texts
    assert texts[-1] == "And what should it do?"
    assert "return a - b" in results_in(model.requests[0])[0].content


def test_an_interrupt_stops_cleanly_and_leaves_a_valid_transcript(
    engine: ContextEngine, toolbox: Toolbox
) -> None:
    def interrupt(arguments: dict[str, Any]) -> str:
        raise KeyboardInterrupt

    toolbox.register(ToolSpec("slow", "A tool the user interrupts.", {"type": "object"}), interrupt)
    both = Message.assistant(
        "", [ToolCallPart("c1", "slow", "{}"), ToolCallPart("c2", "list_dir", "{}")]
    )
    session = engine.new_session()

    result = run_agent(session, ScriptedModel([both]), toolbox, "Go")

    assert result.stop == "interrupted"
    answered = [r for m in session.view for r in m.tool_results]
    assert [(r.call_id, r.content) for r in answered] == [
        ("c1", INTERRUPTED_RESULT),
        ("c2", INTERRUPTED_RESULT),
    ]
    follow_up = ScriptedModel(["Stopped as asked."])
    again = run_agent(session, follow_up, toolbox, "Never mind.")
    assert again.stop == "answered"
    validate(list(follow_up.requests[0].messages), provider="anthropic")


def test_streaming_hooks_receive_the_text_as_it_arrives(
    engine: ContextEngine, toolbox: Toolbox
) -> None:
    answer = "A streamed answer that is longer than one chunk of sixteen characters."
    deltas: list[str] = []

    result = run_agent(
        engine.new_session(),
        ScriptedModel([answer]),
        toolbox,
        "Talk to me",
        hooks=AgentHooks(on_text_delta=deltas.append),
    )

    assert len(deltas) > 1
    assert "".join(deltas) == answer == result.text


def test_the_step_limit_hands_back_control(engine: ContextEngine, toolbox: Toolbox) -> None:
    model = ScriptedModel(default=lambda request: call("list_dir", f"c{len(request.messages)}"))

    result = run_agent(engine.new_session(), model, toolbox, "Loop forever", max_steps=3)

    assert (result.stop, result.steps, result.tool_calls) == ("max_steps", 3, 3)


def test_engine_events_reach_the_hook_and_big_outputs_keep_a_ref(
    engine: ContextEngine, toolbox: Toolbox
) -> None:
    events: list[Event] = []
    stored: list[ToolResultPart] = []
    model = ScriptedModel([call("shell", command="seq 1 20000"), "Counted."])
    hooks = AgentHooks(on_event=events.append, on_tool_result=lambda c, r: stored.append(r))
    session = engine.new_session()

    run_agent(session, model, toolbox, "Count to 20000", hooks=hooks)

    offloaded = [e for e in events if isinstance(e, OutputOffloaded)]
    assert len(offloaded) == 1
    assert stored[0].ref == offloaded[0].ref
    full = session.read_result(offloaded[0].ref, pattern="^19999$")
    assert "19999" in full.content
    assert engine.events.sinks[-1] is not None  # the hook's sink is gone after the run
    assert all(type(s).__name__ != "CallbackSink" for s in engine.events.sinks)


def test_compact_context_is_answered_by_the_engine(engine: ContextEngine, toolbox: Toolbox) -> None:
    model = ScriptedModel([call("compact_context", focus="the calc bug"), "Done."])

    run_agent(engine.new_session(), model, toolbox, "Tidy up your context.")

    result = results_in(model.requests[1])[0]
    assert result.name == "compact_context" and not result.is_error
    assert "compact" in result.content.lower()


def test_an_engine_tool_that_cannot_write_the_store_is_the_models_information(
    engine: ContextEngine, toolbox: Toolbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = engine.new_session()

    def store_down(call: ToolCallPart) -> ToolResultPart | None:
        raise StoreError("sessions.db: disk I/O error")

    monkeypatch.setattr(session, "run_engine_tool", store_down)
    model = ScriptedModel([call("compact_context"), "Carrying on."])

    assert run_agent(session, model, toolbox, "Tidy up your context.").stop == "answered"
    result = results_in(model.requests[1])[0]
    assert result.is_error
    assert result.content == "compact_context failed: StoreError: sessions.db: disk I/O error"


def test_a_bug_in_an_engine_tool_is_not_passed_off_as_a_tool_result(
    engine: ContextEngine, toolbox: Toolbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = engine.new_session()

    def buggy(call: ToolCallPart) -> ToolResultPart | None:
        raise TypeError("unsupported operand")

    monkeypatch.setattr(session, "run_engine_tool", buggy)
    model = ScriptedModel([call("compact_context"), "Carrying on."])

    with pytest.raises(TypeError, match="unsupported operand"):
        run_agent(session, model, toolbox, "Tidy up your context.")
    assert len(model.requests) == 1


def test_a_manual_restart_carries_the_task_and_keeps_refs_readable(
    engine: ContextEngine, toolbox: Toolbox
) -> None:
    session = engine.new_session(title="long job")
    model = ScriptedModel([call("shell", command="seq 1 20000"), "Counted to 20000."])
    run_agent(session, model, toolbox, "Count to 20000 and remember the output.")
    ref = next(r.ref for m in session.view for r in m.tool_results if r.ref)
    assert ref is not None

    child = restart_session(session)

    assert engine.store.get_session(child.id).parent_id == session.id
    texts = [m.text for m in child.view]
    assert any("Session restarted" in t for t in texts)
    assert any("Count to 20000" in t for t in texts)
    assert "20000" in child.read_result(ref, pattern="^20000$").content


def test_the_restart_preset_continues_the_run_in_a_child_session(
    tmp_path: Path, toolbox: Toolbox, sink: MemorySink
) -> None:
    def read_again(request: ChatRequest) -> Message:
        return call("shell", f"c{len(request.messages)}", command="seq 1 400")

    model = ScriptedModel([read_again] * 20 + ["Done after a restart."])
    with ContextEngine(
        model_for_window(6_000),
        store=tmp_path / "restart.db",
        compactor="restart",
        sinks=[sink],
        policy=ContextPolicy(background=False),
    ) as engine:
        session = engine.new_session()
        first_id = session.id

        result = run_agent(session, model, toolbox, "Count a few times.")

        restarted = sink.of_type(SessionRestarted)
        assert restarted and restarted[0].parent_id == first_id
        assert result.stop == "answered"
        assert result.session_id == session.id != first_id
        assert engine.store.get_session(result.session_id).parent_id is not None
        wind_down = [r for r in model.requests if "will restart soon" in r.messages[-1].text]
        assert wind_down  # the model was told before the restart happened
