"""Grounding probes: does a compacted view still hold what the agent goes on to use?

The retention probes (:mod:`contextfold.replay.probes`) ask whether a session's facts survive in
the *final* view. They cannot see what an agent loses when a compaction takes away something it
needs a few turns later. These probes look from the agent's own behaviour instead:

- **Grounding.** At every compaction point (a request before which a method took something out
  of the view), take what the recorded agent used in its next :data:`LOOKAHEAD_TURNS` assistant
  turns, the reply to that request included: file paths, identifiers, numbers and quoted strings
  in its text and in its tool-call arguments (:func:`extract_items`), keeping only those that
  appeared earlier in the history (before the compaction point; the agent brought them from its
  context, not from its head). Each is looked up in the view sent at that point: in the view
  (verbatim or in a summary), recoverable (only in a stored output that a ref in the view points
  to, readable with ``read_result``), or lost. A method that compacts more often is probed more
  often: each compaction is a chance to lose what comes next.
- **Failed approaches.** A tool call whose result failed (:func:`is_failed_result`) and that the
  agent later superseded (a later, different call of the same tool on the same target:
  :func:`call_target`) is a dead end the agent must not walk again. Its command text
  (:func:`failed_approach_needle`) is looked up in the final view. A limit of matching by
  wording: a later call whose text holds the failed one whole (the same command with a flag
  added) counts as holding it, though it does not say that the shorter one failed.

Matching is on exact wording, case-insensitive, whitespace collapsed, as the retention probes
match. The system prompt is neither history nor view here: every method sends it whole.

Everything here is a pure function of messages; the replay driver and the benchmarks' peers
call :meth:`GroundingPlan.items_at` and :func:`check_items` at their compaction points.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeAlias

from contextfold.messages import Message, TextPart, ToolCallPart
from contextfold.replay.probes import (
    STATUSES,
    SUMMARY_KINDS,
    Status,
    ViewText,
    message_texts,
    normalize,
)

__all__ = [
    "ITEM_KINDS",
    "LOOKAHEAD_TURNS",
    "FailedApproach",
    "GroundingPlan",
    "GroundingTally",
    "ItemKind",
    "UsedItem",
    "call_target",
    "check_failed_approaches",
    "check_items",
    "extract_items",
    "failed_approach_needle",
    "failed_approaches",
    "is_failed_result",
]

LOOKAHEAD_TURNS = 5
"""Assistant turns after a compaction point whose use of earlier context is probed (K)."""
MIN_NUMBER_DIGITS = 3
"""Shortest number probed: one or two digits occur in any text, so finding them proves nothing."""
MIN_IDENTIFIER_CHARS = 4
"""Shortest identifier probed."""
QUOTED_CHARS = (4, 120)
"""Shortest and longest quoted string probed (longer ones are code, not a name)."""
NEEDLE_MAX_CHARS = 200
"""Longest failed-approach needle: a summary that quotes a command quotes its start."""

ItemKind: TypeAlias = Literal["path", "identifier", "number", "quoted"]
ITEM_KINDS: tuple[ItemKind, ...] = ("path", "identifier", "number", "quoted")

FILE_EXTENSIONS = frozenset(
    {
        "py",
        "pyi",
        "ipynb",
        "js",
        "mjs",
        "cjs",
        "ts",
        "tsx",
        "jsx",
        "json",
        "jsonl",
        "md",
        "rst",
        "txt",
        "toml",
        "yaml",
        "yml",
        "cfg",
        "ini",
        "conf",
        "env",
        "sh",
        "bash",
        "zsh",
        "rs",
        "go",
        "java",
        "kt",
        "c",
        "h",
        "cc",
        "cpp",
        "hpp",
        "cs",
        "rb",
        "ex",
        "exs",
        "erl",
        "php",
        "swift",
        "scala",
        "html",
        "css",
        "scss",
        "sql",
        "lock",
        "xml",
        "csv",
        "tsv",
        "log",
        "diff",
        "patch",
        "proto",
        "gradle",
        "mk",
        "cmake",
        "dockerfile",
        "tf",
        "lua",
        "dart",
        "vue",
        "svelte",
    }
)
"""Extensions that make a bare name (no ``/``) a file; other ``a.b`` names are identifiers."""

# A path: segments joined by "/" (at least one slash and one word character), or a bare file
# name with a known extension. URLs are paths too: their host and path are what the agent uses.
_PATH = re.compile(
    r"(?:~|\.{1,2})?/?[\w.@+-]+(?:/[\w.@+-]+)+/?|\b[\w-]+(?:\.[\w-]+)*\.[A-Za-z][A-Za-z0-9]{0,9}\b"
)
# An identifier that is clearly one: snake_case, camelCase / PascalCase with an inner capital,
# or dotted (module.attr). Plain words are not: they occur in any prose.
_IDENTIFIER = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\b")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")
_QUOTED = re.compile(r"\"([^\"\n]+)\"|'([^'\n]+)'|`([^`\n]+)`")
_TRAILING = ".,:;)]}>'\""


@dataclass(frozen=True, slots=True)
class UsedItem:
    """One thing the agent used: its kind and its normalized text (the needle)."""

    kind: ItemKind
    text: str


def extract_items(text: str) -> set[UsedItem]:
    """The paths, identifiers, numbers and quoted strings in ``text``, normalized.

    Deterministic and deliberately narrow: an identifier needs an underscore, an inner capital
    or a dot (``parse_args``, ``getValue``, ``os.path``); a number at least
    :data:`MIN_NUMBER_DIGITS` digits; a quoted string :data:`QUOTED_CHARS` characters.
    """
    items: set[UsedItem] = set()
    rest = text  # the text with its paths blanked: their parts are not items of their own
    for match in _PATH.finditer(text):
        path = match.group(0).rstrip(_TRAILING)
        bare = "/" not in path.strip("/")
        if bare and path.rsplit(".", 1)[-1].casefold() not in FILE_EXTENSIONS:
            continue  # `np.abs`, `self.value`: the identifier pattern takes them
        if any(c.isalpha() for c in path) and len(path) >= 3:
            items.add(UsedItem("path", normalize(path)))
            start = match.start()
            rest = rest[:start] + " " * len(path) + rest[start + len(path) :]
    for match in _IDENTIFIER.finditer(rest):
        word = match.group(0)
        if len(word) < MIN_IDENTIFIER_CHARS:
            continue
        inner_capital = any(c.isupper() for c in word[1:]) and any(c.islower() for c in word)
        if "_" in word.strip("_") or inner_capital or "." in word:
            items.add(UsedItem("identifier", normalize(word)))
    for match in _NUMBER.finditer(rest):
        number = match.group(0)
        if sum(c.isdigit() for c in number) >= MIN_NUMBER_DIGITS:
            items.add(UsedItem("number", number))
    low, high = QUOTED_CHARS
    for match in _QUOTED.finditer(text):
        quoted = next(g for g in match.groups() if g is not None).strip()
        if low <= len(quoted) <= high:
            items.add(UsedItem("quoted", normalize(quoted)))
    return items


def _used_texts(message: Message) -> Iterable[str]:
    """What an assistant message *uses*: its text and its tool calls' decoded argument values
    (thinking is left out: it is not acted on)."""
    for part in message.parts:
        if isinstance(part, TextPart):
            yield part.text
        elif isinstance(part, ToolCallPart):
            yield from _strings(part.args())


def _strings(value: object) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield str(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _is_history(message: Message) -> bool:
    """A message the agent's context held: visible, not the system prompt, not an original
    agent's summary (what happened, not what someone wrote about it)."""
    return (
        message.role != "system"
        and message.meta.agent_visible
        and message.meta.kind not in SUMMARY_KINDS
    )


