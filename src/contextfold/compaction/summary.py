"""Structured summaries: the eight sections that stand in for compacted history.

A :class:`StructuredSummary` holds eight sections (Session Intent, Current Task, Files Modified,
Files Read, Key Decisions, Failed Approaches, Errors Encountered, Next Steps: what an agent must
not lose when its history goes, the files and errors above all, which it would otherwise redo).
Each item
cites the transcript messages it came from (``[src: id, ...]``) and, for tool outputs, the ``ref``
that ``read_result`` resolves. :meth:`StructuredSummary.render` is the markdown the model reads;
:meth:`StructuredSummary.sections_for_part` the structured form a
:class:`~contextfold.messages.SummaryPart` keeps, from which :meth:`StructuredSummary.from_part`
rebuilds the summary exactly.

Summaries grow by :meth:`StructuredSummary.extend`: earlier items are kept and deduplicated, new
ones added, and the result is capped (:class:`SummaryCaps`) so repeated compactions never make it
grow without bound; capped sections say how many earlier items were left out.

:class:`ExtractiveSummarizer` is the deterministic default (no model). The model-backed
``LLMSummarizer`` (:mod:`contextfold.compaction._llm`) is exported by :mod:`contextfold.compaction`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol, TypeAlias, get_args

from contextfold.history.facts import Fact, SessionFacts, extract_facts
from contextfold.messages import Message, MessageKind, Meta, SummaryPart

__all__ = [
    "DEFAULT_MAX_ITEM_CHARS",
    "DEFAULT_MAX_SUMMARY_CHARS",
    "DEFAULT_SECTION_CAPS",
    "SECTION_NAMES",
    "ExtractiveSummarizer",
    "SectionName",
    "StructuredSummary",
    "Summarizer",
    "SummaryCaps",
    "SummaryItem",
    "present_sections",
    "summary_from_facts",
    "summary_message",
]

SectionName: TypeAlias = Literal[
    "Session Intent",
    "Current Task",
    "Files Modified",
    "Files Read",
    "Key Decisions",
    "Failed Approaches",
    "Errors Encountered",
    "Next Steps",
]
"""A section of a structured summary: what an agent needs to go on after its history is gone
(the task, where it stands, the files it touched, what it decided, tried and hit, what is next)."""

SECTION_NAMES: tuple[SectionName, ...] = get_args(SectionName)
"""The eight sections, in the order the model reads them: intent and task first, so that a
model reading the summary top-down knows what the rest is for."""

_REPLACED_SECTIONS: frozenset[SectionName] = frozenset({"Current Task", "Next Steps"})
"""Sections that describe the present: a newer summary's items replace the older ones."""
_FILE_SECTIONS: frozenset[SectionName] = frozenset({"Files Modified", "Files Read"})

DEFAULT_SECTION_CAPS: Mapping[SectionName, int] = {
    "Session Intent": 8,
    "Current Task": 4,
    "Files Modified": 40,
    "Files Read": 30,
    "Key Decisions": 12,
    "Failed Approaches": 12,
    "Errors Encountered": 40,
    "Next Steps": 5,
}
"""Most items a section keeps. Files and errors get the most room: they are what agents lose
and then redo (re-reading files, re-hitting errors)."""

DEFAULT_MAX_SUMMARY_CHARS = 16_000
"""Cap on the rendered summary (about 4k tokens): a summary must stay a small share of even a
32k window, and must not grow across repeated compactions."""

DEFAULT_MAX_ITEM_CHARS = 600
"""Longest item; the task statement is the usual long one (it stays verbatim in the view)."""

_CITATION = re.compile(r"\s*\[src: ([^\]]*)\]\s*$")
_REFS = re.compile(r"\s*\((ref_[0-9a-f]{12}(?:, ref_[0-9a-f]{12})*)\)\s*$")
_OMITTED = re.compile(r"^… (\d+) earlier items?$")
_EMPTY = "(none)"
MAX_SOURCES_PER_ITEM = 2
"""Citations kept per item: the first and the latest ones say where to look."""


