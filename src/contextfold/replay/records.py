"""What a replay measured: per request, per preset, and per transcript (with the original agent).

These are plain values (no engine, no store) so the report, the terminal table, ``--json`` and the
benchmarks read the same figures. ``to_json`` gives the machine form ``contextfold replay --json``
prints.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from contextfold.compaction.pipeline import PresetName
from contextfold.replay.grounding import GroundingTally
from contextfold.replay.probes import Retention, Status

__all__ = [
    "AGENT_NAMES",
    "EDIT_KINDS",
    "WINDOW_NOTE_RATIO",
    "EditKind",
    "EditMark",
    "LossMark",
    "OriginalAgent",
    "OriginalCompaction",
    "PresetTotals",
    "ReplayRun",
    "TranscriptReplay",
    "TurnRecord",
    "agent_name",
    "preset_totals",
    "short_tokens",
]

AGENT_NAMES = {"claude-code": "Claude Code", "codex": "Codex", "mini-swe-agent": "mini-swe-agent"}
"""Display names of the agents that recorded each transcript format."""
WINDOW_NOTE_RATIO = 2.0
"""A replay window this many times the largest context the original agent reached is said
beside the comparison with it (:meth:`TranscriptReplay.window_note`): at such a window the
presets compact far later than the agent had to, or never, so what they kept does not compare
like for like."""


def agent_name(format_name: str) -> str:
    """The name of the agent behind a transcript format (``"original agent"`` when unknown)."""
    return AGENT_NAMES.get(format_name, "original agent")


def short_tokens(count: int) -> str:
    """A token count rounded for prose: ``167k``, ``1M``, ``1.5M``, ``900``."""
    if count >= 1_000_000:
        return f"{count / 1_000_000:.1f}".removesuffix(".0") + "M"
    if count >= 1_000:
        return f"{round(count / 1_000):,}k"
    return f"{count:,}"


EditKind: TypeAlias = Literal["mask_batch", "mask", "truncate", "summary", "drop", "restart"]
EDIT_KINDS: tuple[EditKind, ...] = ("mask_batch", "mask", "truncate", "summary", "drop", "restart")
"""What an edit did, as the report marks it:

