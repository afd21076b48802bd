"""``contextfold chat`` and loss reports (issue 19): after an automatic compaction the chat says
how many facts left the view and where they can be read; with ``--pause-on-loss`` it lists the
lost ones and asks before the agent goes on."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextfold import Message, ScriptedModel, ToolCallPart
from contextfold.cli import _agent_setup as agent_setup
from contextfold.cli import app
from contextfold.providers import ChatRequest

runner = CliRunner()

STEPS = 40
"""Tool calls the model makes for the task: enough to fill a small window several times."""
LOSS_LINE = re.compile(
    r"compaction: .*?(\d+) facts? out of view \((\d+) in summary, .*?(\d+) recoverable through "
    r"refs, (\d+) lost\)"
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / ".git").mkdir()
    for n in range(STEPS):
        (folder / f"mod{n}.py").write_text(
            "\n".join(f"def f{i}(x):\n    return x * {i} + {n}" for i in range(30)) + "\n"
        )
    monkeypatch.chdir(folder)
    monkeypatch.setenv("CONTEXTFOLD_HOME", str(tmp_path / "home"))
    yield folder


def _written(step: int) -> str:
    return f"generated/step_{step:03d}_module_with_a_long_descriptive_name.py"


def _model(monkeypatch: pytest.MonkeyPatch) -> ScriptedModel:
    """A model that writes one module per step with a shell command whose output is empty (the
    sliding window drops the calls, and with them the files they wrote: more than the ledger
    keeps, and no output names them), and answers once it wrote them all."""

    def respond(request: ChatRequest) -> str | Message:
        step = len(model.requests) - 1
        if step >= STEPS:
            return "All modules written."
        body = " ".join(f"def f{i}(x): return x * {i} + {step};" for i in range(30))
        command = f"mkdir -p generated && echo '{body}' > {_written(step)}"
        call = ToolCallPart.from_args(f"call_{step}", "shell", {"command": command})
        return Message.assistant(f"Writing module {step}.", [call])

    model = ScriptedModel(default=respond)
    monkeypatch.setattr(agent_setup, "model_from_name", lambda *a, **k: model)
    return model


def _chat(project: Path, *lines: str, options: tuple[str, ...] = ()) -> Any:
    store = project.parent / "sessions.db"
    args = ["chat", "--model", "scripted", "--store", str(store), "--window", "12000"]
    args += ["--preset", "window", "--approval", "auto", *options]
    text = "".join(line + "\n" for line in lines)
    return runner.invoke(app, args, input=text, env={"NO_COLOR": "1", "COLUMNS": "200"})


def test_the_chat_says_what_a_compaction_took_out_of_view(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _model(monkeypatch)
    result = _chat(project, "write every module", "/quit")
    assert result.exit_code == 0, result.output
    out = result.stdout
    lines = LOSS_LINE.findall(out)
    assert lines, out
    for total, *counts in lines:
        assert int(total) >= sum(int(c) for c in counts)
    assert "All modules written." in out  # nothing stopped the task
    assert "Continue? [Y/n]" not in out


def test_pause_on_loss_asks_and_a_no_stops_the_task(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _model(monkeypatch)
    result = _chat(project, "write every module", "n", "/quit", options=("--pause-on-loss",))
    assert result.exit_code == 0, result.output
    out = result.stdout
    question = out.index("Continue? [Y/n]")
    listing = out[:question].rsplit("that nothing in it can bring back:", 1)[-1]
    assert "files_modified:" in listing  # the lost facts are listed before the question
    assert "Stopped." in out[question:]
    assert "All modules written." not in out
    calls = len(model.requests)
    assert calls < STEPS  # the agent did not go on after the no


def test_pause_on_loss_goes_on_after_a_yes(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _model(monkeypatch)
    answers = ["y"] * 20  # one per compaction that loses something
    result = _chat(project, "write every module", *answers, "/quit", options=("--pause-on-loss",))
    assert result.exit_code == 0, result.output
    assert "Continue? [Y/n]" in result.stdout
    assert "All modules written." in result.stdout


def test_the_flag_is_documented() -> None:
    result = runner.invoke(app, ["chat", "--help"], env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert result.exit_code == 0
    assert "--pause-on-loss" in result.stdout
    assert "ask whether the agent may go on" in " ".join(result.stdout.split())


def test_inspect_lists_the_loss_reports(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _model(monkeypatch)
    chat = _chat(project, "write every module", "/quit")
    session_id = re.search(r"--resume (ses_\w+)", chat.stdout).group(1)  # type: ignore[union-attr]
    store = str(project.parent / "sessions.db")
    env = {"NO_COLOR": "1", "COLUMNS": "200"}

    shown = runner.invoke(app, ["inspect", session_id, "--store", store], env=env)
    assert shown.exit_code == 0, shown.output
    reported = LOSS_LINE.findall(chat.stdout)
    rows = re.findall(r"loss report: .*?(\d+) facts? out of view", shown.stdout)
    assert [int(n) for n in rows] == [int(total) for total, *_ in reported]
    assert "lost: " in shown.stdout

    as_json = runner.invoke(app, ["inspect", session_id, "--store", store, "--json"], env=env)
    data = json.loads(as_json.stdout)
    losses = [row for row in data["timeline"] if row["type"] == "loss"]
    assert len(losses) == len(reported)
    assert data["summary"]["facts_lost"] == sum(row["lost"] for row in losses) > 0
    assert all(len(row["lost_items"]) <= row["lost"] for row in losses)
