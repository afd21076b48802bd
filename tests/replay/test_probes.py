"""Retention probes: facts of the whole session looked up in a view."""

from __future__ import annotations

from pathlib import Path

from contextfold.messages import Message, Meta, SummaryPart, ToolCallPart, ToolResultPart
from contextfold.replay import check_retention, original_view, probes_for
from contextfold.replay.probes import task_probe_text
from contextfold.transcripts import RecordedCompaction, Transcript, load_transcript
from tests.compaction.harness_session import COMMAND_TYPED, write_harness_session

ERROR = "ValueError: slug must not be empty"
PATH = "/repo/textkit/slug.py"


def _session() -> list[Message]:
    edit = ToolCallPart.from_args(
        "c1", "Edit", {"file_path": PATH, "old_string": "x", "new_string": "y"}
    )
    run = ToolCallPart.from_args("c2", "Bash", {"command": "pytest tests/test_slug.py"})
    return [
        Message.user(
            "Fix the failing slug test in the textkit package. Do not change the public API.",
            id="task",
        ),
        Message.assistant("", [edit], id="a1"),
        Message.tool(ToolResultPart("c1", "Edit", "The file was updated."), id="r1"),
        Message.assistant("", [run], id="a2"),
        Message.tool(
            ToolResultPart(
                "c2",
                "Bash",
                f'Traceback (most recent call last):\n  File "slug.py", line 3\n{ERROR}\n',
                is_error=True,
            ),
            id="r2",
        ),
        Message.assistant("The slug is empty for blank titles; I will guard it.", id="a3"),
    ]


def _kinds(messages: list[Message]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for probe in probes_for(messages):
        out.setdefault(probe.kind, []).append(probe.text)
    return out


def test_probes_cover_files_errors_task_and_constraints() -> None:
    kinds = _kinds(_session())
    assert kinds["files_modified"] == [PATH]
    assert kinds["errors"] == [ERROR]
    assert kinds["task"] == ["Fix the failing slug test in the textkit package."]
    assert kinds["constraints"] == ["Do not change the public API."]


def test_a_full_view_keeps_everything_verbatim() -> None:
    messages = _session()
    retention = check_retention(probes_for(messages), messages)
    assert retention.count("verbatim") == retention.total() == 4
    assert retention.rate() == 1.0 and retention.lost() == []


def test_a_masked_output_is_recoverable_only_through_its_ref() -> None:
    messages = _session()
    full = messages[4].tool_results[0].content
    placeholder = "[bash output masked: 3 lines → read_result ref_0123456789ab]"
    masked = messages[4].with_parts(
        [ToolResultPart("c2", "Bash", placeholder, is_error=True, ref="ref_0123456789ab")]
    )
    view = [*messages[:4], masked, messages[5]]
    blobs = {"ref_0123456789ab": full}
    with_store = check_retention(probes_for(messages), view, blobs.get)
    assert [r.probe.text for r in with_store.results if r.status == "recoverable"] == [ERROR]
    assert with_store.kept() == 3 and with_store.reachable() == 4
    without_store = check_retention(probes_for(messages), view)
    assert without_store.lost() == [ERROR]


def test_a_summary_that_names_a_file_by_its_project_path_keeps_it() -> None:
    messages = _session()
    summary = Message(
        "user",
        (SummaryPart("## Files Modified\n- `textkit/slug.py` (guard for blank titles)"),),
        meta=Meta(kind="summary"),
    )
    view = [messages[0], summary, messages[5]]
    retention = check_retention(probes_for(messages), view)
    status = {r.probe.kind: r.status for r in retention.results}
    assert status == {
        "files_modified": "summary",
        "errors": "lost",
        "task": "verbatim",
        "constraints": "verbatim",
    }
    assert retention.to_json()["by_kind"]["errors"] == {
        "verbatim": 0,
        "summary": 0,
        "recoverable": 0,
        "lost": 1,
        "total": 1,
    }


def test_facts_come_from_what_happened_not_from_an_earlier_summary() -> None:
    summary = Message(
        "user",
        (SummaryPart("Earlier: edited /elsewhere/other.py; saw RuntimeError: boom", source="x"),),
        meta=Meta(kind="summary"),
    )
    kinds = _kinds([*_session(), summary])
    assert kinds["files_modified"] == [PATH] and kinds["errors"] == [ERROR]


def test_the_original_view_starts_at_its_last_summary() -> None:
    messages = _session()
    summary = Message(
        "user",
        (SummaryPart("summary text", source="claude-code"),),
        meta=Meta(kind="summary"),
        id="s1",
    )
    transcript = Transcript(
        [*messages[:5], summary, messages[5]],
        "claude-code",
        compactions=[RecordedCompaction(5, "auto", 150_000, "summary text", "s1")],
    )
    assert original_view(transcript) == [summary, messages[5]]
    assert original_view(Transcript(messages, "claude-code")) is None


def test_the_task_is_probed_by_its_first_real_sentence() -> None:
    swe = "<pr_description>\nConsider the following PR description:\nTypeError when x is None\nmore"
    assert task_probe_text(swe) == "TypeError when x is None"
    assert task_probe_text("Hi! I'm looking to book a flight to Seattle.") == (
        "I'm looking to book a flight to Seattle."
    )
    assert task_probe_text("short") == "short"


def test_what_the_harness_wrote_is_never_the_task_or_a_constraint(tmp_path: Path) -> None:
    """A Claude Code session's interruption markers, task notifications, local-command records
    and isMeta records are no facts to probe; a typed slash command is, and a full view holds
    it verbatim although its record spells it as tags."""
    messages = load_transcript(write_harness_session(tmp_path / "s.jsonl")).messages
    kinds = _kinds(messages)
    assert kinds["task"] == ["Fix the failing slug test in textkit."]
    assert kinds["constraints"] == ["Do not change the public API.", COMMAND_TYPED]
    retention = check_retention(probes_for(messages), messages)
    assert retention.count("verbatim") == retention.total()
