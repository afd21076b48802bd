"""contextfold.lru.LRU: the bounded table behind the package's caches."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.lru import LRU


def test_the_least_recently_used_entry_goes_first() -> None:
    table: LRU[str, int] = LRU(2)
    table.put("a", 1)
    table.put("b", 2)
    assert table.get("a") == 1  # "a" is now the most recent
    table.put("c", 3)
    assert table.get("b") is None
    assert (table.get("a"), table.get("c"), len(table)) == (1, 3, 2)


def test_no_entries_keeps_nothing() -> None:
    table: LRU[str, int] = LRU(0)
    table.put("a", 1)
    assert table.get("a") is None and len(table) == 0


def test_weight_bound_and_the_heavy_entry_not_kept() -> None:
    table: LRU[str, str] = LRU(max_weight=100, weigh=lambda _key, text: len(text))
    table.put("huge", "x" * 13)  # over an eighth of the budget: one entry would crowd the rest
    assert table.get("huge") is None
    for n in range(20):
        table.put(f"k{n}", "y" * 12)
    assert len(table) == 8  # 8 x 12 = 96 <= 100
    assert [table.get(f"k{n}") is not None for n in range(12, 20)] == [True] * 8


def test_weigh_and_max_weight_go_together() -> None:
    with pytest.raises(ValueError, match="together"):
        LRU(max_weight=10)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 12), st.integers(0, 30)), max_size=60),
    st.integers(1, 6),
    st.integers(40, 120),
)
def test_matches_a_plain_model(puts: list[tuple[int, int]], entries: int, budget: int) -> None:
    """Against a list-based model: which keys stay, after any sequence of puts and gets."""
    table: LRU[int, int] = LRU(entries, max_weight=budget, weigh=lambda _key, weight: weight)
    model: list[tuple[int, int]] = []  # least recent first
    for key, weight in puts:
        if key % 3 == 0:  # a read, which refreshes a held key
            held = [item for item in model if item[0] == key]
            if held:
                model.remove(held[0])
                model.append(held[0])
            assert table.get(key) == (held[0][1] if held else None)
            continue
        if weight > budget // 8:
            table.put(key, weight)
            continue
        model = [item for item in model if item[0] != key] + [(key, weight)]
        while len(model) > entries or sum(w for _, w in model) > budget:
            model.pop(0)
        table.put(key, weight)
        assert len(table) == len(model)
        # Read least recent first, so the reads leave the table's order the model's.
        assert [table.get(k) for k, _ in model] == [w for _, w in model]


def test_concurrent_puts_keep_the_bounds() -> None:
    table: LRU[int, str] = LRU(50, max_weight=400, weigh=lambda _key, text: len(text))

    def fill(offset: int) -> None:
        for n in range(2_000):
            table.put(offset + n % 97, "z" * (n % 9))

    threads = [threading.Thread(target=fill, args=(k * 1_000,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(table) <= 50
    assert table._weight == sum(len(v) for v in table._entries.values()) <= 400
