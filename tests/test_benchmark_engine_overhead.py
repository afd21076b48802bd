"""The engine-overhead benchmark's account of what holds a compaction target back."""

from __future__ import annotations

from benchmarks.engine_overhead import COMPACTION_STEPS, Bucket, Totals, _compaction_diagnosis


def test_the_compaction_diagnosis_gives_each_steps_share_and_the_turns_cost() -> None:
    whole, accounted, _, strategies = (what for _, _, what in COMPACTION_STEPS[:4])
    bucket = Bucket(10_000, compaction_profiled=3)
    bucket.compaction_steps = {whole: 0.040, accounted: 0.024, strategies: 0.010}
    totals = Totals(steady=10.0, compaction=5.0, steady_turns=20_000, compaction_turns=100)

    text = _compaction_diagnosis(bucket, totals)

    assert "one compaction turn (50.0 ms on average) costs as much as 100 steady turns" in text
    assert "one turn in 201 compacts" in text
    assert "3 compaction turns at 10,000 messages" in text
    assert f"{accounted} 60%" in text and f"{strategies} 25%" in text


def test_without_a_profiled_compaction_turn_it_says_so() -> None:
    assert _compaction_diagnosis(Bucket(100)) == "no compaction turn was profiled there"
