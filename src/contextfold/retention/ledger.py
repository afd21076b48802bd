"""The artifact ledger: the files, commands, errors and identifiers a session has touched.

A summary paraphrases; the ledger does not. It lists, verbatim, the concrete things an agent
needs to name again after a compaction took the turns that mentioned them out of view: the
paths it read or edited, the commands it ran (first line), the distinct error lines its failed
tools printed, and identifiers it met (URLs, ``host:port``, hashes, prefixed ids). Each item
carries the ``ref`` of the stored output it came from when ``read_result`` can read it back.

Everything here is a pure function of messages: :func:`ledger_items` reads them in order, and
:meth:`Ledger.merged` keeps the newest items within :data:`MAX_ITEMS_PER_KIND` and
:data:`MAX_LEDGER_TOKENS`. The engine refreshes a session's ledger only when a compaction or a
mask batch changes the view (the request's prefix is broken then anyway) and sends it with the
view's latest summary (a part of that message in the request, never in the stored summary), or
as a system prompt section next to the pins before there is a summary.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Literal, TypeAlias

from contextfold.history.facts import tool_actions
from contextfold.lru import LRU
from contextfold.messages import Message, SummaryPart, TextPart, ToolCallPart, ToolResultPart
from contextfold.outputs.blobs import REF_PATTERN, blob_info
from contextfold.outputs.placeholders import tool_kind
from contextfold.redaction.redactor import redact_text
from contextfold.tokens.counters import HeuristicCounter

__all__ = [
    "LEDGER_HEADER",
    "LEDGER_KINDS",
    "MAX_IDENTIFIERS_PER_MESSAGE",
    "MAX_ITEMS_PER_KIND",
    "MAX_ITEM_CHARS",
    "MAX_LEDGER_TOKENS",
    "MAX_LEDGER_WINDOW_SHARE",
    "Ledger",
    "LedgerItem",
    "LedgerKind",
    "ledger_items",
    "message_identifiers",
    "output_ref",
    "stored_refs",
    "token_budget",
    "visible_refs",
]

LedgerKind: TypeAlias = Literal["file", "command", "error", "identifier"]
"""What a ledger item is: a path read or edited, a command run, an error line, an identifier."""

LEDGER_KINDS: tuple[LedgerKind, ...] = ("file", "command", "error", "identifier")
"""The kinds, in the order the ledger shows them."""

MAX_ITEMS_PER_KIND: Mapping[LedgerKind, int] = {
    "file": 40,
    "command": 20,
    "error": 12,
    "identifier": 20,
}
"""Items the ledger keeps of each kind; past it the oldest of that kind make room."""

MAX_LEDGER_TOKENS = 1_500
"""Estimated tokens of the whole rendered ledger at most; past it the oldest items (of any kind)
make room. Every request carries the ledger, so it must stay small next to the window."""

MAX_LEDGER_WINDOW_SHARE = 0.04
"""Share of the context window the rendered ledger may take, when that is less than
:data:`MAX_LEDGER_TOKENS` (an 8k window gives it about 320 tokens)."""

MAX_ITEM_CHARS = 160
"""Characters one item keeps (a command is its first line, cut here)."""

IDENTIFIER_CACHE_TEXTS = 4_096
"""Texts whose identifiers (and clipped items) are kept between compactions."""
MAX_IDENTIFIERS_PER_MESSAGE = 8
"""Identifiers taken from one message: a listing full of hashes must not fill the ledger."""

LEDGER_HEADER = (
    "Artifact ledger (what this session touched, kept verbatim outside any summary; "
    "`read_result <ref>` reads an output back):"
)
"""The first line of the rendered ledger."""

_TITLES: Mapping[LedgerKind, str] = {
    "file": "Files",
    "command": "Commands",
    "error": "Errors",
    "identifier": "Identifiers",
}

_URL = r"https?://[^\s'\"<>()\[\]{}`]+"
# A host and port: localhost, an IPv4 address, or a dotted name whose last label is not a file
# extension (``parser.py:35`` is a file and a line number, not a host).
_FILE_EXTENSIONS = (
    "py|pyi|js|mjs|cjs|ts|tsx|jsx|rs|go|c|h|cc|cpp|hpp|java|kt|rb|php|cs|swift|scala|sh|md|rst|"
    "txt|json|yaml|yml|toml|ini|cfg|conf|lock|html|htm|css|scss|sql|xml|log|csv|ipynb|vue|svelte|"
    "lua|ex|exs|eex|heex|erl|hrl|dart|zig|nim|pl|pm|jl|hs|ml|clj|el|vim|proto|gradle|tf|r|m|mm|s"
)
_EXTENSIONS = tuple(_FILE_EXTENSIONS.split("|"))
_HOST_PORT = (
    r"\b(?:localhost|\d{1,3}(?:\.\d{1,3}){3}|"
    rf"[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?!(?:{_FILE_EXTENSIONS}):)[a-z][a-z0-9-]*):\d{{2,5}}\b"
)
_UUID = r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
# A hash: 7 to 64 hex digits with at least one letter and one digit (not a plain number or word).
_HASH = r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,64}\b"
# A prefixed id such as ses_01hx9c… or cus_NffrFeUfNV2Hib: a short lower-case prefix, then a
# token of at least 10 characters with a digit in it (``from_iso8601`` is a function name).
_PREFIXED_ID = r"\b[a-z]{2,8}_(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{10,40}\b"
# Every identifier holds one of these within one word (none spans whitespace): ``://`` (a URL),
# ``:`` and two digits (a port, in an ASCII text one not after a file name: see
# :func:`_after_file_name`), ``_`` and ten letters or digits (a prefixed id), seven hex
# digits (a UUID or a hash). A text is scanned for them first, and the identifier pattern, slow
# to try at every position, runs only over the words that hold one, with only the branches
# whose feature the word holds (see :func:`_identifier_matches`).
_FEATURE = re.compile(r"://|:\d\d|_[a-z0-9]{10}|[0-9a-f]{7}", re.IGNORECASE)
_URL_F, _PORT_F, _ID_F, _HEX_F = 1, 2, 4, 8
"""The features as bits, in the order of :data:`_ASCII_FEATURES`."""
_ALL_FEATURES = _URL_F | _PORT_F | _ID_F | _HEX_F
_BRANCHES = (
    (_URL, _URL_F),
    (_UUID, _HEX_F),
    (_HOST_PORT, _PORT_F),
    (_HASH, _HEX_F),
    (_PREFIXED_ID, _ID_F),
)
"""The identifier pattern's branches, in order, each with the feature its matches hold."""


