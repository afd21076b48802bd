"""Accounting (usage and cost), resuming a compacted session, and configuring the engine."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from contextfold import (
    ChatResponse,
    ConfigError,
    ContextEngine,
    ContextPolicy,
    Message,
    UnknownModelError,
    Usage,
    model_for_window,
)
from contextfold.budget import Thresholds, Zone
from contextfold.compaction import RecentWindow
from contextfold.config import load_settings
from contextfold.events import TokenUsage
from contextfold.tokens.counters import HeuristicCounter
from contextfold.tokens.estimator import ContextSizeEstimator
from tests.engine.helpers import SYSTEM, EngineFactory, start

SONNET = "anthropic/claude-sonnet-4-5"


def test_usage_adds_up_tokens_cache_reads_and_cost(make_engine: EngineFactory) -> None:
    engine, sink = make_engine(SONNET)
    session = start(engine).session
    reported = [  # input, output, cache read, cache write
        Usage(10_000, 500, 0, 10_000),
        Usage(11_000, 400, 10_000, 1_000),
        Usage(12_500, 300, 11_000, 1_500),
    ]
    for number, usage in enumerate(reported):
        session.prepare(system=SYSTEM)
        session.add_assistant(ChatResponse(Message.assistant(f"Done step {number}."), usage))
        session.add_user(f"Now step {number + 1}.")
    report = session.usage()

    assert report.calls == 3
    assert (report.input_tokens, report.output_tokens) == (33_500, 1_200)
    assert (report.cache_read_tokens, report.cache_write_tokens) == (21_000, 12_500)
    assert report.cache_hit_rate == pytest.approx(21_000 / 33_500)
    # Sonnet 4.5: $3 input, $15 output, $3.75 cache write, $0.30 cache read per million tokens.
    expected = (10_000 * 3.75 + 500 * 15) + (10_000 * 0.3 + 1_000 * 3.75 + 400 * 15)
    expected += 11_000 * 0.3 + 1_500 * 3.75 + 300 * 15
    assert report.cost == pytest.approx(expected / 1_000_000)
    assert report.average_growth == pytest.approx((1_000 + 1_500) / 2)
    assert report.context_tokens > 12_800  # the anchored size of the next request
    assert report.turns_left == int((report.window - report.context_tokens) / 1_250)
    assert report.window == engine.effective_window
    assert [e.input_tokens for e in sink.of_type(TokenUsage)] == [10_000, 11_000, 12_500]


def test_usage_without_prices_has_no_cost(make_engine: EngineFactory) -> None:
    engine, _ = make_engine()
    driver = start(engine)
    driver.turn()
    report = driver.session.usage()
    assert report.calls == 1 and report.cost is None and report.input_tokens > 0


def test_a_compacted_session_resumes_from_its_snapshot(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    path = tmp_path / "sessions.db"
    engine, _ = make_engine(store=path, compactor="summarize")
    driver = start(engine)
    driver.until_zone(Zone.COMPACT)
    for _ in range(3):
        driver.turn()
    session = driver.session

    resumed_engine, _ = make_engine(store=path, compactor="summarize")
    loaded = resumed_engine.store.load_view(session.id)
    total = resumed_engine.store.last_seq(session.id)
    assert loaded.snapshot is not None
    # Replayed: the compaction turn's reply and output, then 3 turns.
    assert loaded.replayed_messages == total - loaded.snapshot.last_seq == 8
    assert total > 40  # the pre-compaction history was not read again
    resumed = resumed_engine.resume(session.id)

    original, again = driver.prepare(), resumed.prepare(system=SYSTEM)
    assert [m.to_dict() for m in again.messages] == [m.to_dict() for m in original.messages]
    assert again.tokens == original.tokens  # the estimator continued where it was
    fresh = ContextSizeEstimator(resumed_engine.counter).estimate(
        list(again.messages), system=again.system_text, tools=again.tools
    )
    assert abs(fresh.tokens - again.tokens) > 0.1 * again.tokens  # ...which was not a fresh one
    assert resumed.usage().calls == session.usage().calls


def _settings(tmp_path: Path, **arguments: Any) -> Any:
    return load_settings(
        {k.replace("__", "."): v for k, v in arguments.items()},
        cwd=tmp_path,
        environ={},
        user_file=tmp_path / "absent.toml",
    )


def test_policy_from_settings_maps_the_config_keys(tmp_path: Path) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "contextfold.toml").write_text(
        "background_compaction = false\n"
        "max_output_tokens = 2048\n"
        "[thresholds]\nmask_at = 0.5\ncompact_at = 0.7\ncompact_target = 0.4\n"
        "block_at = 0.9\nawareness_at = 0.75\nmin_progress = 0.05\n"
        "[outputs]\nmax_lines = 100\nmax_bytes = 4096\nmax_tokens = 1000\nhead_ratio = 0.3\n"
        "offload_above_bytes = 8192\npreview_chars = 300\n"
        "[recent]\nturns = 2\nmax_share = 0.3\n"
        "[tools]\ndescription_budget = 0.2\n",
        encoding="utf-8",
    )
    policy = ContextPolicy.from_settings(_settings(project))

    assert policy.thresholds == Thresholds(
        mask_at=0.5,
        compact_at=0.7,
        compact_target=0.4,
        block_at=0.9,
        awareness_at=0.75,
        min_progress=0.05,
    )
    limits = policy.output_limits
    assert (limits.max_lines, limits.max_bytes, limits.max_tokens) == (100, 4096, 1000)
    assert (limits.head_ratio, limits.offload_above_bytes, limits.preview_chars) == (
        0.3,
        8192,
        300,
    )
    assert policy.recent == RecentWindow(turns=2, max_share=0.3)
    assert policy.tool_budget_share == 0.2
    assert policy.background is False and policy.reserved_output == 2048
    assert ContextPolicy.from_settings(_settings(elsewhere)) == ContextPolicy()


def test_the_min_progress_setting_reaches_the_compactor(make_engine: EngineFactory) -> None:
    policy = ContextPolicy(
        background=False, cost_schedule=False, thresholds=Thresholds(min_progress=0.25)
    )
    engine, _ = make_engine(policy=policy, compactor="summarize")
    assert engine.compactor.min_progress == 0.25


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("thresholds.mask_at", 0.9),
        ("thresholds.compact_target", 0.85),
        ("thresholds.block_at", 1.5),
        ("outputs.max_lines", 1),
        ("outputs.head_ratio", 1.5),
        ("recent.turns", -1),
        ("recent.max_share", 2.0),
        ("tools.description_budget", 1.5),
        ("max_output_tokens", -5),
    ],
)
def test_an_invalid_setting_raises_config_error_naming_it(
    tmp_path: Path, key: str, value: object
) -> None:
    with pytest.raises(ConfigError) as raised:
        ContextPolicy.from_settings(_settings(tmp_path, **{key.replace(".", "__"): value}))
    assert raised.value.setting == key
    assert key in str(raised.value)


def test_a_reply_reserve_larger_than_the_window_names_the_setting() -> None:
    policy = ContextPolicy(reserved_output=10_000)
    with pytest.raises(ConfigError) as raised:
        ContextEngine(model_for_window(8_000), store=":memory:", policy=policy)
    assert raised.value.setting == "max_output_tokens"


def test_a_model_name_is_looked_up_in_the_registry() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = ContextEngine("claude-sonnet-4-5-20250929", store=":memory:")
    with engine:
        assert engine.model.key == SONNET and engine.provider == "anthropic"
        assert engine.effective_window == 200_000 - engine.reserved_output
    with pytest.raises(UnknownModelError) as raised:
        ContextEngine("anthropic/claude-sonet-4-5", store=":memory:")
    assert "claude-sonnet-4-5" in raised.value.suggestions
    assert "claude-sonnet-4-5" in str(raised.value)


def test_the_saved_engine_state_does_not_grow_with_the_view(make_engine: EngineFactory) -> None:
    engine, _ = make_engine(window=200_000, max_output=8_000)
    driver = start(engine)
    sizes = []
    for turns in (5, 60):
        while len(driver.requests) < turns:
            driver.turn()
        state = engine.store.load_engine_state(driver.session.id)
        sizes.append(len(json.dumps(state)))
    assert len(driver.session.view) > 100
    assert sizes[1] < sizes[0] + 100  # saved every turn: it must stay small


def test_an_estimator_state_saved_with_message_ids_still_restores() -> None:
    """States written before the ids digest (a list of ids) keep their anchor on resume."""
    view = [Message.user("Fix the parser.", id="m1"), Message.assistant("On it.", id="m2")]
    later = [*view, Message.user("Also add a test.", id="m3")]
    old = {
        "evidence": [0.0, 0.0],
        "anchor": {"reported": 500, "ids": ["m1", "m2"], "fixed_raw": 0, "reply_pending": False},
    }
    restored = ContextSizeEstimator(HeuristicCounter())
    restored.restore(old, later)
    estimate = restored.estimate(later)
    assert estimate.anchored
    assert estimate.tokens == 500 + HeuristicCounter().count_messages(later[2:])
    moved = ContextSizeEstimator(HeuristicCounter())
    moved.restore(old, [Message.user("Something else.", id="x"), *later[1:]])
    assert not moved.anchored