- ``mask_batch`` — one batch of old outputs masked in the MASK zone (the cheap step);
- ``mask`` — outputs masked as part of a compaction (COMPACT / BLOCK zone);
- ``truncate`` — big outputs cut to head and tail as part of a compaction;
- ``summary`` — a range replaced by a structured summary;
- ``drop`` — messages taken out of the view (dropped or archived);
- ``restart`` — the session continued in a child session (the ``restart`` preset).
"""


@dataclass(frozen=True, slots=True)
class EditMark:
    """One kind of edit applied before a request: how many items and how many tokens it freed."""

    kind: EditKind
    count: int
    freed_tokens: int

    def to_json(self) -> dict[str, Any]:
        """``{"kind", "count", "freed_tokens"}``."""
        return {"kind": self.kind, "count": self.count, "freed_tokens": self.freed_tokens}


@dataclass(frozen=True, slots=True)
class LossMark:
    """One loss report of the engine (:class:`~contextfold.events.LossReported`): before which
    request, what started the compaction, and where the facts it took out of view can still be
    read, with the texts of those nothing holds any more (as many as the event listed)."""

    turn: int
    """The request the compaction came before (0-based, as :attr:`TurnRecord.turn`)."""
    trigger: str
    in_summary: int = 0
    pinned: int = 0
    in_ledger: int = 0
    behind_ref: int = 0
    lost: int = 0
    lost_items: tuple[str, ...] = ()
    items: tuple[tuple[str, str, str], ...] = ()
    """The facts the report listed, as ``(kind, text, where)``."""
    messages: Mapping[str, int] = field(default_factory=dict)
    """The messages that left the view, by what stands for them now."""

    @property
    def messages_out(self) -> int:
        """Messages the compaction took out of view (or whose outputs it replaced)."""
        return sum(self.messages.values())

    @property
    def out_of_view(self) -> int:
        """Facts whose place the compaction changed (out of the conversation)."""
        return self.in_summary + self.pinned + self.in_ledger + self.behind_ref + self.lost

    def to_json(self) -> dict[str, Any]:
        """The mark as JSON."""
        return {
            "turn": self.turn,
            "trigger": self.trigger,
            "out_of_view": self.out_of_view,
            "in_summary": self.in_summary,
            "pinned": self.pinned,
            "in_ledger": self.in_ledger,
            "behind_ref": self.behind_ref,
            "lost": self.lost,
            "lost_items": list(self.lost_items),
            "messages": dict(self.messages),
        }


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One request of the replay: what the model would have received, and what it cost."""

    turn: int
    """0-based request number."""
    message_index: int
    """Index in the transcript of the recorded assistant message answering this request."""
    tokens: int
    """Our estimate of the request (system prompt, tools, messages, note)."""
    zone: str
    """The zone the context was in before the engine acted."""
    fits: bool
    """True when the request fits the effective window (context window minus reply reserve)."""
    edits: tuple[EditMark, ...] = ()
    compaction_failed: bool = False
    compaction_cpu_seconds: float = 0.0
    recorded_prompt_tokens: int | None = None
    """The prompt size the original provider reported for this call, when recorded."""
    reused_tokens: int = 0
    """Tokens that are an unchanged prefix of the previous request."""
    cost_anthropic: float = 0.0
    cost_openai: float = 0.0
    original_compacted: bool = False
    """True when the original agent compacted just before this request."""
    summary_input_tokens: int = 0
    """Tokens the summarizer read before this request (what it summarized, plus the summary it
    extended): what a model-written summary would add as a call of its own."""
    messages: int = 0
    """Messages in the request (0 when it did not fit: nothing was sent)."""

    @property
    def prefix_share(self) -> float:
        """Share of the request that is an unchanged prefix of the previous one."""
        return self.reused_tokens / self.tokens if self.tokens else 0.0

    @property
    def is_compaction(self) -> bool:
        """True when the engine compacted (beyond a mask batch) before this request."""
        return any(e.kind != "mask_batch" for e in self.edits)

    def to_json(self) -> dict[str, Any]:
        """The record as JSON (short keys left out when empty)."""
        out: dict[str, Any] = {
            "turn": self.turn,
            "message_index": self.message_index,
            "tokens": self.tokens,
            "zone": self.zone,
            "fits": self.fits,
            "messages": self.messages,
            "reused_tokens": self.reused_tokens,
            "cost_anthropic": round(self.cost_anthropic, 6),
            "cost_openai": round(self.cost_openai, 6),
        }
        if self.edits:
            out["edits"] = [e.to_json() for e in self.edits]
        if self.compaction_failed:
            out["compaction_failed"] = True
        if self.recorded_prompt_tokens is not None:
            out["recorded_prompt_tokens"] = self.recorded_prompt_tokens
        if self.original_compacted:
            out["original_compacted"] = True
        if self.summary_input_tokens:
            out["summary_input_tokens"] = self.summary_input_tokens
        return out


