"""The loss report: what a compaction took out of the view, and where it can still be read.

A compaction or a mask batch replaces part of the view; the facts in that part do not all
vanish. :func:`loss_report` compares the view before and after and, for each probe that was in
the conversation before and is not after (or was in the artifact ledger, which the refresh
dropped it from to stay within its bounds), says where the model can still read it, the best
place first:

- ``summary`` — a summary in the new view quotes it;
- ``pinned`` — a pin carries it (pins are in every request's system prompt);
- ``ledger`` — the artifact ledger lists it (:mod:`contextfold.retention.ledger`);
- ``ref`` — the stored output it came from is named in the new view or the ledger, so
  ``read_result <ref>`` reads it back;
- ``lost`` — nowhere the model can reach.

The probes are the facts the summaries are written from (:func:`~contextfold.compaction.
extract_facts`: the task, the user's requests and constraints, the files read and modified, the
error lines), the session's pins, and the ledger's items (commands and identifiers besides).
Matching is on exact wording, case-insensitive with whitespace collapsed, so a paraphrase counts
as lost; a path also matches by its last two components. Everything here is a pure function of
messages, so the same compaction always gets the same report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from contextfold.events import LossReported
from contextfold.history.facts import extract_facts
from contextfold.history.texts import part_texts
from contextfold.messages import (
    Message,
    SummaryPart,
)
from contextfold.redaction.redactor import redact_text
from contextfold.retention.ledger import Ledger, LedgerItem, ledger_items, output_ref, visible_refs

__all__ = [
    "MAX_LISTED_ITEMS",
    "WHERES",
    "LossItem",
    "LossReport",
    "Probe",
    "ProbeKind",
    "Where",
    "count_line",
    "event_line",
    "left_the_view",
    "loss_report",
    "probes_of",
]

Where: TypeAlias = Literal["summary", "pinned", "ledger", "ref", "lost"]
"""Where a probe that left the view can still be read (see the module docstring)."""

WHERES: tuple[Where, ...] = ("summary", "pinned", "ledger", "ref", "lost")
"""The places, best first: the first that holds a probe is its answer."""

ProbeKind: TypeAlias = Literal[
    "task", "request", "constraint", "file", "error", "pin", "command", "identifier"
]
"""What a probe is."""

MAX_LISTED_ITEMS = 40
"""Items a report lists one by one (lost ones first); its counts cover every item."""

TASK_PROBE_CHARS = 200
"""Characters of the task's first line probed: a summary restates a long task, rarely whole."""

_SUMMARY_KINDS = frozenset({"summary", "tool_summary"})
"""Message kinds whose text is a summary rather than the conversation itself."""

_OUTPUT_KINDS: frozenset[ProbeKind] = frozenset({"file", "error", "command", "identifier"})
"""Probes whose tool output is worth reading back (a user's words are never stored as one)."""


