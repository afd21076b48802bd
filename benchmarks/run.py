"""Run every benchmark (or some), print their tables, and rewrite RESULTS.md with the scoreboard.

Each benchmark runs in its own Python process (``python -m benchmarks.NAME``): a failure or a
memory figure of one never touches another, and each one also runs alone the same way. Their
output streams through as they run. At the end: a summary (status and wall time of each) and the
scoreboard rebuilt from every benchmark's latest verdicts.

Usage::

    python -m benchmarks                      # everything, for real: rewrites RESULTS.md
    python -m benchmarks --quick              # small samples, seconds each; writes nothing
    python -m benchmarks --quick --write      # ... and writes the quick figures, marked as such
    python -m benchmarks --only store,outputs
    python -m benchmarks --list

Exit status: 0 when every selected benchmark ran or was skipped for missing data, 1 when one
failed, 2 on bad arguments. Without ``../shared/data`` the benchmarks that need the shared
transcripts are skipped with a line saying so; the others run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a file (python benchmarks/run.py): import as a package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import (
    ROOT,
    SKIPPED_EXIT,
    TRAJECTORIES,
    load_figures,
    machine_line,
    markdown_table,
)


@dataclass(frozen=True)
class Benchmark:
    """One benchmark script of the suite."""

    name: str
    needs_shared_data: bool
    """Skipped (not failed) when ``../shared/data`` is absent."""
    measures: str
    full_minutes: str
    """Rough wall time of a full run on the reference machine (2 cores), for the README."""
    aliases: tuple[str, ...] = ()


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "architecture",
        False,
        "import cycles, files one agent turn runs, public API size, longest functions (counts)",
        "< 1",
    ),
    Benchmark(
        "token_accuracy",
        True,
        "token estimates vs DeepSeek's billed prompt tokens (vs count_tokens_approximately)",
        "< 1",
    ),
    Benchmark(
        "live_tokens",
        True,
        "the engine's estimates vs a live llama.cpp server's prompt tokens (vs "
        "count_tokens_approximately)",
        "3",
    ),
    Benchmark(
        "outputs",
        False,  # without the corpus it measures truncation and says it skipped repair
        "head+tail truncation latency; history repair throughput on the corpus",
        "< 1",
    ),
    Benchmark(
        "store",
        False,
        "appends/s and resume from snapshot vs full replay, SQLite and PostgreSQL",
        "2",
    ),
    Benchmark(
        "redaction",
        False,
        "secret redaction: recall on 113 generated secret formats, false positives on 50 "
        "ordinary texts, cost per MB (vs detect-secrets)",
        "1",
    ),
    Benchmark(
        "engine_overhead",
        False,  # falls back to synthetic turns
        "prepare() per turn from 100 to 100k messages, peak memory (vs LangChain)",
        "4",
    ),
    Benchmark(
        "format_fuzz",
        False,  # seeds from the test writers; the corpus adds real records when present
        "every importer on mutated transcripts: what escapes other than FormatError",
        "4",
    ),
    Benchmark(
        "workspace_attacks",
        False,
        "symlink swap races, hard links and a linked AGENTS.md against the coding tools: "
        "escapes (vs a check by name), and the fence's cost per open",
        "< 1",
    ),
    Benchmark(
        "hostile",
        False,
        "fuzzed request bodies of both protocols through the proxy, SIGKILLs of the proxy on "
        "SQLite and PostgreSQL: 5xx, lost replies, forks by kind, partial sessions",
        "30",
    ),
    Benchmark(
        "compaction",
        True,
        "presets vs LangChain and baselines at 32k/128k: overflow, tokens, cache, cost, "
        "retention, CPU",
        "10",
        aliases=("cache",),
    ),
    Benchmark(
        "proxy",
        False,  # the transcript replay part is skipped without ../shared/data; the rest runs
        "contextfold proxy: overhead per request at 1k/10k/100k tokens (vs calling the upstream "
        "directly), throughput with 2 workers, tokens sent upstream on replayed transcripts",
        "3",
    ),
    Benchmark(
        "clients",
        False,  # skipped when no client is installed, and with --quick
        "real clients (Claude Code, Codex, opencode, aider, mini-swe-agent) through the proxy "
        "at small windows: requests, tokens, peak request, sessions, invariant breaks, steps",
        "6",
    ),
    Benchmark(
        "integrations",
        True,
        "OpenAI Agents SDK, LangChain and pydantic-ai replaying real transcripts: alone, with "
        "their own context option, with contextfold (32k): calls over the window, tokens, "
        "prefix reuse, retention, overhead per call",
        "2",
    ),
)


@dataclass
class Outcome:
    name: str
    status: str
    seconds: float


def select(only: str | None) -> list[Benchmark]:
    """The benchmarks named in ``only`` (comma-separated names or aliases), in suite order."""
    if not only:
        return list(BENCHMARKS)
    wanted = {n.strip() for n in only.split(",") if n.strip()}
    known = {alias: b.name for b in BENCHMARKS for alias in (b.name, *b.aliases)}
    unknown = sorted(wanted - known.keys())
    if unknown:
        names = ", ".join(b.name for b in BENCHMARKS)
        raise ValueError(f"unknown benchmark {', '.join(unknown)}; known: {names} (and cache)")
    chosen = {known[n] for n in wanted}
    return [b for b in BENCHMARKS if b.name in chosen]


def run_one(benchmark: Benchmark, flags: Sequence[str]) -> Outcome:
    """Run one benchmark in its own process, its output streaming through."""
    if benchmark.needs_shared_data and not TRAJECTORIES.exists():
        print(f"\n=== {benchmark.name}: skipped (needs the shared transcripts at {TRAJECTORIES})")
        return Outcome(benchmark.name, "skipped: no shared data", 0.0)
    command = [sys.executable, "-m", f"benchmarks.{benchmark.name}", *flags]
    print(f"\n=== {benchmark.name}: {' '.join(command[1:])}", flush=True)
    started = time.perf_counter()
    code = subprocess.call(command, cwd=ROOT, env=os.environ.copy())
    seconds = time.perf_counter() - started
    if code == 0:
        status = "ok"
    elif code == SKIPPED_EXIT:
        status = "skipped (see its output)"
    else:
        status = f"FAILED (exit {code})"
    print(f"=== {benchmark.name}: {status}, {seconds:.1f} s", flush=True)
    return Outcome(benchmark.name, status, seconds)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="small samples, seconds each (CI)")
    parser.add_argument(
        "--write",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write RESULTS.md (default: yes, but no with --quick)",
    )
    parser.add_argument("--only", metavar="NAME[,NAME]", help="run only these benchmarks")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    if args.list:
        for b in BENCHMARKS:
            also = f" (also: {', '.join(b.aliases)})" if b.aliases else ""
            print(f"{b.name}{also}: {b.measures}")
        return 0
    try:
        chosen = select(args.only)
    except ValueError as error:
        parser.error(str(error))
    flags = ["--quick"] if args.quick else []
    if args.write is not None:
        flags.append("--write" if args.write else "--no-write")
    writes = bool(args.write) if args.write is not None else not args.quick
    print(f"benchmarks: {', '.join(b.name for b in chosen)}; {machine_line()}")
    if not writes:
        print("RESULTS.md is left as it is (quick runs write only with --write)")
    started = time.perf_counter()
    outcomes = [run_one(b, flags) for b in chosen]
    total = time.perf_counter() - started
    print()
    print(
        markdown_table(
            ("benchmark", "status", "seconds"),
            [(o.name, o.status, f"{o.seconds:.1f}") for o in outcomes],
        )
    )
    print(f"suite: {total:.1f} s{' (quick)' if args.quick else ''}")
    if writes:
        from benchmarks.scoreboard import render

        print("\nScoreboard (also at the top of benchmarks/RESULTS.md):\n")
        print(render(load_figures()))
    failed = [o for o in outcomes if o.status.startswith("FAILED")]
    if failed:
        print(f"\nfailed: {', '.join(o.name for o in failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
