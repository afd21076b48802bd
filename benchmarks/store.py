"""Session store throughput, and resume time from a snapshot versus a full replay.

For each backend (SQLite in a temporary folder; PostgreSQL when ``CONTEXTFOLD_BENCH_POSTGRES_URL``
or ``CONTEXTFOLD_TEST_POSTGRES_URL`` names an admin URL, in a database created for the run and
dropped after it):

- appends/s: one message per transaction with the ``expected_seq`` check (what an agent does
  per turn), and 100 messages per transaction (what an importer does); beside a baseline that
  does only the bare minimum on the same database engine and settings (the message's JSON
  inserted into a two-column-key table, one transaction per message or per 100 messages: no
  ``expected_seq`` check, no redaction, no token column, no index beyond the key), so the ratio
  is what the store's guarantees cost;
- resume: a session of N messages (tool turns with ~600-byte outputs), compacted by a summary
  edit over all but the last 30 messages, snapshotted, then 30 more messages. "full replay"
  reads the whole transcript and applies every edit (what resuming without snapshots costs);
  "snapshot" is ``load_view``: the snapshot plus the tail. The snapshot time should stay flat
  as N grows (O(view + tail)); the replay time grows with N.

Target (issue 4): snapshot resume is O(view), not O(transcript): its time stays flat (at most 2x
between the smallest and the largest session) and it reads the same number of messages.

Run: ``python -m benchmarks.store [--quick] [--write]`` (quick: smaller sessions, nothing written
unless ``--write``).
"""

from __future__ import annotations

import json
import os
import secrets
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from benchmarks._results import (
    benchmark_arguments,
    markdown_table,
    record_targets,
    should_write,
    target,
    timings,
    write_section,
)
from contextfold.edits import SummarizeEdit
from contextfold.messages import Message, Meta, SummaryPart, TextPart, ToolCallPart, ToolResultPart
from contextfold.store import SessionStore, SQLiteVersionWarning, open_store
from contextfold.store.view_rebuild import replay

POSTGRES_ENVS = ("CONTEXTFOLD_BENCH_POSTGRES_URL", "CONTEXTFOLD_TEST_POSTGRES_URL")
BATCH = 100
TAIL = 30
REPEATS = 3
BARE_TABLE = "CREATE TABLE bare (session TEXT, seq INT, data TEXT, PRIMARY KEY (session, seq))"
"""The baseline's table: a message's JSON under its session and seq, nothing else."""
OUTPUT = "".join(f"src/module_{i}.py:{i}: checked ok\n" for i in range(20))  # ~600 bytes


def _turn(n: int) -> list[Message]:
    call = ToolCallPart(f"call_{n}", "shell", f'{{"cmd":"pytest -q tests/test_{n}.py"}}')
    return [
        Message("user", (TextPart(f"step {n}: run the tests for module {n}"),), id=f"u{n}"),
        Message("assistant", (TextPart("Running them."), call), id=f"a{n}"),
        Message.tool(ToolResultPart(f"call_{n}", "shell", OUTPUT), id=f"t{n}"),
    ]


def _messages(start: int, count: int) -> Iterator[Message]:
    turn = start
    emitted = 0
    while emitted < count:
        for message in _turn(turn):
            if emitted < count:
                yield message
                emitted += 1
        turn += 1


def _median_seconds(fn: Callable[[], object]) -> float:
    return statistics.median(timings(fn, REPEATS))


def appends_per_second(store: SessionStore, singles: int, batched: int) -> tuple[float, float]:
    """Messages per second appended one per transaction, and 100 per transaction."""
    sid = store.create_session().id
    messages = list(_messages(0, singles))
    started = time.perf_counter()
    for seq, message in enumerate(messages):
        store.append_messages(sid, [message], expected_seq=seq)
    single_rate = singles / (time.perf_counter() - started)

    sid = store.create_session().id
    messages = list(_messages(0, batched))
    started = time.perf_counter()
    for i in range(0, batched, BATCH):
        store.append_messages(sid, messages[i : i + BATCH])
    return single_rate, batched / (time.perf_counter() - started)


