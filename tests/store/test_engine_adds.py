"""A reply's adds on a real store: ``add_assistant`` writes the reply, its usage event and the
turn's state in one transaction, and what it stores is what the writes made one by one store,
row for row, on each backend."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

import pytest

from contextfold import ContextEngine, Message, Session, ToolCallPart, Usage, model_for_window
from contextfold.messages import reproducible_ids
from contextfold.store import open_store
from tests.engine.helpers import MAX_OUTPUT, SYSTEM, TASK, THRESHOLD_POLICY, WINDOW, listing
from tests.store.conftest import StoreTarget

TURNS = 40  # several compactions in the small window, and no restart


def _reply(step: int, prompt_tokens: int) -> tuple[Message, Usage]:
    """The model's reply at ``step``, and the usage it reports (the prompt as estimated)."""
    call = ToolCallPart.from_args(f"call_{step}", "bash", {"command": f"cat src/mod{step}.py"})
    text = f"Step {step}: reading module {step}, token budget and api_key checks next."
    return Message.assistant(text, [call]), Usage(prompt_tokens, 40 + step)


def _run(target: StoreTarget, session_id: str) -> None:
    """An agent's turns on ``session_id``, with ids and times that are the same on every run."""
    store = target.open()
    engine = ContextEngine(
        model_for_window(WINDOW, max_output_tokens=MAX_OUTPUT), store=store, policy=THRESHOLD_POLICY
    )
    try:
        with reproducible_ids():
            session = engine.new_session(title="adds", session_id=session_id)
            session.add_user(TASK)
            for step in range(TURNS):
                request = session.prepare(system=SYSTEM)
                reply, usage = _reply(step, request.tokens)
                added = session.add_assistant(reply, usage)
                for call in added.tool_calls:
                    session.add_tool_result(call.call_id, listing(step))
    finally:
        engine.close()


def _rows(target: StoreTarget, session_id: str) -> dict[str, list[Any]]:
    """Every row the session holds in each table, but the times events and edits were made at
    and the CPU time a compaction took (each reads a clock of its own)."""
    tables = {
        "messages": "SELECT seq, id, role, data, tokens FROM messages WHERE session_id = ? "
        "ORDER BY seq",
        "edits": "SELECT num, id, kind, after_seq, data, created FROM edits WHERE session_id = ? "
        "ORDER BY num",
        "events": "SELECT event_type, data, created FROM events WHERE session_id = ? ORDER BY id",
        "snapshots": "SELECT view, token_count, last_seq, last_edit, created FROM snapshots "
        "WHERE session_id = ?",
        "blobs": "SELECT sha256, ref, tool_name, content, size, created FROM blobs "
        "WHERE session_id = ? ORDER BY sha256",
        "engine_state_parts": "SELECT part, position, value FROM engine_state_parts "
        "WHERE session_id = ? ORDER BY position",
        "sessions": "SELECT model, title, created, updated, metadata FROM sessions WHERE id = ?",
    }
    rows = {name: [list(r) for r in target.raw(sql, (session_id,))] for name, sql in tables.items()}
    for table, column in (("events", 1), ("edits", 4)):
        for row in rows[table]:
            data = json.loads(row[column])
            for own_clock in ("at", "created_at", "cpu_seconds"):
                data.pop(own_clock, None)
            row[column] = data
    for row in rows["blobs"]:
        row[3] = bytes(row[3])
    return rows


def test_adds_store_the_same_rows_as_one_write_at_a_time(
    target: StoreTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(time, "time", lambda: 1_800_000_000.0)  # rows hold times
    _run(target, "ses_together")
    with monkeypatch.context() as apart:
        # The reference: every write its own transaction, as before the adds wrote together.
        apart.setattr(Session, "writes_together", lambda self: contextlib.nullcontext())
        _run(target, "ses_apart")
    together, apart_rows = _rows(target, "ses_together"), _rows(target, "ses_apart")
    assert together["edits"], "the turns compacted"
    assert [r[0] for r in together["events"]].count("token_usage") == TURNS
    assert together == apart_rows


def test_a_reply_its_usage_and_the_state_commit_once(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "s.db"), warn_wal_reset=False) as store:
        engine = ContextEngine(
            model_for_window(WINDOW, max_output_tokens=MAX_OUTPUT),
            store=store,
            policy=THRESHOLD_POLICY,
        )
        session = engine.new_session()
        session.add_user(TASK)
        request = session.prepare(system=SYSTEM)
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)  # type: ignore[attr-defined]
        reply, usage = _reply(0, request.tokens)
        session.add_assistant(reply, usage)
        store._conn.set_trace_callback(None)  # type: ignore[attr-defined]
        assert statements.count("COMMIT") == 1, statements
        assert [m.id for _, m in store.iter_messages(session.id)][-1] == reply.id
        events = [e.event_type for e in store.iter_events(session.id)]
        assert events[-1] == "token_usage"
        saved = store.load_engine_state(session.id)
        assert saved is not None and saved["usage"]["calls"] == 1
        engine.close()
