"""Hostile input: fuzzed request bodies through the proxy, and SIGKILLs of the proxy.

1. *Fuzz*: hypothesis draws request bodies of every protocol the proxy serves (Messages, Chat
   Completions, Responses: a valid conversation, then up to three mutations: a value replaced by
   another JSON value of any type, a lone surrogate, a key deleted or added;
   ``tests/proxy/hostile_bodies.py``) and sends each through the real proxy app in process, a
   scripted upstream on loopback behind it. A case fails on a 5xx, on an error not
   in the protocol's own shape, or when a refused request changed the store. Afterwards a valid
   request of each protocol must still be answered.
2. *Kills*: a client holds a conversation through a proxy process that is SIGKILLed amid its
   requests (in turn: at a random moment of a JSON request; mid-reply in a stream; after the
   reply and its head are recorded but before the stream ends), restarted on the same store,
   and sent the same request again (``tests/proxy/kill_runs.py``), on SQLite and, when
   ``CONTEXTFOLD_TEST_POSTGRES_URL`` names a server, PostgreSQL. Counted: replies the client got
   that the store lost, forks by kind, and what ``check_integrity()`` reports (partial
   sessions, heads pointing nowhere).

Attacks on the agent's workspace have their own section, written by
``benchmarks/workspace_attacks.py`` ("Hostile input: the workspace").

Run: ``python -m benchmarks.hostile [--quick] [--cases N] [--kills N] [--write]``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: import the repository's packages
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import warnings

from hypothesis import HealthCheck, given, settings

from benchmarks._results import (
    benchmark_arguments,
    markdown_table,
    should_write,
    write_section,
)
from tests.proxy.hostile_bodies import ProxyHarness, bodies, proxy_harness
from tests.proxy.kill_runs import MOMENTS, KillReport, kill_run

FULL_CASES = 10_000
QUICK_CASES = 100
FULL_KILLS = 30
QUICK_KILLS = 4
POSTGRES_URL_ENV = "CONTEXTFOLD_TEST_POSTGRES_URL"
FORK_KINDS = ("answered retry", "needless")


def fuzz(harness: ProxyHarness, protocol: Any, cases: int) -> float:
    """Send ``cases`` drawn bodies of ``protocol``; seconds taken."""

    @settings(
        max_examples=cases,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(body=bodies(protocol))
    def one(body: dict[str, Any]) -> None:
        harness.check(protocol, body)  # failures are collected, not raised: all are counted

    started = time.perf_counter()
    one()
    return time.perf_counter() - started


def _postgres_kill_run(kills: int) -> KillReport | None:
    """:func:`kill_run` on a fresh database of the test server (dropped afterwards), or None
    when no server is configured."""
    admin = os.environ.get(POSTGRES_URL_ENV)
    if not admin:
        return None
    import psycopg

    name = "cf_hostile_" + uuid.uuid4().hex[:8]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        return kill_run(admin.rsplit("/", 1)[0] + "/" + name, kills=kills)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main(argv: Sequence[str] | None = None) -> None:
    parser = benchmark_arguments(__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, help="fuzz cases per protocol")
    parser.add_argument("--kills", type=int, help="SIGKILLs of the proxy per backend")
    args = parser.parse_args(argv)
    cases = args.cases or (QUICK_CASES if args.quick else FULL_CASES)
    kills = args.kills or (QUICK_KILLS if args.quick else FULL_KILLS)
    warnings.simplefilter("ignore")

    fuzz_rows = []
    with tempfile.TemporaryDirectory() as tmp, proxy_harness(Path(tmp)) as harness:
        for protocol in ("anthropic", "openai", "responses"):
            before = len(harness.failures)
            seconds = fuzz(harness, protocol, cases)
            statuses = {
                k.split()[1]: v for k, v in harness.outcomes.items() if k.startswith(protocol)
            }
            answered = statuses.get("200", 0)
            refused = sum(v for k, v in statuses.items() if k.startswith("4"))
            failed = len(harness.failures) - before
            fuzz_rows.append(
                [protocol, sum(statuses.values()), answered, refused, failed, f"{seconds:.0f} s"]
            )
            print(f"fuzz {protocol}: {statuses} failures={failed}")
        serving = harness.still_serving()
        failures = list(harness.failures)

    kill_rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("SQLite", "PostgreSQL"):
            report = (
                kill_run(str(Path(tmp) / "killed.db"), kills=kills)
                if name == "SQLite"
                else _postgres_kill_run(kills)
            )
            if report is None:
                kill_rows.append(
                    [name, "not run (no PostgreSQL server configured)", "", "", "", ""]
                )
                continue
            moments = ", ".join(f"{report.moments[m]} {m}" for m in MOMENTS)
            forks = ", ".join(f"{k}: {report.forks[k]}" for k in FORK_KINDS)
            kill_rows.append(
                [
                    name,
                    f"{report.kills} ({moments})",
                    report.replies,
                    report.lost,
                    forks,
                    len(report.problems),
                ]
            )
            print(f"kills {name}: {report}")

    fuzz_table = markdown_table(
        ["protocol", "cases", "answered (200)", "refused (4xx)", "failures", "time"], fuzz_rows
    )
    kill_table = markdown_table(
        ["backend", "kills", "replies received", "lost", "forks by kind", "partial / dangling"],
        kill_rows,
    )
    shown = "\n".join(f"- `{f[:200]}`" for f in failures[:10]) or "none"
    body = f"""
Request bodies of each protocol the proxy serves (Messages, Chat Completions, Responses) drawn
by hypothesis (a valid conversation, then up to three mutations: a value of any JSON type in
place of another, lone surrogates, keys deleted or added), sent through the real proxy app with
a scripted upstream. A failure is a 5xx, an error not in the protocol's own
shape, or a refused request that changed the store. Proxy still serving afterwards:
**{"yes" if serving else "NO"}**.

{fuzz_table}

Failures: {shown}

SIGKILLs of the proxy amid a conversation's requests, the client retrying on a restarted proxy
(same store). The kills take turns among three moments: *at random* (a timer during a JSON
request: before, during or after the writes of a turn), *mid-reply* (a stream, when the client
has the first words of the reply) and *recorded, undelivered* (a stream, once the reply and its
head are recorded, before the stream ends: the client never gets the end of it). *Lost*:
replies the client received that the store does not hold in the session its header named.
Forks: *answered retry* (the killed request had recorded its reply but not delivered it: the
retry is a new branch, as it should be), *needless* (the retry could have gone on in the
session). *Partial / dangling*: what `check_integrity()` reports.

{kill_table}

Run `python -m benchmarks.hostile` (`--cases`, `--kills`). Tests:
`tests/proxy/test_hostile_bodies.py`, `tests/proxy/test_proxy_kills.py` (slow),
`tests/proxy/test_hostile_clients.py`; identical streamed requests racing on two workers (each
header names the session holding its reply): `tests/proxy/test_proxy_workers.py`, with the
store's claims in `tests/store/test_claims.py`. Attacks on the agent's workspace: the section
"Hostile input: the workspace".
"""
    if not should_write(args):
        print(body)
        return
    write_section("hostile", "Hostile input", body, quick=args.quick)


if __name__ == "__main__":
    main()
