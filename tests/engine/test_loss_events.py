"""Loss reports and the artifact ledger in a session (issue 19): every compaction and mask batch
is followed by a ``LossReported`` whose where-readable answers hold in the request that is sent,
and the ledger rides in the system prompt, refreshed only when the view changed, and survives a
resume from the store."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from contextfold import (
    ContextEngine,
    ContextPolicy,
    PreparedRequest,
    ScriptedModel,
    model_for_window,
)
from contextfold.events import CompactionFinished, LossReported, event_from_dict
from contextfold.messages import Message, SummaryPart, ToolCallPart
from contextfold.providers import ChatRequest
from contextfold.retention.ledger import LEDGER_HEADER
from contextfold.retention.loss import MAX_LISTED_ITEMS, WHERES
from tests.engine.helpers import SYSTEM, Driver, EngineFactory, listing, start


def _normalized(text: str) -> str:
    return " ".join(text.split()).casefold()


def _summary_text(request: PreparedRequest) -> str:
    return _normalized(
        "\n".join(
            part.text
            for m in request.messages
            for part in m.parts
            if isinstance(part, SummaryPart) or m.meta.kind in ("summary", "tool_summary")
            if hasattr(part, "text")
        )
    )


def _output(turn: int) -> str:
    """A listing with a build id and an error line in the middle: what a masked output takes
    away (its placeholder keeps the first and last lines)."""
    lines = listing(turn, lines=12).splitlines()
    middle = [
        f"build {turn:04d}a{turn:03d}f9c done",
        "Traceback (most recent call last):",
        f'  File "src/mod{turn}.py", line 99, in f99',
        f"ValueError: module {turn} has no f99",
    ]
    return "\n".join([*lines[:6], *middle, *lines[6:]])


def _running_model() -> ScriptedModel:
    """A model that runs one module per reply (a run's error lines are facts; a read's not)."""

    def respond(request: ChatRequest) -> Message:
        turn = len(model.requests)
        call = ToolCallPart.from_args(f"call_{turn}", "bash", {"command": f"python -m mod{turn}"})
        return Message.assistant(f"Step {turn}: running module {turn}.", [call])

    model = ScriptedModel(default=respond)
    return model


def _compacting_turns(driver: Driver, reports: int, limit: int = 300) -> list[PreparedRequest]:
    """Run turns until ``reports`` requests carried a loss report; those requests."""
    seen: list[PreparedRequest] = []
    for _ in range(limit):
        request = driver.turn()
        if any(isinstance(e, LossReported) for e in request.events):
            seen.append(request)
            if len(seen) >= reports:
                return seen
    raise AssertionError(f"only {len(seen)} loss reports in {limit} turns")


def test_each_compaction_is_followed_by_a_loss_report_whose_answers_hold(
    make_engine: EngineFactory,
) -> None:
    engine, sink = make_engine(compactor="mask-first")
    driver = start(engine, output=_output, model=_running_model())
    requests = _compacting_turns(driver, reports=6)

    events = sink.events
    for i, event in enumerate(events):
        if isinstance(event, CompactionFinished):
            assert isinstance(events[i + 1], LossReported)  # right after it
    reports = sink.of_type(LossReported)
    assert len(reports) == len(sink.of_type(CompactionFinished))
    assert any(r.out_of_view for r in reports)

    session = driver.session
    for request in requests:
        (report,) = [e for e in request.events if isinstance(e, LossReported)]
        assert report.out_of_view == sum(
            (report.in_summary, report.pinned, report.in_ledger, report.behind_ref, report.lost)
        )
        system, summary = _normalized(request.system_text), _summary_text(request)
        for item in report.items:
            assert item["where"] in WHERES
            needle = _normalized(str(item["text"]).rstrip("…"))
            if item["where"] == "summary":
                assert needle in summary
            elif item["where"] == "ledger":
                assert needle in system  # the request that is sent carries the ledger
            elif item["where"] == "recoverable":
                read = session.read_result(str(item["ref"]), pattern=re.escape(str(item["text"])))
                assert not read.is_error, read.content
                assert "no match" not in read.content.lower(), read.content
        # Every message the compaction took out of the view is accounted for.
        counted = report.message_counts()
        assert len(report.messages) == min(sum(counted.values()), MAX_LISTED_ITEMS)
        # A compaction's own request already carries the refreshed ledger: in the system prompt
        # before the first summary, with the latest summary after it.
        sent = request.system_text + "\n".join(m.text for m in request.messages)
        assert LEDGER_HEADER in sent
    last = requests[-1]
    assert session.ledger.render() in last.system_text + "\n".join(m.text for m in last.messages)
    assert event_from_dict(reports[-1].to_dict()) == reports[-1]


def _written(turn: int) -> str:
    return f"src/generated/package/module_{turn:04d}_with_a_rather_long_name.py"


def _model_writing_files() -> ScriptedModel:
    """A model that writes a new file with a shell command every turn."""

    def respond(request: ChatRequest) -> Message:
        turn = len(model.requests)
        command = f"echo 'x = {turn}' > {_written(turn)}"
        call = ToolCallPart.from_args(f"call_{turn}", "bash", {"command": command})
        return Message.assistant("Writing the next module.", [call])

    model = ScriptedModel(default=respond)
    return model


def test_what_nothing_holds_is_reported_as_lost(make_engine: EngineFactory) -> None:
    # A sliding window drops whole turns: the files the commands wrote leave with the calls,
    # their outputs do not name them, and there are more of them than the ledger keeps.
    engine, sink = make_engine(compactor="window")
    driver = start(engine, model=_model_writing_files())
    request = _compacting_turns(driver, reports=1)[-1]
    (report,) = sink.of_type(LossReported)
    lost = [item for item in report.items if item["where"] == "lost"]
    assert len(lost) == min(report.lost, MAX_LISTED_ITEMS) > 0  # the listing is capped
    sent = _normalized(request.system_text + "\n".join(m.text for m in request.messages))
    assert any(item["text"] == _written(1) for item in lost)
    for item in lost:
        assert item["ref"] is None
        assert _normalized(str(item["text"])) not in sent  # nowhere the model can read
    # The newest files are in the ledger, which this very request carries.
    assert report.in_ledger > 0
    assert all(_normalized(i.text) in sent for i in driver.session.ledger.items)
    assert report.messages_lost > 0  # the calls that wrote a lost file


def test_no_ledger_before_the_first_compaction_and_no_change_between_compactions(
    make_engine: EngineFactory,
) -> None:
    engine, _ = make_engine(compactor="mask-first")
    driver = start(engine, output=_output)
    first = driver.prepare()
    assert LEDGER_HEADER not in first.system_text
    assert len(driver.session.ledger) == 0
    (compacted,) = _compacting_turns(driver, reports=1)
    # Until the view changes again, every request sends the same ledger (no cache break).
    for _ in range(2):
        request = driver.turn()
        if not any(isinstance(e, CompactionFinished) for e in request.events):
            assert request.system_text == compacted.system_text


def test_the_ledger_survives_a_resume_from_the_store(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"

    def engine() -> ContextEngine:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # this machine's SQLite warns about the WAL bug
            return ContextEngine(
                model_for_window(8_000, max_output_tokens=1_000),
                store=path,
                policy=ContextPolicy(background=False),
            )

    first = engine()
    try:
        driver = start(first, output=_output)
        _compacting_turns(driver, reports=1)
        ledger = driver.session.ledger
        assert len(ledger) > 0
        session_id = driver.session.id
    finally:
        first.close()

    second = engine()
    try:
        resumed = second.resume(session_id)
        assert resumed.ledger == ledger
        request = resumed.prepare(system=SYSTEM)
        assert ledger.render() in request.system_text
    finally:
        second.close()
