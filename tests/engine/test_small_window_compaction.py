"""Compaction in a window the system prompt and tools nearly fill (`contextfold run --window 3000`).

There the compaction target leaves the conversation nothing. Before the fix the hard shrink cut
every message, the task included, to a ``[text cut …; read_result ref_…]`` marker ("freeing −6
tokens" for the task), then cut the markers again three more times: 12 useless edits and 24
stored copies per compaction, the original text four ``read_result`` hops away. Now the task
keeps its text, no edit frees nothing, and a message is cut at most once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from contextfold import (
    ContextEngine,
    Message,
    PreparedRequest,
    Session,
    ToolCallPart,
    model_for_window,
    validate,
)
from contextfold.agent.approval import ApprovalPolicy
from contextfold.agent.coding_tools import coding_toolbox
from contextfold.agent.loop import DEFAULT_SYSTEM_PROMPT
from contextfold.compaction.pipeline import freed_by
from contextfold.edits import SummarizeEdit, apply_edit
from contextfold.tools.deferral import ToolSpec
from tests.engine.helpers import TASK, EngineFactory, listing

WINDOW = 3_000
TURNS = 24
MAX_EDITS_PER_COMPACTION = 6
"""Measured: 4 (a mask batch, a drop, the last unit's call and output cut once); before, 18."""
MAX_STORED_PER_COMPACTION = 4
"""Blobs one compaction writes: the outputs it masks and the texts it cuts, each once."""


def _blobs(engine: ContextEngine, path: Path, session_id: str) -> list[str]:
    """Every output the session stored, read back through the store."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT ref FROM blobs WHERE session_id = ?", (session_id,))
        refs = [ref for (ref,) in rows]
    return [engine.store.get_blob(session_id, ref) for ref in refs]


def _turn(
    session: Session, tools: Sequence[ToolSpec], turn: int
) -> tuple[list[Message], PreparedRequest]:
    """One turn of the agent's loop; the view before it and the request it prepared."""
    view = list(session.view)
    request = session.prepare(system=DEFAULT_SYSTEM_PROMPT, tools=tools)
    call = ToolCallPart.from_args(f"call_{turn}", "shell", {"command": f"cat src/mod{turn}.py"})
    session.add_assistant(Message.assistant(f"Step {turn}: reading module {turn}.", [call]))
    session.add_tool_result(call.call_id, listing(turn, lines=10))
    return view, request


def test_a_window_the_fixed_part_nearly_fills_keeps_the_task_and_cuts_once(
    tmp_path: Path, make_engine: EngineFactory
) -> None:
    path = tmp_path / "sessions.db"
    tools = coding_toolbox(tmp_path, ApprovalPolicy.auto()).specs()
    engine, _ = make_engine(model_for_window(WINDOW), store=path)
    session = engine.new_session(title="small window")
    session.add_user(TASK)
    compactions = 0
    for turn in range(TURNS):
        stored_before = len(_blobs(engine, path, session.id))
        view, request = _turn(session, tools, turn)
        assert request.tokens <= engine.effective_window
        validate(list(request.messages), provider="anthropic")
        assert request.messages[0].text == TASK  # the task keeps its text
        compaction = request.compaction
        if compaction is None or not compaction.changed:
            continue
        compactions += 1
        assert compaction.target_tokens == 0  # the system prompt and tools took it all
        assert len(compaction.edits) <= MAX_EDITS_PER_COMPACTION
        # The edits stored at most a few copies, none of them a cut marker.
        stored = _blobs(engine, path, session.id)
        assert len(stored) - stored_before <= MAX_STORED_PER_COMPACTION
        assert not any(b.startswith("[text cut to fit") for b in stored)
        for edit in compaction.edits:
            after = apply_edit(view, edit)
            assert freed_by(engine.counter, view, after) > 0, edit  # no useless edit
            if isinstance(edit, SummarizeEdit) and edit.first_id == edit.last_id:
                [cut] = [m for m in view if m.id == edit.first_id]
                assert "shrunk" not in cut.meta.flags  # never cut a cut message again
            view = after
    assert compactions >= 2


def test_a_task_larger_than_the_room_left_by_the_tools_is_cut_to_fit(
    tmp_path: Path, make_engine: EngineFactory
) -> None:
    # The tools take a fifth of an 8k window and the task alone more than the rest: it is cut
    # (head + tail, its full text one read_result away) so that the request still fits.
    tools = coding_toolbox(tmp_path, ApprovalPolicy.auto()).specs()
    task = "\n".join(f"Requirement {i}: the parser must accept input form {i}." for i in range(600))
    engine, _ = make_engine(window=8_000, max_output=1_000)
    session = engine.new_session(title="huge task")
    session.add_user(task)
    request = session.prepare(system=DEFAULT_SYSTEM_PROMPT, tools=tools)
    assert request.tokens <= engine.effective_window
    sent = request.messages[0].text
    assert sent != task and sent.startswith("Total output lines")
    [ref] = [w for w in sent.split() if w.startswith("ref_")]
    last = session.read_result(ref, start_line=600, end_line=600).content
    assert "Requirement 599: the parser must accept input form 599." in last
