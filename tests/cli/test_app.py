"""The console entry point, help texts, and colour handling shared by every command."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextfold import SessionNotFoundError, UnknownModelError
from contextfold.cli import app, main
from tests.cli.conftest import PopulatedStore

runner = CliRunner()
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coding_session.json"


def run_main(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setattr(sys, "argv", ["contextfold", *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
    code = exit_info.value.code
    return code if isinstance(code, int) else 1


def test_main_turns_an_error_into_one_clean_line(
    populated_store: PopulatedStore,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("CONTEXTFOLD_RAISE", raising=False)
    code = run_main(
        monkeypatch, "sessions", "show", "sess_nope", "--store", str(populated_store.path)
    )
    err_lines = [
        line for line in capsys.readouterr().err.splitlines() if not line.startswith("warning:")
    ]
    assert code == 1
    assert err_lines == [
        "error: no session with id 'sess_nope'; `contextfold sessions list` shows them"
    ]


def test_main_unknown_model(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CONTEXTFOLD_RAISE", raising=False)
    code = run_main(monkeypatch, "count", str(EXAMPLE), "--model", "gpt-4q")
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out == ""
    assert captured.err.startswith("error: unknown model 'gpt-4q'.")
    assert "Traceback" not in captured.err


def test_main_reraises_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTFOLD_RAISE", "1")
    monkeypatch.setattr(sys, "argv", ["contextfold", "count", str(EXAMPLE), "-m", "gpt-4q"])
    with pytest.raises(UnknownModelError):
        main()


def test_success_exits_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_main(monkeypatch, "count", str(EXAMPLE)) == 0


@pytest.mark.parametrize(
    ("command", "example"),
    [
        (["count"], "contextfold count examples/coding_session.json"),
        (["doctor"], "contextfold doctor"),
        (["config", "show"], "contextfold config show"),
        (["sessions", "list"], "contextfold sessions list --limit 5"),
        (["sessions", "show"], "contextfold sessions show ses_66130b27d9fd"),
        (["sessions", "export"], "contextfold sessions export ses_66130b27d9fd -o session.jsonl"),
        (["sessions", "delete"], "contextfold sessions delete ses_66130b27d9fd --yes"),
        (["inspect"], "contextfold inspect ses_66130b27d9fd"),
    ],
)
def test_every_command_has_help_with_an_example(command: list[str], example: str) -> None:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "Example" in result.stdout
    assert example in result.stdout


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        (["chat"], ("--model", "PROVIDER/NAME", "--window", "TOKENS", "--store", "PATH|URL")),
        (["run"], ("TASK", "--max-steps", "N", "--approval", "MODE")),
        (["replay"], ("FILE|DIR...", "--preset", "PRESET", "--report", "FILE")),
        (["sessions", "delete"], ("SESSION", "--yes")),
    ],
)
def test_help_names_what_each_option_takes_and_flags_take_nothing(
    command: list[str], shown: tuple[str, ...]
) -> None:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for text in shown:
        assert text in result.stdout
    assert "<bool>" not in result.stdout  # --help, --json, --yes: flags show no value


def test_help_paragraphs_flow_to_the_terminal_width() -> None:
    narrow = runner.invoke(app, ["replay", "--help"], env={"COLUMNS": "80"}).stdout
    lines = [line.strip() for line in narrow.splitlines()]
    # The docstring's own line breaks are not kept: no line is left a few words long mid-paragraph.
    start = next(i for i, line in enumerate(lines) if line.startswith("Replay agent transcripts"))
    paragraph = lines[start + 2 : lines.index("", start + 2)]
    assert len(paragraph) >= 3 and all(len(line) > 60 for line in paragraph[:-1])


def test_top_level_help_lists_the_commands() -> None:
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    for name in ("count", "doctor", "config", "sessions", "inspect"):
        assert f" {name} " in result.stdout


def test_piped_output_has_no_ansi_codes() -> None:
    result = runner.invoke(app, ["doctor"])
    assert "\x1b[" not in result.output


def test_no_color_is_respected_on_a_terminal() -> None:
    # FORCE_COLOR makes rich treat the test's output as a terminal.
    colored = runner.invoke(app, ["doctor"], env={"FORCE_COLOR": "1"}).stdout
    assert "\x1b[32m" in colored  # "ok" in green
    plain = runner.invoke(app, ["doctor"], env={"FORCE_COLOR": "1", "NO_COLOR": "1"}).stdout
    assert "\x1b[32m" not in plain
    assert "\x1b[31m" not in plain


def test_missing_session_through_the_runner_keeps_the_exception(
    populated_store: PopulatedStore,
) -> None:
    # Under tests the boundary is not in the way: the exception reaches the test as it is.
    result = runner.invoke(app, ["inspect", "x", "--store", str(populated_store.path)])
    assert isinstance(result.exception, SessionNotFoundError)
