"""``contextfold run`` end to end against a real llama.cpp server whose context is smaller than
the window it was told: the run must not crash, must persist, learn the server's limit, and
resume (issue 13 §8). The real command runs in a subprocess, through its error boundary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.real_model.conftest import LlamaServerFactory

N_CTX = 4_096
"""The server's context: the coding agent's prompt and tools take about 1,700 tokens of it."""

TASK = "Read these notes and tell me which token fails. " + " ".join(
    f"note {i}: the parser rejects token {i * 7} at column {i}." for i in range(400)
)
"""A task the server counts at about 8,600 tokens: over its context, under the told window."""


def contextfold(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "CONTEXTFOLD_HOME": str(home),
        "CONTEXTFOLD_MAX_OUTPUT_TOKENS": "16",  # the model's words are noise: keep them short
    }
    env.pop("CONTEXTFOLD_RAISE", None)
    script = Path(sys.executable).with_name("contextfold")
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def test_run_learns_the_servers_limit_persists_and_resumes(
    llama_server: LlamaServerFactory, tmp_path: Path
) -> None:
    server = llama_server(N_CTX)
    home = tmp_path / "home"
    common = ["--model", "llamacpp/gemma-3-270m", "--base-url", server.base_url]
    common += ["--approval", "read-only", "--max-steps", "2"]

    first = contextfold(home, "run", *common, "--window", "16384", TASK)

    assert first.returncode == 0, first.stderr
    assert "Traceback" not in first.stderr
    err = " ".join(first.stderr.split())
    assert f"holds {N_CTX} tokens per request" in err  # the told window was doubted up front
    assert f"(its limit: {N_CTX:,}); planning against {N_CTX:,} tokens from now on" in err
    session_id = err.rsplit("session ", 1)[1].split()[0]

    inspected = contextfold(home, "inspect", session_id, "--json")
    assert inspected.returncode == 0, inspected.stderr
    report = json.loads(inspected.stdout)
    assert report["session"]["learned_window"] == N_CTX
    assert any(row["type"] == "overflow_recovered" for row in report["timeline"])

    resumed = contextfold(
        home, "run", *common, "--window", "16384", "--resume", session_id, "Which token?"
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "refused a request" not in resumed.stderr  # planned against the learned limit
    assert f"/ {N_CTX - 16:,} tokens" in " ".join(resumed.stderr.split())


@pytest.mark.parametrize("window", ["256", "1500"])
def test_run_refuses_a_window_too_small_for_its_prompt_and_tools(
    llama_server: LlamaServerFactory, tmp_path: Path, window: str
) -> None:
    server = llama_server(N_CTX)
    args = ["--model", "llamacpp/gemma-3-270m", "--base-url", server.base_url]
    result = contextfold(tmp_path / "home", "run", *args, "--window", window, "Say hi.")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    err = " ".join(result.stderr.split())
    assert f"a window of {int(window):,} tokens is too small" in err