@dataclass(frozen=True, slots=True)
class Probe:
    """One thing to look for: its kind, its text, the normalized wordings that match it, and
    the refs of the outputs it came from."""

    kind: ProbeKind
    text: str
    needles: tuple[str, ...]
    refs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LossItem:
    """A probe that left the view, and where it can be read now (``ref`` when ``where`` is
    ``"ref"``)."""

    kind: ProbeKind
    text: str
    where: Where
    ref: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (as :class:`~contextfold.events.LossReported` lists it)."""
        return {"kind": self.kind, "text": self.text, "where": self.where, "ref": self.ref}


@dataclass(frozen=True)
class LossReport:
    """Every probe that left the view in one compaction, with where each can be read."""

    items: tuple[LossItem, ...] = ()

    def count(self, where: Where | None = None) -> int:
        """How many items are in ``where`` (all of them without it)."""
        return sum(1 for i in self.items if where is None or i.where == where)

    @property
    def lost(self) -> tuple[LossItem, ...]:
        """The items nothing holds any more."""
        return tuple(i for i in self.items if i.where == "lost")

    def listed(self) -> tuple[LossItem, ...]:
        """At most :data:`MAX_LISTED_ITEMS` items, the lost ones first, then by place (worst
        first), each group in the order it happened."""
        rank = {w: i for i, w in enumerate(reversed(WHERES))}
        return tuple(sorted(self.items, key=lambda i: rank[i.where])[:MAX_LISTED_ITEMS])

    def line(self) -> str:
        """One line for a person: ``3 facts out of view (1 in summary, 2 behind refs, 0
        lost)`` (see :func:`count_line`)."""
        return count_line(
            in_summary=self.count("summary"),
            pinned=self.count("pinned"),
            in_ledger=self.count("ledger"),
            behind_ref=self.count("ref"),
            lost=self.count("lost"),
        )


def count_line(*, in_summary: int, pinned: int, in_ledger: int, behind_ref: int, lost: int) -> str:
    """The counts of a loss report in one line; places holding nothing are left out, except
    the summary, refs and lost (the three every compaction can have)."""
    total = in_summary + pinned + in_ledger + behind_ref + lost
    parts = [f"{in_summary} in summary"]
    if pinned:
        parts.append(f"{pinned} pinned")
    if in_ledger:
        parts.append(f"{in_ledger} in the ledger")
    parts += [f"{behind_ref} behind refs", f"{lost} lost"]
    return f"{total} {'fact' if total == 1 else 'facts'} out of view ({', '.join(parts)})"


def event_line(event: LossReported) -> str:
    """:func:`count_line` for a :class:`~contextfold.events.LossReported` event."""
    return count_line(
        in_summary=event.in_summary,
        pinned=event.pinned,
        in_ledger=event.in_ledger,
        behind_ref=event.behind_ref,
        lost=event.lost,
    )


# --------------------------------------------------------------------------------------------------
# Probes
# --------------------------------------------------------------------------------------------------


def probes_of(messages: Sequence[Message], *, pins: Iterable[str] = ()) -> list[Probe]:
    """The probes of ``messages``: facts, pins, then ledger items, one per wording (the first
    kind that names a text keeps it). Summaries already in ``messages`` are not read: the
    probes are what happened, not what someone wrote about it."""
    conversation = [m for m in messages if not _is_summary(m)]
    refs = _output_refs(conversation)
    facts = extract_facts(conversation)
    found: list[Probe] = []
    if facts.task is not None:
        # Redacted before the cut (the event is stored; half a secret no longer looks like one).
        task = _first_line(redact_text(facts.task.text))[:TASK_PROBE_CHARS]
        found.append(_probe("task", task))
    found += [_probe("request", f.text) for f in facts.user_requests]
    found += [_probe("constraint", f.text) for f in facts.constraints]
    for fact in (*facts.files_modified, *facts.files_read):
        found.append(_probe("file", fact.text, _refs_for(fact.sources, refs)))
    found += [_probe("error", f.text, _refs_for(f.sources[-1:], refs)) for f in facts.errors]
    found += [_probe("pin", text) for text in pins]
    stored = {ref for listed in refs.values() for ref in listed}
    for item in ledger_items(conversation, readable_refs=stored):
        kind: ProbeKind = item.kind
        found.append(_probe(kind, item.text, (item.ref,) if item.ref else ()))
    unique: dict[str, Probe] = {}
    for probe in found:
        if probe.needles and all(probe.needles):
            unique.setdefault(probe.needles[0], probe)
    return list(unique.values())


def _probe(kind: ProbeKind, text: str, refs: Iterable[str] = ()) -> Probe:
    needles = _path_needles(text) if kind == "file" else (_normalize(text.rstrip("…")),)
    return Probe(kind, text, needles, tuple(dict.fromkeys(refs)) if kind in _OUTPUT_KINDS else ())


def _output_refs(messages: Sequence[Message]) -> dict[str, list[str]]:
    """The refs of the outputs each message id stands for: a result message's own outputs, and
    the outputs answering an assistant message's calls."""
    by_call: dict[str, str] = {}
    refs: dict[str, list[str]] = {}
    for message in messages:
        for result in message.tool_results:
            ref = output_ref(result)
            by_call.setdefault(result.call_id, ref)
            refs.setdefault(message.id, []).append(ref)
    for message in messages:
        for call in message.tool_calls:
            if call.call_id in by_call:
                refs.setdefault(message.id, []).append(by_call[call.call_id])
        if message.role == "assistant" and message.id in by_call:  # a text-command agent
            refs.setdefault(message.id, []).append(by_call[message.id])
    return refs


