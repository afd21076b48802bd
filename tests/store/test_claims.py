"""Claims on sessions (the proxy's, taken before its session header goes out): one holder at a
time across stores and processes, and none outliving its holder, on both backends."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from contextfold.store import open_store
from tests.store.conftest import StoreTarget


def test_one_holder_at_a_time_across_stores(target: StoreTarget) -> None:
    first, second = target.open(), target.open()
    assert first.claim_session("s1")
    assert not first.claim_session("s1")  # one request per session, in this store too
    assert not second.claim_session("s1")
    assert second.claim_session("s2")  # other sessions are free
    first.release_session("s1")
    assert second.claim_session("s1")
    second.release_session("s1")
    second.release_session("never-claimed")  # nothing to give back: no error


def test_closing_a_store_gives_its_claims_back(target: StoreTarget) -> None:
    first, second = target.open(), target.open()
    assert first.claim_session("s1")
    first.close()
    assert second.claim_session("s1")


def test_a_killed_holder_leaves_no_claim(target: StoreTarget) -> None:
    """A worker SIGKILLed mid-request: its claim ends with it, at once (no timer), so the
    client's retry continues the session instead of forking it."""
    holder = textwrap.dedent(
        f"""
        import sys, time
        from contextfold.store import open_store
        store = open_store({target.url!r}, **{target.options!r})
        assert store.claim_session("s1")
        print("held", flush=True)
        time.sleep(60)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True, env=os.environ.copy()
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        other = target.open()
        assert not other.claim_session("s1")
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        # PostgreSQL ends a dead client's backend (and its locks) as soon as it reads the
        # closed socket: a moment, not a timer.
        deadline = time.monotonic() + 5
        while not other.claim_session("s1"):
            assert time.monotonic() < deadline, "the killed holder's claim outlived it"
            time.sleep(0.05)
    finally:
        child.kill()
        child.wait()


def test_a_store_in_memory_claims_in_process() -> None:
    with open_store(":memory:") as store:
        assert store.claim_session("s1")
        assert not store.claim_session("s1")
        store.release_session("s1")
        assert store.claim_session("s1")


def test_the_claims_file_is_private_and_made_only_when_needed(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with open_store(path) as store:
        assert not (tmp_path / "sessions.db-claims").exists()  # a store the CLI only reads
        store.claim_session("s1")
        mode = stat.S_IMODE((tmp_path / "sessions.db-claims").stat().st_mode)
    assert mode == 0o600


@pytest.mark.skipif(sys.platform != "linux", reason="open-file-description locks are Linux's")
def test_two_stores_of_one_process_exclude_each_other(tmp_path: Path) -> None:
    # POSIX record locks belong to the process; these belong to the descriptor, so two apps
    # in one process (as tests run the proxy) are two holders too.
    with open_store(tmp_path / "a.db") as first, open_store(tmp_path / "a.db") as second:
        assert first.claim_session("s1")
        assert not second.claim_session("s1")