def _is_turn(message: Message) -> bool:
    return message.role == "assistant" and message.meta.kind not in SUMMARY_KINDS


class GroundingPlan:
    """The items each compaction point of one transcript is probed for.

    Built once per transcript (it does not depend on the method); :meth:`items_at` takes the
    index, in the transcript, of the recorded assistant message answering the request.
    """

    def __init__(self, messages: Sequence[Message], lookahead: int = LOOKAHEAD_TURNS) -> None:
        self.messages = messages
        self.lookahead = lookahead
        chunks: list[str] = []
        self._offsets: list[int] = []  # history length before each message
        length = 0
        for message in messages:
            self._offsets.append(length)
            if _is_history(message):
                chunk = normalize("\n".join(message_texts(message))) + "\n"
                chunks.append(chunk)
                length += len(chunk)
        self._history = "".join(chunks)
        self._turns = [i for i, m in enumerate(messages) if _is_turn(m)]
        self._position = {index: p for p, index in enumerate(self._turns)}
        self._cache: dict[int, tuple[UsedItem, ...]] = {}

    def items_at(self, message_index: int) -> tuple[UsedItem, ...]:
        """What the agent used in the ``lookahead`` turns from ``message_index`` on that appeared
        in the history before it, sorted (empty for an index that is not a turn)."""
        found = self._cache.get(message_index)
        if found is not None:
            return found
        position = self._position.get(message_index)
        items: set[UsedItem] = set()
        if position is not None:
            end = self._offsets[message_index]
            for turn in self._turns[position : position + self.lookahead]:
                for text in _used_texts(self.messages[turn]):
                    items |= extract_items(text)
            items = {item for item in items if self._history.find(item.text, 0, end) >= 0}
        result = tuple(sorted(items, key=lambda item: (item.kind, item.text)))
        self._cache[message_index] = result
        return result