@dataclass
class ReplayRun:
    """One transcript replayed with one preset."""

    preset: PresetName
    model: str
    context_window: int
    effective_window: int
    turns: list[TurnRecord] = field(default_factory=list)
    peak_budget: Mapping[str, int] = field(default_factory=dict)
    """The budget by component at the peak request."""
    summaries: list[tuple[int, str]] = field(default_factory=list)
    """(turn, rendered text) of every structured summary the engine wrote."""
    retention: Retention | None = None
    grounding: GroundingTally = field(default_factory=GroundingTally)
    """What the agent used in the turns after each compaction point, looked up in the view sent
    there (:mod:`contextfold.replay.grounding`); empty when the replay was given no plan."""
    failed_approaches: dict[Status, int] | None = None
    """Failed, later superseded calls by status in the final view; ``None`` when not probed."""
    final_tokens: int = 0
    """Our count of the view at the end (what one more request would hold)."""
    restarts: int = 0
    losses: list[LossMark] = field(default_factory=list)
    """The engine's loss report of every compaction and mask batch, in order."""

    # -- figures ------------------------------------------------------------------------------

    @property
    def peak_tokens(self) -> int:
        """Largest request."""
        return max((t.tokens for t in self.turns), default=0)

    @property
    def peak_turn(self) -> int | None:
        """The request with the largest size (the first such), ``None`` without requests."""
        if not self.turns:
            return None
        return max(self.turns, key=lambda t: t.tokens).turn

    @property
    def over_window(self) -> int:
        """Requests that did not fit the effective window (must be 0)."""
        return sum(1 for t in self.turns if not t.fits)

    @property
    def compactions(self) -> int:
        """Requests before which the engine compacted (summary, drop, truncate, mask in a chain)."""
        return sum(1 for t in self.turns if t.is_compaction)

    @property
    def mask_batches(self) -> int:
        """Requests before which the engine masked one batch of old outputs (MASK zone)."""
        return sum(1 for t in self.turns if any(e.kind == "mask_batch" for e in t.edits))

    @property
    def tokens_sent(self) -> int:
        """Input tokens over all requests."""
        return sum(t.tokens for t in self.turns)

    @property
    def reused_tokens(self) -> int:
        """Prefix-cache-reusable tokens over all requests."""
        return sum(t.reused_tokens for t in self.turns)

    @property
    def prefix_reuse(self) -> float:
        """Token-weighted share of the input that repeats the previous request's prefix."""
        sent = self.tokens_sent
        return self.reused_tokens / sent if sent else 0.0

    @property
    def median_prefix_share(self) -> float:
        """Median of the per-request prefix shares (the first request, which has no
        predecessor, left out)."""
        shares = [t.prefix_share for t in self.turns[1:]]
        return statistics.median(shares) if shares else 0.0

    @property
    def cost_anthropic(self) -> float:
        """Input cost at Anthropic's cache prices, USD."""
        return sum(t.cost_anthropic for t in self.turns)

    @property
    def cost_openai(self) -> float:
        """Input cost at OpenAI's cache prices, USD."""
        return sum(t.cost_openai for t in self.turns)

    @property
    def summary_input_tokens(self) -> int:
        """Tokens the summarizer read over the whole replay (see :class:`TurnRecord`)."""
        return sum(t.summary_input_tokens for t in self.turns)

    @property
    def compaction_cpu_seconds(self) -> list[float]:
        """CPU time of each compaction (mask batches left out)."""
        return [t.compaction_cpu_seconds for t in self.turns if t.is_compaction]

    def edit_counts(self) -> dict[str, int]:
        """How many requests had each kind of edit."""
        counts: dict[str, int] = {}
        for turn in self.turns:
            for edit in turn.edits:
                counts[edit.kind] = counts.get(edit.kind, 0) + 1
        return counts

    def to_json(self, *, turns: bool = True) -> dict[str, Any]:
        """Figures, retention, summaries, and (unless ``turns`` is false) every request."""
        out: dict[str, Any] = {
            "preset": self.preset,
            "model": self.model,
            "context_window": self.context_window,
            "effective_window": self.effective_window,
            "requests": len(self.turns),
            "peak_tokens": self.peak_tokens,
            "peak_turn": self.peak_turn,
            "over_window": self.over_window,
            "compactions": self.compactions,
            "mask_batches": self.mask_batches,
            "edits": self.edit_counts(),
            "restarts": self.restarts,
            "tokens_sent": self.tokens_sent,
            "reused_tokens": self.reused_tokens,
            "prefix_reuse": round(self.prefix_reuse, 4),
            "median_prefix_share": round(self.median_prefix_share, 4),
            "cost_anthropic": round(self.cost_anthropic, 6),
            "cost_openai": round(self.cost_openai, 6),
            "final_tokens": self.final_tokens,
            "peak_budget": dict(self.peak_budget),
            "retention": self.retention.to_json() if self.retention else None,
            "grounding": self.grounding.to_json(),
            "failed_approaches": (
                dict(self.failed_approaches) if self.failed_approaches is not None else None
            ),
            "summaries": [{"turn": turn, "text": text} for turn, text in self.summaries],
            "losses": [loss.to_json() for loss in self.losses],
        }
        if turns:
            out["turns"] = [t.to_json() for t in self.turns]
        return out