@lru_cache(maxsize=_ALL_FEATURES + 1)
def _pattern(features: int) -> re.Pattern[str]:
    """The identifier pattern with only the branches whose feature is one of ``features``: in a
    word holding no other feature it finds what the whole pattern finds (a branch whose
    feature the word lacks matches nowhere in it, so it never wins a position)."""
    branches = (p for p, feature in _BRANCHES if feature & features)
    return re.compile("|".join(f"(?:{p})" for p in branches), re.IGNORECASE)


_IDENTIFIER = _pattern(_ALL_FEATURES)
_WORD = re.compile(r"\S+")


def _byte_map(chars: bytes, to: bytes, other: bytes | None = None) -> bytes:
    """A :meth:`bytes.translate` table sending ``chars`` to ``to`` and every other byte to
    ``other`` (itself when ``None``)."""
    return bytes(to[0] if b in chars else (b if other is None else other[0]) for b in range(256))


_DIGITS, _HEX = b"0123456789", b"0123456789abcdefABCDEF"
_ALNUM = _DIGITS + bytes(range(ord("a"), ord("z") + 1)) + bytes(range(ord("A"), ord("Z") + 1))
_ASCII_FEATURES: tuple[tuple[bytes | None, bytes], ...] = (
    (None, b"://"),
    (_byte_map(_DIGITS, b"0"), b":00"),
    (_byte_map(_ALNUM, b"a"), b"_" + b"a" * 10),
    (_byte_map(_HEX, b"x", b" "), b"x" * 7),
)
""":data:`_FEATURE` as literals in an ASCII text's bytes mapped by each table (a search for a
literal runs at C speed; the pattern's character classes are tried byte by byte)."""
_FILE_LINE_ENDS = tuple(f".{e}" for e in _EXTENSIONS)
_FILE_LINE_REACH = max(map(len, _FILE_LINE_ENDS))
_PORT_LITERAL = _ASCII_FEATURES[1][1]
_ASCII_SPACES = _byte_map(b"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f ", b" ", b"w")
"""A table sending the ASCII characters ``str.isspace`` (and ``\\s``) calls whitespace to a
blank, every other byte to ``w``: an ASCII text's word edges, found by :meth:`bytes.find`."""
_TRAILING = ".,;:!?'\"\\"
_COUNTER = HeuristicCounter()
_RefOf: TypeAlias = Callable[[str], str | None]
"""The readable ref of a call's output, by call id."""
Identifiers: TypeAlias = tuple[tuple[str | None, str], ...]
"""A message's identifiers (see :func:`message_identifiers`): each with the call id of the output
it was found in (``None``: in the message's text or a call's arguments)."""


