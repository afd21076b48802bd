"""Replaying transcripts through the engine: every request fits, one request per recorded turn,
recorded usage beside ours (never anchored on), edits and the original's compactions marked."""

from __future__ import annotations

import statistics
from dataclasses import replace

import pytest

from contextfold.engine.policy import ContextPolicy
from contextfold.model_registry import default_registry
from contextfold.replay import (
    ANTHROPIC_PRICE_MODEL,
    DEFAULT_PRESETS,
    PrefixReuse,
    ReplayRun,
    TranscriptReplay,
    input_cost,
    replay,
    replay_transcript,
)
from contextfold.replay.records import EDIT_KINDS
from contextfold.transcripts import Transcript

WINDOW = 32_000


@pytest.fixture(scope="module")
def runs_32k(sampled_transcripts: list[Transcript]) -> dict[tuple[int, str], ReplayRun]:
    """Every sampled transcript replayed at a 32k window with each default preset."""
    return {
        (i, preset): replay(t, preset, window=WINDOW)
        for i, t in enumerate(sampled_transcripts)
        for preset in DEFAULT_PRESETS
    }


def _assistant_turns(transcript: Transcript) -> int:
    return sum(1 for m in transcript.messages if m.role == "assistant" and m.meta.kind != "summary")


@pytest.mark.parametrize("preset", DEFAULT_PRESETS)
def test_every_request_fits_the_window_at_32k(
    preset: str,
    sampled_transcripts: list[Transcript],
    runs_32k: dict[tuple[int, str], ReplayRun],
) -> None:
    acted = 0
    for i, transcript in enumerate(sampled_transcripts):
        run = runs_32k[i, preset]
        assert run.effective_window == WINDOW - run.peak_budget["reserved_output"]
        assert len(run.turns) == _assistant_turns(transcript)
        assert run.over_window == 0, transcript.path
        assert all(t.fits and t.tokens <= run.effective_window for t in run.turns)
        acted += run.compactions + run.mask_batches
    assert acted > 0  # the sample holds sessions bigger than the window: the test is not vacuous


def test_a_window_below_the_recorded_one_forces_compaction(
    sampled_transcripts: list[Transcript], runs_32k: dict[tuple[int, str], ReplayRun]
) -> None:
    largest = sampled_transcripts[1]  # the largest DeepSeek trajectory
    # deepseek-chat's own 128k window, the thresholds alone deciding (the cost schedule
    # compacts big sessions early even there: tests/engine/test_schedule.py)
    roomy = replay(
        largest, "summarize", policy=ContextPolicy(background=False, cost_schedule=False)
    )
    assert roomy.context_window == 128_000
    assert roomy.compactions == 0 and not roomy.summaries
    tight = runs_32k[1, "summarize"]
    assert tight.compactions > 0 and tight.summaries
    assert tight.peak_tokens < roomy.peak_tokens


def test_recorded_prompt_tokens_are_kept_beside_ours(
    sampled_transcripts: list[Transcript], runs_32k: dict[tuple[int, str], ReplayRun]
) -> None:
    transcript = sampled_transcripts[0]
    recorded = [
        m.meta.usage.input_tokens if m.meta.usage else None
        for m in transcript.messages
        if m.role == "assistant"
    ]
    run = runs_32k[0, "mask-first"]
    assert [t.recorded_prompt_tokens for t in run.turns] == recorded
    assert any(r is not None for r in recorded)
    # tau-bench records no usage at all
    assert all(t.recorded_prompt_tokens is None for t in runs_32k[6, "window"].turns)


def test_recorded_usage_never_anchors_our_estimates(sampled_transcripts: list[Transcript]) -> None:
    transcript = sampled_transcripts[2]  # Gemini: its recorded prompts differ from our counts
    stripped = replace(transcript, messages=[m.with_meta(usage=None) for m in transcript.messages])
    with_usage = replay(transcript, "mask-first", window=WINDOW)
    without = replay(stripped, "mask-first", window=WINDOW)
    assert [t.tokens for t in with_usage.turns] == [t.tokens for t in without.turns]


