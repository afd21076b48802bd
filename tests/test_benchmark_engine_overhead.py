"""The engine-overhead benchmark's account of what holds a compaction target back."""

from __future__ import annotations

from pathlib import Path

from benchmarks.engine_overhead import (
    COMPACTION_STEPS,
    QUICK_TURNS,
    Bucket,
    GcClock,
    Totals,
    _compaction_diagnosis,
    agent_turn,
    grown_session,
    judge,
    measured_turns,
    side_by_side,
    synthetic_turns,
)


def test_the_compaction_diagnosis_gives_each_steps_share_and_the_turns_cost() -> None:
    whole, accounted, _, strategies = (what for _, _, what in COMPACTION_STEPS[:4])
    bucket = Bucket(10_000, compaction_profiled=3)
    bucket.compaction_steps = {whole: 0.040, accounted: 0.024, strategies: 0.010}
    totals = Totals(steady=10.0, compaction=5.0, steady_turns=20_000, compaction_turns=100)
    totals.steady_added, totals.compaction_added = 10.0, 0.1

    text = _compaction_diagnosis(bucket, totals)

    assert "one compaction turn (50.0 ms on average) costs as much as 100 steady turns" in text
    assert "whole turns, 51.0 ms against 1.00 ms (51)" in text
    assert "one turn in 201 compacts" in text
    assert "3 compaction turns at 10,000 messages" in text
    assert f"{accounted} 60%" in text and f"{strategies} 25%" in text


def test_without_a_profiled_compaction_turn_it_says_so() -> None:
    assert _compaction_diagnosis(Bucket(100)) == "no compaction turn was profiled there"


def test_side_by_side_times_a_turn_at_each_history_length_in_turn(tmp_path: Path) -> None:
    """Every length gets its steady turns in the same rounds; a short length is held in fresh
    sessions, one after another, each grown to it."""
    turns = synthetic_turns(40)
    buckets = [Bucket(20), Bucket(60)]
    with GcClock() as clock:
        engine, session, stream = grown_session(tmp_path / "grown", 60, turns)
        grown = (agent_turn(session, number, turn, clock) for number, turn in stream)
        side_by_side(buckets, turns, grown, tmp_path / "side", clock, quick=True)
        engine.close()

    for bucket in buckets:
        assert 0 < len(bucket.side) <= QUICK_TURNS
        assert len(bucket.side_gc) == len(bucket.side)
        assert all(spent > 0 for spent in bucket.side)
    # 60 rounds at 20 messages: a new session after each measured_turns(20) turns.
    sessions = sorted(p.name for p in (tmp_path / "side").iterdir())
    assert sessions == [f"20-{k}" for k in range(-(-QUICK_TURNS // measured_turns(20)))]


def test_the_flatness_target_reads_the_turns_timed_side_by_side() -> None:
    """Turns timed one length after another can drift with the machine's load; the target
    reads the side-by-side ones when the run has them."""
    buckets = [Bucket(100), Bucket(1_000)]
    for bucket, drifted in zip(buckets, (0.001, 0.003), strict=True):
        bucket.steady = [drifted] * 100
        bucket.steady_gc = [0.0] * 100
        bucket.side = [0.002] * 100
        bucket.side_gc = [0.0] * 100
        bucket.views = [150]

    rows, _ = judge(buckets, Totals(), memory_mib=10.0, memory_at=1_000)

    flat = next(r for r in rows if "flat in history length" in str(r["target"]))
    assert flat["met"] is True
    assert "timed side by side" in str(flat["target"])
    assert str(flat["measured"]).startswith("1.00x")


def test_each_turn_times_its_adds_and_the_compaction_targets_read_whole_turns(
    tmp_path: Path,
) -> None:
    """Work moved out of prepare() into the adds still counts: a compaction turn is judged with
    its adds, and the totals must hold for prepare() alone and for whole turns."""
    engine, session, stream = grown_session(tmp_path, 20, synthetic_turns(10))
    timed = agent_turn(session, *next(stream))
    engine.close()
    assert timed.added > 0 and timed.whole == timed.spent + timed.added

    bucket = Bucket(10_000)
    bucket.steady, bucket.steady_gc, bucket.floor = [0.001] * 10, [0.0] * 10, [0.001] * 10
    bucket.steady_added = [0.001] * 10
    bucket.compaction, bucket.compaction_added = [0.020], [0.010]
    bucket.peer, bucket.middleware, bucket.views = [0.100], [0.005], [150]
    # In prepare() alone, compaction turns cost less than steady ones; whole turns, more.
    moved = Totals(steady=1.0, compaction=0.9, steady_added=0.0, compaction_added=0.2)

    rows, _ = judge([bucket], moved, memory_mib=10.0, memory_at=10_000)

    share = next(r for r in rows if "25 %" in str(r["target"]))
    assert str(share["measured"]).startswith("30.00 ms (20.00 in prepare())")
    assert share["met"] is False
    total = next(r for r in rows if "in total" in str(r["target"]))
    assert total["met"] is False
    assert Totals(steady=1.0, compaction=0.9, steady_added=0.5).cheaper_compaction()