@dataclass(frozen=True, slots=True)
class LedgerItem:
    """One thing the session touched: its kind, its text (verbatim, cut to
    :data:`MAX_ITEM_CHARS`), and the ref ``read_result`` reads its output back with, if any."""

    kind: LedgerKind
    text: str
    ref: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        """What makes two items the same (the newer one's ref wins)."""
        return self.kind, self.text.casefold()

    def line(self) -> str:
        """The item as the ledger shows it."""
        return f"- {self.text} ({self.ref})" if self.ref else f"- {self.text}"

    def state(self) -> dict[str, str | None]:
        """The stored form."""
        return {"kind": self.kind, "text": self.text, "ref": self.ref}


@dataclass(frozen=True)
class Ledger:
    """A session's ledger, oldest item first, within its bounds when made by :meth:`merged`."""

    items: tuple[LedgerItem, ...] = ()

    def __len__(self) -> int:
        return len(self.items)

    def of_kind(self, kind: LedgerKind) -> tuple[LedgerItem, ...]:
        """The items of one kind, oldest first."""
        return tuple(i for i in self.items if i.kind == kind)

    @property
    def refs(self) -> frozenset[str]:
        """Every ref the ledger names."""
        return frozenset(i.ref for i in self.items if i.ref)

    def render(self) -> str:
        """The ledger as a prompt section: the header, then each kind's items (empty if none)."""
        return self._rendered

    @cached_property
    def _rendered(self) -> str:
        # Rendered once per ledger: a ledger never changes, and every request carries it.
        return "\n".join(self._lines)

    @cached_property
    def _lines(self) -> list[str]:
        if not self.items:
            return []
        lines = [LEDGER_HEADER]
        for kind in LEDGER_KINDS:
            items = self.of_kind(kind)
            if items:
                lines.append(f"{_TITLES[kind]}:")
                lines.extend(i.line() for i in items)
        return lines

    def tokens(self) -> int:
        """Estimated tokens of :meth:`render`."""
        return self._tokens

    @cached_property
    def _tokens(self) -> int:
        # Line by line (the same count): :meth:`merged` counts ledgers that share most lines
        # with the ones it counted before, cutting a few items at a time.
        return _COUNTER.count_lines(self._lines)

    def merged(self, newer: Iterable[LedgerItem], *, max_tokens: int = MAX_LEDGER_TOKENS) -> Ledger:
        """This ledger with ``newer`` items after it, bounded.

        An item seen again moves to the end (it is recent again) and keeps its old ref when the
        new sighting has none. Then each kind keeps its newest :data:`MAX_ITEMS_PER_KIND`, and
        the oldest items go until the rendering fits ``max_tokens`` (see
        :func:`token_budget`).
        """
        by_key: dict[tuple[str, str], LedgerItem] = {i.key: i for i in self.items}
        for item in newer:
            old = by_key.pop(item.key, None)
            if old is not None and item.ref is None and old.ref is not None:
                item = LedgerItem(item.kind, item.text, old.ref)
            by_key[item.key] = item
        ordered = list(by_key.values())
        kept: list[LedgerItem] = []
        room = dict(MAX_ITEMS_PER_KIND)
        for item in reversed(ordered):  # newest first, so the newest of each kind are kept
            if room[item.kind] > 0:
                room[item.kind] -= 1
                kept.append(item)
        kept.reverse()
        ledger = Ledger(tuple(kept))
        while ledger.items and ledger.tokens() > max_tokens:
            # Dropping a few at a time: the rendering is re-estimated after each cut.
            surplus = max(1, len(ledger.items) // 10)
            ledger = Ledger(ledger.items[surplus:])
        return ledger

    def state(self) -> list[dict[str, str | None]]:
        """The stored form, a JSON list."""
        return [i.state() for i in self.items]

    @cached_property
    def stored(self) -> tuple[dict[str, str | None], ...]:
        """:meth:`state` made once for this ledger, as a tuple nobody changes: the session
        saves the same object every turn until a compaction makes a new ledger, and the store
        does not encode an unchanged tuple again."""
        return tuple(i.state() for i in self.items)

    @classmethod
    def from_state(cls, saved: object) -> Ledger:
        """The ledger of a stored form; unreadable entries are skipped, so a state saved before
        ledgers existed gives an empty one."""
        items: list[LedgerItem] = []
        if isinstance(saved, list | tuple):  # a tuple: :attr:`stored`, handed over unencoded
            for entry in saved:
                if not isinstance(entry, Mapping):
                    continue
                kind, text, ref = entry.get("kind"), entry.get("text"), entry.get("ref")
                if kind in LEDGER_KINDS and isinstance(text, str) and text:
                    items.append(LedgerItem(kind, text, ref if isinstance(ref, str) else None))
        return cls().merged(items)


def token_budget(context_window: int) -> int:
    """The tokens a ledger may take in a window of ``context_window`` tokens (0: no window
    known, the absolute cap)."""
    if context_window <= 0:
        return MAX_LEDGER_TOKENS
    return min(MAX_LEDGER_TOKENS, int(context_window * MAX_LEDGER_WINDOW_SHARE))


# --------------------------------------------------------------------------------------------------
# Reading items from messages
# --------------------------------------------------------------------------------------------------


OUTPUT_REF_CHARS = 16_000_000
"""Characters of the outputs whose content refs :func:`output_ref` keeps (the outputs
themselves: the key is the text, so a ref is never guessed from a hash)."""

_output_refs: LRU[str, str] = LRU(
    IDENTIFIER_CACHE_TEXTS, max_weight=OUTPUT_REF_CHARS, weigh=lambda text, _: len(text)
)


def output_ref(result: ToolResultPart) -> str:
    """The ref under which ``result``'s full output is stored once compaction stashes it: the
    ref it already carries, else the content's own (blobs are content-addressed).

    The content's digest is kept: a compaction asks for the refs of the outputs that left the
    view twice (its ledger and its loss report), and a digest reads the whole output."""
    if result.ref:
        return result.ref
    ref = _output_refs.get(result.content)
    if ref is None:
        ref = blob_info(result.content).ref
        _output_refs.put(result.content, ref)
    return ref


def visible_refs(messages: Iterable[Message]) -> frozenset[str]:
    """Every ref named in ``messages``: on tool results, and in text (placeholders, drop notes,
    summaries). What a view names, the model can read back."""
    refs: set[str] = set()
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                if part.ref:
                    refs.add(part.ref)
                refs.update(_refs_in(part.content))
            elif isinstance(part, TextPart | SummaryPart):
                refs.update(_refs_in(part.text))
    return frozenset(refs)


@lru_cache(maxsize=IDENTIFIER_CACHE_TEXTS)
def _refs_in(text: str) -> tuple[str, ...]:
    """The refs named in one text (remembered: every compaction reads the view's texts again)."""
    # The literal first (see :func:`~contextfold.retention.probes.read_text`).
    return tuple(REF_PATTERN.findall(text)) if "ref_" in text else ()


def stored_refs(messages: Iterable[Message]) -> frozenset[str]:
    """The refs of every output ``messages`` stand for: those they name (:func:`visible_refs`)
    and those a drop note or summary keeps in its sections without showing them all (a note
    lists a few refs and "N more"). All were stored when the outputs left the view."""
    refs = set(visible_refs(messages))
    for message in messages:
        for part in message.parts:
            if isinstance(part, SummaryPart):
                for items in part.sections.values():
                    for item in items:
                        refs.update(REF_PATTERN.findall(item))
    return frozenset(refs)


def ledger_items(
    messages: Sequence[Message],
    *,
    readable_refs: Collection[str] = frozenset(),
    only: Collection[str] | None = None,
    identifiers: Callable[[Message], Identifiers] | None = None,
) -> list[LedgerItem]:
    """The ledger items of ``messages``, in the order they happened (duplicates included; a
    :class:`Ledger` merges them).

    An item's ref is set only when ``readable_refs`` holds it (or the output already carried
    it): a ref whose output was never stored would send the model to a dead end. With ``only``
    (message ids), just the items of those messages: a call whose call or result is one of them,
    identifiers in them (what left the view, when they are the messages a compaction took).
    ``identifiers`` gives a message's :func:`message_identifiers` (by default computed here; a
    session's loss tracker reads them once per message).
    """
    results: dict[str, ToolResultPart] = {}
    for message in messages:
        for result in message.tool_results:
            results.setdefault(result.call_id, result)

    def ref_of(call_id: str) -> str | None:
        result = results.get(call_id)
        if result is None:
            return None
        ref = output_ref(result)
        return ref if ref in readable_refs or ref == result.ref else None

    items: list[LedgerItem] = []
    for action in tool_actions(messages, touching=only):
        ref = ref_of(action.call_id)
        for path in (*action.reads, *action.writes):
            items.append(LedgerItem("file", _clip(path), ref))
        if tool_kind(action.tool) == "shell" and action.summary.strip():
            items.append(LedgerItem("command", _clip(action.summary.strip()), ref))
        if action.failed:
            items.extend(LedgerItem("error", _clip(line), ref) for line in action.errors)
    of = identifiers or message_identifiers
    for message in messages:
        if only is None or message.id in only:
            items.extend(
                LedgerItem("identifier", found, ref_of(call_id) if call_id is not None else None)
                for call_id, found in of(message)
            )
    return items


def message_identifiers(message: Message) -> Identifiers:
    """The identifiers in ``message``'s text, tool outputs and call arguments, in that order
    within each part, at most :data:`MAX_IDENTIFIERS_PER_MESSAGE` (not the engine's own refs,
    and never one that looks like a secret), each with the call id of the output it was found
    in (whose ref the ledger item gets, when it is readable)."""
    found: list[tuple[str | None, str]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            text, call_id = part.text, None
        elif isinstance(part, ToolResultPart):
            text, call_id = part.content, part.call_id
        elif isinstance(part, ToolCallPart):
            text, call_id = part.arguments, None
        else:
            continue
        for identifier in _text_identifiers(text):
            found.append((call_id, identifier))
            if len(found) >= MAX_IDENTIFIERS_PER_MESSAGE:
                return tuple(found)
    return tuple(found)


@lru_cache(maxsize=IDENTIFIER_CACHE_TEXTS)
def _text_identifiers(text: str) -> tuple[str, ...]:
    """The identifiers in one text, clipped, at most :data:`MAX_IDENTIFIERS_PER_MESSAGE`.

    Cached by text: every compaction reads the whole view again, and the same outputs (the
    same string objects, whose hash Python keeps) are scanned each time otherwise.
    """
    # Identifiers are read from the redacted text: lifted out of its line, a secret loses
    # the context (``TOKEN=``...) by which the store's redactor would know it. The redactor
    # remembers the texts it redacted (a tool output, on its way in and when it is stashed), so
    # asking it again costs a lookup where scanning for secrets first cost two passes over the
    # text (it returns the text itself when no rule can match: the same text as before).
    found: list[str] = []
    for match in _identifier_matches(redact_text(text)):
        word = match.rstrip(_TRAILING)
        if REF_PATTERN.fullmatch(word) or redact_text(word) != word:
            continue
        found.append(_clip(word))
        if len(found) >= MAX_IDENTIFIERS_PER_MESSAGE:
            break
    return tuple(found)


def _identifier_matches(text: str) -> Iterator[str]:
    """What ``_IDENTIFIER.finditer(text)`` finds, in order, read only from the words of ``text``
    that hold a :data:`_FEATURE`, each with the branches of its features.

    The same matches: a match lies within one word (no part of the pattern takes whitespace)
    and holds a feature, and joined with line breaks the words keep what ``\\b`` and the
    look-aheads see around and inside each match. Tried at every position of a long tool
    output, the pattern cost most of a compaction's ledger; most words hold no feature, and
    most that do hold one only (a ``snake_case_name``, a ``file.py:12``), for which the other
    branches, the host's most of all, are tried in vain at each of their positions."""
    run: list[str] = []
    features = 0
    for word, held in _feature_words(text):
        if held != features and run:
            yield from _run_matches(run, features)
            run = []
        run.append(word)
        features = held
    if run:
        yield from _run_matches(run, features)


def _run_matches(words: list[str], features: int) -> Iterator[str]:
    for match in _pattern(features).finditer("\n".join(words)):
        yield match.group(0)


def _feature_words(text: str) -> list[tuple[str, int]]:
    """The whitespace-delimited words of ``text`` that hold a :data:`_FEATURE`, in order, each
    with the features it holds (all of them for a text that is not ASCII)."""
    if not text.isascii():
        return _unicode_feature_words(text)
    raw = text.encode("ascii")
    spaces = raw.translate(_ASCII_SPACES)
    hits: list[tuple[int, int]] = []
    for bit, (table, literal) in enumerate(_ASCII_FEATURES):
        mapped = raw if table is None else raw.translate(table)
        at = mapped.find(literal)
        while at >= 0:
            if literal is _PORT_LITERAL and _after_file_name(text, at):
                at = mapped.find(literal, at + 1)  # another colon of the word may end a host
                continue
            hits.append((at, 1 << bit))
            end = spaces.find(b" ", at)  # one hit per word is enough
            if end < 0:
                break
            at = mapped.find(literal, end)
    hits.sort()
    words: list[tuple[str, int]] = []
    start = end = 0
    held = 0
    for at, feature in hits:
        if at < end:
            held |= feature  # in the word taken last
            continue
        if end:
            words.append((text[start:end], held))
        start = spaces.rfind(b" ", end, at) + 1 or end
        end = spaces.find(b" ", at)
        if end < 0:
            end = len(text)
        held = feature
    if end:
        words.append((text[start:end], held))
    return words


def _after_file_name(text: str, colon: int) -> bool:
    """Whether the colon at ``colon`` (of an ASCII text) follows a file name (``parser.py:35``),
    so that no host and port ends there: the pattern's last label before a port is the whole run
    of letters, digits and hyphens after a dot, and not a file extension; nor is it
    ``localhost`` or an address's digits."""
    return text[max(0, colon - _FILE_LINE_REACH) : colon].lower().endswith(_FILE_LINE_ENDS)


def _unicode_feature_words(text: str) -> list[tuple[str, int]]:
    words: list[tuple[str, int]] = []
    end = 0
    for hit in _FEATURE.finditer(text):
        at = hit.start()
        if at < end:
            continue  # in the word taken last
        start = at
        while start > end and not text[start - 1].isspace():
            start -= 1
        word = _WORD.match(text, start)
        if word is not None:
            words.append((word.group(0), _ALL_FEATURES))
            end = word.end()
    return words


@lru_cache(maxsize=IDENTIFIER_CACHE_TEXTS)
def _clip(text: str) -> str:
    text = " ".join(redact_text(text).split())  # redacted before any cut, for the same reason
    return text if len(text) <= MAX_ITEM_CHARS else text[: MAX_ITEM_CHARS - 1].rstrip() + "…"
