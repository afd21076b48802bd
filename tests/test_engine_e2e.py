"""End to end: a 300-turn scripted coding session through a 16k window (the engine issue's Show).

Every prepared request must fit the window and pass ``validate``; every tool output the agent ever
saw must stay readable (verbatim in the view or through ``read_result``); and a new process that
resumes the session from its snapshot must prepare the identical next request.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from contextfold import (
    ContextEngine,
    ContextPolicy,
    Message,
    ScriptedModel,
    Session,
    ToolCallPart,
    model_for_window,
    validate,
)
from contextfold.events import MemorySink
from contextfold.outputs.blobs import REF_PATTERN
from contextfold.providers import ChatRequest

WINDOW = 16_000
SYSTEM = "You are a careful coding agent. Work in small steps and run the tests often."
TASK = "The parser in src/parser.py crashes on empty input. Fix it without changing the public API."


def tool_output(rng: random.Random, turn: int) -> str:
    """A tool output of realistic shape: small, medium, or a huge log with an error at the end."""
    kind = rng.random()
    if kind < 0.5:
        return f"ok: step {turn}\n" + "\n".join(f"  item {i}" for i in range(rng.randint(1, 20)))
    if kind < 0.85:
        lines = rng.randint(50, 300)
        return "\n".join(f"src/mod{turn}.py:{i}: def f{i}(x): return x * {i}" for i in range(lines))
    lines = rng.randint(800, 3000)
    body = "\n".join(
        f"[{turn}:{i:05d}] collecting tests ... {'.' * rng.randint(5, 60)}" for i in range(lines)
    )
    return (
        body
        + f"\nE   AssertionError: expected 3, got {turn}\nFAILED tests/test_parser.py::test_{turn}"
    )


def scripted_agent(rng: random.Random) -> ScriptedModel:
    """A model that always calls one tool, reporting usage like a provider would."""

    def respond(request: ChatRequest) -> Message:
        turn = len(model.requests)
        command = rng.choice(["pytest -x", "cat src/parser.py", "grep -rn parse src", "ls -R"])
        call = ToolCallPart.from_args(f"call_{turn}", "bash", {"command": f"{command} # {turn}"})
        return Message.assistant(f"Step {turn}: running {command}.", [call])

    model = ScriptedModel(default=respond)
    return model


def run_session(
    store: str, turns: int, seed: int = 7
) -> tuple[ContextEngine, Session, list[str], MemorySink]:
    sink = MemorySink()
    engine = ContextEngine(
        model_for_window(WINDOW, max_output_tokens=2_000),
        store=store,
        sinks=[sink],
        policy=ContextPolicy(background=False),
    )
    session = engine.new_session(title="e2e")
    session.add_user(TASK)
    rng = random.Random(seed)
    model = scripted_agent(rng)
    outputs: list[str] = []
    for turn in range(turns):
        request = session.prepare(system=SYSTEM)
        assert request.tokens <= engine.effective_window, (turn, request.tokens)
        validate(list(request.messages), provider="anthropic")
        response = model.complete(request.to_chat_request())
        session.add_assistant(response)
        output = tool_output(rng, turn)
        outputs.append(output)
        session.add_tool_result(response.tool_calls[0].call_id, output)
    return engine, session, outputs, sink


@pytest.fixture(scope="module")
def long_session(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[ContextEngine, Session, list[str], MemorySink, Path]:
    path = tmp_path_factory.mktemp("e2e") / "sessions.db"
    engine, session, outputs, sink = run_session(str(path), 300)
    return engine, session, outputs, sink, path


def test_every_request_fits_and_the_engine_compacted(
    long_session: tuple[ContextEngine, Session, list[str], MemorySink, Path],
) -> None:
    engine, session, _, sink, _ = long_session
    kinds = {type(e).__name__ for e in sink.events}
    assert {"ObservationsMasked", "OutputOffloaded", "OutputTruncated", "TokenUsage"} <= kinds
    assert len(session.view) < 300  # the view stayed bounded while the transcript grew
    assert engine.store.last_seq(session.id) == 1 + 2 * 300


def test_every_output_stays_readable(
    long_session: tuple[ContextEngine, Session, list[str], MemorySink, Path],
) -> None:
    engine, session, outputs, _, _ = long_session
    stored = [
        m.tool_results[0] for _, m in engine.store.iter_messages(session.id) if m.role == "tool"
    ]
    assert len(stored) == len(outputs)
    view_text = "\n".join(p.content for m in session.view for p in m.tool_results)
    refs_in_view = set(REF_PATTERN.findall(view_text)) | set(
        REF_PATTERN.findall("\n".join(m.text for m in session.view))
    )
    for turn, original in enumerate(outputs):
        result = stored[turn]
        if result.content == original:
            full = original  # kept whole in the transcript
        else:
            assert result.ref is not None, f"output {turn} was cut without a ref"
            full = engine.store.get_blob(session.id, result.ref)
        assert full == original, f"output {turn} is not recoverable"
    # And what the view shows instead of an output is resolvable through the tool itself.
    for ref in sorted(refs_in_view)[:25]:
        reply = session.read_result(ref, start_line=1, end_line=3)
        assert not reply.is_error, reply.content


def test_resume_in_a_new_process_gives_the_identical_next_request(
    long_session: tuple[ContextEngine, Session, list[str], MemorySink, Path],
) -> None:
    _, session, _, _, path = long_session
    expected = session.prepare(system=SYSTEM).to_chat_request()
    script = textwrap.dedent(
        f"""
        import json, sys
        from contextfold import ContextEngine, ContextPolicy, model_for_window
        from contextfold.wire.anthropic import to_anthropic
        engine = ContextEngine(model_for_window({WINDOW}, max_output_tokens=2_000),
                               store={str(path)!r}, policy=ContextPolicy(background=False))
        session = engine.resume({session.id!r})
        request = session.prepare(system={SYSTEM!r}).to_chat_request()
        print(json.dumps([m.to_dict() for m in request.messages]))
        print(json.dumps([b.text for b in request.system]))
        print(json.dumps([t.name for t in request.tools]))
        print(json.dumps([request.max_tokens, list(request.message_breakpoints)]))
        """
    )
    lines = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert json.loads(lines[0]) == [m.to_dict() for m in expected.messages]
    assert json.loads(lines[1]) == [b.text for b in expected.system]
    assert json.loads(lines[2]) == [t.name for t in expected.tools]
    assert json.loads(lines[3]) == [expected.max_tokens, list(expected.message_breakpoints)]
