"""``contextfold inspect``: the timeline of calls and edits of a session the test stored."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from contextfold import SessionNotFoundError
from contextfold.cli import app
from contextfold.cli._notices import SHORT_COMPACTION
from contextfold.edits import ArchiveEdit, SummarizeEdit
from contextfold.events import CompactionFailed, CompactionFinished, StoreSink
from contextfold.messages import Message, Meta, TextPart
from contextfold.store import open_store
from tests.cli.conftest import PopulatedStore

runner = CliRunner()


def inspect_output(store: PopulatedStore, *args: str) -> str:
    result = runner.invoke(app, ["inspect", store.session_id, "--store", str(store.path), *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_timeline_lists_calls_and_edits_in_order(populated_store: PopulatedStore) -> None:
    out = inspect_output(populated_store)
    lines = out.splitlines()
    assert lines[0] == f"{populated_store.session_id} — Fix the slug tests"
    markers = [
        "call",
        "call",
        "edit #1 mask batch",
        "call",
        "edit #2 summary",
        "edit #3 drop",
        "compaction (threshold)",
        "call",
    ]
    rows = [line for line in lines if any(f"  {m}" in line for m in set(markers))]
    found = [next(m for m in markers if f"  {m}" in row) for row in rows]
    assert found == markers


def test_call_rows_show_tokens_cache_and_window_share(populated_store: PopulatedStore) -> None:
    out = inspect_output(populated_store)
    (turn3,) = [line for line in out.splitlines() if line.rstrip().endswith("90.0%  call")]
    assert turn3.split() == ["3", "89,500", "500", "45,000/1,000", "90,000", "90.0%", "call"]


def test_edit_rows_say_what_they_freed(populated_store: PopulatedStore) -> None:
    out = inspect_output(populated_store)
    # The mask batch's figure comes from its observations_masked event.
    assert "edit #1 mask batch: 2 results, freed 1,800 tokens" in out
    assert "edit #2 summary: 6 messages, freed with the compaction below" in out  # u1..t2
    assert "edit #3 drop: 1 message, freed with the compaction below" in out
    assert "compaction (threshold): 90,000 → 40,000, freed 50,000 (summarize, drop_oldest)" in out


def test_summary_line(populated_store: PopulatedStore) -> None:
    summary = inspect_output(populated_store).splitlines()[-1]
    assert summary.startswith("summary: 4 calls")
    assert "peak 90,000 tokens (90.0%) at call 3" in summary
    assert "3 edits (mask batch 1, summary 1, drop 1)" in summary
    assert "1 compaction freed 50,000 tokens" in summary


def test_json_timeline(populated_store: PopulatedStore) -> None:
    data: dict[str, Any] = json.loads(inspect_output(populated_store, "--json"))
    timeline = data["timeline"]
    assert [row["type"] for row in timeline] == [
        "call",
        "call",
        "edit",
        "call",
        "edit",
        "edit",
        "compaction",
        "call",
    ]
    mask = timeline[2]
    assert mask["id"] == populated_store.mask_id
    assert (mask["kind"], mask["count"], mask["unit"], mask["freed_tokens"]) == (
        "mask",
        2,
        "result",
        1_800,
    )
    assert mask["turn"] == 2
    assert timeline[4]["count"] == 6 and timeline[4]["in_compaction"] is True
    assert [row.get("call") for row in timeline if row["type"] == "call"] == [1, 2, 3, 4]
    assert [row.get("after_call") for row in timeline if row["type"] != "call"] == [2, 3, 3, 3]
    assert data["summary"]["peak"] == {
        "turn": 3,
        "call": 3,
        "context_tokens": 90_000,
        "window": 100_000,
        "window_share": 0.9,
    }
    assert data["summary"]["edits"] == {"mask batch": 1, "summary": 1, "drop": 1}
    assert data["session"]["messages"] == 13


def archive_t4(store: PopulatedStore, *, trigger: str, note: str = "") -> None:
    """A compaction after turn 4 that archived its tool result (42,000 -> 41,000 tokens)."""
    with open_store(store.path) as opened:
        archive = ArchiveEdit(("t4",), created_at=2_000.0)
        opened.append_edit(store.session_id, archive)
        StoreSink(opened).emit(
            CompactionFinished(
                session_id=store.session_id,
                at=2_001.0,
                trigger=trigger,
                before_tokens=42_000,
                after_tokens=41_000,
                before_messages=13,
                after_messages=12,
                edit_ids=(archive.id,),
                note=note,
            )
        )


def test_single_edit_compaction_credits_the_edit(populated_store: PopulatedStore) -> None:
    archive_t4(populated_store, trigger="manual")
    out = inspect_output(populated_store)
    (row,) = [line for line in out.splitlines() if "edit #4 archive" in line]
    assert row.split()[0] == "edit"  # the call column numbers calls only
    assert row.rstrip().endswith("1 message, freed 1,000 tokens")


def test_session_without_records(populated_store: PopulatedStore) -> None:
    with open_store(populated_store.path) as store:
        store.create_session(session_id="empty")
    result = runner.invoke(app, ["inspect", "empty", "--store", str(populated_store.path)])
    assert "Nothing recorded yet" in result.stdout


def test_missing_session(populated_store: PopulatedStore) -> None:
    result = runner.invoke(app, ["inspect", "nope", "--store", str(populated_store.path)])
    assert isinstance(result.exception, SessionNotFoundError)
    assert "'nope'" in str(result.exception)


def test_a_title_with_control_sequences_is_shown_escaped(populated_store: PopulatedStore) -> None:
    with open_store(populated_store.path) as store:
        store.update_session(populated_store.session_id, title="slug\x1b[8m hidden\x1b[1A\x1b[2K")
    out = inspect_output(populated_store)
    assert "\x1b" not in out
    assert "slug\\x1b[8m hidden\\x1b[1A\\x1b[2K" in out


def test_one_numbering_named_in_the_header(populated_store: PopulatedStore) -> None:
    """Calls are numbered; edits sit between the calls they came after, with no number of
    another kind (they showed the turn of their message in the same column)."""
    lines = inspect_output(populated_store).splitlines()
    (header,) = [line for line in lines if line.lstrip().startswith("call ")]
    assert header.split()[:2] == ["call", "input"]
    assert any("call: the number of the model call" in line for line in lines)
    numbers = [line.split()[0] for line in lines if line.rstrip().endswith("  call")]
    assert numbers == ["1", "2", "3", "4"]
    edits = [line for line in lines if "edit #" in line]
    assert edits and all(line.split()[0] == "edit" for line in edits)


def test_a_drop_from_an_earlier_summary_counts_its_messages(
    populated_store: PopulatedStore,
) -> None:
    """A drop whose range starts at the summary of an earlier compaction (a message of no
    transcript seq) showed `drop: ? messages`; its count comes from the view it changed."""
    note = Message(
        "user", (TextPart("[4 earlier messages dropped]"),), id="note1", meta=Meta(kind="drop_note")
    )
    with open_store(populated_store.path) as store:
        # The view is sys, summary1, u3, a3, u4, a4, t4: summary1..a4 is 5 messages.
        store.append_edit(
            populated_store.session_id, SummarizeEdit("summary1", "a4", note, created_at=2_000.0)
        )
    out = inspect_output(populated_store)
    assert "?" not in out
    assert "edit #4 drop: 5 messages" in out
    data = json.loads(inspect_output(populated_store, "--json"))
    drop = [row for row in data["timeline"] if row["type"] == "edit"][-1]
    assert (drop["label"], drop["count"], drop["unit"]) == ("drop", 5, "message")


def test_a_compaction_short_of_the_minimum_shows_as_a_compaction(
    populated_store: PopulatedStore,
) -> None:
    reason = "freed 1000 tokens, less than the minimum progress of 10000 (10% of a ...)"
    archive_t4(populated_store, trigger="threshold", note=reason)
    out = inspect_output(populated_store)
    (row,) = [line for line in out.splitlines() if "42,000 → 41,000" in line]
    assert "compaction (threshold)" in row and "compaction_failed" not in out
    assert SHORT_COMPACTION.split(",")[0] in " ".join(out.split())
    data = json.loads(inspect_output(populated_store, "--json"))
    (last,) = [r for r in data["timeline"] if r["type"] == "compaction" and r.get("note")]
    assert last["note"] == reason


def test_an_unused_background_compaction_is_a_quiet_note(
    populated_store: PopulatedStore,
) -> None:
    with open_store(populated_store.path) as store:
        StoreSink(store).emit(
            CompactionFailed(
                session_id=populated_store.session_id,
                at=2_000.0,
                trigger="background",
                before_tokens=42_000,
                after_tokens=42_000,
                reason="discarded: the session closed before it was needed",
            )
        )
    out = inspect_output(populated_store)
    (row,) = [line for line in out.splitlines() if "background" in line]
    assert "compaction_failed" not in row
    assert "a compaction prepared in the background was not used" in row
    summary = out.splitlines()[-1]
    assert "failed" not in summary and "changed nothing" not in summary
    data = json.loads(inspect_output(populated_store, "--json"))
    assert data["timeline"][-1]["type"] == "compaction_failed"  # machines keep the event


def test_a_compaction_shows_what_it_was_expected_to_save_and_what_it_saved(
    populated_store: PopulatedStore,
) -> None:
    """The cost schedule's figures: the expected saving the compaction event carried, and the
    realized one its settlement reported later, joined by the compaction's edits."""
    data: dict[str, Any] = json.loads(inspect_output(populated_store, "--json"))
    (compaction,) = [row for row in data["timeline"] if row["type"] == "compaction"]
    assert compaction["expected_saving_usd"] == 0.1234
    assert compaction["realized_saving_usd"] == 0.0987
    assert compaction["settled_requests"] == 1
    assert data["summary"]["settled_compactions"] == 1
    text = " ".join(inspect_output(populated_store).split())  # as one line, however wrapped
    assert "expected to save $0.1234, saved $0.0987 over 1 requests" in text
    assert "$0.0987 saved ($0.1234 expected)" in text
