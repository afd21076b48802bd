"""``contextfold replay --json`` gives the same bytes on every run.

Each run is its own process, as a user's runs are: the clock, the random part of fresh message
ids and Python's string hashing (``PYTHONHASHSEED``) all differ between them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import shared_path
from tests.replay.conftest import coding_session

REPLAY_SECONDS = 300
"""Longest one replay process may take before the test fails (a hung run)."""

GENERATED_STEPS = 14
"""Tool calls in the generated session: enough that every default preset compacts it at
:data:`GENERATED_WINDOW`, and that its summaries cite tool results."""
GENERATED_WINDOW = "4000"


def replay_stdout(path: Path, *args: str, hash_seed: str) -> str:
    """``contextfold replay PATH --json ARGS`` in a fresh process with its own hash seed."""
    command = [sys.executable, "-c", "from contextfold.cli import main; main()"]
    result = subprocess.run(
        [*command, "replay", str(path), "--json", *args],
        capture_output=True,
        text=True,
        timeout=REPLAY_SECONDS,
        check=False,
        env={**os.environ, "PYTHONHASHSEED": hash_seed},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def _assert_same_bytes(path: Path, *args: str) -> dict[str, Any]:
    first = replay_stdout(path, *args, hash_seed="1")
    second = replay_stdout(path, *args, hash_seed="2")
    assert first == second
    return dict(json.loads(first))


def test_two_runs_of_a_generated_session_print_the_same_json(tmp_path: Path) -> None:
    path = tmp_path / "session.json"
    path.write_text(json.dumps(coding_session(GENERATED_STEPS)), encoding="utf-8")
    data = _assert_same_bytes(path, "--window", GENERATED_WINDOW)
    (entry,) = data["transcripts"]
    # The figures compared are those of compacted runs whose summaries cite messages.
    summaries = [s["text"] for run in entry["presets"].values() for s in run["summaries"]]
    assert summaries and all("[src: " in text for text in summaries)


@pytest.mark.shared_data
@pytest.mark.slow
def test_two_runs_of_a_shared_trajectory_print_the_same_json() -> None:
    path = shared_path(
        "trajectories",
        "mini-swe-agent-deepseek",
        "dev_marshmallow-code__marshmallow-1343_marshmallow-code__marshmallow-1343.traj.json",
    )
    data = _assert_same_bytes(path, "--window", "32000")
    (entry,) = data["transcripts"]
    assert any(run["compactions"] for run in entry["presets"].values())
