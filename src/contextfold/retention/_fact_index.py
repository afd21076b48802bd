"""Which facts each text shows, each text searched once for every fact (texts and facts never
change).

The loss report asks, at every compaction, where each fact the session knows can be read: in
which of the view's texts, summaries, stored outputs, the pins or the ledger. Asked fact by fact
over every text again, that was most of a compaction turn, although from one compaction to the
next most texts and most facts are the same. A :class:`FactIndex` keeps, for every text it holds
(normalized, see :func:`~contextfold.retention.probes.normalize`), the set of facts whose needle
the text contains; a text new to it is searched for every fact, a fact new to it is searched in
every text it holds. What it answers is always what a plain search would (``needle in text``,
for each text): it caches, it never guesses.

A text is searched through its *tokens* (runs of ASCII letters, digits and any non-ASCII
character, read from its UTF-8 bytes at C speed). A needle found in a text holds its inner
tokens (those bounded on both sides by other characters of the needle) as whole tokens of the
text, so each needle is filed under one inner token, and a text is searched only for the needles
filed under one of its tokens whose inner tokens it all holds. ``_`` ends a token, so that a
file name such as ``test_issue.py`` has one (``issue``); the few needles without any
(``setup.py``) are searched in every new text.

A text's tokens are a set built from every word of it, about 10 µs per kilobyte (a stored output
of 100 kB: 1 ms). While the index files few anchors, a new text is not split: each anchor (and
inner token) is looked for as a whole token in its mapped bytes, one search at C speed (under
1 µs per kilobyte). The token sets are then made only when :meth:`FactIndex.found_in` needs them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

__all__ = ["FactIndex"]

SEARCHED_ANCHORS = 16
"""Anchors up to which a new text is searched for each one rather than split into its tokens
(both cost in proportion to the text; a search is about 20 times cheaper than the split)."""

_TOKEN_BYTES = frozenset(
    b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" + bytes(range(0x80, 0x100))
)
_BLANK_OTHERS = bytes(b if b in _TOKEN_BYTES else 0x20 for b in range(256))
"""A :meth:`bytes.translate` table keeping token bytes and blanking every other byte (UTF-8
puts no ASCII byte inside a multi-byte character, so a character's bytes stay together)."""


def _mapped(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass").translate(_BLANK_OTHERS)


def _tokens(text: str) -> frozenset[bytes]:
    return frozenset(_mapped(text).split())


def _inner_tokens(needle: str) -> tuple[bytes, ...]:
    """The tokens of ``needle`` that neither start nor end it: the first and last pieces of
    the split touch its ends (empty when a blanked byte is there)."""
    return tuple(piece for piece in _mapped(needle).split(b" ")[1:-1] if piece)


@dataclass(frozen=True, slots=True)
class _Needle:
    fact: str
    text: str
    inner: frozenset[bytes]


_Filed: TypeAlias = tuple[str, str, frozenset[bytes]]
"""A needle as filed under its anchor: its fact, its text, and its inner tokens other than the
anchor (most needles have none: a text's search, which already knows it holds the anchor,
then goes straight to the needle's text)."""


class FactIndex:
    """The facts each held text shows (see the module docstring). Facts are known by their key
    and found by their needles (any one of them found is the fact found)."""

    def __init__(self) -> None:
        self._facts: set[str] = set()
        self._filed: dict[bytes, list[_Filed]] = {}
        self._anchors: set[bytes] = set()
        self._loose: list[_Needle] = []
        self._shown: dict[str, set[str]] = {}
        self._tokens: dict[str, frozenset[bytes]] = {}
        """The tokens of held texts, for those split so far (see :meth:`_token_set`)."""

    def shown(self, text: str) -> set[str]:
        """The keys of the facts ``text`` shows (``text`` is held: see :meth:`hold`)."""
        return self._shown[text]

    def keep_only(self, texts: Collection[str]) -> None:
        """Let go of every held text not in ``texts`` (what a session no longer shows need not
        be searched for the facts still to come)."""
        for text in [t for t in self._shown if t not in texts]:
            del self._shown[text]
            self._tokens.pop(text, None)

    def add_facts(self, facts: Iterable[tuple[str, Sequence[str]]]) -> None:
        """Know each fact (its key and its needles) not known yet, and find it in the held
        texts."""
        new: list[_Needle] = []
        for key, needles in facts:
            if key in self._facts:
                continue
            self._facts.add(key)
            for needle in needles:
                inner = _inner_tokens(needle)
                filed = _Needle(key, needle, frozenset(inner))
                new.append(filed)
                if inner:
                    # The last inner tokens are the most telling (a path's file name, the
                    # object of an error line); the longer of the last two is the anchor.
                    anchor = max(reversed(inner[-2:]), key=len)
                    self._filed.setdefault(anchor, []).append((key, needle, filed.inner - {anchor}))
                    self._anchors.add(anchor)
                else:
                    self._loose.append(filed)
        if new and self._shown:
            self._find_in(list(self._shown), new)

    def hold(self, texts: Iterable[str], *, split: bool = False) -> None:
        """Hold each text not held yet, searched for every known fact (``split``: through its
        tokens, which :meth:`found_in` is about to need)."""
        fresh = [t for t in dict.fromkeys(texts) if t not in self._shown]
        for text in fresh:
            if split:
                self._token_set(text)
            self._shown[text] = self._search(text) if self._anchors else set()
        if fresh and self._loose:
            self._find_in(fresh, self._loose)

    def _search(self, text: str) -> set[str]:
        """The facts of the filed needles ``text`` holds: those filed under one of its tokens
        whose inner tokens it all holds, and that it contains."""
        holds: Callable[[frozenset[bytes]], bool]
        anchors: Iterable[bytes]
        if len(self._anchors) > SEARCHED_ANCHORS or text in self._tokens:
            tokens = self._token_set(text)
            holds, anchors = tokens.issuperset, tokens & self._anchors
        else:
            # Blank-bounded, every token of the text is `` token `` in these bytes.
            padded = b" " + _mapped(text) + b" "

            def has(token: bytes) -> bool:
                return b" " + token + b" " in padded

            def holds(inner: frozenset[bytes]) -> bool:
                return all(map(has, inner))

            anchors = [a for a in self._anchors if has(a)]
        found: set[str] = set()
        for anchor in anchors:
            for fact, needle, rest in self._filed[anchor]:
                if fact in found or (rest and not holds(rest)):
                    continue
                if needle in text:
                    found.add(fact)
        return found

    def _token_set(self, text: str) -> frozenset[bytes]:
        """The tokens of a held ``text`` (split once, kept while it is held)."""
        tokens = self._tokens.get(text)
        if tokens is None:
            tokens = self._tokens[text] = _tokens(text)
        return tokens

    def found_in(self, texts: Sequence[str], needles: Iterable[str]) -> set[str]:
        """The ``needles`` (not facts: a ledger's items) that one of ``texts`` (all held)
        contains. A needle is searched only in the texts holding its longest inner token (the
        likeliest to be rare) and all its other ones, a set lookup each; a needle without any, in
        the texts joined by line breaks. Only those tokens are looked up in each text's tokens:
        a union of all of them, and a search of every text for each needle found there, cost
        more."""
        anchored: list[tuple[str, bytes, frozenset[bytes]]] = []
        loose: list[str] = []
        for needle in needles:
            inner = _inner_tokens(needle)
            if inner:
                anchored.append((needle, max(inner, key=len), frozenset(inner)))
            else:
                loose.append(needle)
        wanted = frozenset(anchor for _, anchor, _ in anchored)
        holding: dict[bytes, list[tuple[str, frozenset[bytes]]]] = {}
        for text in texts:
            tokens = self._token_set(text)
            for anchor in tokens & wanted:
                holding.setdefault(anchor, []).append((text, tokens))
        found: set[str] = set()
        for needle, anchor, inner_tokens in anchored:
            for text, tokens in holding.get(anchor, ()):
                if tokens.issuperset(inner_tokens) and needle in text:
                    found.add(needle)
                    break
        if loose:
            joined = "\n".join(texts)
            found.update(needle for needle in loose if needle in joined)
        return found

    def _find_in(self, texts: list[str], needles: Iterable[_Needle]) -> None:
        """Add each of ``needles``' facts to the held ``texts`` that contain it: one search per
        needle through the texts joined by line breaks (a needle, normalized, holds none, so no
        match straddles two texts), each match placed by its offset."""
        starts: list[int] = []
        offset = 0
        for text in texts:
            starts.append(offset)
            offset += len(text) + 1
        joined = "\n".join(texts)
        for needle in needles:
            at = joined.find(needle.text)
            while at >= 0:
                which = bisect_right(starts, at) - 1
                self._shown[texts[which]].add(needle.fact)
                following = which + 1
                if following == len(texts):
                    break
                at = joined.find(needle.text, starts[following])
