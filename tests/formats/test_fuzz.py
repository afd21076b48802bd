"""Malformed input always gets a FormatError naming file and line: every importer, on mutated
records (``benchmarks/format_fuzz.py`` holds the mutations and runs the full fuzz for its
figures; here hypothesis drives the same mutations, in bounded examples)."""

from __future__ import annotations

import random
import tempfile
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.format_fuzz import Seed, corpus_seeds, mutate, read_mutated, render
from benchmarks.format_fuzz import synthetic_seeds as writer_seeds
from contextfold.messages import Message
from contextfold.transcripts import SUPPORTED_FORMATS
from tests.conftest import TRAJECTORIES
from tests.formats.writers import conversations

FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""Bounded so that the module runs in seconds in CI; the benchmark makes tens of thousands."""


def failures(seed: Seed, text: str) -> list[tuple[str, str]]:
    """What escaped reading ``text`` as ``seed``'s file: (reader, problem) pairs."""
    with tempfile.TemporaryDirectory() as folder:
        return read_mutated(seed, text, Path(folder))


@cache
def shared_seeds() -> tuple[Seed, ...]:
    return tuple(corpus_seeds(TRAJECTORIES))


def test_every_seed_reads_cleanly_before_it_is_mutated() -> None:
    # Otherwise a failure below could be the seed's own, not the mutation's.
    for seed in writer_seeds() + list(shared_seeds()):
        assert failures(seed, render(seed, seed.value, random.Random(0))) == [], seed.origin


@pytest.mark.parametrize("format_name", SUPPORTED_FORMATS)
@FUZZ
@given(conversation=conversations(thinking=True), rng=st.randoms(use_true_random=False))
def test_a_mutated_file_of_every_format_gets_only_format_errors(
    format_name: str, conversation: list[Message], rng: random.Random
) -> None:
    [seed] = [s for s in writer_seeds(conversation) if s.format == format_name]
    assert failures(seed, mutate(seed, rng)) == []


@pytest.mark.shared_data
@FUZZ
@given(data=st.data(), rng=st.randoms(use_true_random=False))
def test_mutated_records_of_the_shared_corpus_get_only_format_errors(
    data: st.DataObject, rng: random.Random
) -> None:
    if not shared_seeds():
        pytest.skip(f"shared transcripts not available ({TRAJECTORIES} is absent)")
    seed = data.draw(st.sampled_from(shared_seeds()), label="seed")
    assert failures(seed, mutate(seed, rng)) == []
