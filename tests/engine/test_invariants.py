"""The engine's promises under random agent behaviour, for every preset.

Hypothesis drives a session with random user turns, replies with 0–3 tool calls, outputs of any
size (some failing, some never delivered), and resumes from the store in a new session. After
every ``prepare`` the request must fit the window, meet Anthropic's history rules (the stricter
provider), keep the task, and every ref it mentions must read back; a resumed session must see
exactly the view it left.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold import (
    ContextEngine,
    ContextPolicy,
    Message,
    PreparedRequest,
    Session,
    ToolCallPart,
    model_for_window,
    validate,
)
from contextfold.compaction import PRESETS
from contextfold.messages import ToolResultPart
from tests.engine.helpers import SYSTEM, TASK

WINDOW = 8_000
REF = re.compile(r"\bref_[0-9a-f]{12}\b")
WORDS = ("parser", "token", "empty", "input", "fix", "test", "module", "error", "value", "line")

Turn = tuple[int, int, int, int, bool, bool, bool]
"""One agent turn: user words (0: none), reply words, tool calls, output lines per call, whether
one output is never delivered, whether the outputs fail, whether the session resumes after."""

TURNS = st.tuples(
    st.sampled_from([0, 0, 0, 5, 40, 300]),
    st.integers(0, 150),
    st.integers(0, 3),
    st.sampled_from([0, 3, 40, 400, 2_500, 2_500]),
    st.booleans(),
    st.booleans(),
    st.sampled_from([False] * 9 + [True]),
)


def _text(words: int, seed: int) -> str:
    return " ".join(WORDS[(seed + i * 7) % len(WORDS)] for i in range(words)) or "ok"


def _output(lines: int, seed: int, failed: bool) -> str:
    body = [f"src/mod{seed}.py:{i}: value = compute({i}, {seed})" for i in range(lines)]
    if failed:
        body.append(f"ValueError: empty input in parse() at line {seed}")
    return "\n".join(body) or "(no output)"


@dataclass
class Agent:
    """A session driven the way an agent loop drives it: prepare, reply, run the tools."""

    engine: ContextEngine
    session: Session
    turns: int = 0
    prepared: list[PreparedRequest] = field(default_factory=list)

    def turn(self, user: int, words: int, calls: int, lines: int, drop: bool, fail: bool) -> None:
        self.turns += 1
        if user:
            self.session.add_user(_text(user, self.turns))
        self.prepare()
        parts = [
            ToolCallPart.from_args(f"c{self.turns}_{k}", "bash", {"command": f"run {k}"})
            for k in range(calls)
        ]
        self.session.add_assistant(Message.assistant(_text(words, self.turns), parts))
        for call in parts[1:] if drop else parts:  # a dropped output: the tool never answered
            content = _output(lines, self.turns, failed=fail)
            self.session.add_tool_result(call.call_id, content, name="bash", is_error=fail)

    def prepare(self) -> None:
        request = self.session.prepare(system=SYSTEM)
        self.prepared.append(request)
        assert request.tokens <= self.engine.effective_window
        messages = list(request.messages)
        validate(messages, provider="anthropic")
        assert any(m.role == "user" and TASK in m.text for m in messages), "the task was lost"
        for ref in set(REF.findall(_all_text(messages))):
            page = self.session.read_result(ref, start_line=1, end_line=1)
            assert not page.is_error, page.content

    def resume(self) -> None:
        before = [m.id for m in self.session.view]
        self.session = self.engine.resume(self.session.id)
        assert [m.id for m in self.session.view] == before


def _all_text(messages: list[Message]) -> str:
    chunks: list[str] = []
    for message in messages:
        chunks.append(message.text)
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                chunks.append(part.content)
                if part.ref:
                    chunks.append(part.ref)
    return "\n".join(chunks)


@pytest.mark.parametrize(
    ("preset", "background"),
    [*((name, False) for name in sorted(PRESETS)), ("mask-first", True)],
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=st.lists(TURNS, min_size=10, max_size=60))
def test_every_request_fits_is_valid_and_keeps_what_it_took_out(
    preset: str, background: bool, turns: list[Turn]
) -> None:
    # ``background=True`` is the default policy: compactions prepared in a worker thread.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # this machine's SQLite warns about the WAL bug
        engine = ContextEngine(
            model_for_window(WINDOW, max_output_tokens=1_000),
            store=":memory:",
            compactor=preset,
            policy=ContextPolicy(background=background),
        )
    try:
        session = engine.new_session(title="invariants")
        session.add_user(TASK)
        agent = Agent(engine, session)
        for *turn, resume in turns:
            agent.turn(*turn)
            if resume:
                agent.resume()
        agent.prepare()
    finally:
        engine.close()
