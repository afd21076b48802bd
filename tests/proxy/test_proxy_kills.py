"""SIGKILLs of the proxy amid a conversation, on SQLite and PostgreSQL: no reply the client got
is lost, no fork is needless, no session is left partial; a retry of a request whose reply was
recorded but never delivered forks, as it should (``benchmarks/hostile.py`` runs more)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.proxy.kill_runs import kill_run
from tests.store.conftest import postgres_database  # noqa: F401 (a fixture, used by name)

KILLS = 8


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "killed.db")
    url: str = request.getfixturevalue("postgres_database")
    return url


@pytest.mark.slow
def test_a_killed_proxy_loses_nothing_and_forks_nothing_needlessly(store_url: str) -> None:
    report = kill_run(store_url, kills=KILLS)
    assert report.kills == KILLS
    assert report.lost == 0
    assert report.forks["needless"] == 0, report.forks
    # Each kill after the record is a retry of an answered request: a fork (a kill mid-reply
    # that came after the record too makes another).
    undelivered = report.moments["recorded, undelivered"]
    assert undelivered > 0
    assert report.forks["answered retry"] >= undelivered, report
    assert set(report.forks) <= {"answered retry", "needless"}
    assert report.problems == []
