"""The one answer to "how much do these two sequences share from their start"."""

from __future__ import annotations

import operator

from hypothesis import given
from hypothesis import strategies as st

from contextfold.sequences import common_prefix, same_objects

_INDEXES = st.lists(st.integers(0, 3), max_size=6)


@given(_INDEXES, _INDEXES)
def test_common_prefix_counts_the_shared_objects_from_the_start(a: list[int], b: list[int]) -> None:
    pool = [object() for _ in range(4)]
    left, right = [pool[i] for i in a], [pool[i] for i in b]
    shared = common_prefix(left, right)
    assert all(x is y for x, y in zip(left[:shared], right[:shared], strict=True))
    assert shared == min(len(a), len(b)) or left[shared] is not right[shared]


@given(_INDEXES, _INDEXES)
def test_common_prefix_by_value_compares_equal_items(a: list[int], b: list[int]) -> None:
    # Equal bytes made apart (not the same objects): only a comparison by value finds them.
    left, right = [bytes([i]) * 40 for i in a], [bytes([i]) * 40 for i in b]
    shared = common_prefix(left, right, operator.eq)
    assert left[:shared] == right[:shared]
    assert shared == min(len(a), len(b)) or left[shared] != right[shared]


def test_common_prefix_counts_up_to_the_first_difference() -> None:
    assert common_prefix([1, 2, 3, 4], [1, 9, 3, 4], operator.eq) == 1
    assert common_prefix([1, 2], [1, 2, 3], operator.eq) == 2
    assert common_prefix([], [1], operator.eq) == 0


def test_same_objects_wants_the_very_objects_in_order() -> None:
    a, b = object(), object()
    assert same_objects([a, b], [a, b])
    assert not same_objects([a, b], [b, a])
    assert not same_objects([a], [a, b])
