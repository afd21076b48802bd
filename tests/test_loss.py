"""The loss report (issues 19 and 30): which facts a compaction took out of the view, where each
can still be read (a summary, a pin, the ledger, a stored output a ref leads to, or nowhere), and
what stands for every message it took out."""

from __future__ import annotations

from contextfold.messages import Message, Meta, SummaryPart, ToolCallPart, ToolResultPart
from contextfold.outputs.blobs import blob_info
from contextfold.retention.ledger import Ledger, LedgerItem
from contextfold.retention.loss import (
    MAX_LISTED_ITEMS,
    LossItem,
    LossReport,
    loss_report,
)

TASK = "Fix the crash in the parser when the input is empty."
TASK_PROBE = "Fix the crash in the parser when the input is empty."
CONSTRAINT = "Never change the public API of the parser."
PARSER_SOURCE = "def parse(text):\n    return text.split()[0]\n"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "src/parser.py", line 2, in parse\n'
    "IndexError: list index out of range\nexit code 1"
)
ERROR = "IndexError: list index out of range"
EDITED = "src/parser.py"
TRACEBACK_REF = blob_info(TRACEBACK, "Bash").ref
STORED = {TRACEBACK_REF: TRACEBACK, blob_info(PARSER_SOURCE, "Read").ref: PARSER_SOURCE}


def _read(ref: str) -> str | None:
    return STORED.get(ref)


def _before() -> list[Message]:
    read = ToolCallPart.from_args("c1", "Read", {"file_path": "src/parser.py"})
    run = ToolCallPart.from_args("c2", "Bash", {"command": "pytest -x tests/test_parser.py"})
    edit = ToolCallPart.from_args(
        "c3", "Edit", {"file_path": EDITED, "old_string": "[0]", "new_string": "[:1]"}
    )
    return [
        Message.user(TASK, id="u1"),
        Message.user(f"Thanks. {CONSTRAINT}", id="u2"),
        Message.assistant("Reading the parser.", [read], id="a1"),
        Message.tool(ToolResultPart("c1", "Read", PARSER_SOURCE), id="t1"),
        Message.assistant("Running the tests.", [run], id="a2"),
        Message.tool(ToolResultPart("c2", "Bash", TRACEBACK, is_error=True), id="t2"),
        Message.assistant("Guarding the empty input.", [edit], id="a3"),
        Message.tool(ToolResultPart("c3", "Edit", "The file was updated."), id="t3"),
        Message.user("Go on.", id="u3"),
    ]


def _summary(text: str, covers: tuple[str, str] | None = None) -> Message:
    return Message("user", (SummaryPart(text, covers=covers),), id="s1", meta=Meta(kind="summary"))


def _where(report: LossReport) -> dict[str, tuple[str, str | None]]:
    return {item.text: (item.where, item.ref) for item in report.items}


def test_each_fact_that_left_the_view_says_where_it_can_be_read() -> None:
    before = _before()
    # The summary quotes the task and the edited file; the test run's output is named by a ref
    # in the note; the constraint is nowhere.
    after = [
        _summary(f"Task: {TASK} Edited {EDITED}.", covers=("u1", "u2")),
        Message.user(f"[6 messages dropped; their outputs: Bash {TRACEBACK_REF}]", id="n1"),
        before[-1],
    ]
    report = loss_report(before, after, read_ref=_read)
    where = _where(report)
    assert where[TASK_PROBE] == ("summary", None)
    assert where[EDITED] == ("summary", None)
    assert where[ERROR] == ("recoverable", TRACEBACK_REF)  # a ref leads to it: never "lost"
    assert where[CONSTRAINT] == ("lost", None)
    assert "Go on." not in where  # still in the view (and no fact)
    assert report.count() == report.count("summary") + report.count("recoverable") + 1
    # The same views always give the same report.
    assert loss_report(before, after, read_ref=_read) == report


def test_a_ref_to_nothing_stored_is_lost() -> None:
    before = _before()
    after = [Message.user(f"[dropped; outputs: Bash {TRACEBACK_REF}]", id="n1"), before[-1]]
    assert _where(loss_report(before, after, read_ref=lambda ref: None))[ERROR] == ("lost", None)
    assert _where(loss_report(before, after))[ERROR] == ("lost", None)  # nothing reads refs


