"""An engine SIGKILLed at random moments: its compactions are whole in the store, and a resume
prepares the same next request wherever it resumes from.

A child process runs an agent on a SQLite store (a small window: a compaction every few turns)
and is killed at a random moment, then resumed by the next child. A compaction's outputs, edits,
snapshot, the state with the ledger it refreshed and the events that report it are one
transaction: after every kill, each stored edit is named by a stored ``CompactionFinished`` and
each such event's edits are stored (all of it or none), the stored state holds every part of
one save, and two engines resuming copies of the store prepare identical requests.
"""

from __future__ import annotations

import random
import signal
import time
import warnings
from pathlib import Path

import pytest

from contextfold import ContextEngine, Message, ToolCallPart, model_for_window
from contextfold.providers import ChatRequest
from contextfold.store import SQLiteStore, open_store
from tests.engine.helpers import MAX_OUTPUT, SYSTEM, TASK, THRESHOLD_POLICY, WINDOW, listing
from tests.store.helpers import fork

pytestmark = pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")

KILLS = 12
MAX_DELAY = 0.6  # seconds a child runs before the kill: a few turns, often a compaction


def _engine(path: Path) -> ContextEngine:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # this machine's SQLite warns about the WAL bug
        return ContextEngine(
            model_for_window(WINDOW, max_output_tokens=MAX_OUTPUT),
            store=str(path),
            policy=THRESHOLD_POLICY,
        )


def _reply(request: ChatRequest, step: int) -> Message:
    """The model's reply at transcript length ``step`` (the same whichever process asks)."""
    call = ToolCallPart.from_args(f"call_{step}", "bash", {"command": f"cat src/mod{step}.py"})
    return Message.assistant(f"Step {step}: reading module {step}.", [call])


def _agent(path: Path, sid: str, report: object) -> None:
    assert callable(report)
    engine = _engine(path)
    session = engine.resume(sid)
    report("ready")
    while True:
        step = engine.store.last_seq(sid)
        request = session.prepare(system=SYSTEM)
        reply = _reply(request.to_chat_request(), step)
        session.add_assistant(reply)
        for call in reply.tool_calls:
            session.add_tool_result(call.call_id, listing(step))
        report(f"turn {engine.store.last_seq(sid)}")


def _next_request(path: Path, sid: str, copy: Path) -> object:
    """The request an engine resuming a copy of the store at ``path`` prepares first."""
    with SQLiteStore(path) as store:
        store.backup(copy)
    engine = _engine(copy)
    try:
        sent = engine.resume(sid).prepare(system=SYSTEM).to_chat_request()
        # What the provider receives (a message synthesized at the resume, the result of a call
        # the kill left open, has an id and a time of its own).
        return sent.system, sent.tools, [(m.role, m.parts) for m in sent.messages]
    finally:
        engine.close()


def test_a_killed_engine_leaves_whole_compactions_and_resumes_to_the_same_request(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.db"
    engine = _engine(path)
    session = engine.new_session(title="kills")
    session.add_user(TASK)
    sid = session.id
    engine.close()
    rng = random.Random(20261127)
    committed = compactions = 0
    for kill in range(KILLS):
        child = fork(lambda report: _agent(path, sid, report))
        assert child.readline() == "ready", f"kill {kill}: child did not start"
        time.sleep(rng.uniform(0, MAX_DELAY))
        child.kill()
        assert child.wait() == -signal.SIGKILL
        lines = child.lines()
        assert not [line for line in lines if line.startswith("error")], lines
        committed = max([committed, *(int(line.split()[1]) for line in lines)])

        with open_store(str(path)) as store:
            assert store.check_integrity() == [], f"after kill {kill}"
            assert store.last_seq(sid) >= committed, f"kill {kill}: a committed turn is gone"
            stored_edits = {record.edit.id for record in store.iter_edits(sid)}
            reported = {
                edit_id
                for event in store.iter_events(sid)
                if event.event_type == "compaction_finished"
                for edit_id in event.data["edit_ids"]
            }
            assert stored_edits == reported, f"kill {kill}: edits and their events apart"
            compactions = len(stored_edits)
        first = _next_request(path, sid, tmp_path / f"a{kill}.db")
        again = _next_request(path, sid, tmp_path / f"b{kill}.db")
        if first != again:
            a, b = first[2], again[2]  # type: ignore[index]
            diff = [(x, y) for x, y in zip(a, b, strict=False) if x != y][:1]
            raise AssertionError(f"kill {kill}: {len(a)} vs {len(b)}: {diff}")
    assert committed > 0
    assert compactions > 0
