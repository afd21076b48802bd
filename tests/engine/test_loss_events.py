"""Loss reports and the artifact ledger in a session (issue 19): every compaction and mask batch
is followed by a ``LossReported`` whose where-readable answers hold in the request that is sent,
and the ledger rides in the system prompt, refreshed only when the view changed, and survives a
resume from the store."""

from __future__ import annotations

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
    """A listing with a build id in the middle: an identifier a masked output takes away (its
    placeholder keeps the first and last lines)."""
    lines = listing(turn, lines=12).splitlines()
    return "\n".join([*lines[:6], f"build {turn:04d}a{turn:03d}f9c done", *lines[6:]])


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
    driver = start(engine, output=_output)
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
            elif item["where"] == "ref":
                read = session.read_result(str(item["ref"]))
                assert not read.is_error, read.content
        # A compaction's own request already carries the refreshed ledger.
        assert LEDGER_HEADER in request.system_text
    assert session.ledger.render() in requests[-1].system_text
    assert event_from_dict(reports[-1].to_dict()) == reports[-1]


def _job_ids(turn: int) -> list[str]:
    return [f"{turn:08x}-0000-4000-8000-{i:012x}" for i in range(3)]


def _model_naming_jobs() -> ScriptedModel:
    """A model whose every reply names three job ids in its own text, then runs a command."""

    def respond(request: ChatRequest) -> Message:
        turn = len(model.requests)
        call = ToolCallPart.from_args(f"call_{turn}", "bash", {"command": f"cat src/mod{turn}.py"})
        return Message.assistant(f"Queued jobs {', '.join(_job_ids(turn))}.", [call])

    model = ScriptedModel(default=respond)
    return model


def test_what_nothing_holds_is_reported_as_lost(make_engine: EngineFactory) -> None:
    # A sliding window drops whole turns: the ids the model wrote leave with its text, with no
    # output to read them back from, and more of them than the ledger keeps.
    engine, sink = make_engine(compactor="window")
    driver = start(engine, model=_model_naming_jobs())
    request = _compacting_turns(driver, reports=1)[-1]
    (report,) = sink.of_type(LossReported)
    lost = [item for item in report.items if item["where"] == "lost"]
    assert len(lost) == min(report.lost, MAX_LISTED_ITEMS) > 0  # the listing is capped
    sent = _normalized(request.system_text + "\n".join(m.text for m in request.messages))
    assert any(item["text"] in _job_ids(1) for item in lost)
    for item in lost:
        assert item["ref"] is None
        assert _normalized(str(item["text"])) not in sent  # nowhere the model can read
    # The newest ids are in the ledger, which this very request carries.
    assert report.in_ledger > 0
    assert all(_normalized(i.text) in sent for i in driver.session.ledger.items)


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