@dataclass(frozen=True, slots=True)
class OriginalCompaction:
    """A compaction the original agent recorded, placed on the replay's request axis."""

    turn: int
    """The first request after it."""
    trigger: str | None
    pre_tokens: int | None
    summary_text: str

    def to_json(self) -> dict[str, Any]:
        """JSON form (the summary text included)."""
        return {
            "turn": self.turn,
            "trigger": self.trigger,
            "pre_tokens": self.pre_tokens,
            "summary_text": self.summary_text,
        }


@dataclass
class OriginalAgent:
    """What the transcript recorded about the agent that produced it."""

    compactions: list[OriginalCompaction] = field(default_factory=list)
    retention: Retention | None = None
    """Probes applied to its post-compaction view (``None`` when it never compacted)."""
    recorded_calls: int = 0
    recorded_prompt_tokens: int = 0
    recorded_cache_read_tokens: int = 0
    recorded_peak_tokens: int = 0
    """The largest prompt the provider reported for one call."""

    @property
    def peak_tokens(self) -> int:
        """The largest context the agent reached: its largest recorded prompt, or the size at
        which it compacted when that was larger (0 when nothing was recorded)."""
        compacted_at = (c.pre_tokens or 0 for c in self.compactions)
        return max([self.recorded_peak_tokens, *compacted_at])

    @property
    def cache_read_share(self) -> float | None:
        """Share of the recorded prompt tokens the provider served from its cache."""
        if not self.recorded_prompt_tokens:
            return None
        return self.recorded_cache_read_tokens / self.recorded_prompt_tokens

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "compactions": [c.to_json() for c in self.compactions],
            "retention": self.retention.to_json() if self.retention else None,
            "recorded_calls": self.recorded_calls,
            "recorded_prompt_tokens": self.recorded_prompt_tokens,
            "recorded_cache_read_tokens": self.recorded_cache_read_tokens,
            "recorded_peak_tokens": self.recorded_peak_tokens,
            "cache_read_share": self.cache_read_share,
        }


@dataclass
class TranscriptReplay:
    """One transcript replayed with several presets, beside what the original agent did."""

    label: str
    path: str | None
    format: str
    messages: int
    full_tokens: int
    """Our count of the whole transcript as one request (no compaction, summaries left out)."""
    original: OriginalAgent
    runs: dict[PresetName, ReplayRun] = field(default_factory=dict)
    unrecorded_prompt_tokens: int | None = None
    """How far the first recorded prompt exceeds our first request, when the transcript holds no
    system prompt (Claude Code and Codex logs leave out the system prompt and tool definitions)."""

    def window_note(self) -> str | None:
        """What a reader must know before comparing the presets with the original agent: that
        the replay's window is far above (:data:`WINDOW_NOTE_RATIO` times or more) the context
        at which the agent compacted; ``None`` when it is not, or the agent never compacted."""
        runs = list(self.runs.values())
        peak = self.original.peak_tokens
        if not runs or not self.original.compactions or not peak:
            return None
        window = runs[0].context_window
        if window < WINDOW_NOTE_RATIO * peak:
            return None
        compacted = max(c.pre_tokens or 0 for c in self.original.compactions) or peak
        never = not any(run.compactions for run in runs)
        return (
            f"{agent_name(self.format)} compacted at {short_tokens(compacted)} tokens; this "
            f"replay's window of {short_tokens(window)} is {window / compacted:.0f}x that"
            + (" and never needed to" if never else ", so its presets compacted far later")
            + ": replay at the agent's own window (--window) to compare what each kept."
        )

    def to_json(self, *, turns: bool = True) -> dict[str, Any]:
        """JSON form: the transcript, the original agent, each preset's run, and the notes a
        reader needs beside the figures (:meth:`window_note`)."""
        note = self.window_note()
        return {
            "notes": [note] if note else [],
            "label": self.label,
            "path": self.path,
            "format": self.format,
            "messages": self.messages,
            "full_tokens": self.full_tokens,
            "unrecorded_prompt_tokens": self.unrecorded_prompt_tokens,
            "original": self.original.to_json(),
            "presets": {name: run.to_json(turns=turns) for name, run in self.runs.items()},
        }