@dataclass
class GroundingTally:
    """Grounding statuses summed over the compaction points of one run (or of many)."""

    points: int = 0
    """Compaction points probed (with at least one item)."""
    counts: dict[Status, int] = field(default_factory=lambda: dict.fromkeys(STATUSES, 0))
    by_kind: dict[ItemKind, dict[Status, int]] = field(default_factory=dict)
    lost_examples: list[str] = field(default_factory=list)
    """A few lost items (the first ones), for reading what went missing."""

    MAX_EXAMPLES: ClassVar[int] = 20

    @property
    def total(self) -> int:
        """Items probed over every point."""
        return sum(self.counts.values())

    @property
    def in_view(self) -> int:
        """Items the model read at their point: verbatim or in a summary."""
        return self.counts["verbatim"] + self.counts["summary"]

    @property
    def recoverable(self) -> int:
        return self.counts["recoverable"]

    @property
    def lost(self) -> int:
        return self.counts["lost"]

    def add(self, items: Sequence[UsedItem], view: ViewText) -> None:
        """Probe one compaction point: look each item up in the view sent there."""
        if not items:
            return
        self.points += 1
        for item in items:
            status = view.status((item.text,))
            self.counts[status] += 1
            kind = self.by_kind.setdefault(item.kind, dict.fromkeys(STATUSES, 0))
            kind[status] += 1
            if status == "lost" and len(self.lost_examples) < self.MAX_EXAMPLES:
                self.lost_examples.append(f"{item.kind}: {item.text}")

    def merge(self, other: GroundingTally) -> None:
        """Add ``other``'s counts to these (pooling runs)."""
        self.points += other.points
        for status, count in other.counts.items():
            self.counts[status] += count
        for kind, counts in other.by_kind.items():
            mine = self.by_kind.setdefault(kind, dict.fromkeys(STATUSES, 0))
            for status, count in counts.items():
                mine[status] += count

    def to_json(self) -> dict[str, Any]:
        """Points, counts by status and by kind, and the first lost items."""
        return {
            "points": self.points,
            "total": self.total,
            "in_view": self.in_view,
            "recoverable": self.recoverable,
            "lost": self.lost,
            "counts": dict(self.counts),
            "by_kind": {kind: dict(counts) for kind, counts in self.by_kind.items()},
            "lost_examples": list(self.lost_examples),
        }


def check_items(
    items: Sequence[UsedItem],
    view: Sequence[Message],
    read_ref: Callable[[str], str | None] | None = None,
) -> dict[Status, int]:
    """How many of ``items`` have each status in ``view`` (system prompt excluded by the caller);
    ``read_ref`` as in :func:`~contextfold.replay.probes.check_retention`."""
    text = ViewText.of(view, read_ref)
    counts: dict[Status, int] = dict.fromkeys(STATUSES, 0)
    for item in items:
        counts[text.status((item.text,))] += 1
    return counts


# --------------------------------------------------------------------------------------------------
# Failed approaches
# --------------------------------------------------------------------------------------------------