@dataclass(frozen=True, slots=True)
class SummaryItem:
    """One line of a section, with the message ids and refs it came from."""

    text: str
    sources: tuple[str, ...] = ()
    refs: tuple[str, ...] = ()
    _line: str | None = field(default=None, init=False, repr=False, compare=False)
    """:meth:`render`'s line, once made: most items outlive several compactions, and each one
    renders every item a few times (capping, the text, the stored sections)."""

    def render(self) -> str:
        """The line as the model reads it: ``text (ref_...) [src: id, ...]``."""
        if self._line is not None:
            return self._line
        out = self.text
        if self.refs:
            out += f" ({', '.join(self.refs)})"
        if self.sources:
            out += f" [src: {', '.join(self.sources)}]"
        object.__setattr__(self, "_line", out)
        return out

    @classmethod
    def parse(cls, line: str) -> SummaryItem:
        """Inverse of :meth:`render` (a line without citations gives a bare item)."""
        sources: tuple[str, ...] = ()
        refs: tuple[str, ...] = ()
        match = _CITATION.search(line)
        if match:
            sources = tuple(s.strip() for s in match.group(1).split(",") if s.strip())
            line = line[: match.start()]
        match = _REFS.search(line)
        if match:
            refs = tuple(r.strip() for r in match.group(1).split(","))
            line = line[: match.start()]
        return cls(line.strip(), sources, refs)

    def key(self, section: SectionName) -> str:
        """What makes two items the same (a file path, or the normalised text)."""
        if section in _FILE_SECTIONS and self.text:
            return self.text.split()[0].rstrip(":,")
        return " ".join(self.text.lower().split())

    def merged(self, other: SummaryItem) -> SummaryItem:
        """This item with the other's citations added (first and latest kept)."""
        sources = _keep_ends(tuple(dict.fromkeys((*self.sources, *other.sources))))
        refs = tuple(dict.fromkeys((*self.refs, *other.refs)))[-2:]
        return SummaryItem(self.text, sources, refs)


def _keep_ends(ids: tuple[str, ...]) -> tuple[str, ...]:
    if len(ids) <= MAX_SOURCES_PER_ITEM:
        return ids
    return (ids[0], *ids[-(MAX_SOURCES_PER_ITEM - 1) :])


@dataclass(frozen=True, slots=True)
class SummaryCaps:
    """How large a summary may get: items per section, characters per item and in total."""

    per_section: Mapping[SectionName, int] = field(
        default_factory=lambda: dict(DEFAULT_SECTION_CAPS)
    )
    max_chars: int = DEFAULT_MAX_SUMMARY_CHARS
    max_item_chars: int = DEFAULT_MAX_ITEM_CHARS


