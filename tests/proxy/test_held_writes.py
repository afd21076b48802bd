"""A continued session's turn is written while the upstream answers (issue 28:
``Exchange._send_writing``): the store ends up with the same rows as when the turn was written
before the upstream call, through compactions too, and a request refused before the call still
leaves its turn stored."""

from __future__ import annotations

import json
import random
import re
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks._proxy_workload import append_turn, post, tool_output, tool_script
from contextfold.proxy import ProxyConfig, _exchange, create_app
from contextfold.proxy._conversation import Conversation
from tests.proxy.servers import serve
from tests.proxy.upstreams import ScriptedUpstream

WINDOW = 10_000
_VOLATILE = {
    "id",
    "at",
    "cpu_seconds",
    "ids_digest",
    "created_at",
    "created",
    "updated",
    "session_id",
    "state_token",
    "ms",
}


def _stable(value: Any) -> Any:
    """``value`` without what differs from run to run (ids, times)."""
    if isinstance(value, dict):
        # A summary quotes ids, and is cut to a length: their random lengths move the cut.
        drop = {"text"} if value.get("part_kind") == "summary" else set()
        return {k: _stable(v) for k, v in value.items() if k not in _VOLATILE | drop}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    if isinstance(value, str) and " omitted \u2026]" in value:
        return "<cut>"  # where a long text is cut moves with the random ids' lengths too
    return value


def _rows(path: Path) -> dict[str, list[Any]]:
    """The store's rows, sessions named by the order they were made, ids and times left out."""
    with sqlite3.connect(path) as db:
        order = {
            sid: n for n, (sid,) in enumerate(db.execute("SELECT id FROM sessions ORDER BY rowid"))
        }

        def rows(sql: str) -> list[Any]:
            out = []
            for row in db.execute(sql):
                out.append(
                    tuple(
                        order.get(cell, cell) if isinstance(cell, str) and cell in order else cell
                        for cell in row
                    )
                )
            return out

        def decoded(sql: str) -> list[Any]:
            return [
                (*row[:-1], _stable(json.loads(row[-1])) if isinstance(row[-1], str) else row[-1])
                for row in rows(sql)
            ]

        return {
            "sessions": decoded(
                "SELECT id, parent_id, title, metadata FROM sessions ORDER BY rowid"
            ),
            "messages": decoded(
                "SELECT session_id, seq, role, tokens, data FROM messages ORDER BY session_id, seq"
            ),
            "edits": decoded(
                "SELECT session_id, num, after_seq, data FROM edits ORDER BY session_id, num"
            ),
            "heads": rows(
                "SELECT tenant, head, session_id, messages, seq FROM proxy_heads "
                "ORDER BY tenant, head"
            ),
            "state": decoded(
                "SELECT session_id, part, position, value FROM engine_state_parts "
                "ORDER BY session_id, position"
            ),
            "events": decoded("SELECT session_id, event_type, data FROM events ORDER BY rowid"),
        }


def _converse(store: Path, *, hold: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    class Unheld(Conversation):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "hold_writes": hold})

    rng = random.Random(7)
    bodies: list[bytes] = []
    upstream = ScriptedUpstream(tool_script, window=WINDOW)
    with monkeypatch.context() as patch:
        patch.setattr(_exchange, "Conversation", Unheld)
        with serve(upstream) as up_url:
            config = ProxyConfig(upstream=up_url, window=WINDOW, store=store, tenant_salt=b"s")
            with (
                serve(create_app(config)) as proxy_url,
                httpx.Client(base_url=proxy_url, headers={"x-api-key": "k"}, timeout=60) as client,
            ):
                history: list[dict[str, Any]] = [{"role": "user", "content": "Fix the test."}]
                for _ in range(30):  # masks at this window (a summary is cut where random ids fall)
                    reply = post(client, history)
                    bodies.append(json.dumps(_stable(reply), sort_keys=True).encode())
                    append_turn(history, reply, tool_output(rng, 120))
                before = _rows(store)
                # A request the window cannot hold: refused before any upstream call.
                history.append({"role": "user", "content": "word " * 20_000})
                refused = client.post(
                    "/v1/messages",
                    json={"model": "m", "max_tokens": 100, "messages": history},
                    headers={"anthropic-version": "2023-06-01"},
                )
                assert refused.status_code == 400
    # The forwarded bodies (with the ids and times the engine's messages carry left out).
    sent = [_stable(r.body) for r in upstream.requests]
    after = _rows(store)
    return {"replies": bodies, "upstream": sent, **before, "refused": after["messages"]}


def test_held_writes_leave_the_rows_unheld_writes_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = _converse(tmp_path / "held.db", hold=True, monkeypatch=monkeypatch)
    unheld = _converse(tmp_path / "unheld.db", hold=False, monkeypatch=monkeypatch)
    assert held["edits"], "the conversation should have compacted"
    assert held["messages"] and held["heads"] and held["events"]
    # The refused request's turn is stored (the messages after the refusal; what its view
    # was cut to, and so the estimates after it, move with the random ids' lengths).
    assert len(held["refused"]) > len(held["messages"])
    for key in held:
        assert _named(held[key]) == _named(unheld[key]), key


_IDS = re.compile(r"\b(?:(?:msg|ses|edit)_[0-9a-f]{16,}|ref_[0-9a-f]{12,})")


def _named(rows: Any) -> str:
    """``rows`` as JSON text, each message, session, edit or ref id named by where it first
    appears (the ids are random; summaries and edits quote them)."""
    names: dict[str, str] = {}
    text = json.dumps(rows, sort_keys=True, default=repr)
    return _IDS.sub(lambda m: names.setdefault(m.group(0), f"id{len(names)}"), text)