@dataclass
class PresetTotals:
    """One preset's figures summed over every transcript of a run (the line a large run is read
    by)."""

    preset: PresetName
    transcripts: int = 0
    requests: int = 0
    peak_tokens: int = 0
    """The largest request of any transcript."""
    over_window: int = 0
    compactions: int = 0
    mask_batches: int = 0
    tokens_sent: int = 0
    reused_tokens: int = 0
    summary_input_tokens: int = 0
    cost_anthropic: float = 0.0
    cost_openai: float = 0.0
    facts_kept: int = 0
    facts_recoverable: int = 0
    facts_total: int = 0

    @property
    def prefix_reuse(self) -> float:
        """Token-weighted share of all input that repeats the previous request's prefix."""
        return self.reused_tokens / self.tokens_sent if self.tokens_sent else 0.0

    def add(self, run: ReplayRun) -> None:
        """Count one transcript's run in."""
        self.transcripts += 1
        self.requests += len(run.turns)
        self.peak_tokens = max(self.peak_tokens, run.peak_tokens)
        self.over_window += run.over_window
        self.compactions += run.compactions
        self.mask_batches += run.mask_batches
        self.tokens_sent += run.tokens_sent
        self.reused_tokens += run.reused_tokens
        self.summary_input_tokens += run.summary_input_tokens
        self.cost_anthropic += run.cost_anthropic
        self.cost_openai += run.cost_openai
        if run.retention is not None:
            self.facts_kept += run.retention.kept()
            self.facts_recoverable += run.retention.count("recoverable")
            self.facts_total += run.retention.total()

    def to_json(self) -> dict[str, Any]:
        """JSON form, rounded as :meth:`ReplayRun.to_json` rounds."""
        return {
            "preset": self.preset,
            "transcripts": self.transcripts,
            "requests": self.requests,
            "peak_tokens": self.peak_tokens,
            "over_window": self.over_window,
            "compactions": self.compactions,
            "mask_batches": self.mask_batches,
            "tokens_sent": self.tokens_sent,
            "reused_tokens": self.reused_tokens,
            "prefix_reuse": round(self.prefix_reuse, 4),
            "summary_input_tokens": self.summary_input_tokens,
            "cost_anthropic": round(self.cost_anthropic, 6),
            "cost_openai": round(self.cost_openai, 6),
            "facts_kept": self.facts_kept,
            "facts_recoverable": self.facts_recoverable,
            "facts_total": self.facts_total,
        }


def preset_totals(replays: Iterable[TranscriptReplay]) -> dict[PresetName, PresetTotals]:
    """Each preset's figures summed over ``replays``, presets in first-seen order."""
    totals: dict[PresetName, PresetTotals] = {}
    for replay in replays:
        for preset, run in replay.runs.items():
            totals.setdefault(preset, PresetTotals(preset)).add(run)
    return totals
