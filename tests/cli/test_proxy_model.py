"""``contextfold proxy --model``: a model it cannot plan for is refused before serving."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from contextfold.cli import main


def run_proxy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: str) -> tuple[int, Any]:
    served: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **_: served.append(app))
    store = str(tmp_path / "store.db")
    argv = ["contextfold", "proxy", "-u", "http://127.0.0.1:9", "--store", store, *args]
    monkeypatch.setattr(sys, "argv", argv)
    try:
        main()
    except SystemExit as exit_info:
        code = exit_info.code
        return (code if isinstance(code, int) else 1), served
    return 0, served


def test_an_unknown_model_is_refused_at_start_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, served = run_proxy(monkeypatch, tmp_path, "--model", "no-such/model")
    err = capsys.readouterr().err
    assert (code, served) == (1, [])
    assert err.startswith("error: unknown model 'no-such/model'")
    assert "--window" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_the_refusal_suggests_close_names(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = run_proxy(monkeypatch, tmp_path, "--model", "claude-sonet-4-5")
    assert code == 1
    assert "did you mean claude-sonnet-4-5" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args", [["--model", "no-such/model", "--window", "8192"], ["--model", "qwen3:8b"]]
)
def test_a_model_with_a_known_window_is_served(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: list[str]
) -> None:
    code, served = run_proxy(monkeypatch, tmp_path, *args)
    assert code == 0 and len(served) == 1