_FAILURE_TEXT = re.compile(
    r"Traceback \(most recent call last\)"
    r"|^(?:[A-Za-z_][\w.]*Error|error|fatal): "
    r"|command not found"
    r"|<returncode>\s*-?[1-9]\d*\s*</returncode>"
    r"|\bexit (?:code|status)[: ]+[1-9]",
    re.MULTILINE | re.IGNORECASE,
)
PATH_KEYS = ("path", "file_path", "filepath", "filename", "file", "notebook_path", "target_file")
"""Argument names that name an edit's (or a read's) target file, in order of preference."""
COMMAND_KEYS = ("command", "cmd", "script", "code")
"""Argument names that hold a shell command."""
_CD_PREFIX = re.compile(r"^(?:cd\s+\S+\s*(?:&&|;)\s*)+")
_FILE_LIKE = re.compile(r"/|^[\w-]+\.[A-Za-z][A-Za-z0-9]{0,4}$")


def is_failed_result(content: str, is_error: bool) -> bool:
    """A tool result that failed: flagged as an error by its format (a non-zero exit for
    mini-swe-agent, ``is_error`` for Claude Code), or whose output holds a Python traceback, a
    line opening with ``<Something>Error:`` / ``error:`` / ``fatal:``, "command not found", a
    non-zero ``<returncode>`` or "exit code N" (N ≠ 0)."""
    return is_error or _FAILURE_TEXT.search(content) is not None


def call_target(call: ToolCallPart) -> str | None:
    """What a call acts on: its file argument (:data:`PATH_KEYS`) or, for a shell command
    (:data:`COMMAND_KEYS`), the first word of the command that looks like a file (has a ``/`` or
    an extension), else its first two words (``git commit``, ``python -m``), a leading
    ``cd DIR &&`` left out; ``None`` when it
    has neither (such a call is never probed)."""
    args = call.args()
    for key in PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    for key in COMMAND_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            words = _CD_PREFIX.sub("", value.strip()).split()
            for word in words:
                if _FILE_LIKE.search(word.strip("'\"")):
                    return word.strip("'\"")
            return " ".join(words[:2])
    return None


def failed_approach_needle(call: ToolCallPart) -> str:
    """The text a failed call is looked up by: the first line of its longest string argument
    (the command; for an edit, the text it tried to write or replace), normalized and cut to
    :data:`NEEDLE_MAX_CHARS`."""
    values = [v for v in _strings(call.args()) if v.strip()]
    longest = max(values, key=len) if values else call.arguments
    first = next((line for line in longest.splitlines() if line.strip()), longest)
    return normalize(first)[:NEEDLE_MAX_CHARS]


@dataclass(frozen=True, slots=True)
class FailedApproach:
    """One failed, later superseded call: its tool, target and needle, and where it was made."""

    message_index: int
    tool: str
    target: str
    needle: str


def failed_approaches(messages: Sequence[Message]) -> list[FailedApproach]:
    """Every failed call in ``messages`` that a later, different call of the same tool on the
    same target superseded (the same call repeated unchanged is a retry, not a new approach)."""
    calls: list[tuple[int, ToolCallPart, str | None]] = []
    failed: set[str] = set()
    for index, message in enumerate(messages):
        if not _is_history(message):
            continue
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                calls.append((index, part, call_target(part)))
        for result in message.tool_results:
            if is_failed_result(result.content, result.is_error):
                failed.add(result.call_id)
    canonical = [_canonical(call) for _, call, _ in calls]
    out: list[FailedApproach] = []
    for position, (index, call, target) in enumerate(calls):
        if target is None or call.call_id not in failed:
            continue
        superseded = any(
            later.name == call.name
            and later_target == target
            and canonical[position + 1 + offset] != canonical[position]
            for offset, (_, later, later_target) in enumerate(calls[position + 1 :])
        )
        needle = failed_approach_needle(call)
        if superseded and needle:
            out.append(FailedApproach(index, call.name, target, needle))
    return out


def _canonical(call: ToolCallPart) -> str:
    """The call's arguments in one spelling (key order and spacing do not make it different)."""
    args = call.args()
    return json.dumps(args, sort_keys=True) if args else call.arguments


def check_failed_approaches(
    approaches: Sequence[FailedApproach],
    view: Sequence[Message],
    read_ref: Callable[[str], str | None] | None = None,
) -> dict[Status, int]:
    """How many failed approaches have each status in ``view`` (the final view)."""
    text = ViewText.of(view, read_ref)
    counts: dict[Status, int] = dict.fromkeys(STATUSES, 0)
    for approach in approaches:
        counts[text.status((approach.needle,))] += 1
    return counts
