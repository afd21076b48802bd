from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextfold import ConfigError
from contextfold.budget import (
    MAX_OUTPUT_RESERVE_SHARE,
    ContextBudget,
    Thresholds,
    Zone,
    reserved_output_tokens,
)
from contextfold.model_registry import ModelInfo, default_registry


def test_defaults_are_the_design_values() -> None:
    t = Thresholds()
    assert (t.mask_at, t.compact_at, t.compact_target, t.block_at) == (0.60, 0.80, 0.50, 0.95)
    assert (t.awareness_at, t.min_progress) == (0.80, 0.10)


@pytest.mark.parametrize(
    ("changes", "setting"),
    [
        ({"mask_at": 0.0}, "thresholds.mask_at"),
        ({"mask_at": 0.85}, "thresholds.mask_at"),
        ({"compact_at": 0.97}, "thresholds.compact_at"),
        ({"block_at": 1.2, "compact_at": 0.9}, "thresholds.block_at"),
        ({"compact_target": 0.8}, "thresholds.compact_target"),
        ({"compact_target": -0.1}, "thresholds.compact_target"),
        ({"awareness_at": 0.0}, "thresholds.awareness_at"),
        ({"min_progress": 1.0}, "thresholds.min_progress"),
        ({"mask_at": "0.5"}, "thresholds.mask_at"),
    ],
)
def test_bad_thresholds_name_the_setting(changes: dict[str, object], setting: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Thresholds(**changes)  # type: ignore[arg-type]
    assert caught.value.setting == setting
    assert setting in str(caught.value)


def test_thresholds_from_a_settings_table() -> None:
    assert Thresholds.from_mapping({"mask_at": 0.5}).mask_at == 0.5
    with pytest.raises(ConfigError, match=r"thresholds\.mask"):
        Thresholds.from_mapping({"mask": 0.5})


@pytest.mark.parametrize(
    ("fraction", "zone"),
    [
        (0.0, Zone.OK),
        (0.5999, Zone.OK),
        (0.60, Zone.MASK),
        (0.7999, Zone.MASK),
        (0.80, Zone.COMPACT),
        (0.95, Zone.BLOCK),
        (1.0, Zone.BLOCK),
        (1.0001, Zone.OVERFLOW),
    ],
)
def test_zone_boundaries(fraction: float, zone: Zone) -> None:
    assert Thresholds().zone(fraction) is zone


@given(st.floats(0, 1.5), st.floats(0, 1.5))
def test_zones_never_go_down_as_the_context_fills(a: float, b: float) -> None:
    order = list(Zone)
    low, high = sorted((a, b))
    assert order.index(Thresholds().zone(low)) <= order.index(Thresholds().zone(high))


def test_budget_by_component() -> None:
    budget = ContextBudget(100_000, 10_000, system=2_000, instructions=1_000, tools=3_000)
    budget = budget.with_usage(conversation=48_000)
    assert budget.effective_window == 90_000
    assert budget.used == 54_000
    assert budget.remaining == 36_000
    assert budget.fraction == pytest.approx(0.6)
    assert budget.zone() is Zone.MASK
    assert budget.components()["tools"] == 3_000


def test_marks_in_tokens() -> None:
    marks = ContextBudget(110_000, 10_000).marks()
    assert (marks.mask_tokens, marks.compact_tokens, marks.target_tokens) == (
        60_000,
        80_000,
        50_000,
    )
    assert (marks.block_tokens, marks.awareness_tokens) == (95_000, 80_000)
    assert marks.min_progress_tokens == 10_000


@given(st.integers(1_000, 2_000_000), st.integers(0, 2_500_000))
def test_budget_zone_agrees_with_its_marks(window: int, used: int) -> None:
    budget = ContextBudget(window, 0, conversation=used)
    marks = budget.marks()
    zone = budget.zone()
    assert (zone is Zone.OK) == (used < marks.mask_tokens)
    assert (zone is Zone.OVERFLOW) == (used > window)
    if zone is Zone.BLOCK:
        assert marks.block_tokens <= used <= window


def test_reserve_is_max_output_capped_for_small_windows() -> None:
    gpt4o = default_registry().get("gpt-4o")
    assert reserved_output_tokens(gpt4o) == 16_384
    local = ModelInfo("qwen3-8k", 8_192, max_output_tokens=8_192)
    assert reserved_output_tokens(local) == int(8_192 * MAX_OUTPUT_RESERVE_SHARE)
    budget = ContextBudget.for_model(local)
    assert budget.effective_window == 6_144


def test_explicit_reserve_wins() -> None:
    budget = ContextBudget.for_model(default_registry().get("gpt-4o"), reserved_output=1_000)
    assert budget.effective_window == 127_000


def test_impossible_budgets_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"budget\.reserved_output"):
        ContextBudget(1_000, 1_000)
    with pytest.raises(ConfigError, match=r"budget\.conversation"):
        ContextBudget(1_000, 0, conversation=-1)
