"""The RESULTS.md table "Real clients through the proxy" from the JSON lines the client tests
append to ``$CONTEXTFOLD_CLIENT_RESULTS``: ``python -m tests.clients.results_table FILE``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["table"]

_HEAD = (
    "| client | window | passed | requests | tokens sent by the client | tokens the upstream got "
    "| peak upstream request | sessions (chains) | invariant breaks | steps |\n"
    "| --- | ---: | :---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
)


def table(rows: Iterable[Mapping[str, Any]]) -> str:
    """One Markdown row per test run, direct controls included (window "direct")."""
    lines = [_HEAD]
    for row in rows:
        window = f"{row['window']:,}" if row.get("window") else "direct"
        sessions = (
            "–" if row.get("sessions") is None else f"{row['sessions']} ({row['session_chains']})"
        )
        breaks = row.get("invariant_breaks", 0)
        rules = row.get("breaks_by_rule") or {}
        detail = f" ({', '.join(f'{k} {v}' for k, v in sorted(rules.items()))})" if rules else ""
        client = f"{row['client']} ({row['note']})" if row.get("note") else row["client"]
        lines.append(
            f"| {client} | {window} | {'yes' if row.get('passed') else 'no'} "
            f"| {row.get('client_requests', 0)} | {row.get('client_tokens', 0):,} "
            f"| {row.get('upstream_tokens', 0):,} | {row.get('peak_upstream_request', 0):,} "
            f"| {sessions} | {breaks}{detail} "
            f"| {row.get('steps_completed', 0)}/{row.get('steps_planned', 0)} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    text = Path(sys.argv[1]).read_text(encoding="utf-8")
    print(table(json.loads(line) for line in text.splitlines() if line.strip()))
