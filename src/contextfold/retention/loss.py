"""The loss report: what a compaction took out of the view, and where it can still be read.

A compaction or a mask batch replaces part of the view; what was in that part does not all
vanish. :func:`loss_report` compares the view before and after and accounts for two things.

**Facts.** The facts are those of the replay's retention table, found and looked up the same way
(:mod:`contextfold.retention.probes`: the task, the user's constraints, the files modified, the
error lines). Each fact whose place changed, and which is not in the conversation any more, is
an item saying where the model can read it now, the best place first:

- ``summary`` — a summary in the new view quotes it;
- ``pinned`` — a pin carries it (pins are in every request's system prompt);
- ``ledger`` — the artifact ledger lists it (:mod:`contextfold.retention.ledger`);
- ``recoverable`` — a stored output that the new view or the ledger names holds it, so
  ``read_result <ref>`` reads it back (what a ref leads to is never called lost);
- ``lost`` — nowhere the model can reach.

The facts probed are those of the view before the compaction and those the session met before
(``known``): a fact a summary carried, and the next summary leaves out, is reported then.

**Messages.** Every message the compaction took out of the view, and every message whose tool
output it replaced, is listed with what stands for it now: a ``summary`` covering it, its
outputs ``recoverable`` through refs, ``lost`` when it held a fact now lost or an output no ref
leads back to, and ``facts_kept`` otherwise (the agent's own words and calls, whose facts, if
any, are still readable).

Everything here is a pure function of its arguments, so the same compaction always gets the same
report.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from contextfold.events import LossReported
from contextfold.messages import Message, SummaryPart
from contextfold.retention._fact_index import FactIndex
from contextfold.retention.ledger import (
    Identifiers,
    Ledger,
    LedgerItem,
    message_identifiers,
    output_ref,
    stored_refs,
)
from contextfold.retention.probes import (
    Probe,
    ProbeKind,
    is_summary,
    message_texts,
    normalize,
    probes_for,
    read_text,
)

__all__ = [
    "MAX_LISTED_ITEMS",
    "MESSAGE_WHERES",
    "WHERES",
    "LossItem",
    "LossReport",
    "LossTracker",
    "MessageOut",
    "MessageWhere",
    "Where",
    "count_line",
    "event_line",
    "left_the_view",
    "loss_report",
    "messages_line",
    "stored_where",
]

Where: TypeAlias = Literal["summary", "pinned", "ledger", "recoverable", "lost"]
"""Where a fact that left the view can still be read (see the module docstring)."""

WHERES: tuple[Where, ...] = ("summary", "pinned", "ledger", "recoverable", "lost")
"""The places, best first: the first that holds a fact is its answer."""

MessageWhere: TypeAlias = Literal["summary", "recoverable", "facts_kept", "lost"]
"""What stands for a message that left the view (see the module docstring)."""

MESSAGE_WHERES: tuple[MessageWhere, ...] = ("summary", "recoverable", "facts_kept", "lost")
"""The answers for messages, in the order a report counts them."""

_OLD_WHERES = {"ref": "recoverable"}
"""Places under the names reports stored before they were renamed."""

MAX_LISTED_ITEMS = 40
"""Items (and messages) a report lists one by one, the lost ones first; its counts cover all."""

_Place: TypeAlias = Literal["verbatim", "summary", "pinned", "ledger", "recoverable", "lost"]


@dataclass(frozen=True, slots=True)
class LossItem:
    """A fact that left the view, and where it can be read now (``ref``: the stored output
    holding it, when ``where`` is ``"recoverable"``)."""

    kind: ProbeKind
    text: str
    where: Where
    ref: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (as :class:`~contextfold.events.LossReported` lists it)."""
        return {"kind": self.kind, "text": self.text, "where": self.where, "ref": self.ref}


