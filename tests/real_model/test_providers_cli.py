"""The CLI's agent setup against a real llama.cpp server: the window of a ``llamacpp/`` model is
the server's, and a planned window the server cannot hold is said out loud before any work."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextfold.cli._agent_setup import agent_settings, build_agent
from tests.real_model.conftest import LlamaServerFactory

N_CTX = 4096
"""The server's context: room for the coding agent's prompt and tools (about 1,700 tokens)."""


def build(tmp_path: Path, model: str, base_url: str, window: int | None = None) -> int:
    """The context window of the agent the CLI builds for these options."""
    settings = agent_settings(model=model, base_url=base_url, window=window, approval="read-only")
    agent = build_agent(settings, root=tmp_path, approve=None, quiet_sqlite_warning=True)
    try:
        return agent.engine.model.context_window
    finally:
        agent.close()


def test_a_llamacpp_model_gets_the_servers_window(
    llama_server: LlamaServerFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = llama_server(N_CTX)
    assert build(tmp_path, "llamacpp/gemma-3-270m", server.base_url) == N_CTX
    assert "warning" not in capsys.readouterr().err


def test_a_window_larger_than_the_server_is_warned_about(
    llama_server: LlamaServerFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = llama_server(N_CTX)
    assert build(tmp_path, "llamacpp/gemma-3-270m", server.base_url, 2 * N_CTX) == 2 * N_CTX
    err = capsys.readouterr().err
    assert "warning:" in err and f"--window {N_CTX}" in err


def test_ollama_at_a_llamacpp_server_is_said_and_goes_on(
    llama_server: LlamaServerFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = llama_server(N_CTX)
    assert build(tmp_path, "ollama/gemma-3-270m", server.base_url, 2 * N_CTX) == 2 * N_CTX
    err = " ".join(capsys.readouterr().err.split())  # the console wraps long lines
    assert "warning:" in err and "/api/show" in err and f"{N_CTX} tokens per request" in err


def test_a_window_set_in_the_config_wins_over_the_server(
    llama_server: LlamaServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = llama_server(N_CTX)
    (tmp_path / "contextfold.toml").write_text(
        '[models."llamacpp/gemma-3-270m"]\ncontext_window = 4000\n'
    )
    monkeypatch.chdir(tmp_path)
    assert build(tmp_path, "llamacpp/gemma-3-270m", server.base_url) == 4000