@dataclass(frozen=True, slots=True)
class StructuredSummary:
    """The eight sections, each a tuple of items, plus how many earlier items were left out.

    ``fallback_reason`` is set when a model-backed summarizer failed and this summary came from
    the extractive fallback; the pipeline turns it into a ``SummarizerFellBack`` event.
    """

    sections: Mapping[SectionName, tuple[SummaryItem, ...]] = field(default_factory=dict)
    omitted: Mapping[SectionName, int] = field(default_factory=dict)
    fallback_reason: str | None = None
    _rendered: str | None = field(default=None, init=False, repr=False, compare=False)
    """:meth:`render`'s text, once made: a summary is a value, and the session reads its text
    again and again (the cost schedule sizes it, retention checks search it)."""

    def items(self, section: SectionName) -> tuple[SummaryItem, ...]:
        """The items of one section (empty when it has none)."""
        return self.sections.get(section, ())

    # -- rendering -------------------------------------------------------------------------------

    def render(self, covers: tuple[str, str] | None = None) -> str:
        """The markdown the model reads, marked as a summary, with how to recover details."""
        if covers is None and self._rendered is not None:
            return self._rendered
        lines = _header_lines(covers)
        for name in SECTION_NAMES:
            lines += _section_lines(name, self.items(name), self.omitted.get(name, 0))
        text = "\n".join(lines)
        if covers is None:
            object.__setattr__(self, "_rendered", text)
        return text

    def sections_for_part(self) -> dict[str, tuple[str, ...]]:
        """The structured form a ``SummaryPart`` stores (omission markers included)."""
        out: dict[str, tuple[str, ...]] = {}
        for name in SECTION_NAMES:
            lines = [item.render() for item in self.items(name)]
            skipped = self.omitted.get(name, 0)
            if skipped:
                lines.insert(0, f"… {skipped} earlier item{'s' if skipped != 1 else ''}")
            out[name] = tuple(lines)
        return out

    def to_part(
        self, covers: tuple[str, str] | None = None, source: str = "contextfold"
    ) -> SummaryPart:
        """A ``SummaryPart`` holding the rendered text and the structured sections."""
        return SummaryPart(self.render(covers), self.sections_for_part(), covers, source)

    @classmethod
    def from_sections(cls, sections: Mapping[str, Iterable[str]]) -> StructuredSummary:
        """Rebuild from :meth:`sections_for_part` output (unknown section names are ignored)."""
        parsed: dict[SectionName, tuple[SummaryItem, ...]] = {}
        omitted: dict[SectionName, int] = {}
        for name, lines in sections.items():
            canonical = _canonical_section(name)
            if canonical is None:
                continue
            items = []
            for line in lines:
                read = _section_line(line)
                if isinstance(read, SummaryItem):
                    items.append(read)
                elif read is not None:
                    omitted[canonical] = omitted.get(canonical, 0) + read
            parsed[canonical] = (*parsed.get(canonical, ()), *items)
        return cls(parsed, omitted)

    @classmethod
    def from_part(cls, part: SummaryPart) -> StructuredSummary:
        """Rebuild from a ``SummaryPart`` (its sections, else its markdown text)."""
        if part.sections:
            try:
                return _parsed_sections(tuple(part.sections.items()))
            except TypeError:  # sections not held as tuples: nothing to remember them by
                return cls.from_sections(part.sections)
        return cls.from_markdown(part.text)

    @classmethod
    def from_markdown(cls, text: str) -> StructuredSummary:
        """Parse ``## Section`` headings and their ``-`` items (what a model writes)."""
        sections: dict[str, list[str]] = {}
        current: str | None = None
        for raw in text.splitlines():
            line = raw.strip()
            heading = re.match(r"^#{1,4}\s*(.+?)\s*#*$", line)
            if heading:
                current = heading.group(1).strip().strip("*")
                sections.setdefault(current, [])
                continue
            if current is None or not line:
                continue
            item = re.sub(r"^(?:[-*•]|\d+[.)])\s+", "", line)
            sections[current].append(item)
        return cls.from_sections(sections)

    # -- growth ----------------------------------------------------------------------------------

    def extend(
        self, newer: StructuredSummary, caps: SummaryCaps | None = None
    ) -> StructuredSummary:
        """This summary brought up to date by ``newer``: items kept, deduplicated, added, capped."""
        sections: dict[SectionName, tuple[SummaryItem, ...]] = {}
        omitted = dict(self.omitted)
        for name in SECTION_NAMES:
            old, new = self.items(name), newer.items(name)
            if name in _REPLACED_SECTIONS and new:
                sections[name] = new
                omitted.pop(name, None)
            else:
                sections[name] = _merge(name, old, new)
            if newer.omitted.get(name) and name not in _REPLACED_SECTIONS:
                omitted[name] = omitted.get(name, 0) + newer.omitted[name]
        merged = StructuredSummary(sections, omitted, newer.fallback_reason or self.fallback_reason)
        return merged.capped(caps or SummaryCaps())

    def capped(self, caps: SummaryCaps | None = None) -> StructuredSummary:
        """This summary within ``caps``: the task and the most recent items are the ones kept."""
        caps = caps or SummaryCaps()
        sections: dict[SectionName, list[SummaryItem]] = {}
        omitted = dict(self.omitted)
        for name in SECTION_NAMES:
            items = [_clip_item(i, caps.max_item_chars) for i in self.items(name)]
            limit = max(1, caps.per_section.get(name, len(items) or 1))
            if len(items) > limit:
                items, dropped = _drop_oldest(name, items, len(items) - limit)
                omitted[name] = omitted.get(name, 0) + dropped
            sections[name] = items

        def build() -> StructuredSummary:
            frozen = {k: tuple(v) for k, v in sections.items()}
            return StructuredSummary(frozen, dict(omitted), self.fallback_reason)

        # The rendered length, kept section by section: shedding an item re-renders only its
        # section (rendering the whole summary again for each item shed cost more than the
        # rest of a summary). The same lines :meth:`render` joins, so the same length.
        header = _header_lines(None)
        header_length = sum(map(len, header)) + len(header)
        room: dict[SectionName, int] = {}  # what each section's items take, as shed below
        length: dict[SectionName, int] = {}  # its lines, each with its line break
        for name in SECTION_NAMES:
            room[name] = sum(len(i.render()) for i in sections[name])
            lines = _section_lines(name, sections[name], omitted.get(name, 0))
            length[name] = sum(map(len, lines)) + len(lines)
        while header_length + sum(length.values()) - 1 > caps.max_chars:
            # Shed the oldest item of the section taking the most room (the task stays).
            candidates = [n for n in SECTION_NAMES if len(sections[n]) > _floor(n)]
            if not candidates:
                break
            name = max(candidates, key=room.__getitem__)
            sections[name], dropped = _drop_oldest(name, sections[name], 1)
            omitted[name] = omitted.get(name, 0) + dropped
            room[name] = sum(len(i.render()) for i in sections[name])
            lines = _section_lines(name, sections[name], omitted.get(name, 0))
            length[name] = sum(map(len, lines)) + len(lines)
        return build()

    def mentions(self, text: str) -> bool:
        """True when ``text`` appears in the rendered summary (for retention checks)."""
        return text in self.render()


