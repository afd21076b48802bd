"""The scoreboard at the top of RESULTS.md: every target of the issues, met or not, with figures.

Each benchmark judges its own targets (it knows its data) and records the rows with
:func:`benchmarks._results.record_targets`; this module only lays out the latest rows of every
benchmark, in a fixed order, and lists what holds back each target that is not met.

Run: ``python -m benchmarks.scoreboard`` rebuilds it from ``benchmarks/results.json`` (no
measuring).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from benchmarks import readme_figures
from benchmarks._results import ROOT, load_figures, markdown_table, replace_block, write_section

README = ROOT / "benchmarks" / "README.md"
"""The benchmarks' README carries a copy of the scoreboard between the same markers."""

ORDER: tuple[tuple[str, str], ...] = (
    ("token_accuracy", "python -m benchmarks.token_accuracy"),
    ("live_tokens", "python -m benchmarks.live_tokens"),
    ("outputs", "python -m benchmarks.outputs"),
    ("store", "python -m benchmarks.store"),
    ("redaction", "python -m benchmarks.redaction"),
    ("engine_overhead", "python -m benchmarks.engine_overhead"),
    ("compaction", "python -m benchmarks.compaction"),
    ("clients", "python -m benchmarks.clients"),
)
"""The benchmarks that judge targets, in scoreboard order, with the command that measures them."""


def render(figures: dict[str, Any]) -> str:
    """The scoreboard's markdown body from the recorded rows."""
    rows: list[tuple[object, ...]] = []
    held: list[str] = []
    missing: list[str] = []
    for name, command in ORDER:
        entry = figures.get(name)
        if not entry:
            missing.append(f"`{command}`")
            continue
        when = entry["measured"].split(",", 1)[0]
        quick = " (quick sample)" if entry.get("quick") else ""
        for row in entry["targets"]:
            status = "met" if row["met"] else "**not met**"
            rows.append(
                (
                    row["area"],
                    row["target"],
                    row["measured"] + quick,
                    row.get("versus") or "—",
                    status,
                    when,
                )
            )
            if not row["met"]:
                reason = row.get("held_back") or "not yet diagnosed"
                held.append(f"- **{row['area']} — {row['target']}**: {reason}")
    table = markdown_table(
        (
            "area",
            "target",
            "measured on this machine",
            "vs the best peer or baseline",
            "status",
            "run",
        ),
        rows,
    )
    met = sum(1 for row in rows if row[4] == "met")
    body = "\n\n".join(
        [
            "Every target the issues set, judged by the latest run of the benchmark that measures "
            "it (its section of RESULTS.md has the method and the full tables). Comparisons are "
            "with the best LangChain peer or baseline measured in the same run.",
            f"**{met} of {len(rows)} targets met.**",
            table,
        ]
    )
    if held:
        body += "\n\nWhat holds back the targets not met (measured; details in each section):\n\n"
        body += "\n".join(held)
    if missing:
        body += "\n\nNot measured yet: " + ", ".join(missing) + "."
    return body


def write_scoreboard() -> None:
    """Rebuild the scoreboard section of RESULTS.md from ``results.json``."""
    stamp = (
        f"Rebuilt {time.strftime('%Y-%m-%d')} from the latest run of each benchmark (the run "
        "column); machine and versions in each section"
    )
    body = render(load_figures())
    write_section("scoreboard", "Scoreboard", body, top=True, stamp=stamp + ".")
    if README.exists():
        replace_block(README, "scoreboard", f"_{stamp}._\n\n{body}")
    readme_figures.write()  # the main README quotes a few rows


def main(argv: Sequence[str] | None = None) -> None:
    # No options; the parser gives --help and refuses a mistyped one instead of rewriting files.
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    write_scoreboard()
    print(render(load_figures()))


if __name__ == "__main__":
    main()
