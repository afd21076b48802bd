"""benchmarks/integrations.py: a run is repeatable (the same requests on every run)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai")

from benchmarks.baselines import wire_segments
from benchmarks.integrations import (
    CONFIGS,
    Run,
    Script,
    load_script,
    replay,
    run_pydantic_ai,
    timed_runs,
)
from contextfold.hosts import digests
from contextfold.redaction import redactor
from contextfold.tokens import counters
from tests.conftest import shared_path


def _requests(run: Run) -> list[object]:
    return [wire_segments(r.messages, r.system, r.tools, "openai") for r in run.inputs]


def test_two_replays_send_the_same_requests(tmp_path: Path) -> None:
    """Fresh ids hold the clock and a random part, and they reach what the model reads (refs,
    summaries citing messages): two runs once differed by 1,443 input tokens on one transcript.
    A replay makes its ids reproducibly."""
    folder = shared_path("trajectories", "mini-swe-agent-deepseek")
    # 45 calls: the first compaction comes at call 44 (two plain runs differed from there).
    script = load_script(next(folder.glob("*django-14016*.json")), 45)
    runs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        runs.append(replay(run_pydantic_ai, script, "contextfold", tmp_path / name))
    assert not runs[0].error
    assert _requests(runs[0]) == _requests(runs[1])


def test_the_configurations_take_turns(tmp_path: Path) -> None:
    """Each configuration runs ``repeats`` times, in rounds that each start with another one:
    a load drifting over the runs weighs on every configuration alike."""
    order: list[str] = []

    def runner(script: Script, config: str, folder: Path) -> Run:
        order.append(config)
        return Run("fake", config, script.name, 0.0, [])

    script = Script("t", "", "task", [], {}, [])
    runs = timed_runs(runner, script, 4, str(tmp_path), "fake", 0)
    assert {config: len(r) for config, r in runs.items()} == dict.fromkeys(CONFIGS, 4)
    rounds = [order[k : k + len(CONFIGS)] for k in range(0, len(order), len(CONFIGS))]
    assert [r[0] for r in rounds] == [*CONFIGS, CONFIGS[0]]
    assert all(sorted(r) == sorted(CONFIGS) for r in rounds)


def test_a_run_starts_without_what_earlier_runs_left_in_the_caches(tmp_path: Path) -> None:
    """A repeat of a transcript found its texts counted, digested and redacted by the run
    before, and cost less than a conversation ever does: each run starts with them empty."""
    folder = shared_path("trajectories", "mini-swe-agent-deepseek")
    script = load_script(next(folder.glob("*django-14016*.json")), 3)
    (tmp_path / "a").mkdir()
    assert not replay(run_pydantic_ai, script, "contextfold", tmp_path / "a").error

    def held() -> dict[str, int]:
        return {
            "digests": len(digests._digests),
            "redactions": len(redactor._LONG_TEXTS) + redactor._redact_short.cache_info().currsize,
            "counters": len(counters._shared_counters),
        }

    left = held()
    assert all(left.values()), left  # the run used each of them
    at_start: list[dict[str, int]] = []

    def runner(script: Script, config: str, folder: Path) -> Run:
        at_start.append(held())
        return Run("fake", config, script.name, 0.0, [])

    replay(runner, script, "contextfold", tmp_path)
    assert at_start == [dict.fromkeys(left, 0)]