@functools.lru_cache(maxsize=8)
def _parsed_sections(sections: tuple[tuple[str, tuple[str, ...]], ...]) -> StructuredSummary:
    """:meth:`StructuredSummary.from_sections`, remembered for the last few summaries: each
    compaction parses the summary it wrote (for its result) and, at the next one, the same
    summary again as the previous one to extend. A summary is a value nobody changes, so one
    parse can be handed to both."""
    return StructuredSummary.from_sections(dict(sections))


@functools.lru_cache(maxsize=4_096)
def _section_line(line: str) -> SummaryItem | int | None:
    """What one line of a stored section holds: an item, how many earlier items were left out
    there, or nothing (``None``: a blank line, ``(none)``). Remembered by line: each summary repeats
    most lines of the one before (and the pipeline parses every summary it writes), and items
    are values, so the one parsed before can be handed out again."""
    stripped = line.strip()
    match = _OMITTED.match(stripped)
    if match:
        return int(match.group(1))
    if stripped and stripped != _EMPTY:
        return SummaryItem.parse(stripped)
    return None


def present_sections(text: str) -> list[SectionName]:
    """Which of the eight section headings ``text`` contains (for checking a model's reply)."""
    found = {_canonical_section(m) for m in re.findall(r"(?m)^\s*#{1,4}\s*(.+?)\s*#*$", text)}
    return [name for name in SECTION_NAMES if name in found]


def _canonical_section(name: str) -> SectionName | None:
    lowered = name.lower()
    for canonical in SECTION_NAMES:
        if lowered.startswith(canonical.lower()):
            return canonical
    return None


def _merge(
    name: SectionName, old: Sequence[SummaryItem], new: Sequence[SummaryItem]
) -> tuple[SummaryItem, ...]:
    """Old items first, then new ones; a repeated item keeps its place and gains citations.

    A file listed again keeps the newer description (what was done to it last)."""
    out: dict[str, SummaryItem] = {}
    for item in (*old, *new):
        key = item.key(name)
        if key not in out:
            out[key] = item
            continue
        merged = out[key].merged(item)
        if name in _FILE_SECTIONS and item.text != key:
            merged = replace(merged, text=item.text)
        out[key] = merged
    return tuple(out.values())


def _header_lines(covers: tuple[str, str] | None) -> list[str]:
    """The lines a rendered summary starts with."""
    span = f" (messages {covers[0]} … {covers[1]})" if covers else ""
    return [
        f"[Summary of the earlier conversation{span}. It replaces those messages in your "
        "context; it is background, not a new request.]",
        "Details are recoverable: call read_result with a ref shown below (ref_…) to read a "
        "removed tool output in full; [src: …] names the transcript messages an item came "
        "from.",
    ]


def _section_lines(name: SectionName, items: Sequence[SummaryItem], skipped: int) -> list[str]:
    """The lines one section renders as (after a blank line): its heading, how many earlier
    items it left out, its items, or that it has none."""
    lines = ["", f"## {name}"]
    if skipped:
        lines.append(f"- … {skipped} earlier item{'s' if skipped != 1 else ''}")
    lines.extend(f"- {item.render()}" for item in items)
    if not items and not skipped:
        lines.append(_EMPTY)
    return lines


def _floor(section: SectionName) -> int:
    """Items a section keeps whatever the total cap: Session Intent keeps the task."""
    return 1 if section == "Session Intent" else 0


