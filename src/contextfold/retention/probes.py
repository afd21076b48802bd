"""Facts and where a view holds them: the one definition the loss report and the replay's
retention table share.

A *fact* is what :func:`probes_for` finds in a session's messages, through the extractor the
summaries are written from (:func:`contextfold.history.facts.extract_facts`): every file the
agent modified, every distinct error line its tools printed, the task statement, and every
constraint the user stated. Each one is looked up in a view and gets one status, the best that
applies:

- ``verbatim`` — in the view's ordinary messages (text, tool calls and their arguments, tool
  outputs);
- ``summary`` — in a summary the view holds (a compaction summary, a tool-result digest, a drop
  note);
- ``recoverable`` — only in a stored output that a ``ref`` in the view names, so the model gets
  it back with ``read_result``;
- ``lost`` — nowhere the model can reach.

The loss report (:mod:`contextfold.retention.loss`) adds two places between ``summary`` and
``recoverable``: a pin, and the artifact ledger (both are sent with every request; the retention
table sees them as verbatim text of the system prompt).

Matching is on exact wording, case-insensitive, with whitespace collapsed, within one text (a
message's text, a tool call's arguments, a tool output, a summary): a paraphrase counts as
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
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal, TypeAlias

from contextfold.history.facts import extract_facts
from contextfold.history.harness_notes import typed_text
from contextfold.history.texts import part_texts
from contextfold.messages import Message, MessageKind, SummaryPart
from contextfold.outputs.blobs import REF_PATTERN
from contextfold.redaction.redactor import redact_text

__all__ = [
    "PROBE_KINDS",
    "STATUSES",
    "SUMMARY_KINDS",
    "Probe",
    "ProbeKind",
    "Status",
    "ViewText",
    "is_summary",
    "message_texts",
    "normalize",
    "probe_of",
    "probes_for",
    "read_text",
    "task_probe_text",
]

TEXT_CACHE_SIZE = 4_096
"""Texts whose normalized form (and refs) are kept: every compaction compares two views made
mostly of the same texts."""

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
    """One fact to look for: its kind, its text, the wordings that count as a match, and the ids
    of the messages it came from."""

    kind: ProbeKind
    text: str
    needles: tuple[str, ...]
    sources: tuple[str, ...] = ()
    key: str = field(init=False, repr=False, compare=False)
    """What makes two probes the same fact (made once: a loss report looks every fact the
    session knows up by it several times)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.kind}:{self.needles[0]}")


def probes_for(
    messages: Sequence[Message], summaries: Callable[[Message], bool] | None = None
) -> list[Probe]:
    """The facts of ``messages`` to probe for (a whole session, or the part of it a view holds).

    Summaries an earlier compaction left in ``messages`` (e.g. Claude Code's) are skipped: the
    facts are what happened, not what someone wrote about it. ``summaries`` tells them (by
    default :func:`is_summary`; the loss report's tracker knows it of every message already).
    """
    skipped = is_summary if summaries is None else summaries
    # Without the narrative (decisions, next steps, failed approaches): no probe reads it.
    facts = extract_facts([m for m in messages if not skipped(m)], narrative=False)
    probes = [
        Probe("files_modified", f.text, _path_needles(f.text), f.sources)
        for f in facts.files_modified
    ]
    probes += [Probe("errors", f.text, (_needle(f.text),), f.sources) for f in facts.errors]
    if facts.task is not None:
        # Redacted before the cut: half a secret no longer looks like one (the text is stored).
        task = _task_probe(facts.task.text)
        if task:
            probes.append(Probe("task", task, (_needle(task),), facts.task.sources))
    probes += [
        Probe("constraints", f.text, (_needle(f.text),), f.sources) for f in facts.constraints
    ]
    return [p for p in probes if all(p.needles)]


def probe_of(kind: str, text: str) -> Probe | None:
    """The probe of a fact of ``kind`` worded ``text`` (as a saved state names it); ``None`` for
    a kind that is not one of :data:`PROBE_KINDS` or a text nothing can match."""
    for known in PROBE_KINDS:
        if kind == known:
            needles = _path_needles(text) if known == "files_modified" else (_needle(text),)
            return Probe(known, text, needles) if all(needles) else None
    return None


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


@lru_cache(maxsize=64)
def _task_probe(task: str) -> str:
    """:func:`task_probe_text` of the redacted task (remembered: every loss report probes the
    same task)."""
    return task_probe_text(redact_text(task))


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


def is_summary(message: Message) -> bool:
    """Whether ``message`` is written about the conversation (a summary, a digest, a drop note)
    rather than part of it."""
    return message.meta.kind in SUMMARY_KINDS or any(
        isinstance(p, SummaryPart) for p in message.parts
    )


# --------------------------------------------------------------------------------------------------
# Looking facts up in a view
# --------------------------------------------------------------------------------------------------