@dataclass(frozen=True, slots=True)
class MessageOut:
    """A message the compaction took out of the view (or whose outputs it replaced), and what
    stands for it now (``refs``: the stored outputs that read it back)."""

    id: str
    role: str
    where: MessageWhere
    refs: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (as :class:`~contextfold.events.LossReported` lists it)."""
        return {"id": self.id, "role": self.role, "where": self.where, "refs": list(self.refs)}


@dataclass(frozen=True)
class LossReport:
    """Every fact whose place one compaction changed, and every message it took out of view."""

    items: tuple[LossItem, ...] = ()
    messages: tuple[MessageOut, ...] = ()
    facts: tuple[Probe, ...] = ()
    """Every fact probed (what the session knows of so far, for the next report)."""

    def count(self, where: Where | None = None) -> int:
        """How many items are in ``where`` (all of them without it)."""
        return sum(1 for i in self.items if where is None or i.where == where)

    def count_messages(self, where: MessageWhere | None = None) -> int:
        """How many messages left the view with ``where`` (all of them without it)."""
        return sum(1 for m in self.messages if where is None or m.where == where)

    @property
    def lost(self) -> tuple[LossItem, ...]:
        """The items nothing holds any more."""
        return tuple(i for i in self.items if i.where == "lost")

    def listed(self) -> tuple[LossItem, ...]:
        """At most :data:`MAX_LISTED_ITEMS` items, the lost ones first, then by place (worst
        first), each group in the order it happened."""
        rank = {w: i for i, w in enumerate(reversed(WHERES))}
        return tuple(sorted(self.items, key=lambda i: rank[i.where])[:MAX_LISTED_ITEMS])

    def listed_messages(self) -> tuple[MessageOut, ...]:
        """At most :data:`MAX_LISTED_ITEMS` messages, the lost ones first."""
        return tuple(sorted(self.messages, key=lambda m: m.where != "lost")[:MAX_LISTED_ITEMS])

    def line(self) -> str:
        """One line for a person: ``3 facts out of view (1 in summary, 2 recoverable through
        refs, 0 lost)`` (see :func:`count_line`)."""
        return count_line(
            in_summary=self.count("summary"),
            pinned=self.count("pinned"),
            in_ledger=self.count("ledger"),
            behind_ref=self.count("recoverable"),
            lost=self.count("lost"),
        )


def count_line(*, in_summary: int, pinned: int, in_ledger: int, behind_ref: int, lost: int) -> str:
    """The counts of a loss report in one line; places holding nothing are left out, except
    the summary, refs and lost (the three every compaction can have), and all of them when no
    fact left the view."""
    total = in_summary + pinned + in_ledger + behind_ref + lost
    if not total:
        return "no fact out of view"
    parts = [f"{in_summary} in summary"]
    if pinned:
        parts.append(f"{pinned} pinned")
    if in_ledger:
        parts.append(f"{in_ledger} in the ledger")
    parts += [f"{behind_ref} recoverable through refs", f"{lost} lost"]
    return f"{total} {'fact' if total == 1 else 'facts'} out of view ({', '.join(parts)})"


def messages_line(counts: dict[str, int]) -> str:
    """The messages of a loss report in one line: ``8 messages out of view (3 recoverable
    through refs, 5 with no fact lost)``; empty when no message left the view."""
    total = sum(counts.values())
    if not total:
        return ""
    labels = {
        "summary": "in a summary",
        "recoverable": "recoverable through refs",
        "facts_kept": "with no fact lost",
        "lost": "lost",
    }
    parts = [f"{counts[w]} {labels[w]}" for w in MESSAGE_WHERES if counts.get(w)]
    noun = "message" if total == 1 else "messages"
    return f"{total} {noun} out of view ({', '.join(parts)})"


def event_line(event: LossReported) -> str:
    """:func:`count_line` (and :func:`messages_line`) for a
    :class:`~contextfold.events.LossReported` event."""
    line = count_line(
        in_summary=event.in_summary,
        pinned=event.pinned,
        in_ledger=event.in_ledger,
        behind_ref=event.behind_ref,
        lost=event.lost,
    )
    messages = messages_line(event.message_counts())
    return f"{messages}; {line}" if messages else line


def stored_where(item: Mapping[str, Any]) -> str:
    """The place of a listed item as stored, under its current name."""
    where = str(item.get("where", ""))
    return _OLD_WHERES.get(where, where)


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
    read_ref: Callable[[str], str | None] | None = None,
    known: Iterable[Probe] = (),
) -> LossReport:
    """What left the view between ``before`` and ``after``, and where each can be read now.

    ``pins`` are the session's pin texts and ``ledger`` its ledger as refreshed for ``after``
    (both are sent with every request, so what they hold is not lost); ``previous_ledger`` is
    the ledger ``before`` was sent with. ``read_ref`` reads a stored output by ref (``None``
    when it is not stored); without it nothing counts as recoverable. ``known`` are the facts
    an earlier report probed (:attr:`LossReport.facts`).

    The same as :meth:`LossTracker.report` on a new tracker: a session keeps one, so that
    each compaction searches only the texts and facts the previous ones did not.
    """
    return LossTracker().report(
        before,
        after,
        pins=pins,
        ledger=ledger,
        previous_ledger=previous_ledger,
        read_ref=read_ref,
        known=known,
    )


@dataclass(frozen=True, slots=True)
class _MessageText:
    """What the loss report and the ledger read of one message: its texts, normalized, the
    refs it names (on its tool results and in its texts) and its identifiers."""

    summary: bool
    texts: tuple[str, ...]
    refs: frozenset[str]
    stored: frozenset[str]
    """The refs of the outputs the message stands for (see
    :func:`~contextfold.retention.ledger.stored_refs`)."""
    identifiers: Identifiers
    """What the ledger lists of it once it leaves the view (see
    :func:`~contextfold.retention.ledger.message_identifiers`)."""

    @classmethod
    def of(cls, message: Message) -> _MessageText:
        texts: list[str] = []
        refs = {r.ref for r in message.tool_results if r.ref}
        for text in message_texts(message):
            normalized, named = read_text(text)
            if normalized:
                texts.append(normalized)
            refs.update(named)
        return cls(
            is_summary(message),
            tuple(texts),
            frozenset(refs),
            stored_refs([message]),
            message_identifiers(message),
        )


class LossTracker:
    """A session's loss reports, each the same as :func:`loss_report`'s, computed from what
    the earlier ones read.

    It remembers only what never changes: a message's normalized texts and identifiers
    (messages are immutable), a stored output's text (refs are content addresses), and which
    facts each text shows (:class:`~contextfold.retention._fact_index.FactIndex`). So a report
    searches the texts new since the last one for every fact, and the facts new since then in
    every text; the rest is set lookups. What no view holds any more is let go at each report.
    """

    def __init__(self) -> None:
        self._index = FactIndex()
        self._messages: dict[str, tuple[Message, _MessageText]] = {}
        self._outputs: dict[str, str] = {}

    def report(
        self,
        before: Sequence[Message],
        after: Sequence[Message],
        *,
        pins: Iterable[str] = (),
        ledger: Ledger | None = None,
        previous_ledger: Ledger | None = None,
        read_ref: Callable[[str], str | None] | None = None,
        known: Iterable[Probe] = (),
    ) -> LossReport:
        """What left the view between ``before`` and ``after`` (see :func:`loss_report`)."""
        ledger = ledger or Ledger()
        previous_ledger = previous_ledger or Ledger()
        pinned = normalize("\n".join(pins))
        was_messages = self._read_messages(before)

        def summary(message: Message) -> bool:
            # What was read of it (the same object: ids are unique in a view, not guaranteed).
            read = was_messages.get(message.id)
            return (
                read[1].summary if read is not None and read[0] is message else is_summary(message)
            )

        facts = _facts(before, known, summary)
        now_messages = self._read_messages(after)
        self._messages = {**was_messages, **now_messages}  # what no view holds is let go
        was_read = [read for _, read in was_messages.values()]
        now_read = [read for _, read in now_messages.values()]
        was_refs, now_refs = _refs(was_read, previous_ledger), _refs(now_read, ledger)
        # The outputs read before whose refs are still named stay (what is not named any more
        # is let go); the others are read only if a fact is found in no better place.
        refs = was_refs | now_refs
        self._outputs = {r: t for r, t in self._outputs.items() if r in refs}
        listed_was, listed_now = normalize(previous_ledger.render()), normalize(ledger.render())
        texts = {
            *(t for m in (*was_read, *now_read) for t in m.texts),
            *self._outputs.values(),
            *(t for t in (pinned, listed_was, listed_now) if t),
        }
        self._index.keep_only(texts)
        self._index.add_facts((p.key, p.needles) for p in facts)
        self._index.hold(texts)
        pinned_facts = self._facts_in([pinned])
        was = _Places(
            self._index,
            was_read,
            pinned_facts,
            self._facts_in([listed_was]),
            lambda: self._read_outputs(was_refs, read_ref),
        )
        now = _Places(
            self._index,
            now_read,
            pinned_facts,
            self._facts_in([listed_now]),
            lambda: self._read_outputs(now_refs, read_ref),
        )
        items: list[LossItem] = []
        lost_sources: set[str] = set()
        for probe in facts:
            place = now.place(probe.key)
            if place is None or place == "verbatim":
                continue  # in the conversation
            # Where it was matters only if it is the same place: the outputs before are read
            # only for a fact that now is behind a ref or lost.
            if place == was.place(probe.key, outputs=place in ("recoverable", "lost")):
                continue  # where it was (a report said so then)
            ref = now.holding_ref(probe.key) if place == "recoverable" else None
            items.append(LossItem(probe.kind, probe.text, place, ref))
            if place == "lost":
                lost_sources.update(probe.sources)
        messages = _messages_out(before, after, now_refs, lost_sources, summary)
        return LossReport(tuple(items), tuple(messages), tuple(facts))

    def stored_refs(self, view: Sequence[Message]) -> frozenset[str]:
        """:func:`~contextfold.retention.ledger.stored_refs` of ``view``, each message's read
        once."""
        refs: set[str] = set()
        for _, read in self._read_messages(view).values():
            refs |= read.stored
        return frozenset(refs)

    def left_the_view(
        self, items: Iterable[LedgerItem], after: Sequence[Message]
    ) -> list[LedgerItem]:
        """The ``items`` whose wording no longer appears in ``after``'s conversation (see
        :func:`left_the_view`), each wording looked up once."""
        read = self._read_messages(after).values()
        texts = [t for _, m in read if not m.summary for t in m.texts]
        self._index.hold(texts, split=True)
        items = list(items)
        needles = {item: _ledger_needles(item) for item in items}
        found = self._index.found_in(texts, {n for each in needles.values() for n in each})
        return [item for item in items if found.isdisjoint(needles[item])]

    def identifiers(self, message: Message) -> Identifiers:
        """:func:`~contextfold.retention.ledger.message_identifiers` of ``message``, read once
        (with its texts, at the first report that meets it)."""
        return self._read(message).identifiers

    def _read_messages(self, view: Sequence[Message]) -> dict[str, tuple[Message, _MessageText]]:
        """Each message of ``view`` with what the report reads of it, by id (see
        :meth:`_read`)."""
        read: dict[str, tuple[Message, _MessageText]] = {}
        for message in view:
            read[message.id] = (message, self._read(message))
        return read

    def _read(self, message: Message) -> _MessageText:
        """What the report reads of ``message``, read once per message (a message edited in
        place keeps its id, so the message itself is compared)."""
        known = self._messages.get(message.id)
        if known is None or (known[0] is not message and known[0] != message):
            known = (message, _MessageText.of(message))
            self._messages[message.id] = known
        return known[1]

    def _read_outputs(
        self, refs: Iterable[str], read_ref: Callable[[str], str | None] | None
    ) -> dict[str, str]:
        """The normalized stored output of each of ``refs`` that is stored (read once per
        ref: a ref is its content's address), held by the index."""
        if read_ref is None:
            return {}
        outputs: dict[str, str] = {}
        for ref in refs:
            text = self._outputs.get(ref)
            if text is None:
                raw = read_ref(ref)
                text = normalize(raw) if raw else ""
                if text:
                    self._outputs[ref] = text
            if text:
                outputs[ref] = text
        self._index.hold(outputs.values())
        return outputs

    def _facts_in(self, texts: Iterable[str]) -> set[str]:
        """The keys of the facts any of ``texts`` shows (all held)."""
        found: set[str] = set()
        for text in texts:
            if text:
                found |= self._index.shown(text)
        return found


def _refs(messages: Iterable[_MessageText], ledger: Ledger) -> frozenset[str]:
    """Every ref the model can read with a view (its messages') and a ledger."""
    refs: set[str] = set(ledger.refs)
    for message in messages:
        refs |= message.refs
    return frozenset(refs)


class _Places:
    """Where a view, the pins and a ledger hold a fact: one lookup, the best place first.

    The stored outputs (``outputs``: read and held by the index when called) are read only
    for a fact found in no better place: most facts are in the view, a summary or the ledger,
    and the outputs new since the last report are the largest texts it would read."""

    def __init__(
        self,
        index: FactIndex,
        messages: Iterable[_MessageText],
        pinned: set[str],
        listed: set[str],
        outputs: Callable[[], Mapping[str, str]],
    ) -> None:
        self.verbatim: set[str] = set()
        self.summary: set[str] = set()
        for message in messages:
            into = self.summary if message.summary else self.verbatim
            for text in message.texts:
                into |= index.shown(text)
        self.pinned = pinned
        self.listed = listed
        self._index = index
        self._read = outputs
        self._outputs: dict[str, set[str]] | None = None
        self._recoverable: set[str] = set()

    @property
    def outputs(self) -> dict[str, set[str]]:
        """The facts each stored output shows, by ref in sorted order (read on first use)."""
        if self._outputs is None:
            read = self._read()
            self._outputs = {ref: self._index.shown(read[ref]) for ref in sorted(read)}
            self._recoverable = set().union(*self._outputs.values())
        return self._outputs

    def place(self, key: str, *, outputs: bool = True) -> _Place | None:
        """The best place holding the fact (with ``outputs=False``, ``None`` when that is a
        stored output or nowhere: the outputs are not read)."""
        if key in self.verbatim:
            return "verbatim"
        if key in self.summary:
            return "summary"
        if key in self.pinned:
            return "pinned"
        if key in self.listed:
            return "ledger"
        if not outputs:
            return None
        return "recoverable" if self.outputs and key in self._recoverable else "lost"

    def holding_ref(self, key: str) -> str | None:
        """The first ref (in sorted order) whose stored output shows the fact."""
        return next((ref for ref, shown in self.outputs.items() if key in shown), None)


def _facts(
    before: Sequence[Message],
    known: Iterable[Probe],
    summaries: Callable[[Message], bool] = is_summary,
) -> list[Probe]:
    """The facts of ``before`` (with the messages they came from), then the ``known`` ones
    ``before`` no longer shows the source of; one per fact (``summaries``: as
    :func:`~contextfold.retention.probes.probes_for` takes it)."""
    unique: dict[str, Probe] = {}
    for probe in (*probes_for(before, summaries), *known):
        unique.setdefault(probe.key, probe)
    return list(unique.values())


def _messages_out(
    before: Sequence[Message],
    after: Sequence[Message],
    reachable: Collection[str],
    lost_sources: set[str],
    summaries: Callable[[Message], bool] = is_summary,
) -> list[MessageOut]:
    """Every message of ``before`` that ``after`` no longer holds as it was, with what stands
    for it now (``summaries``: :func:`~contextfold.retention.probes.is_summary`, or what a
    tracker read of it already)."""
    kept = {m.id: m for m in after}
    covered = _covered(before, after)
    out: list[MessageOut] = []
    for message in before:
        now = kept.get(message.id)
        # The same object first: most of the view is, and comparing it field by field is not
        # free.
        if now is message or now == message or summaries(message):
            continue  # unchanged; or a summary another one replaced (its facts are probed)
        replaced = message.tool_results
        if now is not None:
            still = {(r.call_id, r.content) for r in now.tool_results}
            replaced = tuple(r for r in replaced if (r.call_id, r.content) not in still)
        refs = tuple(output_ref(r) for r in replaced)
        where = _message_where(message.id in covered, refs, reachable, message.id in lost_sources)
        out.append(MessageOut(message.id, message.role, where, refs))
    return out


def _message_where(
    covered: bool, refs: Sequence[str], reachable: Collection[str], held_lost: bool
) -> MessageWhere:
    if held_lost:
        return "lost"
    if covered:
        return "summary"
    if any(ref not in reachable for ref in refs):
        return "lost"
    return "recoverable" if refs else "facts_kept"


def _covered(before: Sequence[Message], after: Sequence[Message]) -> set[str]:
    """Ids of the messages of ``before`` a summary in ``after`` stands for (a drop note stands
    for none: what it names is accounted for by its refs)."""
    position = {m.id: i for i, m in enumerate(before)}
    covered: set[str] = set()
    for message in after:
        if message.meta.kind not in ("summary", "tool_summary"):
            continue
        for part in message.parts:
            if isinstance(part, SummaryPart) and part.covers is not None:
                first, last = (position.get(i) for i in part.covers)
                if first is not None and last is not None:
                    covered.update(m.id for m in before[first : last + 1])
    return covered


def left_the_view(items: Iterable[LedgerItem], after: Sequence[Message]) -> list[LedgerItem]:
    """The ``items`` whose wording no longer appears in ``after``'s conversation (what a ledger
    refreshed for ``after`` must name: what is still in view needs no entry); the same as
    :meth:`LossTracker.left_the_view` on a new tracker."""
    return LossTracker().left_the_view(items, after)


def _ledger_needles(item: LedgerItem) -> tuple[str, ...]:
    if item.kind != "file":
        return (normalize(item.text),)
    parts = [p for p in item.text.split("/") if p and p != "."]
    needles = [normalize(item.text)]
    if len(parts) >= 2:
        needles.append(normalize("/".join(parts[-2:])))
    return tuple(dict.fromkeys(needles))
