"""The loss report (issue 19): which probes a compaction took out of the view, and where each
can still be read — in a summary, a pin, the ledger, behind a ref, or nowhere."""

from __future__ import annotations

from contextfold.messages import Message, Meta, SummaryPart, ToolCallPart, ToolResultPart
from contextfold.outputs.blobs import blob_info
from contextfold.retention.ledger import Ledger, LedgerItem
from contextfold.retention.loss import (
    MAX_LISTED_ITEMS,
    LossItem,
    LossReport,
    loss_report,
    probes_of,
)

TASK = "Fix the crash in the parser when the input is empty."
CONSTRAINT = "Never change the public API of the parser."
PARSER_SOURCE = "def parse(text):\n    return text.split()[0]\n"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "src/parser.py", line 2, in parse\n'
    "IndexError: list index out of range\nexit code 1"
)
ERROR = "IndexError: list index out of range"


def _before() -> list[Message]:
    read = ToolCallPart.from_args("c1", "Read", {"file_path": "src/parser.py"})
    run = ToolCallPart.from_args("c2", "Bash", {"command": "pytest -x tests/test_parser.py"})
    return [
        Message.user(TASK, id="u1"),
        Message.user(f"Thanks. {CONSTRAINT}", id="u2"),
        Message.assistant("Reading the parser.", [read], id="a1"),
        Message.tool(ToolResultPart("c1", "Read", PARSER_SOURCE), id="t1"),
        Message.assistant("Running the tests.", [run], id="a2"),
        Message.tool(ToolResultPart("c2", "Bash", TRACEBACK, is_error=True), id="t2"),
        Message.user("Go on.", id="u3"),
    ]


def _summary(text: str) -> Message:
    return Message("user", (SummaryPart(text),), id="s1", meta=Meta(kind="summary"))


def _where(report: LossReport) -> dict[str, tuple[str, str | None]]:
    return {item.text: (item.where, item.ref) for item in report.items}


def test_each_probe_that_left_the_view_says_where_it_can_be_read() -> None:
    before = _before()
    read_ref = blob_info(PARSER_SOURCE, "Read").ref
    # The summary quotes the task; the read's output is named by a ref in the drop note; the
    # error and the constraint are nowhere.
    after = [
        _summary(f"Task: {TASK}"),
        Message.user(f"[3 messages dropped; their outputs: Read {read_ref}]", id="n1"),
        before[-1],
    ]
    report = loss_report(before, after)
    where = _where(report)
    assert where[TASK] == ("summary", None)
    assert where["src/parser.py"] == ("ref", read_ref)
    assert where[ERROR] == ("lost", None)
    assert where[CONSTRAINT] == ("lost", None)
    assert where["pytest -x tests/test_parser.py"] == ("lost", None)  # its output has no ref
    assert "Go on." not in where  # still in the view
    assert report.count() == report.count("summary") + report.count("ref") + report.count("lost")
    # The same views always give the same report.
    assert loss_report(before, after) == report


def test_pins_and_the_ledger_hold_what_they_carry() -> None:
    before = _before()
    after = [before[-1]]
    ledger = Ledger().merged([LedgerItem("error", ERROR, "ref_bbbbbbbbbbbb")])
    report = loss_report(before, after, pins=[CONSTRAINT], ledger=ledger)
    where = _where(report)
    assert where[CONSTRAINT] == ("pinned", None)
    assert where[ERROR] == ("ledger", None)
    # A ref the ledger names counts as readable for the output it names.
    run_ref = blob_info(TRACEBACK, "Bash").ref
    named = Ledger().merged([LedgerItem("command", "make", run_ref)])
    assert _where(loss_report(before, after, ledger=named))[ERROR] == ("ref", run_ref)


def test_a_mask_that_keeps_the_call_loses_only_the_output() -> None:
    before = _before()
    read_ref = blob_info(PARSER_SOURCE, "Read").ref
    masked = ToolResultPart("c1", "Read", f"[Read src/parser.py: 2 lines] → read_result {read_ref}")
    after = [*before[:3], Message.tool(masked, id="t1"), *before[4:]]
    # The path is still in the view (the call and the placeholder): nothing left it.
    assert loss_report(before, after).items == ()


def test_nothing_is_reported_when_nothing_left() -> None:
    before = _before()
    assert loss_report(before, before) == LossReport()
    assert LossReport().line() == "0 facts out of view (0 in summary, 0 behind refs, 0 lost)"


def test_the_line_and_the_listing() -> None:
    report = LossReport(
        (
            LossItem("file", "a.py", "ref", "ref_aaaaaaaaaaaa"),
            LossItem("task", "fix it", "summary"),
            LossItem("error", "boom", "lost"),
            LossItem("pin", "never x", "pinned"),
        )
    )
    assert report.line() == "4 facts out of view (1 in summary, 1 pinned, 1 behind refs, 1 lost)"
    assert [i.where for i in report.listed()] == ["lost", "ref", "pinned", "summary"]
    assert report.lost == (LossItem("error", "boom", "lost"),)
    many = LossReport(tuple(LossItem("file", f"f{i}.py", "ref", "ref_x") for i in range(90)))
    assert len(many.listed()) == MAX_LISTED_ITEMS


def test_probes_skip_summaries_and_name_each_wording_once() -> None:
    before = [_summary("Earlier: edited src/old.py"), *_before()]
    probes = probes_of(before, pins=[CONSTRAINT])
    texts = [p.text for p in probes]
    assert "src/old.py" not in texts
    assert texts.count("src/parser.py") == 1
    assert texts.count(CONSTRAINT) == 1  # a constraint fact and the pin are one probe
    (file_probe,) = [p for p in probes if p.text == "src/parser.py"]
    assert "parser.py" not in file_probe.needles  # one component alone would match too much
    assert "src/parser.py" in file_probe.needles


def test_an_item_the_ledger_dropped_to_stay_small_left_the_view_too() -> None:
    before = _before()
    after = [before[-1]]
    kept = LedgerItem("identifier", "db.internal:5432")
    dropped = LedgerItem("identifier", "https://ci.example.com/run/7", "ref_cccccccccccc")
    old_ledger = Ledger().merged([dropped, kept])
    new_ledger = Ledger().merged([kept])
    report = loss_report(before, after, ledger=new_ledger, previous_ledger=old_ledger)
    where = _where(report)
    assert where[dropped.text] == ("lost", None)  # its ref is named nowhere any more
    assert kept.text not in where  # in the ledger before and after: it never left
    # A ref the new view still names keeps it readable.
    naming = [Message.user("see ref_cccccccccccc"), *after]
    report = loss_report(before, naming, ledger=new_ledger, previous_ledger=old_ledger)
    assert _where(report)[dropped.text] == ("ref", "ref_cccccccccccc")