def _refs_for(sources: Iterable[str], refs: Mapping[str, list[str]]) -> list[str]:
    return [ref for source in sources for ref in refs.get(source, ())]


# --------------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------------


def loss_report(
    before: Sequence[Message],
    after: Sequence[Message],
    *,
    pins: Iterable[str] = (),
    ledger: Ledger | None = None,
    previous_ledger: Ledger | None = None,
) -> LossReport:
    """What left the view between ``before`` and ``after``, and where each can be read now.

    ``pins`` are the session's pin texts and ``ledger`` its ledger as refreshed for ``after``
    (both are sent with every request, so what they hold is not lost). ``previous_ledger`` is
    the ledger ``before`` was sent with: an item the refresh dropped to stay within its bounds
    left the view too, unless the conversation still shows it.
    """
    pin_texts = tuple(pins)
    before_text, _ = _view_text(before)
    after_text, after_summaries = _view_text(after)
    ledger = ledger or Ledger()
    pinned = _normalize("\n".join(pin_texts))
    listed = _normalize(ledger.render())
    reachable = visible_refs(after) | ledger.refs
    probes = [p for p in probes_of(before, pins=pin_texts) if _has(before_text, p.needles)]
    probed = {p.needles[0] for p in probes}
    for item in previous_ledger.items if previous_ledger is not None else ():
        probe = _probe(item.kind, item.text, (item.ref,) if item.ref else ())
        if probe.needles[0] not in probed:
            probed.add(probe.needles[0])
            probes.append(probe)
    items: list[LossItem] = []
    for probe in probes:
        needles = probe.needles
        if _has(after_text, needles):
            continue  # still in the conversation
        if _has(after_summaries, needles):
            items.append(LossItem(probe.kind, probe.text, "summary"))
        elif _has(pinned, needles):
            items.append(LossItem(probe.kind, probe.text, "pinned"))
        elif _has(listed, needles):
            if not _has(before_text, needles):
                continue  # in the ledger before and after: it never left the view
            items.append(LossItem(probe.kind, probe.text, "ledger"))
        else:
            ref = next((r for r in probe.refs if r in reachable), None)
            where: Where = "lost" if ref is None else "ref"
            items.append(LossItem(probe.kind, probe.text, where, ref))
    return LossReport(tuple(items))


def left_the_view(items: Iterable[LedgerItem], after: Sequence[Message]) -> list[LedgerItem]:
    """The ``items`` whose wording no longer appears in ``after``'s conversation (what a ledger
    refreshed for ``after`` must name: what is still in view needs no entry)."""
    text, _ = _view_text(after)
    return [
        item
        for item in items
        if not _has(
            text, _path_needles(item.text) if item.kind == "file" else (_normalize(item.text),)
        )
    ]


def _has(text: str, needles: Iterable[str]) -> bool:
    return any(n in text for n in needles)


def _is_summary(message: Message) -> bool:
    return message.meta.kind in _SUMMARY_KINDS


def _view_text(messages: Iterable[Message]) -> tuple[str, str]:
    """The normalized text of ``messages``: the conversation, and the summaries."""
    ordinary: list[str] = []
    summaries: list[str] = []
    for message in messages:
        summary = _is_summary(message)
        for part in message.parts:
            if isinstance(part, SummaryPart):
                summaries.append(part.text)
            else:
                (summaries if summary else ordinary).extend(part_texts(part))
    return _normalize("\n".join(ordinary)), _normalize("\n".join(summaries))


def _path_needles(path: str) -> tuple[str, ...]:
    parts = [p for p in path.split("/") if p and p != "."]
    needles = [_normalize(path)]
    if len(parts) >= 2:
        needles.append(_normalize("/".join(parts[-2:])))
    return tuple(dict.fromkeys(needles))


def _normalize(text: str) -> str:
    return " ".join(text.split()).casefold()


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")
