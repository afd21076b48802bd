"""Retention probes: which facts of a whole session a compacted view still holds.

The facts, their statuses and how a view is searched are defined once, in
:mod:`contextfold.retention.probes` (the loss report uses the same); this module checks every
fact of a session against one view and counts the results for the replay's retention table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from contextfold.messages import Message
from contextfold.retention.probes import (
    PROBE_KINDS,
    STATUSES,
    SUMMARY_KINDS,
    Probe,
    ProbeKind,
    Status,
    ViewText,
    message_texts,
    normalize,
    probes_for,
    task_probe_text,
)
from contextfold.transcripts.transcript import Transcript

__all__ = [
    "PROBE_KINDS",
    "STATUSES",
    "SUMMARY_KINDS",
    "Probe",
    "ProbeKind",
    "ProbeResult",
    "Retention",
    "Status",
    "ViewText",
    "check_retention",
    "message_texts",
    "normalize",
    "original_view",
    "probes_for",
    "task_probe_text",
]


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """Where one fact was found."""

    probe: Probe
    status: Status


@dataclass(frozen=True)
class Retention:
    """The status of every probe in one view, with counts by kind."""

    results: tuple[ProbeResult, ...]

    def total(self, kind: ProbeKind | None = None) -> int:
        """How many facts were probed (of one kind, or all)."""
        return sum(1 for r in self.results if kind is None or r.probe.kind == kind)

    def count(self, status: Status, kind: ProbeKind | None = None) -> int:
        """How many facts (of one kind, or all) have ``status``."""
        return sum(
            1 for r in self.results if r.status == status and (kind is None or r.probe.kind == kind)
        )

    def kept(self, kind: ProbeKind | None = None) -> int:
        """Facts the model still reads: verbatim or in a summary."""
        return self.count("verbatim", kind) + self.count("summary", kind)

    def reachable(self, kind: ProbeKind | None = None) -> int:
        """Facts the model can still get: kept, or recoverable through ``read_result``."""
        return self.kept(kind) + self.count("recoverable", kind)

    def rate(self, kind: ProbeKind | None = None) -> float | None:
        """Share of facts kept; ``None`` when there was nothing to probe."""
        total = self.total(kind)
        return self.kept(kind) / total if total else None

    def lost(self, kind: ProbeKind | None = None) -> list[str]:
        """The texts of the lost facts."""
        return [
            r.probe.text
            for r in self.results
            if r.status == "lost" and (kind is None or r.probe.kind == kind)
        ]

    def to_json(self) -> dict[str, Any]:
        """Counts by kind and status, the overall kept rate, and the lost facts."""
        by_kind: dict[str, Any] = {}
        for kind in PROBE_KINDS:
            counts: dict[str, Any] = {s: self.count(s, kind) for s in STATUSES}
            counts["total"] = self.total(kind)
            by_kind[kind] = counts
        return {
            "kept_rate": self.rate(),
            "total": self.total(),
            "kept": self.kept(),
            "recoverable": self.count("recoverable"),
            "lost": self.count("lost"),
            "by_kind": by_kind,
            "lost_facts": self.lost(),
        }


# --------------------------------------------------------------------------------------------------
# Checking a view
# --------------------------------------------------------------------------------------------------


def check_retention(
    probes: Iterable[Probe],
    view: Sequence[Message],
    read_ref: Callable[[str], str | None] | None = None,
) -> Retention:
    """The status of each probe in ``view``.

    ``read_ref`` returns the stored text behind a ref (``None`` when unknown); without it
    nothing counts as recoverable (e.g. another agent's view, which has no refs).
    """
    text = ViewText.of(view, read_ref)
    return Retention(tuple(ProbeResult(probe, text.status(probe.needles)) for probe in probes))


def original_view(transcript: Transcript) -> list[Message] | None:
    """What the original agent's model saw at the end: its last recorded summary and everything
    after it; ``None`` when the agent never compacted."""
    if not transcript.compactions:
        return None
    start = transcript.compactions[-1].index
    return [m for m in transcript.messages[start:] if m.meta.agent_visible]
