"""Shared helpers for benchmark scripts: the shared corpus, machine facts, and RESULTS.md.

Each benchmark owns one section of ``benchmarks/RESULTS.md``, delimited by HTML comments, and
rewrites only that section, so scripts can run alone or together in any order. Its verdicts on
the project's targets go to ``benchmarks/results.json`` (:func:`record_targets`), from which the
scoreboard at the top of RESULTS.md is rebuilt after every write (:mod:`benchmarks.scoreboard`).

Quick runs (``--quick``: small samples, for CI) write nothing unless ``--write`` is given, so quick
figures never overwrite real ones; when they are written, their sections say so.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
FIGURES = ROOT / "benchmarks" / "results.json"
SHARED_DATA = Path(os.environ.get("CONTEXTFOLD_SHARED_DATA") or ROOT.parent / "shared" / "data")
"""The shared corpus: ``../shared/data`` beside the repository, or the folder
``$CONTEXTFOLD_SHARED_DATA`` names (a checkout elsewhere, a corpus of your own laid out alike)."""
TRAJECTORIES = SHARED_DATA / "trajectories"

_HEADER = """# Benchmark results

Written by the scripts in `benchmarks/` (run `python -m benchmarks`, or one script alone). Each
section says when and on what machine it was measured. Timings are this machine's, not promises.
"""


SKIPPED_EXIT = 3
"""Exit status of a benchmark that cannot run here (its data is absent): the suite reports it
as skipped, not failed."""


def require_shared_data() -> Path:
    """The trajectories folder, or exit (status :data:`SKIPPED_EXIT`) with a clear message when
    ``../shared`` is absent."""
    if not TRAJECTORIES.exists():
        print(f"skipped: this benchmark needs the shared transcripts at {TRAJECTORIES} (absent)")
        sys.exit(SKIPPED_EXIT)
    return TRAJECTORIES


def benchmark_arguments(description: str) -> argparse.ArgumentParser:
    """An argument parser with the options every benchmark takes: ``--quick`` and ``--write``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--quick", action="store_true", help="small samples, seconds (checks the script runs)"
    )
    parser.add_argument(
        "--write",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write RESULTS.md (default: yes for a full run, no with --quick)",
    )
    return parser


def should_write(args: argparse.Namespace) -> bool:
    """Whether a run writes RESULTS.md: full runs do, quick ones only when asked."""
    return bool(args.write) if args.write is not None else not args.quick


def machine_line() -> str:
    """One line describing the machine and the versions that matter for the figures."""
    versions = []
    for package in ("tiktoken", "langchain-core", "langchain", "langgraph", "psycopg"):
        try:
            versions.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            pass
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"{time.strftime('%Y-%m-%d')}, {cpu}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        + ", ".join(versions)
    )


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured markdown table."""

    def cell(value: object) -> str:
        return str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def timings(
    action: Callable[[], object], runs: int, clock: Callable[[], float] = time.perf_counter
) -> list[float]:
    """Seconds each of ``runs`` calls of ``action`` took by ``clock``, in call order."""
    times = []
    for _ in range(runs):
        started = clock()
        action()
        times.append(clock() - started)
    return times


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    if len(values) == 1:
        return float(values[0])
    cuts = statistics.quantiles(values, n=1000, method="inclusive")
    index = min(len(cuts) - 1, max(0, round(q * 10) - 1))
    return cuts[index] if 0 < q < 100 else (min(values) if q <= 0 else max(values))


@contextmanager
def _locked() -> Iterator[None]:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(RESULTS.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def write_section(
    name: str,
    title: str,
    body: str,
    *,
    quick: bool = False,
    top: bool = False,
    stamp: str | None = None,
) -> None:
    """Replace (or add) the section ``name`` of RESULTS.md with ``title`` and ``body``.

    A new section goes at the end, or right after the file's header when ``top``. ``quick`` marks
    the section as measured on small samples. ``stamp`` replaces the "Measured <date, machine>"
    line under the title.
    """
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    sample = " Quick mode (small samples): not the real figures." if quick else ""
    stamp = stamp or f"Measured {machine_line()}."
    block = f"{begin}\n## {title}\n\n_{stamp}{sample}_\n\n{body.strip()}\n{end}"
    with _locked():
        text = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else _HEADER
        if begin in text and end in text:
            head, rest = text.split(begin, 1)
            _, tail = rest.split(end, 1)
            text = head + block + tail
        elif top:
            marker = "<!-- BEGIN "
            at = text.find(marker)
            head, tail = (text, "") if at < 0 else (text[:at], text[at:])
            text = head.rstrip("\n") + "\n\n" + block + "\n\n" + tail
        else:
            text = text.rstrip("\n") + "\n\n" + block + "\n"
        RESULTS.write_text(text, encoding="utf-8")


def replace_block(path: Path, name: str, content: str) -> bool:
    """Replace what lies between ``<!-- BEGIN name -->`` and ``<!-- END name -->`` in ``path``
    (markers kept); False, file untouched, when the markers are absent."""
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    with _locked():
        text = path.read_text(encoding="utf-8")
        if begin not in text or end not in text:
            return False
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        path.write_text(f"{head}{begin}\n{content.strip()}\n{end}{tail}", encoding="utf-8")
    return True


def times_under(limit: float, value: float) -> str:
    """``value`` beside a ``limit`` it should stay under: "12x under" or "2.5x over"."""
    if value <= 0:
        return "—"
    ratio = limit / value
    return f"{ratio:.1f}x under" if ratio >= 1 else f"{1 / ratio:.1f}x over"


def target(
    area: str,
    goal: str,
    measured: str,
    met: bool,
    *,
    versus: str = "",
    held_back: str = "",
) -> dict[str, Any]:
    """One scoreboard row: a target from the issues, what was measured, and whether it is met.

    ``versus`` gives the figure beside the best peer or baseline of the same run; ``held_back``
    says, from a measurement, what keeps an unmet target from being met.
    """
    return {
        "area": area,
        "target": goal,
        "measured": measured,
        "met": met,
        "versus": versus,
        "held_back": held_back,
    }


def load_figures() -> dict[str, Any]:
    """Everything the benchmarks recorded in ``results.json`` (empty when none ran yet)."""
    if not FIGURES.exists():
        return {}
    loaded: dict[str, Any] = json.loads(FIGURES.read_text(encoding="utf-8"))
    return loaded


def record_targets(
    name: str,
    targets: Sequence[Mapping[str, Any]],
    figures: Mapping[str, Any] | None = None,
    *,
    quick: bool = False,
) -> None:
    """Store benchmark ``name``'s target rows (and any figures) in ``results.json``, then rebuild
    the scoreboard at the top of RESULTS.md from every benchmark's latest rows."""
    with _locked():
        everything = load_figures()
        everything[name] = {
            "measured": machine_line(),
            "quick": quick,
            "targets": [dict(t) for t in targets],
            "figures": dict(figures or {}),
        }
        FIGURES.write_text(
            json.dumps(everything, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    from benchmarks.scoreboard import write_scoreboard

    write_scoreboard()
