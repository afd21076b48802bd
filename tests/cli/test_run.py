"""``contextfold run``: the answer alone on stdout, or one JSON event per line with --json."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextfold import ConfigError, Message, ScriptedModel, ToolCallPart
from contextfold.cli import _agent_setup as agent_setup
from contextfold.cli import app

runner = CliRunner()


def call(name: str, **args: Any) -> Message:
    return Message.assistant(f"Using {name}.", [ToolCallPart.from_args(f"c_{name}", name, args)])


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.txt").write_text("alpha\nbeta\n")
    monkeypatch.chdir(folder)
    yield folder


def script(monkeypatch: pytest.MonkeyPatch, *items: Any) -> ScriptedModel:
    """Make `--model scripted` answer with ``items`` (the real factory would echo)."""
    model = ScriptedModel(list(items))
    monkeypatch.setattr(agent_setup, "model_from_name", lambda *a, **k: model)
    return model


def invoke(*args: str, input: str | None = None) -> Any:
    store = Path.cwd().parent / "sessions.db"
    return runner.invoke(
        app,
        ["run", "--model", "scripted", "--store", str(store), *args],
        input=input,
    )


def test_json_prints_one_event_per_line_and_a_final_record(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script(monkeypatch, call("read_file", path="notes.txt"), call("nope"), "It says alpha, beta.")

    result = invoke("--json", "What do the notes say?")

    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [r["type"] for r in records]
    assert kinds[0] == "session" and kinds[-1] == "final"
    assert {"text", "tool_call", "tool_result", "token_usage"} <= set(kinds)
    calls = [r for r in records if r["type"] == "tool_call"]
    assert calls[0] == {
        "type": "tool_call",
        "call_id": "c_read_file",
        "name": "read_file",
        "arguments": {"path": "notes.txt"},
    }
    results = [r for r in records if r["type"] == "tool_result"]
    assert "alpha" in results[0]["content"] and results[0]["is_error"] is False
    assert results[1]["is_error"] is True  # an unknown tool is the model's problem, not ours
    final = records[-1]
    assert final["text"] == "It says alpha, beta."
    assert (final["stop"], final["steps"], final["tool_calls"]) == ("answered", 3, 2)
    assert final["session_id"] == records[0]["session_id"]
    assert final["usage"]["input_tokens"] > 0


def test_plain_output_is_the_answer_alone(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script(monkeypatch, call("list_dir"), "Two files: notes.txt.")

    result = invoke("List the files")

    assert result.exit_code == 0, result.output
    assert result.stdout == "Two files: notes.txt.\n"
    assert "list_dir" in result.stderr  # progress went to stderr


def test_ask_mode_without_a_terminal_refuses_writes_and_says_why(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = script(
        monkeypatch, call("write_file", path="new.txt", content="x"), "I could not write it."
    )

    result = invoke("Write new.txt")

    assert result.exit_code == 0
    assert not (project / "new.txt").exists()
    assert "--approval auto" in result.stderr
    refusal = model.requests[1].messages[-1].tool_results[0]
    assert refusal.is_error and "declined" in refusal.content


def test_auto_approval_lets_the_agent_write(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script(monkeypatch, call("write_file", path="new.txt", content="hello\n"), "Written.")

    result = invoke("--approval", "auto", "Write new.txt")

    assert result.exit_code == 0
    assert (project / "new.txt").read_text() == "hello\n"


def test_the_step_limit_exits_2_with_a_hint_to_resume(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script(monkeypatch, call("list_dir"), call("list_dir"), "never reached")

    result = invoke("--max-steps", "2", "Loop")

    assert result.exit_code == 2
    assert "--resume" in result.stderr


def test_resume_continues_a_stored_session(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script(monkeypatch, "First answer.")
    first = invoke("--json", "First task")
    session_id = json.loads(first.stdout.splitlines()[-1])["session_id"]
    model = script(monkeypatch, "Second answer.")

    second = invoke("--resume", session_id, "Second task")

    assert second.exit_code == 0
    sent = [m.text for m in model.requests[0].messages if m.role in ("user", "assistant")]
    assert sent[:3] == ["First task", "First answer.", "Second task"]


def test_the_task_can_come_from_stdin(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = script(monkeypatch, "Done.")

    result = invoke("-", input="Task from a pipe\n")

    assert result.exit_code == 0
    assert model.requests[0].messages[0].text == "Task from a pipe"


def test_a_model_the_registry_does_not_know_needs_a_window(project: Path) -> None:
    result = runner.invoke(app, ["run", "--model", "ollama/some-local-model", "Hi"])

    assert result.exit_code == 1
    assert "--window" in str(result.exception)


def test_options_are_settings_of_the_highest_layer(project: Path) -> None:
    (project / "contextfold.toml").write_text('preset = "window"\napproval = "read-only"\n')

    settings = agent_settings_for(preset="summarize")

    assert settings.get("preset") == "summarize"
    assert settings.source("preset") == "argument preset"
    assert settings.get("approval") == "read-only"


def agent_settings_for(**options: Any) -> Any:
    return agent_setup.agent_settings(**options)


def test_a_window_too_small_for_the_prompt_and_tools_is_refused_before_any_work(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = script(monkeypatch, "never asked")

    result = invoke("--window", "256", "What do the notes say?")

    # The CLI's error boundary (main) prints our errors as one line; under the test runner the
    # error itself comes back.
    assert isinstance(result.exception, ConfigError)
    message = str(result.exception)
    assert "a window of 256 tokens is too small" in message
    assert "tool definitions" in message and "Give a window of at least" in message
    assert model.requests == []  # nothing was sent
    assert _stored_sessions(project) == 0


def _stored_sessions(project: Path) -> int:
    from contextfold.store import open_store

    with open_store(project.parent / "sessions.db") as store:
        return len(store.list_sessions())


# A GitHub token's shape (a rule of its own) and a .env line, built so no secret sits in the source.
GITHUB_TOKEN = "ghp_" + "Zx9" * 12
ENV_LINE = "DB_PASSWORD=" + "q7Rt2" * 4


def test_json_output_is_redacted_like_the_store(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / ".env").write_text(f"GITHUB_TOKEN={GITHUB_TOKEN}\n{ENV_LINE}\n")
    script(
        monkeypatch,
        call("read_file", path=".env"),
        call("write_file", path="copy.env", content=f"token {GITHUB_TOKEN}\n"),
        f"The token is {GITHUB_TOKEN}.",
    )

    result = invoke("--json", "--approval", "auto", "What is in .env?")

    assert result.exit_code == 0, result.output
    assert GITHUB_TOKEN not in result.stdout
    assert "q7Rt2q7Rt2" not in result.stdout
    records = [json.loads(line) for line in result.stdout.splitlines()]
    read = next(r for r in records if r["type"] == "tool_result")
    assert "[REDACTED:" in read["content"] and "GITHUB_TOKEN=" in read["content"]
    written = next(r for r in records if r["type"] == "tool_call" and r["name"] == "write_file")
    assert written["arguments"]["path"] == "copy.env"  # the structure survives redaction
    assert "[REDACTED:" in written["arguments"]["content"]
    assert "[REDACTED:" in records[-1]["text"]
    # Only what is printed is redacted: the file the agent wrote holds what it was asked to.
    assert GITHUB_TOKEN in (project / "copy.env").read_text()


def test_json_output_is_left_alone_when_redaction_is_off(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTEXTFOLD_REDACT", "false")
    (project / ".env").write_text(f"GITHUB_TOKEN={GITHUB_TOKEN}\n")
    script(monkeypatch, call("read_file", path=".env"), "Done.")
    result = invoke("--json", "What is in .env?")
    assert result.exit_code == 0, result.output
    assert GITHUB_TOKEN in result.stdout


def test_an_agents_md_linked_outside_is_not_read_and_the_user_is_warned(
    project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    secret = tmp_path / "credentials"
    secret.write_text(f"aws = {GITHUB_TOKEN}\n")
    (project / ".git").mkdir()
    (project / "AGENTS.md").symlink_to(secret)
    model = script(monkeypatch, "Nothing to do.")

    result = invoke("--json", "Hi")

    assert result.exit_code == 0, result.output
    assert f"warning: instructions: {project / 'AGENTS.md'}: not read" in " ".join(
        result.stderr.split()
    )
    assert "outside the project" in result.stderr
    assert model.requests
    assert all(GITHUB_TOKEN not in repr(request) for request in model.requests)
