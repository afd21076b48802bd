"""Conformance: stored tool outputs and the JSONL audit export (both backends)."""

from __future__ import annotations

import io
import json

import pytest

from contextfold import RefNotFoundError
from contextfold.edits import MaskEdit, ReplacedResult, edit_from_dict
from contextfold.messages import Message
from contextfold.outputs.blobs import blob_info
from contextfold.store import SessionStore

from .conftest import StoreTarget
from .helpers import tool_turn


def test_a_stored_output_comes_back_by_its_ref(store: SessionStore) -> None:
    sid = store.create_session().id
    output = "".join(f"line {i}\n" for i in range(20_000)) + "\x00 binary tail \udc80"

    info = store.put_blob(sid, output, tool_name="shell")

    assert info == blob_info(output, "shell")
    assert info.ref.startswith("ref_")
    assert store.get_blob(sid, info.ref) == output


def test_identical_outputs_share_one_copy(target: StoreTarget) -> None:
    store = target.open()
    sid = store.create_session().id
    first = store.put_blob(sid, "same output", tool_name="shell")
    second = store.put_blob(sid, "same output", tool_name="grep")

    assert first.ref == second.ref
    assert target.raw("SELECT COUNT(*) FROM blobs") == [(1,)]


def test_a_ref_from_another_session_is_not_readable(store: SessionStore) -> None:
    mine = store.create_session().id
    theirs = store.create_session().id
    ref = store.put_blob(theirs, "their secret build log").ref

    with pytest.raises(RefNotFoundError, match=ref):
        store.get_blob(mine, ref)
    with pytest.raises(RefNotFoundError, match="ref_000000000000"):
        store.get_blob(theirs, "ref_000000000000")


def test_the_export_holds_the_whole_session_in_transcript_order(store: SessionStore) -> None:
    sid = store.create_session(model="m", title="audit me", metadata={"k": "v"}).id
    store.append_messages(sid, tool_turn(1))
    mask = MaskEdit((ReplacedResult("t1", "call_1", "[masked]"),))
    store.append_edit(sid, mask)
    store.append_messages(sid, tool_turn(2))
    store.append_event(sid, "observations_masked", {"count": 1})
    ref = store.put_blob(sid, "full output").ref

    out = io.StringIO()
    written = store.export_jsonl(sid, out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]

    assert written == len(lines) == 10
    assert [line["kind"] for line in lines] == (
        ["session"] + ["message"] * 3 + ["edit"] + ["message"] * 3 + ["event", "blob"]
    )
    assert lines[0] | {"created": 0, "updated": 0} == {
        "kind": "session",
        "id": sid,
        "parent_id": None,
        "model": "m",
        "title": "audit me",
        "metadata": {"k": "v"},
        "message_count": 6,
        "created": 0,
        "updated": 0,
    }
    messages = [Message.from_dict(line["message"]) for line in lines if line["kind"] == "message"]
    assert messages == [*tool_turn(1), *tool_turn(2)]
    assert [line["seq"] for line in lines if line["kind"] == "message"] == [1, 2, 3, 4, 5, 6]
    assert lines[4]["after_seq"] == 3
    assert edit_from_dict(lines[4]["edit"]) == mask
    assert lines[8]["event_type"] == "observations_masked"
    assert (lines[9]["ref"], lines[9]["content"]) == (ref, "full output")
