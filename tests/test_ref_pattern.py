"""REF_PATTERN is written to open with the literal ``ref_`` (so the regex engine can jump between
occurrences) in place of the plain ``\\bref_[0-9a-f]{12}\\b``: both must find the same refs."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextfold.outputs.blobs import REF_PATTERN
from contextfold.transcripts import load_transcript, load_transcripts
from tests.conftest import shared_path

# The plain form of the pattern: the meaning REF_PATTERN must keep.
PLAIN_REF_PATTERN = re.compile(r"\bref_[0-9a-f]{12}\b")


def assert_same_matches(text: str) -> None:
    assert [m.span() for m in REF_PATTERN.finditer(text)] == [
        m.span() for m in PLAIN_REF_PATTERN.finditer(text)
    ]
    assert REF_PATTERN.findall(text) == PLAIN_REF_PATTERN.findall(text)
    assert bool(REF_PATTERN.fullmatch(text)) == bool(PLAIN_REF_PATTERN.fullmatch(text))


@pytest.mark.parametrize(
    "text",
    [
        "ref_0123456789ab",
        "see ref_0123456789ab.",
        "xref_0123456789ab",
        "_ref_0123456789ab",
        "éref_0123456789ab",
        "ref_0123456789abc",
        "ref_0123456789aé",
        "ref_ref_0123456789ab",
        "-ref_0123456789ab-ref_aaaaaaaaaaaa",
        "ref_0123456789AB",
        "",
    ],
)
def test_edge_cases_match_the_plain_pattern(text: str) -> None:
    assert_same_matches(text)


# Pieces that sit around a ref's boundaries: word characters (ASCII, Unicode, digits, '_'),
# non-word characters, hex digits and parts of refs.
_PIECES = st.sampled_from(
    [
        "ref_",
        "ref",
        "_",
        "0",
        "a",
        "f",
        "g",
        "A",
        "é",
        "٣",
        " ",
        "\n",
        ".",
        "-",
        "(",
        "0123456789ab",
    ]
)


@given(st.lists(_PIECES | st.text(max_size=3), max_size=30).map("".join))
def test_random_texts_match_the_plain_pattern(text: str) -> None:
    assert_same_matches(text)


def _with_refs_spliced_in(text: str, rng: random.Random) -> str:
    """The text with refs inserted at random places (inside words too), as placeholders do."""
    pieces = list(text)
    for _ in range(max(1, len(text) // 200)):
        ref = "ref_" + "".join(
            rng.choice("0123456789abcdef") for _ in range(rng.choice((11, 12, 13)))
        )
        pieces.insert(rng.randrange(len(pieces) + 1), ref)
    return "".join(pieces)


@pytest.mark.shared_data
def test_real_tool_outputs_match_the_plain_pattern() -> None:
    root = shared_path("trajectories")
    transcripts = [
        load_transcript(min((root / "mini-swe-agent-deepseek").glob("*.json"))),
        load_transcript(root / "claude-code" / "tool_heavy.jsonl"),
        *load_transcripts(root / "tau-bench" / "gpt-4o-airline.json")[:1],
    ]
    rng = random.Random(28)
    texts = [
        text
        for transcript in transcripts
        for message in transcript.messages
        for text in (message.text, *(r.content for r in message.tool_results))
        if text
    ]
    assert texts
    for text in texts:
        assert_same_matches(text)
        assert_same_matches(_with_refs_spliced_in(text, rng))
