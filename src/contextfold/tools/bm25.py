"""Okapi BM25 ranking over short documents, and the word splitting that tool names need.

Small on purpose: ``tool_search`` ranks at most a few thousand tool descriptions, so a plain
in-memory index (term frequencies per document, document frequencies per term) is fast enough
and has no dependency. :func:`search_terms` turns text into index terms: it splits identifiers
(``snake_case``, ``camelCase``, ``dotted.names``, ``kebab-case``), lowercases, drops a few
English filler words and folds common suffixes, so that "creating issues" finds
``github_create_issue``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

__all__ = ["BM25_B", "BM25_K1", "BM25Index", "search_terms", "split_words"]

BM25_K1 = 1.2
"""Term-frequency saturation: a word repeated in one description soon stops adding score."""
BM25_B = 0.75
"""Length normalization: a match in a short description weighs more than in a long one."""

# A lower or digit followed by an upper ("getURL", "v2Api"), or an upper run followed by a
# capitalized word ("HTTPServer"): the boundaries of camelCase words.
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[\W_]+")

_STOPWORD_TEXT = (
    "a an and any are as at be by can could do does for from how i in into is it its me my of on "
    "or please some that the this to tool tools use using want which with would you your"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
"""Words that say nothing about which tool is meant (queries are often whole sentences)."""


def split_words(text: str) -> list[str]:
    """The lowercase words of ``text``, with identifiers split at case changes and separators."""
    return [w.lower() for w in _SEPARATORS.split(_CAMEL_BOUNDARY.sub(" ", text)) if w]


def _fold(word: str) -> str:
    """A crude stem: enough for "issues"/"issue" and "creating"/"create" to meet.

    Applied to documents and queries alike, so an odd stem ("messag") costs nothing.
    """
    if len(word) <= 3 or word.isdigit():
        return word
    for suffix, replacement in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + replacement
            break
    else:
        if word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def search_terms(text: str) -> list[str]:
    """The index terms of ``text``: its words without filler words, suffixes folded."""
    return [_fold(w) for w in split_words(text) if w not in _STOPWORDS]


class BM25Index:
    """Scores documents (lists of terms) against a query with Okapi BM25."""

    def __init__(
        self, documents: Sequence[Sequence[str]], *, k1: float = BM25_K1, b: float = BM25_B
    ) -> None:
        self.k1 = k1
        self.b = b
        self._frequencies = [Counter(doc) for doc in documents]
        self._lengths = [len(doc) for doc in documents]
        self._average_length = sum(self._lengths) / len(documents) if documents else 0.0
        document_frequency: Counter[str] = Counter()
        for frequencies in self._frequencies:
            document_frequency.update(frequencies.keys())
        count = len(documents)
        # The "+ 1" form of the IDF (as in Lucene) stays positive for terms in most documents,
        # so a common word still counts a little instead of lowering the score.
        self._idf = {
            term: math.log((count - df + 0.5) / (df + 0.5) + 1.0)
            for term, df in document_frequency.items()
        }

    def __len__(self) -> int:
        return len(self._frequencies)

    def scores(self, query: Sequence[str]) -> list[float]:
        """One score per document, in document order; 0.0 where no query term occurs."""
        terms = [t for t in dict.fromkeys(query) if t in self._idf]  # each term once
        results = [0.0] * len(self._frequencies)
        if not terms:
            return results
        average = self._average_length or 1.0
        for index, frequencies in enumerate(self._frequencies):
            norm = self.k1 * (1.0 - self.b + self.b * self._lengths[index] / average)
            total = 0.0
            for term in terms:
                tf = frequencies.get(term, 0)
                if tf:
                    total += self._idf[term] * tf * (self.k1 + 1.0) / (tf + norm)
            results[index] = total
        return results
