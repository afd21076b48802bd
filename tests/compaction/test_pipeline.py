"""The Compactor: runs strategies to the target, reports failures, presets."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.compaction import (
    PRESETS,
    ClearOldThinking,
    CompactionContext,
    Compactor,
    DropOldest,
    MaskObservations,
    RestartPolicy,
    Summarize,
    SupersededReads,
    TrimOldArguments,
    TruncateToolResults,
)
from contextfold.edits import ContextEdit, MaskEdit, ReplacedResult, apply_edits
from contextfold.errors import ConfigError
from contextfold.events import ObservationsMasked
from contextfold.history.repair import validate
from contextfold.messages import Message, ToolCallPart, ToolResultPart
from contextfold.outputs.intake import InMemoryBlobStore

from .conftest import CharCounter, agent_log, chat, make_ctx
from .test_window import conversations

counter = CharCounter()


@dataclass
class Shrinker:
    """A fake strategy that masks the first ``count`` unmasked results and records its calls."""

    count: int
    name: str = "shrinker"
    calls: list[int] = field(default_factory=list)

    def plan(self, ctx: CompactionContext) -> list[ContextEdit]:
        self.calls.append(ctx.tokens())
        items = [
            ReplacedResult(m.id, r.call_id, "-", ctx.stash(r.content))
            for m in ctx.view
            for r in m.tool_results
            if r.content != "-"
        ][: self.count]
        return [MaskEdit(tuple(items))] if items else []


def test_stops_as_soon_as_the_target_is_reached() -> None:
    view = agent_log(rounds=20, output_chars=2_000)
    total = counter.count_messages(view)
    first, second = Shrinker(count=5), Shrinker(count=20, name="second")
    result = Compactor([first, second]).compact(make_ctx(view, target=total - 1_000, window=20_000))
    assert result.strategies_run == ("shrinker",)
    assert second.calls == []
    assert result.after_tokens <= result.target_tokens and result.reached_target
    assert not result.failed


def test_figures_describe_the_edits() -> None:
    view = chat(turns=6, rounds_per_turn=3, output_chars=3_000)
    result = Compactor.preset("mask-first").compact(make_ctx(view, target=3_000, window=40_000))
    assert result.before_tokens == counter.count_messages(view)
    assert result.after_tokens == counter.count_messages(result.view)
    assert result.freed_tokens == result.before_tokens - result.after_tokens > 0
    assert list(result.view) == apply_edits(view, result.edits)
    assert result.before_messages == len(view) and result.after_messages == len(result.view)
    assert result.cpu_seconds >= 0.0
    assert result.base_ids == tuple(m.id for m in view)


def test_nothing_runs_when_already_under_target() -> None:
    view = chat(turns=2)
    shrinker = Shrinker(count=1)
    result = Compactor([shrinker]).compact(make_ctx(view, target=10**6, window=10**6))
    assert shrinker.calls == [] and result.edits == () and not result.failed


def test_too_little_progress_is_reported_not_looped() -> None:
    view = agent_log(rounds=20, output_chars=2_000)
    tiny = Shrinker(count=1)
    result = Compactor([tiny], min_progress=0.10).compact(make_ctx(view, target=100, window=20_000))
    assert tiny.calls and len(tiny.calls) == 1  # asked once, never again
    assert result.failed
    assert "minimum progress of 2000" in result.reason
    assert result.edits  # what it did free stays usable
    assert result.after_tokens > result.target_tokens


def test_enough_progress_above_target_is_not_a_failure() -> None:
    view = agent_log(rounds=20, output_chars=2_000)
    result = Compactor([Shrinker(count=12)]).compact(make_ctx(view, target=100, window=20_000))
    assert not result.failed and not result.reached_target
    assert "above the target" in result.reason


def test_hard_compaction_adds_the_fit_guarantee() -> None:
    view = agent_log(rounds=20, output_chars=2_000)
    result = Compactor([Shrinker(count=1)]).compact(
        make_ctx(view, target=500, window=20_000), hard=True
    )
    assert result.hard and result.reached_target and not result.failed
    assert result.strategies_run[0] == "shrinker" and "drop" in result.strategies_run


def test_events_from_strategies_come_back_in_the_result() -> None:
    view = agent_log(rounds=40, output_chars=2_000)
    result = Compactor([MaskObservations()]).compact(make_ctx(view, target=1, window=40_000))
    assert [type(e) for e in result.events] == [ObservationsMasked]


def test_summary_of_the_run_is_returned() -> None:
    view = chat(turns=6, rounds_per_turn=3)
    result = Compactor([Summarize()]).compact(make_ctx(view, target=10, window=10**6))
    assert result.summary is not None
    assert result.summary.items("Session Intent")[0].text.startswith("Task: Task: refactor")


# -- presets ---------------------------------------------------------------------------------------


def test_presets_define_both_zones() -> None:
    assert set(PRESETS) == {"mask-first", "summarize", "window", "restart"}
    mask_first = Compactor.preset("mask-first")
    assert [type(s) for s in mask_first.mask_strategies] == [MaskObservations]
    assert [type(s) for s in mask_first.strategies] == [
        TruncateToolResults,
        SupersededReads,
        TrimOldArguments,
        ClearOldThinking,
        MaskObservations,
        Summarize,
        DropOldest,
    ]
    assert Compactor.preset("summarize").mask_strategies == ()
    assert [type(s) for s in Compactor.preset("summarize").strategies] == [Summarize, DropOldest]
    assert [type(s) for s in Compactor.preset("window").strategies] == [DropOldest]
    restart = Compactor.preset("restart")
    assert restart.restart == RestartPolicy() and Compactor.preset("mask-first").restart is None
    assert Compactor.preset(
        "restart", restart=RestartPolicy(max_restarts=1)
    ).restart == RestartPolicy(max_restarts=1)


def test_preset_options_reach_the_strategies() -> None:
    compactor = Compactor.preset("mask-first", mask_batch_share=0.2, truncate_above_tokens=900)
    (mask,) = compactor.mask_strategies
    assert isinstance(mask, MaskObservations) and mask.min_batch_share == 0.2
    assert compactor.strategies[0] == TruncateToolResults(above_tokens=900)


def test_unknown_preset_or_option_names_the_choices() -> None:
    with pytest.raises(ConfigError, match="mask-first"):
        Compactor.preset("aggressive")
    with pytest.raises(ConfigError, match="mask_batch_share"):
        Compactor.preset("window", batch=0.3)


def test_mask_zone_runs_one_batch() -> None:
    view = agent_log(rounds=60, output_chars=2_000)
    ctx = make_ctx(view, target=counter.count_messages(view) - 1, window=40_000)
    result = Compactor.preset("mask-first").mask(ctx)
    assert result.strategies_run == ("mask",) and len(result.edits) == 1
    assert result.freed_tokens >= 2_000 and not result.failed
    assert Compactor.preset("summarize").mask(ctx).edits == ()


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_reaches_a_reachable_target(preset: str) -> None:
    view = chat(turns=8, rounds_per_turn=4, output_chars=2_000)
    result = Compactor.preset(preset).compact(make_ctx(view, target=12_000, window=40_000))
    assert result.reached_target and not result.failed, result.reason


@settings(max_examples=60, deadline=None)
@given(conversations(), st.integers(800, 20_000), st.sampled_from(sorted(PRESETS)))
def test_hard_compaction_always_fits_and_stays_valid(
    view: list[Message], target: int, preset: str
) -> None:
    """Whatever the history and the target (above a small floor), one hard pass fits it."""
    view = [*view, Message.user("latest request " * 200, id="last")]
    view += [
        Message.assistant(
            "", [ToolCallPart("z", "bash", '{"command": "' + "q" * 5_000 + '"}')], id="za"
        ),
        Message.tool(ToolResultPart("z", "bash", "out " * 4_000), id="zt"),
    ]
    blobs = InMemoryBlobStore()
    result = Compactor.preset(preset).compact(
        make_ctx(view, target=target, window=40_000, blobs=blobs), hard=True
    )
    assert result.after_tokens <= target and not result.failed
    validate(result.view)
    ids = {m.id for m in result.view}
    assert {"u0", "last", "za", "zt"} <= ids
