"""A tool call left without a result (a process killed mid-tool) must not kill the session.

The scenario of issue 13: the process dies while a tool runs, the session resumes, and the tool
loop goes on with no user message in between. Before the fix the open call's compaction unit
swallowed every later turn: compaction never summarized again and the hard shrink appended
thousands of edits a turn (at a 12k window every prepare() overflowed from turn 123; at 32k,
135,070 edits and 127 MB by turn 350). Now the session closes the call with a synthesized result
when it goes on, and a call left open in a stored view closes its unit at the next turn; either
way every request fits and the store grows with the number of turns, not faster.
"""

from __future__ import annotations

import sqlite3
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from contextfold import (
    ContextEngine,
    ContextPolicy,
    Message,
    Session,
    ToolCallPart,
    model_for_window,
    validate,
)
from contextfold.history.repair import SYNTHESIZED_FLAG
from contextfold.messages import ToolResultPart
from tests.engine.helpers import SYSTEM, TASK, listing

TURNS = 400
MAX_OUTPUT = 1_000
MAX_EDITS_PER_COMPACTION = 8
"""A compaction of this loop needs a handful of edits (measured: at most 2)."""
MAX_EDITS_PER_TURN = 1.0
"""Edits over the whole loop, per turn: measured 0.28 (12k) and 0.20 (32k); before, hundreds."""
MAX_SECOND_HALF_GROWTH = 1.5
"""The store's growth over turns 200-400 against turns 0-200 (linear: about 1)."""

KILLED_CALL = ToolCallPart.from_args("killed_1", "bash", {"command": "pytest -x tests/"})


@dataclass
class Loop:
    """Figures of one run of the tool loop."""

    edits_per_compaction: list[int] = field(default_factory=list)
    over_window: int = 0
    store_bytes: list[int] = field(default_factory=list)
    """Size of the SQLite file after each half of the loop (the engine closed: no WAL left)."""


def _engine(path: Path, window: int) -> ContextEngine:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # this machine's SQLite warns about the WAL bug
        return ContextEngine(
            model_for_window(window, max_output_tokens=MAX_OUTPUT),
            store=path,
            policy=ContextPolicy(background=False),
        )


def _run(session: Session, engine: ContextEngine, first: int, last: int, loop: Loop) -> None:
    """Tool-loop turns ``first``..``last - 1``: prepare, one call, its result; no user turn."""
    for turn in range(first, last):
        request = session.prepare(system=SYSTEM)  # a ContextOverflowError fails the test
        if request.tokens > engine.effective_window:
            loop.over_window += 1
        validate(list(request.messages), provider="anthropic")
        if request.compaction is not None and request.compaction.changed:
            loop.edits_per_compaction.append(len(request.compaction.edits))
        call = ToolCallPart.from_args(f"call_{turn}", "bash", {"command": f"cat src/mod{turn}.py"})
        session.add_assistant(Message.assistant(f"Step {turn}: reading module {turn}.", [call]))
        session.add_tool_result(call.call_id, listing(turn))


def _loop_after_resume(path: Path, window: int, session_id: str) -> Loop:
    """Resume, run the loop in two halves (resuming between them), and measure the store."""
    loop = Loop(store_bytes=[path.stat().st_size])
    for first, last in ((0, TURNS // 2), (TURNS // 2, TURNS)):
        engine = _engine(path, window)
        try:
            session = engine.resume(session_id)
            _run(session, engine, first, last, loop)
            before = [m.id for m in session.view]
        finally:
            engine.close()
        loop.store_bytes.append(path.stat().st_size)
        engine = _engine(path, window)
        try:
            assert [m.id for m in engine.resume(session_id).view] == before
        finally:
            engine.close()
    return loop


def _assert_bounded(loop: Loop, path: Path, session_id: str) -> None:
    assert loop.over_window == 0
    assert loop.edits_per_compaction, "compaction never ran"
    assert max(loop.edits_per_compaction) <= MAX_EDITS_PER_COMPACTION
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        (edits,) = db.execute("SELECT count(*) FROM edits WHERE session_id = ?", (session_id,))
    assert edits[0] <= MAX_EDITS_PER_TURN * TURNS
    start, half, end = loop.store_bytes
    assert end - half <= MAX_SECOND_HALF_GROWTH * (half - start)


@pytest.mark.parametrize("window", [12_000, 32_000])
def test_a_tool_loop_after_a_call_killed_mid_tool_keeps_fitting(
    tmp_path: Path, window: int
) -> None:
    path = tmp_path / "sessions.db"
    engine = _engine(path, window)
    try:
        session = engine.new_session(title="killed mid-tool")
        session.add_user(TASK)
        session.prepare(system=SYSTEM)
        session.add_assistant(Message.assistant("Running the tests.", [KILLED_CALL]))
        session_id = session.id  # the process dies here, before the tool returns
    finally:
        engine.close()

    loop = _loop_after_resume(path, window, session_id)

    _assert_bounded(loop, path, session_id)
    engine = _engine(path, window)
    try:
        transcript = [m for _, m in engine.store.iter_messages(session_id)]
    finally:
        engine.close()
    # The call was closed in the transcript, right after it, by a flagged synthesized result.
    at = next(i for i, m in enumerate(transcript) if KILLED_CALL in m.tool_calls)
    closing = transcript[at + 1]
    assert [r.call_id for r in closing.tool_results] == [KILLED_CALL.call_id]
    assert SYNTHESIZED_FLAG in closing.meta.flags and closing.tool_results[0].is_error


def test_a_call_left_open_in_a_stored_view_does_not_swallow_later_turns(tmp_path: Path) -> None:
    # A store written before the fix: the open call is followed by more of the tool loop.
    path = tmp_path / "sessions.db"
    engine = _engine(path, 12_000)
    try:
        info = engine.store.create_session(model=engine.model.key, title="legacy")
        answered = ToolCallPart.from_args("call_after", "bash", {"command": "ls"})
        engine.store.append_messages(
            info.id,
            [
                Message.user(TASK),
                Message.assistant("Running the tests.", [KILLED_CALL]),
                Message.assistant("Listing instead.", [answered]),
                Message.tool(ToolResultPart(answered.call_id, "bash", "src\ntests")),
            ],
        )
    finally:
        engine.close()

    loop = _loop_after_resume(path, 12_000, info.id)

    _assert_bounded(loop, path, info.id)