class ViewText:
    """A view's text, normalized for lookups: its ordinary messages, its summaries, and (read
    only when a lookup needs it) the stored outputs its refs name.

    One lookup gives the best :data:`Status` that applies; the retention table, the loss report
    and the grounding probes (:mod:`contextfold.replay.grounding`) all look facts up through it.
    """

    def __init__(
        self,
        ordinary: str,
        summaries: str,
        refs: Iterable[str] = (),
        read_ref: Callable[[str], str | None] | None = None,
        read: dict[str, str] | None = None,
    ) -> None:
        self.in_view = ordinary
        self.in_summary = summaries
        self.refs = tuple(sorted(set(refs)))
        self.read_ref = read_ref
        self._outputs: dict[str, str] | None = None
        self._joined: str | None = None
        self._word_set: frozenset[str] | None = None
        self._word_text: str | None = None
        self._output_words: tuple[frozenset[str], str] | None = None
        self._read: dict[str, str] = {} if read is None else read

    @classmethod
    def of(
        cls,
        view: Sequence[Message],
        read_ref: Callable[[str], str | None] | None = None,
        *,
        extra_refs: Iterable[str] = (),
        read: dict[str, str] | None = None,
    ) -> ViewText:
        """The text of ``view``; ``read_ref`` reads a stored output by ref (``None``: none is).
        ``extra_refs`` are refs the model reads elsewhere (the artifact ledger); ``read`` holds
        the normalized outputs read already through the same ``read_ref`` (filled as read)."""
        ordinary: list[str] = []
        summaries: list[str] = []
        refs: set[str] = set(extra_refs)
        for message in view:
            into = summaries if is_summary(message) else ordinary
            refs.update(r.ref for r in message.tool_results if r.ref)
            for text in message_texts(message):
                # Each text normalized and searched for refs once (the same texts come back in
                # every view a compaction compares).
                normalized, named = read_text(text)
                if normalized:
                    into.append(normalized)
                refs.update(named)
        # Joined by line breaks, which no needle holds: a fact is found within one text, never
        # across the end of one and the start of the next.
        return cls("\n".join(ordinary), "\n".join(summaries), refs, read_ref, read)

    @property
    def outputs(self) -> dict[str, str]:
        """The normalized text of every stored output a ref in the view names, by ref (read
        once, on first use: most lookups end in the view itself). Outputs already read for
        another view of the same session (``read``, given to both views a loss report
        compares, which name mostly the same outputs) are not read again."""
        if self._outputs is None:
            self._outputs = {}
            if self.read_ref is not None:
                for ref in self.refs:
                    text = self._read.get(ref)
                    if text is None:
                        raw = self.read_ref(ref)
                        text = self._read[ref] = normalize(raw) if raw else ""
                    if text:
                        self._outputs[ref] = text
        return self._outputs

    @property
    def _all_outputs(self) -> str:
        """Every output's normalized text in one string, one per line: a needle (normalized,
        so without a line break) found nowhere in it is in no output, in one search."""
        if self._joined is None:
            self._joined = "\n".join(self.outputs.values())
        return self._joined

    def holding_ref(self, needles: Iterable[str]) -> str | None:
        """The first ref (in sorted order) whose stored output holds one of ``needles``."""
        needles = tuple(needles)
        if self.read_ref is None or not self.refs:
            return None
        if not any(self._in_outputs(n) for n in needles):
            return None
        return next(
            (ref for ref, text in self.outputs.items() if any(n in text for n in needles)), None
        )

    def _in_outputs(self, needle: str) -> bool:
        """Whether any stored output holds ``needle``: the word shortcuts of :meth:`shows`,
        on the outputs' words (each output's kept across reports: outputs never change)."""
        if self._output_words is None:
            words = frozenset().union(*(_words_of(t) for t in self.outputs.values()))
            self._output_words = (words, "\n".join(words))
        words, distinct = self._output_words
        split = needle.split(" ")
        if len(split) == 1:
            return needle in distinct
        inner = split[1:-1]
        if inner and not words.issuperset(inner):
            return False
        return needle in self._all_outputs

    def shows(self, needles: Iterable[str]) -> bool:
        """Whether the view's ordinary messages hold one of ``needles`` (normalized).

        A needle of three words or more can be in the normalized text only if its inner words
        are words of it (they are bounded by spaces on both sides), a set lookup each: most
        probes of a loss report are looked for in two views that do not hold them, and a
        search through the whole text each time was most of the report's cost."""
        text = self.in_view
        for needle in needles:
            words = needle.split(" ")
            if len(words) == 1:
                # A needle without a space lies inside one word: searching the distinct words
                # (a fraction of the text) gives the same answer.
                if needle in self._distinct_words:
                    return True
                continue
            inner = words[1:-1]
            if inner and not self._words.issuperset(inner):
                continue
            if needle in text:
                return True
        return False

    @property
    def _words(self) -> frozenset[str]:
        if self._word_set is None:
            self._word_set = frozenset(self.in_view.split(" "))
        return self._word_set

    @property
    def _distinct_words(self) -> str:
        """The view's distinct words, one per line (a needle holds no line break)."""
        if self._word_text is None:
            self._word_text = "\n".join(self._words)
        return self._word_text

    def status(self, needles: Iterable[str]) -> Status:
        """The best status of any of ``needles`` (already normalized) in this view."""
        needles = tuple(needles)
        if self.shows(needles):
            return "verbatim"
        if any(n in self.in_summary for n in needles):
            return "summary"
        return "recoverable" if self.holding_ref(needles) is not None else "lost"


@lru_cache(maxsize=TEXT_CACHE_SIZE)
def read_text(text: str) -> tuple[str, tuple[str, ...]]:
    """``text`` normalized, and the refs it names (remembered for the latest texts)."""
    # A ref starts with ``ref_``: the pattern, which opens with ``\b``, is tried at every
    # position of the text, the literal found at C speed.
    return normalize(text), tuple(REF_PATTERN.findall(text)) if "ref_" in text else ()


@lru_cache(maxsize=TEXT_CACHE_SIZE)
def _words_of(normalized: str) -> frozenset[str]:
    """The words of a normalized text (a stored output: looked up again at every compaction)."""
    return frozenset(normalized.split(" "))


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
