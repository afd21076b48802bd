"""Prefix-cache reuse between requests, and input cost at cache prices."""

from __future__ import annotations

import warnings

import pytest

from contextfold.engine import ContextEngine, ContextPolicy
from contextfold.messages import Message
from contextfold.model_registry import ModelInfo, default_registry
from contextfold.replay import PrefixMeter, PrefixReuse, input_cost
from contextfold.replay.cache import request_segments
from contextfold.store import SQLiteVersionWarning
from contextfold.tokens.counters import HeuristicCounter


def test_identical_requests_reuse_everything_and_a_change_cuts_the_prefix() -> None:
    meter = PrefixMeter(HeuristicCounter(), "openai")
    first = meter.measure_segments(["tools", "system prompt", "task " * 50, "reply " * 50], 1_000)
    assert first.reused_tokens == 0  # nothing came before it
    again = meter.measure_segments(["tools", "system prompt", "task " * 50, "reply " * 50], 1_000)
    assert again.share == pytest.approx(1.0)
    changed = meter.measure_segments(["tools", "system prompt", "task " * 50, "masked"], 1_000)
    assert 0.5 < changed.share < 1.0  # tools, system and task unchanged; the reply is not
    meter.reset()
    assert meter.measure_segments(["tools"], 10).reused_tokens == 0


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_segments_are_the_wire_request_without_cache_markers(provider: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SQLiteVersionWarning)
        engine = ContextEngine(
            "claude-sonnet-4-5",
            store=":memory:",
            provider=provider,
            policy=ContextPolicy(background=False),
        )
    session = engine.new_session()
    session.add_user("Rename the parse function to parse_config everywhere. " * 40)
    meter = PrefixMeter(engine.counter, provider)
    first = session.prepare(system="You are a careful coding agent. " * 20)
    assert all("cache_control" not in s for s in request_segments(first, provider))
    assert meter.measure(first).reused_tokens == 0
    session.add_assistant(Message.assistant("I will search for the function first."))
    session.add_user("Also keep the old name as an alias.")
    second = session.prepare(system="You are a careful coding agent. " * 20)
    reuse = meter.measure(second)
    assert reuse.total_tokens == second.tokens
    # The breakpoint moved to the new tail, yet the earlier messages count as reused.
    assert 0.8 < reuse.share < 1.0
    engine.close()


def _model(**prices: float | int | None) -> ModelInfo:
    return ModelInfo("m", 100_000, **prices)  # type: ignore[arg-type]


def test_input_cost_reads_the_prefix_and_writes_the_rest() -> None:
    model = _model(
        input_price=3.0,
        output_price=15.0,
        cache_write_price=3.75,
        cache_read_price=0.3,
        min_cacheable_tokens=1_024,
    )
    cost = input_cost(model, PrefixReuse(total_tokens=10_000, reused_tokens=8_000))
    assert cost == pytest.approx((8_000 * 0.3 + 2_000 * 3.75) / 1e6)
    # Below the minimum cacheable prefix nothing is read or written: plain input price.
    small = input_cost(model, PrefixReuse(total_tokens=900, reused_tokens=800))
    assert small == pytest.approx(900 * 3.0 / 1e6)
    # A reused prefix shorter than the minimum is not a cache hit.
    short = input_cost(model, PrefixReuse(total_tokens=5_000, reused_tokens=500))
    assert short == pytest.approx(5_000 * 3.75 / 1e6)


def test_openai_prices_have_no_write_surcharge_and_unpriced_models_cost_nothing() -> None:
    gpt5 = default_registry().get("gpt-5")
    assert gpt5.cache_write_price == gpt5.input_price
    cost = input_cost(gpt5, PrefixReuse(total_tokens=10_000, reused_tokens=9_000))
    assert cost == pytest.approx((9_000 * 0.125 + 1_000 * 1.25) / 1e6)
    assert input_cost(_model(), PrefixReuse(10_000, 9_000)) == 0.0
