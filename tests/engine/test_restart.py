"""The restart preset: wind down once, then continue in a child session seeded with the task,
the summary and the last turns; refs of the parent stay readable from the child."""

from __future__ import annotations

from contextfold import Compactor, RestartPolicy, SummaryPart
from contextfold.budget import Zone
from contextfold.events import CompactionFinished, SessionRestarted
from tests.engine.helpers import TASK, Driver, EngineFactory, listing, start

WIND_DOWN = "restart soon"


def _big_first_output(turn: int) -> str:
    # The first output is large enough to be offloaded to the store behind a ref.
    return listing(turn, lines=2_000) if turn == 1 else listing(turn)


def test_wind_down_note_then_a_child_session(make_engine: EngineFactory) -> None:
    engine, sink = make_engine(compactor="restart")
    driver = start(engine, output=_big_first_output)
    parent = driver.session.id
    driver.turn()
    ref = driver.session.view[-1].tool_results[0].ref
    assert ref is not None

    wind_down = driver.until(lambda r: WIND_DOWN in r.note)
    assert wind_down.zone in (Zone.COMPACT, Zone.BLOCK)
    assert wind_down.messages[-1].text == wind_down.note  # told last, never stored
    assert driver.session.id == parent and wind_down.compaction is None
    restarted = driver.turn()

    child = driver.session.id
    assert child != parent
    assert engine.store.get_session(child).parent_id == parent
    assert WIND_DOWN not in restarted.note  # the note was sent once
    assert sum(WIND_DOWN in r.note for r in driver.requests) == 1
    event = next(e for e in restarted.events if isinstance(e, SessionRestarted))
    assert (event.parent_id, event.child_id, event.restart_number) == (parent, child, 1)
    assert sink.of_type(SessionRestarted) == [event]
    # The child's transcript: restart marker, the task verbatim, the summary, the last turns.
    seeded = [m for _, m in engine.store.iter_messages(child)]
    assert seeded[0].meta.kind == "restart_marker" and "session #2" in seeded[0].text
    assert seeded[1].text == TASK
    assert any(isinstance(p, SummaryPart) for p in seeded[2].parts)
    carried = [m for m in seeded[3:] if "carried" in m.meta.flags]
    assert carried and any(m.role == "assistant" for m in carried)
    assert event.carried_messages == len(restarted.messages)  # the seed is what was sent
    # The request describes the new, small view (figures re-measured after the restart).
    assert restarted.budget.fraction < engine.policy.thresholds.mask_at
    assert restarted.note == ""  # no stale "[Context: 8x% used]" from before the restart
    assert [m.id for m in restarted.messages] == [m.id for m in seeded[: len(restarted.messages)]]
    # A ref from the parent session is readable from the child.
    page = driver.session.read_result(ref, start_line=1, end_line=2)
    assert not page.is_error and "src/mod1.py:0" in page.content


def test_max_restarts_then_compaction_in_place(make_engine: EngineFactory) -> None:
    compactor = Compactor.preset("restart", restart=RestartPolicy(max_restarts=1))
    engine, sink = make_engine(compactor=compactor)
    driver = start(engine)
    driver.until(lambda r: bool(r.events) and isinstance(r.events[-1], SessionRestarted))
    child = driver.session.id
    compacted = driver.until_zone(Zone.COMPACT)

    assert driver.session.id == child and driver.session.restarts == 1
    assert len(sink.of_type(SessionRestarted)) == 1
    assert sum(WIND_DOWN in r.note for r in driver.requests) == 1
    finished = [e for e in compacted.events if isinstance(e, CompactionFinished)]
    assert finished and finished[-1].trigger == "threshold"
    assert compacted.budget.fraction <= engine.policy.thresholds.compact_target + 0.05


def test_a_jump_into_the_block_zone_restarts_at_once(make_engine: EngineFactory) -> None:
    # No wind-down turn when the window has no room left for one: the request must fit now.
    engine, sink = make_engine(compactor="restart")
    driver = start(engine)
    driver.until(lambda r: r.budget.fraction > 0.62)
    assert not sink.of_type(SessionRestarted)
    words = " ".join(f"constraint{i} must hold for the parser" for i in range(700))
    driver.session.add_user(f"Before you go on, read these carefully: {words}")
    request = driver.prepare()

    assert request.zone in (Zone.BLOCK, Zone.OVERFLOW)  # the zone before the engine acted
    assert request.tokens <= engine.effective_window
    assert driver.session.restarts == 1 and WIND_DOWN not in request.note


def test_a_restart_on_request_continues_the_presets_chain_with_the_same_metadata(
    make_engine: EngineFactory,
) -> None:
    from contextfold.agent import restart_session

    engine, sink = make_engine(compactor="restart")
    session = engine.new_session(title="chain", metadata={"cwd": "/work/textkit"})
    session.add_user(TASK)
    driver = Driver(session)
    first = driver.session.id
    driver.until(lambda r: any(isinstance(e, SessionRestarted) for e in r.events))
    by_preset = driver.session.id

    by_hand = restart_session(driver.session, focus="the parser")

    # One restart: the same metadata (the parent's, with the chain's number) either way.
    assert engine.store.get_session(by_preset).metadata == {
        "cwd": "/work/textkit",
        "restart_number": 1,
    }
    assert engine.store.get_session(by_hand.id).metadata == {
        "cwd": "/work/textkit",
        "restart_number": 2,
    }
    assert engine.store.get_session(by_hand.id).parent_id == by_preset != first
    events = sink.of_type(SessionRestarted)
    assert [(e.restart_number, e.reason) for e in events] == [(1, "context_full"), (2, "manual")]
    assert by_hand.restarts == 2 and driver.session.restarts == 1
    seeded = [m for _, m in engine.store.iter_messages(by_hand.id)]
    assert "session #3" in seeded[0].text  # numbered on from the preset's child (#2)
    assert driver.session.id == by_preset  # the session asked stays where it was
