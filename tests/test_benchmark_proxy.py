"""The proxy benchmark's transcript replay gives the same upstream requests on every run."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import benchmarks.proxy as bench
from benchmarks._proxy_workload import MODEL, tool_output
from benchmarks._results import ROOT
from tests.proxy.upstreams import ScriptedUpstream


def _long_transcript(path: Path, turns: int = 18) -> Path:
    """A Messages-API conversation whose tool outputs outgrow the replay's 32k window, so the
    proxy summarizes (summaries and the ledger cite messages by id) within a few requests."""
    rng = random.Random(7)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    for turn in range(turns):
        call = f"toolu_{turn:04d}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Reading file_{turn}.py. " + tool_output(rng, 600)},
                    {
                        "type": "tool_use",
                        "id": call,
                        "name": "bash",
                        "input": {"command": f"cat src/file_{turn}.py"},
                    },
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call, "content": tool_output(rng, 300)}
                ],
            }
        )
    messages.append({"role": "assistant", "content": "Done."})
    path.write_text(json.dumps({"model": MODEL, "messages": messages}))
    return path


def upstream_bodies(transcript: Path, store: Path) -> list[dict[str, Any]]:
    """The bodies the proxy sent upstream in the benchmark's replay of ``transcript``."""
    upstreams: list[ScriptedUpstream] = []

    class Kept(ScriptedUpstream):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            upstreams.append(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bench, "ScriptedUpstream", Kept)
        row = bench.replay_transcript(transcript, 30, store)
    assert row.errors == 0
    return [r.body for r in upstreams[0].requests]


def test_a_replay_sends_the_same_requests_upstream_on_every_run(tmp_path: Path) -> None:
    """Run twice, in processes with different hash seeds (set and dict order, and the ids the
    proxy makes: summaries cite messages by id, so their clock and random digits changed how many
    tokens a summary took)."""
    transcript = _long_transcript(tmp_path / "conversation.json")
    runs = []
    for seed in ("1", "2"):
        folder = tmp_path / f"seed-{seed}"
        folder.mkdir()
        script = (
            "import json, sys; from pathlib import Path; "
            "from tests.test_benchmark_proxy import upstream_bodies; "
            "json.dump(upstream_bodies(Path(sys.argv[1]), Path(sys.argv[2])), sys.stdout)"
        )
        env = {**os.environ, "PYTHONHASHSEED": seed, "CONTEXTFOLD_HOME": str(folder)}
        done = subprocess.run(
            [sys.executable, "-c", script, str(transcript), str(folder / "store.db")],
            env=env, capture_output=True, text=True, check=False, cwd=ROOT,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout))
    first, second = runs
    assert any("[Summary of the earlier conversation" in json.dumps(b) for b in first)
    assert first == second
