"""The notices chat and run print for engine events: a background compaction that was never
used says nothing (it did nothing to the context), and one that fell short of the minimum
progress is told as the compaction it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextfold.cli import app
from contextfold.cli._notices import SHORT_COMPACTION, NoticeWriter
from contextfold.compaction import NOTHING_TO_REMOVE
from contextfold.events import CompactionFailed, CompactionFinished, CompactionStarted
from contextfold.store import open_store

runner = CliRunner()

DISCARDED = "discarded: the session closed before it was needed"
"""The reason the engine gives a background compaction the session closed on."""


def test_an_unused_background_compaction_has_no_notice() -> None:
    writer = NoticeWriter()
    started = CompactionStarted(
        trigger="background", zone="mask", before_tokens=4_286, target_tokens=3_000
    )
    for reason in (DISCARDED, "the transcript moved on"):
        unused = CompactionFailed(
            trigger="background", before_tokens=4_286, after_tokens=4_286, reason=reason
        )
        assert writer.notice(started) is None
        assert writer.notice(unused) is None


def test_a_foreground_compaction_that_freed_nothing_still_warns() -> None:
    failed = NoticeWriter().notice(
        CompactionFailed(
            trigger="threshold", before_tokens=5_000, after_tokens=5_000, reason=NOTHING_TO_REMOVE
        )
    )
    assert failed is not None and failed.level == "warning"


def test_a_compaction_short_of_the_minimum_is_told_as_a_compaction() -> None:
    notice = NoticeWriter().notice(
        CompactionFinished(
            trigger="threshold",
            before_tokens=10_175,
            after_tokens=3_570,
            before_messages=63,
            after_messages=16,
            strategies_run=("summarize",),
            note="freed 6605 tokens, less than the minimum progress of 10096 (95% of a ...)",
        )
    )
    assert notice is not None and notice.level == "info"
    assert notice.text == (
        "compacted the context: 10,175 → 3,570 tokens, 63 → 16 messages (summarize; the window "
        f"reached the compact threshold); {SHORT_COMPACTION}, so the next automatic one waits "
        "until the context has grown"
    )
    assert "minimum progress" not in notice.text


def test_only_an_automatic_short_compaction_is_said_to_hold_back_the_next() -> None:
    """The engine waits for growth after a short threshold or background compaction only."""
    for trigger, waits in (("threshold", True), ("background", True), ("block", False)):
        notice = NoticeWriter().notice(
            CompactionFinished(
                trigger=trigger,
                before_tokens=9_000,
                after_tokens=8_500,
                before_messages=30,
                after_messages=20,
                note="freed 500 tokens, less than the minimum progress of 900",
            )
        )
        assert notice is not None and SHORT_COMPACTION in notice.text
        assert ("waits until the context has grown" in notice.text) is waits


def long_message(n: int) -> str:
    return f"message {n}: " + " ".join(f"word{n}x{j}" for j in range(90))


def test_quitting_with_a_background_compaction_prepared_prints_no_notice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seven long messages take an 8,000-token chat past the background mark (70 %) but not to
    the compact threshold: the compaction prepared in the background is never used."""
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "sessions.db"
    lines = [long_message(n) for n in range(1, 8)] + ["/quit"]
    result = runner.invoke(
        app,
        ["chat", "--model", "scripted", "--window", "8000", "--store", str(store)],
        input="".join(line + "\n" for line in lines),
        # Under the compact threshold only the cost schedule would compact: off, so the
        # prepared compaction is never used.
        env={"NO_COLOR": "1", "CONTEXTFOLD_SCHEDULE__COST": "false"},
    )
    assert result.exit_code == 0, result.output
    assert "discarded" not in result.output and "◆" not in result.output

    with open_store(store) as opened:
        (session,) = opened.list_sessions()
        ends = [e for e in opened.iter_events(session.id) if e.event_type == "compaction_failed"]
    assert [e.data["reason"] for e in ends] == [DISCARDED]  # kept for the record
