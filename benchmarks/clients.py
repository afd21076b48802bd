"""Real clients through the proxy: the tests/clients scenarios run, their figures tabled.

Runs ``pytest tests/clients`` (Claude Code, Codex, opencode, aider, mini-swe-agent, each
directly and through the proxy at the windows issue 26 names, against scripted upstreams on
loopback) with ``CONTEXTFOLD_CLIENT_RESULTS`` set, so every client test appends one JSON line of
figures (:class:`tests.clients.harness.RunFigures`), and writes them as the RESULTS.md section
"Real clients through the proxy": per client and window, the requests, the tokens the client
sent and the upstream received, the peak upstream request, the sessions holding the
conversation (and the chains they form), the invariant breaks (which must be 0) and the steps
completed. Any client test that records figures gets its row (bridged protocols included).

A client that is not installed skips its tests (``.ci/run`` installs them); the section lists
the rows it has. ``--quick`` skips the clients altogether (they take minutes).

Run: ``python -m benchmarks.clients [--write] [-k EXPRESSION]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: import the repository's packages
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import (
    ROOT,
    SKIPPED_EXIT,
    benchmark_arguments,
    record_targets,
    should_write,
    target,
    write_section,
)
from tests.clients.results_table import table

SECTION = "clients"
TITLE = "Real clients through the proxy"


def run_client_tests(results: Path, expression: str | None) -> int:
    """``pytest tests/clients`` with the figures going to ``results``; its exit status."""
    command = [sys.executable, "-m", "pytest", "tests/clients", "-q", "-p", "no:cacheprovider"]
    if expression:
        command += ["-k", expression]
    env = {**os.environ, "CONTEXTFOLD_CLIENT_RESULTS": str(results)}
    print(" ".join(command[1:]), flush=True)
    return subprocess.call(command, cwd=ROOT, env=env)


def read_rows(results: Path) -> list[dict[str, Any]]:
    """The figures the client tests recorded, ordered by client, then direct before proxied,
    then by window."""
    if not results.exists():
        return []
    rows = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines() if line]
    return sorted(rows, key=lambda r: (r["client"], r.get("window") or 0, r.get("note", "")))


def summary(rows: Sequence[Mapping[str, Any]]) -> tuple[str, bool]:
    """A sentence on the proxied runs, and whether every one of them passed with 0 breaks."""
    proxied = [r for r in rows if r.get("window")]
    good = [
        r
        for r in proxied
        if r.get("passed") and not r.get("invariant_breaks") and r.get("session_chains") == 1
    ]
    breaks = sum(int(r.get("invariant_breaks") or 0) for r in proxied)
    text = (
        f"{len(good)} of {len(proxied)} runs through the proxy passed (exit 0, every edit "
        f"landed, every step, one chain of sessions); invariant breaks on upstream requests: "
        f"{breaks}."
    )
    return text, bool(proxied) and len(good) == len(proxied)


def main(argv: Sequence[str] | None = None) -> int:
    parser = benchmark_arguments(__doc__.splitlines()[0])
    parser.add_argument("-k", dest="expression", help="only the client tests pytest -k selects")
    args = parser.parse_args(argv)
    if args.quick:
        print("skipped: real clients take minutes; run without --quick to measure them")
        return SKIPPED_EXIT
    with tempfile.TemporaryDirectory(prefix="cf-clients-") as tmp:
        results = Path(tmp) / "figures.jsonl"
        started = time.perf_counter()
        status = run_client_tests(results, args.expression)
        seconds = time.perf_counter() - started
        rows = read_rows(results)
    if not rows:
        print("skipped: no client test recorded figures (no client installed?)")
        return SKIPPED_EXIT
    text, all_good = summary(rows)
    body = "\n\n".join(
        [
            text,
            table(rows),
            "Window: the proxy's `--window` (direct: the client talks to the scripted upstream "
            "itself, the control). Tokens are counted by the scripted upstream. Sessions: "
            "stored sessions holding the conversation (chains: those without a parent among "
            "them). Breaks: tests/clients/invariants.py on every upstream request against the "
            f"client request it was made for. pytest took {seconds:.0f} s (exit {status}).",
        ]
    )
    print(body)
    if should_write(args):
        write_section(SECTION, TITLE, body)
        record_targets(
            SECTION,
            [
                target(
                    "proxy",
                    "real clients through the proxy: exit 0, every edit, 0 invariant breaks, "
                    "one session chain",
                    text,
                    all_good,
                )
            ],
            {"rows": rows},
        )
    return 0 if status in (0, 5) else 1


if __name__ == "__main__":
    sys.exit(main())
