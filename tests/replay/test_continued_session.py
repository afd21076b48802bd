"""A session continued from an earlier one's compaction replays with the summary it began with."""

from __future__ import annotations

from pathlib import Path

from contextfold.replay import replay
from contextfold.tokens.counters import counter_for
from contextfold.transcripts import load_transcript
from tests.formats.test_claude_code import reply, user
from tests.formats.writers import write_jsonl

SUMMARY = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The user asked to port the billing module to the new payments API; invoice.py is done, "
    "refunds.py is next. Don't touch the public function names."
)


def _continued_session(tmp_path: Path, *, boundary: bool) -> Path:
    """A Claude Code file that begins with the summary of an earlier compaction (after its
    boundary record, or alone), then two requests."""
    records = []
    if boundary:
        records.append(
            {
                "type": "system",
                "subtype": "compact_boundary",
                "uuid": "k",
                "parentUuid": None,
                "logicalParentUuid": "gone",
                "compactMetadata": {"trigger": "auto", "preTokens": 160_000},
            }
        )
    records += [
        user("s", "k" if boundary else None, SUMMARY, isCompactSummary=True),
        reply("a", "s", "Picking up with refunds.py."),
        user("b", "a", "go on"),
        reply("c", "b", "Done."),
    ]
    return write_jsonl(tmp_path / "continued.jsonl", records)


def test_the_summary_a_session_begins_with_is_its_first_input(tmp_path: Path) -> None:
    for boundary in (True, False):
        transcript = load_transcript(_continued_session(tmp_path, boundary=boundary))
        assert transcript.messages[0].meta.kind == "summary"
        run = replay(transcript, "mask-first", model="claude-opus-4-6")
        counter = counter_for("claude-opus-4-6")
        # The first request holds the task the summary carries (it had no message at all, a
        # request Anthropic refuses), and the whole run keeps it.
        assert [t.messages for t in run.turns] == [1, 3]
        assert run.final_tokens > counter.count_text(SUMMARY)
        # Claude Code's compaction is still shown where it was: before the first request.
        assert run.turns[0].original_compacted


def test_a_summary_after_the_history_it_replaces_is_still_not_input(tmp_path: Path) -> None:
    # The replay has the full history, and compacts it its own way.
    path = write_jsonl(
        tmp_path / "mid.jsonl",
        [
            user("a", None, "port the billing module"),
            reply("b", "a", "working"),
            user("s", "b", SUMMARY, isCompactSummary=True),
            user("c", "s", "go on"),
            reply("d", "c", "Done."),
        ],
    )
    transcript = load_transcript(path)
    run = replay(transcript, "mask-first", model="claude-opus-4-6")
    assert [t.messages for t in run.turns] == [1, 3]  # "go on" follows the first reply
    assert run.final_tokens < counter_for("claude-opus-4-6").count_text(SUMMARY)
    assert run.turns[1].original_compacted