def _drop_oldest(
    name: SectionName, items: list[SummaryItem], count: int
) -> tuple[list[SummaryItem], int]:
    """Drop ``count`` oldest items; Session Intent keeps its first item (the task)."""
    if name == "Session Intent" and items:
        rest = items[1:]
        count = min(count, len(rest))
        return [items[0], *rest[count:]], count
    count = min(count, len(items))
    return items[count:], count


def _clip_item(item: SummaryItem, limit: int) -> SummaryItem:
    if len(item.text) <= limit:
        return item
    return replace(item, text=item.text[: limit - 1].rstrip() + "…")


def summary_message(
    summary: StructuredSummary,
    covers: tuple[str, str] | None,
    *,
    kind: MessageKind = "summary",
    source: str = "contextfold",
) -> Message:
    """The user-role message holding ``summary`` as a ``SummaryPart`` (``meta.kind`` = ``kind``)."""
    return Message("user", (summary.to_part(covers, source),), meta=Meta(kind=kind))


# --------------------------------------------------------------------------------------------------
# Summarizers
# --------------------------------------------------------------------------------------------------


class Summarizer(Protocol):
    """Writes a structured summary of ``messages``, extending ``previous`` when given."""

    def summarize(
        self,
        messages: Sequence[Message],
        previous: StructuredSummary | None,
        focus: str | None,
    ) -> StructuredSummary:
        """The summary of ``previous`` plus ``messages``; ``focus`` says what matters most."""
        ...


MAX_TASK_CHARS = 600
"""How much of the task statement the Session Intent section repeats (the task itself stays
verbatim in the view)."""


class ExtractiveSummarizer:
    """The deterministic summarizer: facts read from the messages, no model (the default).

    Earlier summaries found among ``messages`` (and ``previous``) are extended, never rewritten.
    """

    name = "extractive"

    def __init__(self, caps: SummaryCaps | None = None) -> None:
        self.caps = caps or SummaryCaps()

    def summarize(
        self,
        messages: Sequence[Message],
        previous: StructuredSummary | None = None,
        focus: str | None = None,
    ) -> StructuredSummary:
        """The summary of ``previous`` plus ``messages`` (see :class:`Summarizer`)."""
        base = previous
        for message in messages:
            for part in message.parts_of(SummaryPart):
                embedded = StructuredSummary.from_part(part)
                base = base.extend(embedded, self.caps) if base else embedded
        new = summary_from_facts(extract_facts(messages), focus)
        return base.extend(new, self.caps) if base else new.capped(self.caps)


def summary_from_facts(facts: SessionFacts, focus: str | None = None) -> StructuredSummary:
    """The eight sections filled from extracted facts."""

    def items(facts_: Iterable[Fact]) -> tuple[SummaryItem, ...]:
        return tuple(
            SummaryItem(f.text, _keep_ends(f.sources), (f.ref,) if f.ref else ()) for f in facts_
        )

    intent: list[Fact] = []
    if facts.task is not None:
        task_text = " ".join(facts.task.text.split())
        if len(task_text) > MAX_TASK_CHARS:
            task_text = task_text[: MAX_TASK_CHARS - 1] + "…"
        intent.append(Fact(f"Task: {task_text}", facts.task.sources))
    intent.extend(Fact(f"User asked: {f.text}", f.sources) for f in facts.user_requests)
    intent.extend(Fact(f"Constraint: {f.text}", f.sources) for f in facts.constraints)
    current: list[Fact] = []
    if focus:
        current.append(Fact(f"Focus requested: {focus}"))
    if facts.user_requests:
        current.append(
            Fact(f"Latest request: {facts.user_requests[-1].text}", facts.user_requests[-1].sources)
        )
    if facts.latest_progress is not None:
        current.append(
            Fact(f"Latest progress: {facts.latest_progress.text}", facts.latest_progress.sources)
        )
    if facts.actions:
        last = facts.actions[-1]
        outcome = "failed" if last.failed else "ok"
        if last.exit_code is not None:
            outcome += f", exit {last.exit_code}"
        ref = last.ref
        current.append(Fact(f"Last action: `{last.summary}` ({outcome})", last.sources, ref))
    return StructuredSummary(
        {
            "Session Intent": items(intent),
            "Current Task": items(current),
            "Files Modified": items(facts.files_modified),
            "Files Read": items(facts.files_read),
            "Key Decisions": items(facts.decisions),
            "Failed Approaches": items(facts.failed_approaches),
            "Errors Encountered": items(facts.errors),
            "Next Steps": items(facts.next_steps),
        }
    )
