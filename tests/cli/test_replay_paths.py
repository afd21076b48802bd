"""``contextfold replay`` on bad ground: a folder without transcripts, and ``--report`` paths
that cannot be written, refused before any transcript is replayed (so no work is lost)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextfold.cli import app
from contextfold.cli import replay as replay_command
from tests.replay.conftest import EXAMPLE

runner = CliRunner()
WIDE = {"COLUMNS": "400"}
"""A terminal wide enough that the usage-error box does not wrap the message."""
pytestmark = pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")


@pytest.fixture
def no_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if any transcript gets replayed."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the replay started although its --report path is bad")

    monkeypatch.setattr(replay_command, "replay_transcript", refuse)


def test_a_folder_without_transcripts_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "run.txt").write_text("no transcript", encoding="utf-8")
    result = runner.invoke(app, ["replay", str(tmp_path)])
    assert result.exit_code == 1
    assert f"error: {tmp_path}: no transcript here" in result.stderr


@pytest.mark.usefixtures("no_replay")
@pytest.mark.parametrize(
    ("where", "problem"),
    [
        ("missing/report.html", "the folder {tmp}/missing does not exist"),
        ("a-folder", "is a folder"),
        ("a-file/report.html", "{tmp}/a-file is a file, not a folder"),
    ],
)
def test_a_report_path_that_cannot_be_written_is_refused_before_the_work(
    tmp_path: Path, where: str, problem: str
) -> None:
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    report = tmp_path / where
    result = runner.invoke(app, ["replay", str(EXAMPLE), "--report", str(report)], env=WIDE)
    assert result.exit_code == 2, result.output  # a usage error, as for a bad option
    message = " ".join(result.stderr.split())
    assert "--report" in message and str(report) in message
    assert problem.format(tmp=tmp_path) in message
    assert "Traceback" not in result.output


@pytest.mark.usefixtures("no_replay")
def test_a_read_only_folder_is_refused_before_the_work(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("this user can write into read-only folders (root)")
        report = locked / "report.html"
        result = runner.invoke(app, ["replay", str(EXAMPLE), "--report", str(report)], env=WIDE)
        assert result.exit_code == 2
        assert "is read-only for you" in result.stderr
    finally:
        locked.chmod(0o700)


def test_a_report_that_fails_to_write_after_the_work_keeps_the_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(*args: object, **kwargs: object) -> Path:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(replay_command, "write_report", disk_full)
    report = tmp_path / "report.html"
    args = ["replay", str(EXAMPLE), "-p", "window", "--report", str(report), "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert [t["path"] for t in data["transcripts"]] == [str(EXAMPLE)]  # the work is shown
    assert data["report"] is None
    assert data["errors"][-1]["path"] == str(report)
    assert "No space left on device" in result.stderr
    assert "could not be replayed" not in result.stderr  # every transcript was
