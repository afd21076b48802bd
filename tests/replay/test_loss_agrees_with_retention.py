"""The loss reports and the retention table agree item by item (issue 30).

Both use one definition of a fact and of where it is (:mod:`contextfold.retention.probes`). So
replaying a session, the place the last loss report gave each fact is the place the retention
table finds it in at the end, unless the fact is back in the conversation (the agent read the
file again): kept (in the view, a summary, a pin or the ledger), recoverable through a ref, or
lost. A fact no report named never left the conversation: the table finds it there, or it was
never in the conversation at all (it was in the middle of an output the engine offloaded as it
arrived, and is read back through that output's ref). Replayed: the demo's own session (exported
from its store) and a Claude Code session from ../shared/data.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextfold.cli import app
from contextfold.replay import ReplayRun, replay
from contextfold.replay.probes import Status
from contextfold.retention.loss import MAX_LISTED_ITEMS
from contextfold.store import open_store
from contextfold.transcripts import Transcript, load_transcript
from tests.conftest import shared_path

_CLASS = {
    "verbatim": "kept",
    "summary": "kept",
    "pinned": "kept",
    "ledger": "kept",
    "recoverable": "recoverable",
    "lost": "lost",
}
"""The table's columns: kept, via read_result, lost."""


def _disagreements(run: ReplayRun) -> list[str]:
    """Each fact whose place the loss reports and the retention table tell differently."""
    assert run.retention is not None
    reported: dict[tuple[str, str], str] = {}
    for mark in run.losses:
        # Every item is listed (the comparison needs them all, not the first few).
        assert len(mark.items) == mark.out_of_view <= MAX_LISTED_ITEMS
        for kind, text, where in mark.items:
            reported[(kind, text)] = where
    wrong = []
    for result in run.retention.results:
        key = (result.probe.kind, result.probe.text)
        status: Status = result.status
        if status == "verbatim":
            continue  # in the conversation at the end: never left, or back
        where = reported.get(key)
        if where is None:
            if status != "recoverable":  # an output offloaded on arrival holds it
                wrong.append(f"{key}: the table says {status}, no report named it")
        elif _CLASS[where] != _CLASS[status]:
            wrong.append(f"{key}: the last report says {where}, the table says {status}")
    return wrong


def _check(run: ReplayRun) -> None:
    assert run.losses, "nothing was compacted: nothing to compare"
    assert run.retention is not None and run.retention.total() > 0
    assert _disagreements(run) == []
    # Every message each compaction took out of the view is accounted for.
    assert all(sum(mark.messages.values()) > 0 for mark in run.losses if mark.out_of_view)


@pytest.fixture(scope="module")
def demo_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Transcript]:
    """The demo's session, exported from the store the demo kept, as a transcript."""
    folder = tmp_path_factory.mktemp("demo")
    result = CliRunner().invoke(app, ["demo", "--keep"], env={"TMPDIR": str(folder)})
    assert result.exit_code == 0, result.output
    kept = re.search(r"Kept (\S+) \(project", result.output)
    assert kept is not None, result.output
    store = open_store(Path(kept.group(1)) / "sessions.db")
    try:
        (info,) = store.list_sessions()
        exported = folder / "demo.jsonl"
        with exported.open("w", encoding="utf-8") as out:
            store.export_jsonl(info.id, out)
    finally:
        store.close()
    yield load_transcript(exported)


@pytest.mark.parametrize("preset", ["mask-first", "summarize", "window"])
def test_the_demo_replayed(demo_session: Transcript, preset: str) -> None:
    run = replay(demo_session, preset, window=4_000)  # type: ignore[arg-type]
    _check(run)
    if preset != "mask-first":  # masks keep every fact in view; the others take some out
        assert any(mark.out_of_view for mark in run.losses)


@pytest.mark.parametrize("preset", ["mask-first", "summarize", "window"])
def test_a_claude_code_session_replayed(preset: str) -> None:
    path = shared_path("trajectories", "claude-code", "fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl")
    _check(replay(load_transcript(path), preset, window=100_000))  # type: ignore[arg-type]