def test_every_message_taken_out_is_accounted_for() -> None:
    before = _before()
    after = [
        _summary(f"Task: {TASK}", covers=("u1", "u2")),
        Message.user(f"[dropped; outputs: Bash {TRACEBACK_REF}]", id="n1"),
        *before[6:],
    ]
    report = loss_report(before, after, read_ref=_read)
    messages = {m.id: m.where for m in report.messages}
    assert set(messages) == {"u1", "u2", "a1", "t1", "a2", "t2"}  # every message that left
    assert messages["u1"] == "summary"  # the summary covers it
    assert messages["u2"] == "lost"  # covered too, but its constraint is nowhere
    assert messages["t2"] == "recoverable"  # its output behind a ref the view names
    assert messages["t1"] == "lost"  # the read's output: no ref in the view leads to it
    assert messages["a1"] == messages["a2"] == "facts_kept"  # the agent's words and calls
    assert report.count_messages() == 6


def test_pins_and_the_ledger_hold_what_they_carry() -> None:
    before = _before()
    after = [before[-1]]
    ledger = Ledger().merged([LedgerItem("error", ERROR, "ref_bbbbbbbbbbbb")])
    report = loss_report(before, after, pins=[CONSTRAINT], ledger=ledger, read_ref=_read)
    where = _where(report)
    assert where[CONSTRAINT] == ("pinned", None)
    assert where[ERROR] == ("ledger", None)
    # A ref the ledger names makes what its output holds recoverable.
    named = Ledger().merged([LedgerItem("command", "make", TRACEBACK_REF)])
    report = loss_report(before, after, ledger=named, read_ref=_read)
    assert _where(report)[ERROR] == ("recoverable", TRACEBACK_REF)


def test_a_masked_output_is_recoverable_through_its_placeholder() -> None:
    before = _before()
    masked = ToolResultPart("c2", "Bash", f"[Bash: 4 lines, exit 1] → read_result {TRACEBACK_REF}")
    after = [*before[:5], Message.tool(masked, id="t2"), *before[6:]]
    report = loss_report(before, after, read_ref=_read)
    assert _where(report) == {ERROR: ("recoverable", TRACEBACK_REF)}
    assert [(m.id, m.where, m.refs) for m in report.messages] == [
        ("t2", "recoverable", (TRACEBACK_REF,))
    ]


def test_a_fact_a_later_summary_leaves_out_is_reported_then() -> None:
    before = _before()
    summarized = [_summary(f"Edited {EDITED}."), before[-1]]
    first = loss_report(before, summarized, read_ref=_read)
    assert _where(first)[EDITED] == ("summary", None)
    # The second compaction replaces that summary with one that no longer names the file: the
    # report knows the fact from the first one.
    again = [_summary("Earlier work on the parser."), before[-1]]
    second = loss_report(summarized, again, read_ref=_read, known=first.facts)
    assert _where(second)[EDITED] == ("lost", None)
    assert ERROR not in _where(second)  # lost then, lost now: reported once


def test_nothing_is_reported_when_nothing_left() -> None:
    before = _before()
    report = loss_report(before, before)
    assert report.items == () and report.messages == ()
    assert LossReport().line() == "no fact out of view"


def test_the_line_and_the_listing() -> None:
    report = LossReport(
        (
            LossItem("files_modified", "a.py", "recoverable", "ref_aaaaaaaaaaaa"),
            LossItem("task", "fix it", "summary"),
            LossItem("errors", "boom", "lost"),
            LossItem("constraints", "never x", "pinned"),
        )
    )
    assert report.line() == (
        "4 facts out of view (1 in summary, 1 pinned, 1 recoverable through refs, 1 lost)"
    )
    assert [i.where for i in report.listed()] == ["lost", "recoverable", "pinned", "summary"]
    assert report.lost == (LossItem("errors", "boom", "lost"),)
    many = LossReport(
        tuple(LossItem("files_modified", f"f{i}.py", "recoverable", "ref_x") for i in range(90))
    )
    assert len(many.listed()) == MAX_LISTED_ITEMS
