"""``contextfold inspect``: the timeline of calls and edits of a session the test stored."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from contextfold import SessionNotFoundError
from contextfold.cli import app
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
    assert "peak 90,000 tokens (90.0%) at turn 3" in summary
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
    assert data["summary"]["peak"] == {
        "turn": 3,
        "context_tokens": 90_000,
        "window": 100_000,
        "window_share": 0.9,
    }
    assert data["summary"]["edits"] == {"mask batch": 1, "summary": 1, "drop": 1}
    assert data["session"]["messages"] == 13


def test_single_edit_compaction_credits_the_edit(populated_store: PopulatedStore) -> None:
    from contextfold.edits import ArchiveEdit
    from contextfold.events import CompactionFinished, StoreSink

    with open_store(populated_store.path) as store:
        archive = ArchiveEdit(("t4",), created_at=2_000.0)
        store.append_edit(populated_store.session_id, archive)
        StoreSink(store).emit(
            CompactionFinished(
                session_id=populated_store.session_id,
                at=2_001.0,
                trigger="manual",
                before_tokens=42_000,
                after_tokens=41_000,
                before_messages=13,
                after_messages=12,
                edit_ids=(archive.id,),
            )
        )
    out = inspect_output(populated_store)
    (row,) = [line for line in out.splitlines() if "edit #4 archive" in line]
    assert row.split()[0] == "4"  # the turn of the message it follows
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
