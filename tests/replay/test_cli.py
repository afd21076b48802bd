"""``contextfold replay``: the table, ``--json``, the report, and bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextfold.cli import app
from contextfold.errors import UnknownModelError
from tests.conftest import shared_path
from tests.replay.conftest import EXAMPLE, coding_session

runner = CliRunner()
pytestmark = pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")


def replay_json(*args: str, code: int = 0) -> dict[str, Any]:
    result = runner.invoke(app, ["replay", *args, "--json"])
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def test_json_has_every_preset_with_figures_turns_and_retention() -> None:
    data = replay_json(str(EXAMPLE), "--window", "6000")
    assert data["errors"] == [] and data["report"] is None
    assert data["prices"] == {"anthropic": "claude-sonnet-4-5", "openai": "gpt-5"}
    (entry,) = data["transcripts"]
    assert entry["path"] == str(EXAMPLE) and entry["format"] == "openai-messages"
    assert set(entry["original"]) >= {"compactions", "retention", "cache_read_share"}
    assert list(entry["presets"]) == ["mask-first", "summarize", "window"]
    for name, run in entry["presets"].items():
        assert run["preset"] == name
        assert run["context_window"] == 6_000
        assert run["over_window"] == 0
        assert run["requests"] == len(run["turns"]) == 14
        assert 0 <= run["prefix_reuse"] <= 1
        assert run["tokens_sent"] == sum(t["tokens"] for t in run["turns"])
        assert set(run["peak_budget"]) >= {"system", "tools", "conversation", "reserved_output"}
        retention = run["retention"]
        assert set(retention["by_kind"]) == {"files_modified", "errors", "task", "constraints"}
        assert (
            retention["kept"] + retention["recoverable"] + retention["lost"] == retention["total"]
        )
        turn = run["turns"][0]
        assert set(turn) >= {"turn", "message_index", "tokens", "zone", "fits", "reused_tokens"}


def test_presets_and_model_can_be_chosen() -> None:
    data = replay_json(str(EXAMPLE), "-p", "window", "-p", "restart", "--model", "gpt-4o-mini")
    (entry,) = data["transcripts"]
    assert list(entry["presets"]) == ["window", "restart"]
    assert {r["model"] for r in entry["presets"].values()} == {"gpt-4o-mini"}


def test_a_corrupt_file_is_reported_and_skipped(tmp_path: Path) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text('{"messages": [', encoding="utf-8")
    result = runner.invoke(app, ["replay", str(bad), str(EXAMPLE), "--json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert [t["path"] for t in data["transcripts"]] == [str(EXAMPLE)]  # the others still replay
    (error,) = data["errors"]
    assert error["path"] == str(bad)
    assert "broken.json" in result.stderr and "1 file could not be replayed" in result.stderr


def test_the_table_shows_each_preset_and_the_report_is_written(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["replay", str(EXAMPLE), "-w", "6000", "--report", str(out)])
    assert result.exit_code == 0, result.output
    text = result.stdout
    for header in ("peak", "over", "window", "compactions", "/ masks", "prefix", "facts"):
        assert header in text
    # A row naming the transcript and its 14 requests, then one row per preset, in order.
    assert "coding_session.json · 14 requests" in text
    rows = re.findall(r"^  (mask-first|summarize|window) +[\d,]+ ", text, re.MULTILINE)
    assert rows == ["mask-first", "summarize", "window"]
    assert "gpt-4o: window 6,000" in text
    assert f"report written to {out}" in text
    assert 'data-chart="context-size"' in out.read_text(encoding="utf-8")


def _long_named_session(tmp_path: Path) -> Path:
    """A generated session under a long file name (the column that has to give way)."""
    path = tmp_path / ("a-session-with-a-rather-long-file-name-" + "x" * 30 + ".json")
    path.write_text(json.dumps(coding_session(40)), encoding="utf-8")
    return path


def _assert_fits(text: str, columns: int) -> None:
    assert "…" not in text  # no cell, number or header, was cut
    assert max(len(line) for line in text.splitlines()) <= columns


def test_the_table_fits_100_columns_with_no_number_cut(tmp_path: Path) -> None:
    long_named = _long_named_session(tmp_path)
    args = ["replay", str(EXAMPLE), str(long_named), "-w", "6000"]
    result = runner.invoke(app, args, env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    _assert_fits(result.stdout, 100)
    # Every preset of both transcripts, and their totals, with their figures whole.
    rows = re.findall(r"^  (mask-first|summarize|window) +([\d,]+) ", result.stdout, re.MULTILINE)
    assert [preset for preset, _ in rows] == ["mask-first", "summarize", "window"] * 3
    data = replay_json(*args[1:])
    peaks = [r["peak_tokens"] for t in data["transcripts"] for r in t["presets"].values()]
    totals = [t["peak_tokens"] for t in data["totals"].values()]
    assert [int(peak.replace(",", "")) for _, peak in rows] == [*peaks, *totals]
    assert "all 2 transcripts" in result.stdout
    # --wide has every column, for a wider terminal.
    wide = runner.invoke(app, [*args, "--wide"], env={"COLUMNS": "160"})
    _assert_fits(wide.stdout, 160)
    for header in ("requests", "summary", "anthropic", "openai"):
        assert header in wide.stdout


@pytest.mark.shared_data
def test_a_claude_code_session_fits_100_columns() -> None:
    path = shared_path("trajectories", "claude-code", "fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl")
    result = runner.invoke(app, ["replay", str(path), "-w", "100000"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    _assert_fits(result.stdout, 100)
    assert re.search(r"^  Claude Code +1 / — +15,635,389 ", result.stdout, re.MULTILINE)


def test_a_window_too_small_for_any_request_is_a_warning() -> None:
    result = runner.invoke(app, ["replay", str(EXAMPLE), "--window", "1024"])
    # Figures of the replay, not an error: the exit status stays 0, as the help says.
    assert result.exit_code == 0, result.output
    assert re.search(
        r"warning: .*coding_session\.json: 14 of 14 requests \(every preset\) did not fit the "
        r"window of 1,024 tokens",
        " ".join(result.stderr.split()),
    )
    help_text = " ".join(runner.invoke(app, ["replay", "--help"]).stdout.split())
    assert "(always 0)" not in help_text
    assert "a warning then names the transcript, and the exit status stays 0" in help_text


def test_a_model_the_registry_does_not_know_needs_only_a_window() -> None:
    result = runner.invoke(
        app, ["replay", str(EXAMPLE), "--model", "gpt-9", "--window", "32000", "--json"]
    )
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)["transcripts"]
    assert {(r["model"], r["context_window"]) for r in entry["presets"].values()} == {
        ("gpt-9", 32_000)
    }
    assert "'gpt-9' is not in the model registry" in " ".join(result.stderr.split())
    # Without a window its size is unknown: the error says what to give.
    unknown = runner.invoke(app, ["replay", str(EXAMPLE), "--model", "gpt-9"])
    assert isinstance(unknown.exception, UnknownModelError)  # the error boundary shows it
    assert "--window N" in str(unknown.exception)


def test_an_unknown_preset_is_a_usage_error() -> None:
    result = runner.invoke(app, ["replay", str(EXAMPLE), "--preset", "shrink"])
    assert result.exit_code == 2
    assert "unknown preset 'shrink'" in result.output
