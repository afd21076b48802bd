"""The figures in the main README, copied from the scoreboard of RESULTS.md so they cannot drift.

The README quotes a few rows of the scoreboard (its Benchmarks section, between
``<!-- BEGIN figures -->`` and ``<!-- END figures -->``), and nowhere else quotes a benchmark
figure. The rows are chosen here by area and the start of their target; their cells are
RESULTS.md's, unchanged. :func:`benchmarks.scoreboard.write_scoreboard` rewrites the block
whenever the scoreboard changes, and ``tests/test_readme.py`` checks the README against
:func:`render` of the current RESULTS.md.

Run: ``python -m benchmarks.readme_figures`` rewrites the block from RESULTS.md as it is.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks._results import RESULTS, ROOT, markdown_table, replace_block

__all__ = ["BLOCK", "CHOSEN", "MAIN_README", "ScoreboardRow", "render", "scoreboard_rows"]

MAIN_README = ROOT / "README.md"
BLOCK = "figures"
"""The name of the README's block (``<!-- BEGIN figures -->`` … ``<!-- END figures -->``)."""

CHOSEN: tuple[tuple[str, str], ...] = (
    ("proxy", "real clients through the proxy"),
    ("overflow", "0 requests over the window"),
    ("grounding", "default preset"),
    ("cache", "≥ 85% prefix reuse"),
    ("cost", "default preset"),
    ("token accuracy", "anchored median error"),
    ("engine overhead", "steady turn ≥ 10x cheaper"),
    ("store", "snapshot resume O(view), not O(transcript) (SQLite)"),
    ("redaction", "recall"),
    ("redaction", "≤ 1 false positive"),
)
"""The scoreboard rows the README quotes, in its order: (area, start of the target)."""

_CELL_SPLIT = re.compile(r"(?<!\\) \| ")
_STAMP = re.compile(r"^_Rebuilt (\d{4}-\d{2}-\d{2})", re.M)


@dataclass(frozen=True)
class ScoreboardRow:
    """One row of the scoreboard table, its cells as RESULTS.md prints them."""

    area: str
    target: str
    measured: str
    versus: str
    status: str
    run: str


def _scoreboard(results: str) -> str:
    begin, end = "<!-- BEGIN scoreboard -->", "<!-- END scoreboard -->"
    if begin not in results or end not in results:
        raise ValueError("RESULTS.md has no scoreboard: run python -m benchmarks.scoreboard")
    return results.split(begin, 1)[1].split(end, 1)[0]


def scoreboard_rows(results: str) -> list[ScoreboardRow]:
    """The rows of the scoreboard table in RESULTS.md's text ``results``."""
    rows = []
    for line in _scoreboard(results).splitlines():
        if not line.startswith("| ") or line.startswith("| area |"):
            continue
        cells = _CELL_SPLIT.split(line[2:-2])
        if len(cells) == 6:
            rows.append(ScoreboardRow(*cells))
    return rows


def render(results: str) -> str:
    """The README's figures block for RESULTS.md's text ``results``."""
    rows = scoreboard_rows(results)
    chosen = []
    for area, target in CHOSEN:
        found = next((r for r in rows if r.area == area and r.target.startswith(target)), None)
        if found is None:
            raise ValueError(f"the scoreboard has no row {area!r} / {target!r}...")
        chosen.append((found.target, found.measured, found.versus, found.status))
    stamp = _STAMP.search(_scoreboard(results))
    when = f", rebuilt {stamp.group(1)}" if stamp else ""
    table = markdown_table(
        ("target", "measured on a 2-core machine", "vs the best peer or baseline", "status"),
        chosen,
    )
    return f"_From the scoreboard of `benchmarks/RESULTS.md`{when}._\n\n{table}"


def write() -> bool:
    """Rewrite the README's figures block from RESULTS.md (False when the README has none)."""
    return replace_block(MAIN_README, BLOCK, render(RESULTS.read_text(encoding="utf-8")))


def main(argv: Sequence[str] | None = None) -> None:
    # No options; the parser gives --help and refuses a mistyped one instead of rewriting files.
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    if not write():
        raise SystemExit(f"{MAIN_README} has no <!-- BEGIN {BLOCK} --> block")
    print(render(RESULTS.read_text(encoding="utf-8")))


if __name__ == "__main__":
    main()