def bare_appends_per_second(url: str, singles: int, batched: int) -> tuple[float, float]:
    """The baseline: the same messages' JSON inserted with nothing else, one transaction per
    message and per 100 messages, on the same database engine and durability settings."""
    rows = [json.dumps(m.to_dict()) for m in _messages(0, max(singles, batched))]
    if url.startswith(("postgres://", "postgresql://")):
        import psycopg

        with psycopg.connect(url) as conn:
            conn.execute(BARE_TABLE)
            conn.commit()
            return _bare_rates(conn, rows, singles, batched, "%s")
    import sqlite3

    db = sqlite3.connect(url + ".bare", isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute(BARE_TABLE)
        return _bare_rates(db, rows, singles, batched, "?")
    finally:
        db.close()


def _bare_rates(
    conn: Any, rows: Sequence[str], singles: int, batched: int, mark: str
) -> tuple[float, float]:
    insert = f"INSERT INTO bare VALUES ({mark}, {mark}, {mark})"
    sqlite = mark == "?"

    def transaction(session: str, start: int, chunk: Sequence[str]) -> None:
        if sqlite:
            conn.execute("BEGIN IMMEDIATE")
        cursor = conn.cursor()
        cursor.executemany(insert, [(session, start + i, row) for i, row in enumerate(chunk)])
        conn.execute("COMMIT") if sqlite else conn.commit()

    started = time.perf_counter()
    for seq in range(singles):
        transaction("one", seq, rows[seq : seq + 1])
    single_rate = singles / (time.perf_counter() - started)
    started = time.perf_counter()
    for i in range(0, batched, BATCH):
        transaction("batch", i, rows[i : i + BATCH])
    return single_rate, batched / (time.perf_counter() - started)


def resume_times(store: SessionStore, size: int) -> tuple[float, float, int, int]:
    """Seconds for a full replay and a snapshot resume of a compacted ``size``-message session,
    with the messages the snapshot resume read and the view length."""
    sid = store.create_session().id
    body = size - TAIL
    chunk: list[Message] = []
    for message in _messages(0, body):
        chunk.append(message)
        if len(chunk) == 1000:
            store.append_messages(sid, chunk)
            chunk = []
    if chunk:
        store.append_messages(sid, chunk)
    first = next(m for _, m in store.iter_messages(sid, limit=1))
    last_summarized = next(m for _, m in store.iter_messages(sid, after_seq=body - 2 * TAIL - 1))
    summary = Message(
        "user", (SummaryPart(f"Summary of {body - 2 * TAIL} messages."),), meta=Meta(kind="summary")
    )
    store.append_edit(sid, SummarizeEdit(first.id, last_summarized.id, summary))
    live = store.load_view(sid)
    store.save_snapshot(sid, live.view, 5000, last_seq=live.last_seq, last_edit=live.last_edit)
    store.append_messages(sid, list(_messages(10**7, TAIL)))

    def full_replay() -> list[Message]:
        return replay((), store.iter_messages(sid), list(store.iter_edits(sid)))[0]

    full = _median_seconds(full_replay)
    snap = _median_seconds(lambda: store.load_view(sid))
    resumed = store.load_view(sid)
    assert resumed.view == full_replay()
    return full, snap, resumed.replayed_messages, len(resumed.view)


@contextmanager
def _postgres_database() -> Iterator[str | None]:
    admin = next((os.environ[k] for k in POSTGRES_ENVS if os.environ.get(k)), None)
    if admin is None:
        yield None
        return
    import psycopg

    name = f"contextfold_bench_{secrets.token_hex(4)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(admin)
    try:
        yield urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


def judge(resume: dict[str, list[tuple[int, float, float, int]]]) -> list[dict[str, object]]:
    """The O(view) target per backend: snapshot resume flat across sizes, same messages read."""
    rows = []
    for label, points in resume.items():
        snaps = [snap for _, _, snap, _ in points]
        reads = {read for _, _, _, read in points}
        spread = max(snaps) / min(snaps)
        flat = spread <= 2 and len(reads) == 1
        sizes = " / ".join(f"{size:,}" for size, _, _, _ in points)
        largest, full, snap, _ = points[-1]
        rows.append(
            target(
                "store",
                f"snapshot resume O(view), not O(transcript) ({label.split(' ')[0]})",
                f"{' / '.join(_ms(s) for s in snaps)} at {sizes} messages ({spread:.1f}x spread, "
                f"{', '.join(str(r) for r in sorted(reads))} messages read)",
                flat,
                versus=f"full replay (baseline) at {largest:,}: {_ms(full)}, "
                f"{full / snap:,.0f}x slower",
                held_back=""
                if flat
                else f"resume time grows {spread:.1f}x from {points[0][0]:,} to {largest:,} "
                f"messages; messages read: {sorted(reads)}",
            )
        )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = benchmark_arguments(__doc__.splitlines()[0])
    args = parser.parse_args(argv)
    singles, batched = (500, 10_000) if args.quick else (2_000, 50_000)
    sizes = (1_000, 10_000) if args.quick else (1_000, 10_000, 100_000)
    warnings.simplefilter("ignore", SQLiteVersionWarning)

    throughput_rows: list[tuple[object, ...]] = []
    resume_rows: list[tuple[object, ...]] = []
    resume: dict[str, list[tuple[int, float, float, int]]] = {}
    rates: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder, _postgres_database() as pg_url:
        targets = [("SQLite (WAL, synchronous=NORMAL)", str(Path(folder) / "bench.db"))]
        if pg_url:
            targets.append(("PostgreSQL", pg_url))
        for label, url in targets:
            with open_store(url) as store:
                single, batch = appends_per_second(store, singles, batched)
                bare_single, bare_batch = bare_appends_per_second(url, singles, batched)
                rates[label] = {"single": single, "batch": batch}
                throughput_rows.append(
                    (
                        label,
                        f"{single:,.0f}",
                        f"{bare_single:,.0f} ({single / bare_single:.2f}x)",
                        f"{batch:,.0f}",
                        f"{bare_batch:,.0f} ({batch / bare_batch:.2f}x)",
                    )
                )
                for size in sizes:
                    full, snap, read, view = resume_times(store, size)
                    resume.setdefault(label, []).append((size, full, snap, read))
                    speedup = f"{full / snap:,.0f}x"
                    resume_rows.append(
                        (label, f"{size:,}", _ms(full), _ms(snap), speedup, read, view)
                    )
                    print(resume_rows[-1], flush=True)

    throughput = markdown_table(
        (
            "backend",
            "appends/s (1 message, expected_seq)",
            "bare INSERT baseline (store ÷ baseline)",
            f"messages/s ({BATCH} a batch)",
            "bare INSERT baseline (store ÷ baseline)",
        ),
        throughput_rows,
    )
    resume_table = markdown_table(
        (
            "backend",
            "session messages",
            "full replay",
            "snapshot resume",
            "speed-up",
            "messages read on resume",
            "view length",
        ),
        resume_rows,
    )
    rows = judge(resume)
    verdicts = "\n".join(
        f"- {r['target']}: {r['measured']} — {'met' if r['met'] else '**not met**'}." for r in rows
    )
    print(throughput, resume_table, verdicts, sep="\n\n")
    if not should_write(args):
        return
    postgres_note = (
        ""
        if len(throughput_rows) > 1
        else "\n\nPostgreSQL was not measured (set CONTEXTFOLD_BENCH_POSTGRES_URL)."
    )
    body = (
        f"`python -m benchmarks.store{' --quick' if args.quick else ''}`. Throughput: "
        f"{singles:,} single-message appends (each its own transaction with the `expected_seq` "
        f"check), then {batched:,} messages in batches of {BATCH}, redaction on; beside a bare "
        "baseline on the same database and settings (the message JSON into a table keyed by "
        "session and seq, nothing else), so the ratio is what the store's checks, redaction "
        "and bookkeeping cost.\n\n"
        f"{throughput}\n\nResume of a compacted session (a summary edit over all but the last "
        f"{2 * TAIL + TAIL} messages, a snapshot, then {TAIL} more messages); median of "
        f"{REPEATS}. Full replay reads every message and edit; snapshot resume (`load_view`) "
        f"reads the snapshot and the {TAIL}-message tail, so it stays flat as sessions grow."
        f"\n\n{resume_table}{postgres_note}\n\n{verdicts}"
    )
    write_section("store", "Session store: appends and resume", body, quick=args.quick)
    record_targets("store", rows, {"appends_per_second": rates}, quick=args.quick)


if __name__ == "__main__":
    main()
