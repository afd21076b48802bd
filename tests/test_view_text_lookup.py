"""ViewText.shows: its shortcuts (distinct words, the inner-word check) answer exactly as a
plain substring search of the view's text would."""

from __future__ import annotations

import random

from contextfold.retention.probes import ViewText, normalize

WORDS = ["src/pkg/mod.py", "pkg/mod.py", "error:", "no", "such", "file", "mod", "a", "ab", "b"]


def test_shows_agrees_with_a_plain_search() -> None:
    rng = random.Random(7)
    for _ in range(300):
        text = normalize(" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12))))
        view = ViewText(text, "")
        for _ in range(10):
            words = [rng.choice(WORDS) for _ in range(rng.randint(1, 4))]
            needle = normalize(" ".join(words))
            # Cut inside a word too: a needle may start or end mid-word.
            needle = needle[rng.randint(0, 2) :] or needle
            assert view.shows([needle]) == (needle in text), (needle, text)


def test_holding_ref_agrees_with_a_plain_search() -> None:
    rng = random.Random(11)
    for _ in range(200):
        stored = {
            f"ref_{k:012x}": " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 8)))
            for k in range(rng.randint(0, 4))
        }
        view = ViewText("", "", stored, stored.get)
        for _ in range(10):
            needle = normalize(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4))))
            needle = needle[rng.randint(0, 2) :] or needle
            plain = next((ref for ref in sorted(stored) if needle in normalize(stored[ref])), None)
            assert view.holding_ref([needle]) == plain, (needle, stored)
