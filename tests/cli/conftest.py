"""Fixtures for the CLI tests: a session store populated the way the engine would fill it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from contextfold.edits import DropEdit, MaskEdit, ReplacedResult, SummarizeEdit
from contextfold.events import (
    CompactionFinished,
    CompactionSettled,
    ObservationsMasked,
    StoreSink,
    TokenUsage,
)
from contextfold.messages import Message, Meta, SummaryPart, ToolCallPart, ToolResultPart
from contextfold.store import open_store

WINDOW = 100_000
SESSION_ID = "sess_cli_demo"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # This machine's SQLite may predate the WAL-reset fix; that warning has tests of its own.
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(
                pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")
            )


@dataclass
class PopulatedStore:
    """A SQLite store file holding one session with messages, edits, events and a snapshot."""

    path: Path
    session_id: str
    mask_id: str
    summary_id: str
    drop_id: str


def _turn(n: int, command: str, output: str) -> list[Message]:
    turn = Meta(turn=n)
    call = ToolCallPart.from_args(f"call_{n}", "shell", {"command": command})
    return [
        Message.user(f"step {n}: run {command}", id=f"u{n}", meta=turn),
        Message.assistant("", [call], id=f"a{n}", meta=turn),
        Message.tool(
            ToolResultPart(f"call_{n}", "shell", output),
            id=f"t{n}",
            meta=Meta(kind="tool_result", turn=n),
        ),
    ]


@pytest.fixture
def populated_store(tmp_path: Path) -> PopulatedStore:
    """Four turns; a mask batch after turn 2 (2 results, 1,800 tokens freed); a compaction after
    turn 3 (summarize turns 1-2 and drop turn 3's result: 90,000 -> 40,000); usage per turn."""
    path = tmp_path / "sessions.db"
    store = open_store(path)
    sink = StoreSink(store)
    store.create_session(
        session_id=SESSION_ID,
        model="openai/gpt-4o",
        title="Fix the slug tests",
        metadata={"cwd": "/home/dev/textkit"},
    )
    store.append_messages(SESSION_ID, [Message.system("You are a coding agent.", id="sys")])
    contexts = {1: 20_000, 2: 61_000, 3: 90_000, 4: 42_000}
    at = 1_000.0
    mask = MaskEdit(
        (
            ReplacedResult("t1", "call_1", "[output masked]", ref="ref_000000000001"),
            ReplacedResult("t2", "call_2", "[output masked]", ref="ref_000000000002"),
        ),
        created_at=at + 25,
    )
    summary_message = Message(
        "user",
        (SummaryPart("## Current Task\nFix slugify\n## Next Steps\nRun the tests"),),
        id="summary1",
        meta=Meta(kind="summary"),
    )
    summarize = SummarizeEdit("u1", "t2", summary_message, created_at=at + 35)
    drop = DropEdit(("t3",), created_at=at + 36)
    for n in (1, 2, 3, 4):
        store.append_messages(SESSION_ID, _turn(n, f"pytest -k case{n}", "x\n" * 50 * n))
        sink.emit(
            TokenUsage(
                session_id=SESSION_ID,
                at=at + 10 * n,
                turn=n,
                input_tokens=contexts[n] - 500,
                output_tokens=500,
                cache_read_tokens=contexts[n] // 2,
                cache_write_tokens=1_000,
                context_tokens=contexts[n],
                window=WINDOW,
            )
        )
        if n == 2:
            store.append_edit(SESSION_ID, mask)
            sink.emit(
                ObservationsMasked(
                    session_id=SESSION_ID, at=at + 26, count=2, freed_tokens=1_800, edit_id=mask.id
                )
            )
        if n == 3:
            store.append_edit(SESSION_ID, summarize)
            store.append_edit(SESSION_ID, drop)
            sink.emit(
                CompactionFinished(
                    session_id=SESSION_ID,
                    at=at + 37,
                    trigger="threshold",
                    before_tokens=90_000,
                    after_tokens=40_000,
                    before_messages=10,
                    after_messages=5,
                    strategies_run=("summarize", "drop_oldest"),
                    edit_ids=(summarize.id, drop.id),
                    expected_saving_usd=0.1234,
                    horizon_requests=1,
                )
            )
            view = store.load_view(SESSION_ID)
            store.save_snapshot(
                SESSION_ID, view.view, 40_000, last_seq=view.last_seq, last_edit=view.last_edit
            )
        if n == 4:
            sink.emit(
                CompactionSettled(
                    session_id=SESSION_ID,
                    at=at + 45,
                    trigger="threshold",
                    edit_ids=(summarize.id, drop.id),
                    expected_saving_usd=0.1234,
                    realized_saving_usd=0.0987,
                    requests=1,
                )
            )
    store.close()
    return PopulatedStore(path, SESSION_ID, mask.id, summarize.id, drop.id)
