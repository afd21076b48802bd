"""A compaction that summarizes what its mask batch would mask skips the batch, and nothing else
changes: the requests, the sizes and the loss reports are those of the full computation.

Replays real agent turns (the shared mini-swe-agent transcripts) through an engine to a few
thousand messages twice, once with the shortcut and once with it turned off, and compares every
request body. Ids are made reproducible, edit ids apart (the skipped batch's edit would
otherwise shift the ids of every later message).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import contextfold.edits
from benchmarks.engine_overhead import Turn, corpus_turns
from contextfold import ChatResponse, ContextEngine, ContextPolicy, Message, ToolCallPart, Usage
from contextfold.compaction import pipeline
from contextfold.events import LossReported
from contextfold.messages import reproducible_ids
from contextfold.outputs.blobs import blob_info
from tests.conftest import shared_path

MESSAGES = 1_800
SYSTEM = "You are a coding agent with a shell. Read before you edit; run the tests after."


def _turns() -> list[Turn]:
    turns, _ = corpus_turns(shared_path("trajectories", "mini-swe-agent-deepseek"))
    return turns


def _replay(turns: list[Turn], folder: Path) -> Iterator[tuple[str, Any]]:
    """Each request's body digest, and each compaction's figures and loss report; checks on the
    way that every output a compaction took out of the view is stored under its ref."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = ContextEngine(
            "anthropic/claude-sonnet-4-5",
            store=folder / "sessions.db",
            policy=ContextPolicy(background=False),
        )
    session = engine.new_session(title="mask summarized")
    session.add_user("Make the minimal change that resolves the issue.")
    history = 1
    for number, turn in enumerate(turns):
        text, calls, outputs = turn.text, turn.calls, turn.outputs
        request = session.prepare(system=SYSTEM)
        body = json.dumps(request.to_anthropic(model="claude-sonnet-4-5"), sort_keys=True)
        yield "body", hashlib.sha256(body.encode()).hexdigest()
        done = request.compaction
        if done is not None:
            loss = [e.to_dict() for e in request.events if isinstance(e, LossReported)]
            for event in loss:
                del event["at"], event["session_id"]
            yield "compaction", (done.before_tokens, done.after_tokens, loss)
            kept = {id(m) for m in done.view}
            for message in done.before_view:
                for result in message.tool_results if id(message) not in kept else ():
                    ref = result.ref or blob_info(result.content).ref
                    session.engine.store.get_blob(session.id, ref)  # LookupError when absent
        parts = [ToolCallPart(f"call_{number}_{k}", n, a) for k, (n, a) in enumerate(calls)]
        usage = Usage(request.tokens, max(1, len(text) // 4))
        session.add_assistant(ChatResponse(Message.assistant(text, parts), usage))
        for call, output in zip(parts, outputs, strict=True):
            session.add_tool_result(call.call_id, output, name=call.name)
        history += 1 + len(outputs)
        if history >= MESSAGES:
            break
    engine.close()


def _run(turns: list[Turn], folder: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    edit_ids = itertools.count(1 << 40)
    monkeypatch.setattr(
        contextfold.edits, "new_message_id", lambda prefix="msg": f"{prefix}_{next(edit_ids):022x}"
    )
    folder.mkdir()
    with reproducible_ids():
        return list(_replay(turns, folder))


def test_skipping_the_batch_a_summary_replaces_changes_no_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns = _turns()
    taken: list[bool] = []
    shortcut = pipeline._summary_instead_of_mask

    def counted(*args: Any) -> Any:
        planned = shortcut(*args)
        taken.append(planned is not None)
        return planned

    monkeypatch.setattr(pipeline, "_summary_instead_of_mask", counted)
    fast = _run(turns, tmp_path / "fast", monkeypatch)
    monkeypatch.setattr(pipeline, "_summary_instead_of_mask", lambda *args: None)
    full = _run(turns, tmp_path / "full", monkeypatch)
    assert any(kind == "compaction" for kind, _ in full)
    assert any(taken), "the shortcut was never taken: the test compares nothing"
    assert fast == full
