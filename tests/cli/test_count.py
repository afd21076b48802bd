"""``contextfold count``: the bundled example, shared transcripts, bad files, options."""

from __future__ import annotations

import json
import shutil
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextfold import UnknownModelError
from contextfold.cli import app
from contextfold.cli._tally import DEFAULT_MODEL, KINDS, ROLES
from contextfold.transcripts import SUPPORTED_FORMATS, load_transcripts
from tests.conftest import shared_path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coding_session.json"
runner = CliRunner()


def count_json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["count", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_bundled_example_is_a_realistic_session() -> None:
    (transcript,) = load_transcripts(EXAMPLE)
    assert transcript.format == "openai-messages"
    assert 20 <= len(transcript.messages) <= 40
    assert {m.role for m in transcript.messages} == {"system", "user", "assistant", "tool"}
    results = [r.content for m in transcript.messages for r in m.tool_results]
    assert any("Traceback" in r or "AssertionError" in r for r in results)
    assert max(len(r) for r in results) > 5_000  # at least one large tool output
    assert not transcript.unanswered_calls()


def test_count_example_shows_roles_kinds_counter_and_window() -> None:
    result = runner.invoke(app, ["count", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert str(EXAMPLE) in out
    assert "openai-messages · 29 messages" in out
    assert "model gpt-4o (transcript) · window 128,000 · counter o200k_base (exact)" in out
    for label in (*ROLES, *KINDS):
        assert f"  {label} " in out
    total = count_json(str(EXAMPLE))["total_tokens"]
    assert f"{total:,} tokens = {100 * total / 128_000:.1f}% of the 128,000-token window" in out
    assert "\x1b[" not in result.output  # not a terminal: no ANSI codes


def test_json_breakdowns_add_up_to_the_total() -> None:
    data = count_json(str(EXAMPLE))
    assert data["errors"] == []
    (entry,) = data["transcripts"]
    tokens = entry["tokens"]
    assert set(tokens["by_role"]) == set(ROLES)
    assert set(tokens["by_kind"]) == set(KINDS)
    assert sum(tokens["by_kind"].values()) == tokens["total"]
    assert (
        sum(tokens["by_role"].values()) + tokens["by_kind"]["tool definitions"] == tokens["total"]
    )
    assert tokens["by_kind"]["tool results"] > tokens["by_kind"]["assistant text"]
    assert tokens["by_kind"]["tool definitions"] > 0  # the example declares its tools
    assert entry["counter"] == {"name": "o200k_base", "exact": True}
    assert entry["model"]["source"] == "transcript"
    assert entry["window_share"] == pytest.approx(tokens["total"] / 128_000, abs=1e-6)
    assert entry["recorded_usage"] is None
    assert data["total_tokens"] == tokens["total"]


def test_model_and_window_options() -> None:
    claude = count_json(str(EXAMPLE), "--model", "claude-sonnet-4-5")["transcripts"][0]
    assert claude["model"]["source"] == "--model"
    assert claude["model"]["context_window"] == 200_000
    assert claude["counter"]["exact"] is False
    small = count_json(str(EXAMPLE), "--window", "8000")["transcripts"][0]
    assert small["model"]["context_window"] == 8_000
    assert small["model"]["source"] == "transcript, --window"
    assert small["window_share"] == pytest.approx(small["tokens"]["total"] / 8_000, abs=1e-6)


def test_default_model_when_the_transcript_names_none(tmp_path: Path) -> None:
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps([{"role": "user", "content": "hello there"}]), encoding="utf-8")
    entry = count_json(str(bare))["transcripts"][0]
    assert entry["model"] == {
        "name": DEFAULT_MODEL,
        "provider": "openai",
        "source": "default",
        "context_window": 128_000,
    }


def test_unknown_model_is_a_usage_error() -> None:
    result = runner.invoke(app, ["count", str(EXAMPLE), "--model", "gpt-4q"])
    assert isinstance(result.exception, UnknownModelError)
    assert "gpt-4o" in str(result.exception)  # suggests the close name


def test_malformed_file_is_reported_and_others_still_counted(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    shutil.copy(EXAMPLE, good)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"type": "user", "message": {"role": "user", "content": "hi"}}\n'
        '{"type": "assistant", broken\n',
        encoding="utf-8",
    )
    result = runner.invoke(app, ["count", str(bad), str(good)])
    assert result.exit_code == 1
    assert f"error: {bad}:2: invalid JSON record" in result.stderr
    assert "1 file could not be read" in result.stderr
    assert "openai-messages · 29 messages" in result.stdout  # the good file was still counted


def test_malformed_file_in_json_output(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "user"}\n{oops\n', encoding="utf-8")
    result = runner.invoke(app, ["count", str(bad), str(EXAMPLE), "--json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert [e["line"] for e in data["errors"]] == [2]
    assert data["errors"][0]["path"] == str(bad)
    assert len(data["transcripts"]) == 1


def test_unknown_format_lists_the_supported_ones(tmp_path: Path) -> None:
    other = tmp_path / "settings.json"
    other.write_text('{"theme": "dark"}', encoding="utf-8")
    result = runner.invoke(app, ["count", str(other)])
    assert result.exit_code == 1
    assert f"error: {other}: not a transcript format" in result.stderr
    for name in SUPPORTED_FORMATS:
        assert name in result.stderr


def test_missing_path_is_reported(tmp_path: Path) -> None:
    result = runner.invoke(app, ["count", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 1
    assert "no such file or directory" in result.stderr


def test_directories_are_searched_recursively(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / ".hidden").mkdir()
    shutil.copy(EXAMPLE, tmp_path / "a" / "b" / "one.json")
    shutil.copy(EXAMPLE, tmp_path / "two.json")
    shutil.copy(EXAMPLE, tmp_path / ".hidden" / "skipped.json")
    (tmp_path / "notes.txt").write_text("not a transcript", encoding="utf-8")
    result = runner.invoke(app, ["count", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert str(tmp_path / "a" / "b" / "one.json") in result.stdout
    assert str(tmp_path / "two.json") in result.stdout
    assert "skipped" not in result.stdout
    assert "total (2 transcripts)" in result.stdout  # several: one row each


@pytest.mark.shared_data
def test_claude_code_session_with_subagents_and_recorded_usage() -> None:
    path = shared_path("trajectories", "claude-code", "fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl")
    (transcript,) = load_transcripts(path)
    data = count_json(str(path))
    (entry,) = data["transcripts"]
    assert entry["format"] == "claude-code"
    assert len(entry["subagents"]) == len(transcript.subagents) > 0
    index, usage = [(i, u) for i, u in transcript.usages() if u.input_tokens][-1]
    assert entry["recorded_usage"]["last_prompt_tokens"] == usage.input_tokens
    assert entry["recorded_usage"]["message_index"] == index
    assert entry["model"]["source"] == "transcript"

    result = runner.invoke(app, ["count", str(path), "--summary"])
    lines = result.stdout.splitlines()
    parent = next(i for i, line in enumerate(lines) if line.startswith(str(path)))
    assert lines[parent + 1].startswith("↳ subagent")  # listed under their parent
    assert f"{usage.input_tokens:,}" in lines[parent]


@pytest.mark.shared_data
def test_multi_transcript_file_gets_one_row_per_transcript() -> None:
    path = shared_path("trajectories", "tau-bench", "gpt-4o-airline.json")
    transcripts = load_transcripts(path)
    result = runner.invoke(app, ["count", str(path)])
    assert result.exit_code == 0, result.output
    assert f"{path} #2 " in result.stdout
    assert f"total ({len(transcripts)} transcripts)" in result.stdout


def test_progress_bar_only_on_a_terminal(tmp_path: Path) -> None:
    for n in range(6):
        shutil.copy(EXAMPLE, tmp_path / f"session_{n}.json")
    piped = runner.invoke(app, ["count", str(tmp_path)])
    assert piped.stderr == ""
    terminal = runner.invoke(app, ["count", str(tmp_path)], env={"FORCE_COLOR": "1"})
    assert "counting" in terminal.stderr
    assert "6/6" in terminal.stderr


# -- malformed input, live files and empty folders (issue 13) --------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "line"),
    [
        ("roles.json", '[{"role": []}]', None),  # no format matches: the whole file is named
        ("deep.jsonl", '{"type": "user"}\n' + "[" * 100_000 + "]" * 100_000 + "\n", 2),
    ],
)
def test_a_file_that_crashed_count_is_reported_and_the_others_counted(
    tmp_path: Path, name: str, content: str, line: int | None
) -> None:
    bad = tmp_path / name
    bad.write_text(content, encoding="utf-8")
    result = runner.invoke(app, ["count", str(bad), str(EXAMPLE), "--json"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.exception
    data = json.loads(result.stdout)
    assert [t["path"] for t in data["transcripts"]] == [str(EXAMPLE)]
    assert [(e["path"], e["line"]) for e in data["errors"]] == [(str(bad), line)]


def test_a_usage_that_is_not_an_object_counts_as_no_usage(tmp_path: Path) -> None:
    reply = {"role": "assistant", "content": "ok", "extra": {"response": {"usage": [1]}}}
    trajectory = {"info": {"mini_version": "2"}, "messages": [{"role": "user"}, reply]}
    path = tmp_path / "run.traj.json"
    path.write_text(json.dumps(trajectory), encoding="utf-8")
    (entry,) = count_json(str(path))["transcripts"]
    assert entry["recorded_usage"] is None


def test_a_live_session_is_counted_up_to_its_last_complete_line(tmp_path: Path) -> None:
    records = [
        {
            "type": "user",
            "uuid": f"u{n}",
            "parentUuid": f"u{n - 1}" if n else None,
            "sessionId": "s",
            "message": {"role": "user", "content": f"step {n}"},
        }
        for n in range(3)
    ]
    live = tmp_path / "live.jsonl"
    live.write_text(
        "".join(json.dumps(r) + "\n" for r in records) + json.dumps(records[0])[:25],
        encoding="utf-8",
    )
    result = runner.invoke(app, ["count", str(live), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["transcripts"][0]["messages"] == 3
    assert f"warning: {live}: line 4 is incomplete" in result.stderr


def test_a_folder_without_transcripts_is_an_error_naming_it(tmp_path: Path) -> None:
    empty = tmp_path / "nothing here"
    (empty / "sub").mkdir(parents=True)
    (empty / "notes.txt").write_text("not a transcript", encoding="utf-8")
    result = runner.invoke(app, ["count", str(empty)])
    assert result.exit_code == 1
    assert f"error: {empty}: no transcript here" in result.stderr
    with_json = runner.invoke(app, ["count", str(empty), str(EXAMPLE), "--json"])
    assert with_json.exit_code == 1
    data = json.loads(with_json.stdout)
    assert [e["path"] for e in data["errors"]] == [str(empty)]
    assert len(data["transcripts"]) == 1


COUNT_OVERHEAD = 1 << 20
"""Bytes ``count`` allocates whatever the input's size (options, output, the table)."""


def test_counting_a_huge_single_line_stays_within_twice_its_size(tmp_path: Path) -> None:
    # Reading holds the text and its parsed value at once (2x); tokenizing adds only pieces.
    small = tmp_path / "small.json"
    small.write_text(json.dumps([{"role": "user", "content": "warm up"}]), encoding="utf-8")
    count_json(str(small))  # imports and the tokenizer's ranks load outside the measure
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps([{"role": "user", "content": "token " * 1_000_000}]), "utf-8")
    tracemalloc.start()
    try:
        entry = count_json(str(huge))["transcripts"][0]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert entry["tokens"]["total"] > 1_000_000
    assert peak < 2 * huge.stat().st_size + COUNT_OVERHEAD
