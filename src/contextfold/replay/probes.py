"""Retention probes: which facts of a whole session a compacted view still holds.

The facts come from the *full* transcript, through the same extractor the summarizer uses
(:func:`contextfold.history.facts.extract_facts`): every file the agent modified, every
distinct error line its tools printed, the task statement, and every constraint the user stated.
Each one is looked up in a view and gets one status, the best that applies:

- ``verbatim`` — in the view's ordinary messages (text, tool calls and their arguments, tool
  outputs);
- ``summary`` — in a summary the view holds (a compaction summary or a tool-result digest);
- ``recoverable`` — only in a stored output that a ``ref`` in the view points to, so the model can
  get it back with ``read_result``;
- ``lost`` — nowhere the model can reach.

Matching is on exact wording, case-insensitive, with whitespace collapsed: a paraphrase counts as
lost. Two allowances keep it fair across agents: a file also matches by its last two path
components (``pkg/module.py``: summaries often drop the working-directory prefix), and the task is
probed by its first real sentence (:func:`task_probe_text`), not its whole text, which a summary
restates but rarely quotes in full. What the agent harness wrote in user messages (interruption
markers, task notifications, hook reminders: :mod:`contextfold.history.harness_notes`) is neither
the task nor a constraint; a slash command the user typed is, as its command line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from contextfold.history.facts import extract_facts
from contextfold.history.harness_notes import typed_text
from contextfold.history.texts import part_texts
from contextfold.messages import (
    Message,
    MessageKind,
)
from contextfold.outputs.blobs import REF_PATTERN
from contextfold.transcripts.transcript import Transcript

__all__ = [
    "PROBE_KINDS",
    "STATUSES",
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

ProbeKind: TypeAlias = Literal["files_modified", "errors", "task", "constraints"]
Status: TypeAlias = Literal["verbatim", "summary", "recoverable", "lost"]

PROBE_KINDS: tuple[ProbeKind, ...] = ("files_modified", "errors", "task", "constraints")
"""The kinds of fact probed, in display order."""
STATUSES: tuple[Status, ...] = ("verbatim", "summary", "recoverable", "lost")
"""The statuses, best first."""

TASK_SENTENCE_MIN_CHARS = 20
"""Shortest sentence that can stand for the task (shorter ones are greetings or tags)."""
TASK_PROBE_MAX_CHARS = 200
"""Longest task probe: a summary that quotes the task quotes at least this much of its start."""
SUMMARY_KINDS: frozenset[MessageKind] = frozenset({"summary", "tool_summary"})
"""Message kinds whose text counts as a summary rather than the conversation itself."""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_TAG_ONLY = re.compile(r"^\s*</?[\w-]+>\s*$")


@dataclass(frozen=True, slots=True)
class Probe:
    """One fact to look for: its kind, its text, and the wordings that count as a match."""

    kind: ProbeKind
    text: str
    needles: tuple[str, ...]


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
# Probes from a transcript
# --------------------------------------------------------------------------------------------------


def probes_for(messages: Sequence[Message]) -> list[Probe]:
    """The facts of a whole session to probe for, from its messages.

    Summaries an earlier compaction left in ``messages`` (e.g. Claude Code's) are skipped: the
    facts are what happened, not what someone wrote about it.
    """
    facts = extract_facts([m for m in messages if m.meta.kind not in SUMMARY_KINDS])
    probes: list[Probe] = [
        Probe("files_modified", f.text, _path_needles(f.text)) for f in facts.files_modified
    ]
    probes += [Probe("errors", f.text, (_needle(f.text),)) for f in facts.errors]
    if facts.task is not None:
        task = task_probe_text(facts.task.text)
        if task:
            probes.append(Probe("task", task, (_needle(task),)))
    probes += [Probe("constraints", f.text, (_needle(f.text),)) for f in facts.constraints]
    return [p for p in probes if all(p.needles)]


def task_probe_text(task: str) -> str:
    """The sentence that stands for the task: its first sentence of at least
    :data:`TASK_SENTENCE_MIN_CHARS` characters that is neither a bare tag nor a lead-in ending
    with a colon, cut to :data:`TASK_PROBE_MAX_CHARS`; the task's start when none qualifies."""
    for raw in _SENTENCE_END.split(task):
        sentence = " ".join(raw.split())
        if (
            len(sentence) >= TASK_SENTENCE_MIN_CHARS
            and not _TAG_ONLY.match(sentence)
            and not sentence.endswith(":")
        ):
            return sentence[:TASK_PROBE_MAX_CHARS]
    return " ".join(task.split())[:TASK_PROBE_MAX_CHARS]


def _needle(text: str) -> str:
    # Facts longer than their limit end with an ellipsis the original never had.
    return normalize(text.rstrip("…").rstrip(" .!?"))


def _path_needles(path: str) -> tuple[str, ...]:
    parts = [p for p in path.split("/") if p and p != "."]
    needles = [normalize(path)]
    if len(parts) >= 2:
        needles.append(normalize("/".join(parts[-2:])))
    return tuple(dict.fromkeys(needles))


def normalize(text: str) -> str:
    """``text`` as probes match it: whitespace collapsed, case folded."""
    return " ".join(text.split()).casefold()


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


class ViewText:
    """A view's text, normalized for lookups: its ordinary messages, its summaries, and (read
    only when a lookup needs it) the stored outputs its refs point to.

    One lookup gives the best :data:`Status` that applies; the grounding probes
    (:mod:`contextfold.replay.grounding`) look up many needles in one view through it.
    """

    def __init__(
        self,
        ordinary: str,
        summaries: str,
        refs: Iterable[str] = (),
        read_ref: Callable[[str], str | None] | None = None,
    ) -> None:
        self.in_view = ordinary
        self.in_summary = summaries
        self.refs = tuple(sorted(set(refs)))
        self.read_ref = read_ref
        self._stored: str | None = None

    @classmethod
    def of(
        cls, view: Sequence[Message], read_ref: Callable[[str], str | None] | None = None
    ) -> ViewText:
        """The text of ``view``; ``read_ref`` reads a stored output by ref (``None``: none is)."""
        ordinary: list[str] = []
        summaries: list[str] = []
        refs: set[str] = set()
        for message in view:
            texts = list(message_texts(message))
            (summaries if message.meta.kind in SUMMARY_KINDS else ordinary).extend(texts)
            refs.update(r.ref for r in message.tool_results if r.ref)
            for text in texts:
                refs.update(REF_PATTERN.findall(text))
        return cls(normalize("\n".join(ordinary)), normalize("\n".join(summaries)), refs, read_ref)

    @property
    def stored(self) -> str:
        """The normalized text of every stored output a ref in the view points to (read once,
        on first use: most lookups end in the view itself)."""
        if self._stored is None:
            blobs: list[str] = []
            if self.read_ref is not None:
                blobs = [b for b in map(self.read_ref, self.refs) if b]
            self._stored = normalize("\n".join(blobs))
        return self._stored

    def status(self, needles: Iterable[str]) -> Status:
        """The best status of any of ``needles`` (already normalized) in this view."""
        needles = tuple(needles)
        if any(n in self.in_view for n in needles):
            return "verbatim"
        if any(n in self.in_summary for n in needles):
            return "summary"
        if self.read_ref is not None and self.refs:
            stored = self.stored
            if stored and any(n in stored for n in needles):
                return "recoverable"
        return "lost"


def message_texts(message: Message) -> Iterable[str]:
    """Every text of ``message`` a model reads: text, summaries, thinking, tool-call arguments
    (raw and decoded) and tool outputs."""
    if message.role == "user":
        # A slash command as the user typed it: the facts quote it so (its record holds tags).
        typed = typed_text(message.text)
        if typed != message.text:
            yield typed
    for part in message.parts:
        yield from part_texts(part)


def original_view(transcript: Transcript) -> list[Message] | None:
    """What the original agent's model saw at the end: its last recorded summary and everything
    after it; ``None`` when the agent never compacted."""
    if not transcript.compactions:
        return None
    start = transcript.compactions[-1].index
    return [m for m in transcript.messages[start:] if m.meta.agent_visible]