def test_what_the_summarizer_reads_is_put_on_the_request_it_compacted_for(
    runs_32k: dict[tuple[int, str], ReplayRun],
) -> None:
    tight = runs_32k[1, "summarize"]
    for turn in tight.turns:
        summarized = any(e.kind == "summary" for e in turn.edits)
        # A summary reads at least what it took out of the view; no summary, nothing read.
        if summarized:
            freed = sum(e.freed_tokens for e in turn.edits if e.kind == "summary")
            assert turn.summary_input_tokens >= freed > 0
        elif not any(e.kind == "restart" for e in turn.edits):
            assert turn.summary_input_tokens == 0
    assert tight.summary_input_tokens == sum(t.summary_input_tokens for t in tight.turns) > 0
    window_only = runs_32k[1, "window"]  # drops, never summarizes
    assert window_only.summary_input_tokens == 0


def test_edits_are_recorded_by_kind_with_the_tokens_they_freed(
    runs_32k: dict[tuple[int, str], ReplayRun],
) -> None:
    kinds: set[str] = set()
    for (_, preset), run in runs_32k.items():
        for turn in run.turns:
            for edit in turn.edits:
                assert edit.kind in EDIT_KINDS
                assert edit.count > 0
                kinds.add(edit.kind)
                if edit.kind == "mask_batch":
                    assert turn.zone == "mask"
            if turn.is_compaction:
                assert sum(e.freed_tokens for e in turn.edits) > 0
        if preset == "window":
            assert {e.kind for t in run.turns for e in t.edits} <= {"drop"}
    assert {"summary", "drop"} <= kinds


def test_prefix_reuse_is_high_between_edits_and_breaks_at_a_summary(
    runs_32k: dict[tuple[int, str], ReplayRun],
) -> None:
    run = runs_32k[1, "summarize"]
    assert run.turns[0].reused_tokens == 0  # nothing before the first request
    steady = [t.prefix_share for t in run.turns[1:] if not t.edits]
    assert statistics.median(steady) > 0.9
    for turn in run.turns:
        if any(e.kind == "summary" for e in turn.edits):
            assert turn.prefix_share < 0.5  # only the system prompt and the task are unchanged
    assert 0 < run.prefix_reuse < 1


def test_input_cost_prices_the_reused_prefix_at_the_cache_read_price(
    runs_32k: dict[tuple[int, str], ReplayRun],
) -> None:
    anthropic = default_registry().get(ANTHROPIC_PRICE_MODEL)
    run = runs_32k[0, "mask-first"]
    for turn in run.turns:
        assert turn.cost_anthropic == pytest.approx(
            input_cost(anthropic, PrefixReuse(turn.tokens, turn.reused_tokens))
        )
    assert anthropic.input_price is not None
    uncached = run.tokens_sent * anthropic.input_price / 1_000_000
    assert run.cost_anthropic < uncached / 2  # most of every request is read from the cache


def test_the_original_agents_summary_is_not_input_and_its_compaction_is_marked(
    claude_compacted: list[tuple[Transcript, TranscriptReplay]],
) -> None:
    for transcript, result in claude_compacted:
        (recorded,) = transcript.compactions
        turns_before = sum(
            1 for m in transcript.messages[: recorded.index] if m.role == "assistant"
        )
        (marked,) = result.original.compactions
        assert marked.turn == turns_before
        assert marked.trigger == recorded.trigger and marked.pre_tokens == recorded.pre_tokens
        for run in result.runs.values():
            assert [t.turn for t in run.turns if t.original_compacted] == [turns_before]
            assert run.over_window == 0
            # Every preset acts below the recorded window: mask-first's batches, which carry
            # the hygiene edits too, may be enough without a compaction.
            assert run.compactions > 0 or run.mask_batches > 0
            for _, text in run.summaries:
                assert "claude-code" not in text  # Claude Code's summary never reached our view
        assert result.unrecorded_prompt_tokens and result.unrecorded_prompt_tokens > 10_000


def test_replay_transcript_runs_each_preset_once_on_the_same_axis(example: Transcript) -> None:
    result = replay_transcript(example, ["window", "mask-first", "window"], window=6_000)
    assert list(result.runs) == ["window", "mask-first"]
    lengths = {len(run.turns) for run in result.runs.values()}
    assert lengths == {_assistant_turns(example)}
    assert result.full_tokens > max(run.peak_tokens for run in result.runs.values())
    assert result.original.compactions == [] and result.original.retention is None
