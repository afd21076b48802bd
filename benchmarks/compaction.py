"""Compaction presets beside LangChain and three baselines, on every shared transcript, 32k/128k.

Every shared transcript (DeepSeek and Gemini mini-swe-agent trajectories, the Claude Code main
sessions, the tau-bench dialogues) is replayed once per window (32k, 128k) and method:

- our presets (``mask-first``, the default; ``summarize``; ``window``) through the engine
  (:func:`contextfold.replay.replay`): the recorded assistant turns answer each request, so what
  differs is only the context each method sends;
- the peers and baselines of :mod:`benchmarks.baselines` (LangChain's ``trim_messages`` and
  ``SummarizationMiddleware``, a sliding window, a Codex-like summary + recent user messages,
  an OpenHands-like event-count condenser),
  fed the same messages and measured the same way (:func:`benchmarks.baselines.replay_method`).

Each transcript keeps its own model (tokenizer, reply reserve: at most a quarter of the window)
with the window overridden; every request is counted with that model's counter (ours, for every
method). Per method and window:

- requests over the window (must be 0 for ours), input tokens over all requests;
- prefix reuse: the share of each request identical to the start of the previous one, on the wire
  JSON (what a provider's prefix cache can hit), token-weighted and the median request;
- input cost with that prefix at the cache-read price and the rest at the cache-write price of
  claude-sonnet-4-5 (Anthropic) and gpt-5 (OpenAI); "no cache" = the tokens at sonnet's input
  price;
- compactions (requests preceded by one; for ``trim_messages`` and the sliding window: requests
  where anything was dropped) and mask batches (ours, MASK zone), CPU time per compaction;
- compression (the whole transcript as one request ÷ the last request) and retention: over the
  transcripts larger than the window, the share of the session's modified files, distinct error
  lines, task and user constraints the final view holds verbatim or in a summary (+ the share only
  readable through ``read_result``, ours only);
- grounding (:mod:`contextfold.replay.grounding`): at each request a method compacted before,
  the share of what the agent used in its next five turns (paths, identifiers, numbers, quoted
  strings seen earlier) that the view sent there holds, that a ref makes recoverable, and that is
  lost; and the share of failed, later superseded calls the final view still holds.

Every figure is also given as a ratio to the best peer or baseline of the same run.

Targets (issue 6 and DESIGN.md): >= 85 % token-weighted prefix reuse for the default preset; no
request over the window for any preset.

Writes two sections of RESULTS.md: ``cache`` (tokens, prefix reuse, cost) and ``compaction``
(compactions, CPU, retention, ratios). ``python -m benchmarks.cache`` runs this same script.

Run: ``python -m benchmarks.compaction [--quick] [--write] [--transcripts DIR] [--methods A,B]
[--workers N]`` (quick: two small transcripts per corpus, nothing written unless ``--write``;
``--transcripts``: replay the transcripts under a folder of your own instead of the shared ones;
``--methods``: a subset of the methods, the default preset always among them; ``--workers``:
processes, one per core by default). A run on other transcripts or a subset of methods prints
its tables and writes nothing.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from benchmarks._plot import PlotPoint, cost_grounding_svg
from benchmarks._results import (
    benchmark_arguments,
    markdown_table,
    percentile,
    record_targets,
    require_shared_data,
    should_write,
    target,
    write_section,
)
from benchmarks.baselines import (
    BASELINE_SLIDING,
    method_labels,
    other_methods,
    replay_method,
)
from benchmarks.peers import missing_peers
from contextfold.budget import ContextBudget
from contextfold.compaction import PresetName, RecentWindow
from contextfold.compaction.pipeline import preset_named
from contextfold.engine import ContextPolicy
from contextfold.replay import (
    ANTHROPIC_PRICE_MODEL,
    DEFAULT_PRESETS,
    OPENAI_PRICE_MODEL,
    REPLAY_POLICY,
    ReplayRun,
    Retention,
    probes_for,
    replay,
)
from contextfold.replay.cache import price_models
from contextfold.replay.driver import resolve_model
from contextfold.replay.grounding import (
    LOOKAHEAD_TURNS,
    GroundingPlan,
    GroundingTally,
    failed_approaches,
)
from contextfold.replay.probes import PROBE_KINDS, STATUSES, SUMMARY_KINDS, Status
from contextfold.store import SQLiteVersionWarning
from contextfold.tokens.counters import counter_for
from contextfold.transcripts import Transcript, load_transcripts

WINDOWS = (32_000, 128_000)
DEFAULT_PRESET = "mask-first"
TARGET_REUSE = 0.85
"""Issue 6: the default preset keeps at least this token-weighted prefix reuse."""
CORPORA = ("mini-swe-agent-deepseek", "mini-swe-agent-gemini3pro", "claude-code", "tau-bench")
QUICK_PER_CORPUS = 2
"""Transcripts per corpus in ``--quick`` mode (the first ones under :data:`QUICK_MAX_BYTES`)."""
QUICK_MAX_BYTES = 1_000_000
"""Files larger than this are left out in ``--quick`` mode (seconds, not minutes)."""
FRONTIER_RECENT_SHARE = 0.15
"""The recent window of the cheaper frontier row (the default keeps up to 25 % of the window)."""
VARIANTS: dict[str, tuple[PresetName, ContextPolicy]] = {
    "mask-first, thresholds only": (
        "mask-first",
        replace(REPLAY_POLICY, cost_schedule=False),
    ),
    f"mask-first, recent window {FRONTIER_RECENT_SHARE:.0%}": (
        "mask-first",
        replace(REPLAY_POLICY, recent=RecentWindow(max_share=FRONTIER_RECENT_SHARE)),
    ),
}
"""Other settings of ours, measured beside the presets to show the frontier the defaults were
picked from: the default without the cost schedule (the thresholds alone trigger), and a
smaller recent window (cheaper, less kept verbatim)."""
OURS: tuple[str, ...] = (*DEFAULT_PRESETS, *VARIANTS)
METHODS: tuple[str, ...] = (*OURS, *other_methods())
PLOT = Path(__file__).with_name("cost_grounding.svg")
"""The cost × grounding plot RESULTS.md shows (written with the section)."""
COST_HELD_BACK = (
    "the cheaper methods keep less: a summary with no recent turns (Codex-like) or a view "
    "capped at a few dozen events (OpenHands-like) makes every later request small, at the "
    "price of what the agent needs next (their grounding in view is far lower, see the table)"
)
GROUNDING_HELD_BACK = (
    "methods that only ever drop the oldest messages (trim_messages, the sliding window, "
    "clearing old tool results) keep what the agent uses next in view more often, at several "
    "times the cost or with requests over the window; every compaction that summarizes "
    "loses some of it"
)


def corpus(quick: bool, root: Path | None = None) -> Iterator[tuple[str, Transcript]]:
    """(corpus name, transcript) for every shared transcript, or for every transcript under
    ``root`` (each folder holding transcripts is a corpus); a few small ones when quick."""
    folders = _corpus_folders(root) if root is not None else _shared_folders()
    for name, folder in folders:
        files = sorted(p for p in folder.iterdir() if p.suffix in (".json", ".jsonl"))
        if quick:
            files = [p for p in files if p.stat().st_size < QUICK_MAX_BYTES][:QUICK_PER_CORPUS]
        taken = 0
        for path in files:
            for transcript in load_transcripts(path):
                if quick and taken >= QUICK_PER_CORPUS:
                    break
                taken += 1
                yield name, transcript


def _shared_folders() -> list[tuple[str, Path]]:
    root = require_shared_data()
    return [(name, root / name) for name in CORPORA]


def _corpus_folders(root: Path) -> list[tuple[str, Path]]:
    """``root`` and every folder under it that holds ``.json`` or ``.jsonl`` files, each named
    by its path under ``root``."""
    found = []
    for folder in sorted({root, *(p for p in root.rglob("*") if p.is_dir())}):
        if any(p.suffix in (".json", ".jsonl") for p in folder.iterdir() if p.is_file()):
            name = str(folder.relative_to(root)) if folder != root else root.name
            found.append((name, folder))
    return found


def _methods(text: str) -> tuple[str, ...]:
    """The methods ``--methods`` names (comma-separated), the default preset first.

    Some names hold a comma themselves ("mask-first, thresholds only"), so the pieces between
    commas are joined back into the longest known name at each place.
    """
    pieces = text.split(",")
    known = {_squeezed(name): name for name in METHODS}
    wanted: list[str] = []
    unknown: list[str] = []
    start = 0
    while start < len(pieces):
        for end in range(len(pieces), start, -1):
            name = known.get(_squeezed(",".join(pieces[start:end])))
            if name is not None:
                wanted.append(name)
                start = end
                break
        else:
            if pieces[start].strip():
                unknown.append(pieces[start].strip())
            start += 1
    if unknown or not wanted:
        raise argparse.ArgumentTypeError(
            f"unknown method {', '.join(map(repr, unknown)) or repr(text)}; the methods are: "
            + "; ".join(METHODS)
        )
    return tuple(dict.fromkeys([DEFAULT_PRESET, *wanted]))


def _squeezed(name: str) -> str:
    """``name`` with no space around its commas or at its ends, as it is compared."""
    return ",".join(piece.strip() for piece in name.split(","))


def _workers(text: str) -> int:
    try:
        workers = int(text)
    except ValueError:
        workers = 0
    if workers < 1:
        raise argparse.ArgumentTypeError(f"--workers takes a number of processes, got {text!r}")
    return workers


# --------------------------------------------------------------------------------------------------
# pooling runs
# --------------------------------------------------------------------------------------------------


@dataclass
class Pool:
    """The runs of one method at one window, pooled over transcripts."""

    transcripts: int = 0
    requests: int = 0
    over_window: int = 0
    tokens: int = 0
    reused: int = 0
    shares: list[float] = field(default_factory=list)
    cost_anthropic: float = 0.0
    cost_openai: float = 0.0
    summary_tokens: int = 0
    """Tokens the summarizer read: a model-written summary would be a call reading them."""
    compactions: int = 0
    masks: int = 0
    cpu: list[float] = field(default_factory=list)
    full_tokens: int = 0
    final_tokens: int = 0
    kept: dict[str, int] = field(default_factory=dict)
    recoverable: dict[str, int] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)
    probed: int = 0
    """Transcripts retention is pooled over: those larger than the effective window, and any
    other one this method cut (a method may cut before the window is full)."""
    grounding: GroundingTally = field(default_factory=GroundingTally)
    """What the agent used after each compaction point, looked up in the view sent there."""
    failed: dict[Status, int] = field(default_factory=lambda: dict.fromkeys(STATUSES, 0))
    """Failed, later superseded calls by status in the final view (over the probed
    transcripts, as retention)."""

    def add(self, run: ReplayRun, full_tokens: int, big: bool) -> None:
        self.transcripts += 1
        self.requests += len(run.turns)
        self.over_window += run.over_window
        self.tokens += run.tokens_sent
        self.reused += run.reused_tokens
        # The first request of a session has nothing before it: it is no cache miss of anyone's.
        self.shares += [t.prefix_share for t in run.turns[1:]]
        self.cost_anthropic += run.cost_anthropic
        self.cost_openai += run.cost_openai
        self.summary_tokens += run.summary_input_tokens
        self.compactions += run.compactions
        self.masks += run.mask_batches
        self.cpu += run.compaction_cpu_seconds
        self.full_tokens += full_tokens
        self.final_tokens += run.turns[-1].tokens if run.turns else 0
        cut = run.compactions > 0 or run.mask_batches > 0
        if (big or cut) and run.retention is not None:
            self._add_retention(run.retention)
            for status, count in (run.failed_approaches or {}).items():
                self.failed[status] += count
        self.grounding.merge(run.grounding)

    def _add_retention(self, retention: Retention) -> None:
        self.probed += 1
        for kind in PROBE_KINDS:
            self.kept[kind] = self.kept.get(kind, 0) + retention.kept(kind)
            self.recoverable[kind] = self.recoverable.get(kind, 0) + retention.count(
                "recoverable", kind
            )
            self.totals[kind] = self.totals.get(kind, 0) + retention.total(kind)

    @property
    def cost_with_summaries(self) -> float:
        """Anthropic input cost plus summary calls that read what was summarized at the input
        price (an upper bound: a summary call that re-sends the cached conversation pays less)."""
        anthropic, _ = price_models()
        assert anthropic.input_price is not None
        return self.cost_anthropic + self.summary_tokens * anthropic.input_price / 1e6

    @property
    def reuse(self) -> float:
        return self.reused / self.tokens if self.tokens else 0.0

    @property
    def median_share(self) -> float:
        return statistics.median(self.shares) if self.shares else 0.0

    @property
    def compression(self) -> float:
        return self.full_tokens / self.final_tokens if self.final_tokens else 0.0

    def cpu_ms(self, q: float) -> float:
        return percentile(self.cpu, q) * 1e3

    def retention(self, kind: str | None = None) -> float | None:
        """Share of the facts (of one kind, or all) the final views keep; ``None`` when none."""
        kinds = PROBE_KINDS if kind is None else (kind,)
        total = sum(self.totals.get(k, 0) for k in kinds)
        return sum(self.kept.get(k, 0) for k in kinds) / total if total else None

    def grounded(self) -> float | None:
        """Share of the items used after compaction points that were in the view there."""
        total = self.grounding.total
        return self.grounding.in_view / total if total else None

    def grounding_cell(self) -> str:
        """In view / recoverable / lost, as shares of the items probed."""
        total = self.grounding.total
        if not total:
            return "—"
        g = self.grounding
        return f"{g.in_view / total:.1%} / {g.recoverable / total:.1%} / {g.lost / total:.1%}"

    def failed_kept(self) -> float | None:
        """Share of the failed approaches the final views keep (verbatim or in a summary)."""
        total = sum(self.failed.values())
        return (self.failed["verbatim"] + self.failed["summary"]) / total if total else None

    def failed_cell(self) -> str:
        total = sum(self.failed.values())
        share = self.failed_kept()
        if share is None:
            return "—"
        extra = self.failed["recoverable"]
        return f"{share:.1%}" + (f" (+{extra / total:.1%})" if extra else "") + f" of {total:,}"

    def retention_cell(self, kind: str | None = None) -> str:
        kinds = PROBE_KINDS if kind is None else (kind,)
        total = sum(self.totals.get(k, 0) for k in kinds)
        extra = sum(self.recoverable.get(k, 0) for k in kinds)
        share = self.retention(kind)
        if share is None:
            return "—"
        return f"{share:.1%}" + (f" (+{extra / total:.1%})" if extra else "")


@dataclass
class Measured:
    """Everything one run measured."""

    pools: dict[tuple[int, str], Pool] = field(default_factory=dict)
    by_corpus: dict[tuple[int, str], Pool] = field(default_factory=dict)
    """The default preset per (window, corpus)."""
    engine_extra: list[int] = field(default_factory=list)
    """Tokens our first request of a transcript carries beyond the same messages sent bare (the
    engine's own tools and note), per transcript at the larger window."""
    transcripts: int = 0
    big_transcripts: dict[int, int] = field(default_factory=dict)
    """Per window: the transcripts larger than its effective window."""
    methods: tuple[str, ...] = METHODS
    """The methods replayed (``--methods``: a subset, the default preset always among them)."""

    @property
    def ours(self) -> tuple[str, ...]:
        """Our presets and variants among :attr:`methods`."""
        return tuple(name for name in self.methods if name in OURS)

    @property
    def others(self) -> tuple[str, ...]:
        """The peers and baselines among :attr:`methods`."""
        return tuple(name for name in self.methods if name not in OURS)


def _full_tokens(transcript: Transcript, counter_tokens: Callable[..., int]) -> int:
    system = "\n\n".join(m.text for m in transcript.messages if m.role == "system" and m.text)
    messages = [
        m
        for m in transcript.messages
        if m.role != "system" and m.meta.kind not in SUMMARY_KINDS and m.meta.agent_visible
    ]
    return counter_tokens(messages, system=system, tools=transcript.tools)


@dataclass(frozen=True)
class _TranscriptRuns:
    """What one transcript gave at every window and method (computed in a worker process)."""

    corpus: str
    runs: tuple[tuple[int, str, ReplayRun, int, bool], ...]
    """(window, method, run, whole transcript's tokens, larger than the window)."""
    engine_extra: int | None


def _replay_every_method(
    item: tuple[str, Transcript],
    windows: Sequence[int] = WINDOWS,
    methods: Sequence[str] = METHODS,
) -> _TranscriptRuns:
    corpus_name, transcript = item
    probes = probes_for(transcript.messages)
    plan = GroundingPlan(transcript.messages)
    failed = failed_approaches(transcript.messages)
    runs: list[tuple[int, str, ReplayRun, int, bool]] = []
    extra: int | None = None
    for window in windows:
        info = resolve_model(transcript, window=window)
        counter = counter_for(info)
        effective = ContextBudget.for_model(info).effective_window
        full = _full_tokens(transcript, counter.count_request)
        first: dict[str, int] = {}
        for method in methods:
            if method in OURS:
                variant = VARIANTS.get(method)
                preset, policy = variant or (preset_named(method), REPLAY_POLICY)
                run = replay(
                    transcript,
                    preset,
                    window=window,
                    policy=policy,
                    probes=probes,
                    grounding=plan,
                    failed=failed,
                )
            else:
                run = replay_method(method, transcript, info, counter, probes, plan, failed)
            runs.append((window, method, run, full, full > effective))
            if run.turns:
                first[method] = run.turns[0].tokens
        if window == max(windows) and DEFAULT_PRESET in first and BASELINE_SLIDING in first:
            extra = first[DEFAULT_PRESET] - first[BASELINE_SLIDING]
    return _TranscriptRuns(corpus_name, tuple(runs), extra)


def _quiet_worker() -> None:
    warnings.simplefilter("ignore", SQLiteVersionWarning)


def measure(
    transcripts: Sequence[tuple[str, Transcript]],
    windows: Sequence[int] = WINDOWS,
    workers: int = 1,
    methods: Sequence[str] = METHODS,
) -> Measured:
    """Replay every transcript with every method at every window, in ``workers`` processes
    (each transcript's runs are independent; the pooling happens here, in transcript order)."""
    out = Measured(transcripts=len(transcripts), methods=tuple(methods))
    started = time.perf_counter()
    replay_one = partial(_replay_every_method, windows=windows, methods=tuple(methods))
    with ExitStack() as stack:
        if workers > 1:
            context = multiprocessing.get_context("fork")
            executor = stack.enter_context(
                ProcessPoolExecutor(workers, mp_context=context, initializer=_quiet_worker)
            )
            results: Iterator[_TranscriptRuns] = executor.map(replay_one, transcripts)
        else:
            results = map(replay_one, transcripts)
        for number, done in enumerate(results, 1):
            for window, method, run, full, big in done.runs:
                if method == DEFAULT_PRESET:  # counted once per transcript and window
                    out.big_transcripts[window] = out.big_transcripts.get(window, 0) + big
                out.pools.setdefault((window, method), Pool()).add(run, full, big)
                if method == DEFAULT_PRESET:
                    out.by_corpus.setdefault((window, done.corpus), Pool()).add(run, full, big)
            if done.engine_extra is not None:
                out.engine_extra.append(done.engine_extra)
            if number % 25 == 0 or number == len(transcripts):
                elapsed = time.perf_counter() - started
                print(f"  {number}/{len(transcripts)} transcripts, {elapsed:.0f} s", flush=True)
    return out


# --------------------------------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------------------------------


def _money(value: float) -> str:
    return f"${value:,.2f}"


def _cpu(ms: float) -> str:
    return f"{ms * 1000:.0f} µs" if ms < 0.1 else f"{ms:.2f} ms"


def _label(method: str) -> str:
    return f"**{method}** (ours)" if method in OURS else method


def cache_table(m: Measured, windows: Sequence[int]) -> str:
    anthropic, _ = price_models()
    assert anthropic.input_price is not None
    rows = []
    for window in windows:
        for method in m.methods:
            p = m.pools[window, method]
            rows.append(
                (
                    f"{window // 1000}k",
                    _label(method),
                    f"{p.over_window:,} / {p.requests:,}",
                    f"{p.tokens / 1e6:,.2f} M",
                    f"{p.reuse:.1%}",
                    f"{p.median_share:.1%}",
                    _money(p.cost_anthropic),
                    _money(p.cost_openai),
                    _money(p.tokens * anthropic.input_price / 1e6),
                    f"{p.summary_tokens / 1e6:,.2f} M",
                    _money(p.cost_with_summaries),
                )
            )
    return markdown_table(
        (
            "window",
            "method",
            "requests over window",
            "input tokens",
            "prefix reuse (token-weighted)",
            "median request",
            f"$ {ANTHROPIC_PRICE_MODEL}",
            f"$ {OPENAI_PRICE_MODEL}",
            "$ no cache",
            "summarizer input",
            f"$ {ANTHROPIC_PRICE_MODEL} + summary calls",
        ),
        rows,
    )


def compaction_table(m: Measured, windows: Sequence[int]) -> str:
    rows = []
    for window in windows:
        for method in m.methods:
            p = m.pools[window, method]
            masks = f" / {p.masks:,}" if method in OURS else ""
            rows.append(
                (
                    f"{window // 1000}k",
                    _label(method),
                    f"{p.compactions:,}{masks}",
                    f"{_cpu(p.cpu_ms(50))} / {_cpu(p.cpu_ms(95))}" if p.cpu else "—",
                    f"{p.compression:.2f}x",
                    f"{p.probed:,}",
                    p.retention_cell("files_modified"),
                    p.retention_cell("errors"),
                    p.retention_cell("task"),
                    p.retention_cell("constraints"),
                    p.retention_cell(),
                    f"{p.grounding.points:,}",
                    p.grounding_cell(),
                    p.failed_cell(),
                )
            )
    return markdown_table(
        (
            "window",
            "method",
            "compactions (/ mask batches)",
            "CPU per compaction p50 / p95",
            "compression",
            "probed",
            "files modified",
            "errors",
            "task",
            "constraints",
            "all facts",
            "grounding points",
            "grounded in view / recoverable / lost",
            "failed approaches kept",
        ),
        rows,
    )


Metric = tuple[str, Callable[[Pool], float | None], bool]
"""(column, value of a pool, higher is better)."""

RATIO_METRICS: tuple[Metric, ...] = (
    ("input tokens", lambda p: float(p.tokens), False),
    ("prefix reuse", lambda p: p.reuse, True),
    (f"$ {ANTHROPIC_PRICE_MODEL}", lambda p: p.cost_anthropic, False),
    (f"$ {OPENAI_PRICE_MODEL}", lambda p: p.cost_openai, False),
    (f"$ {ANTHROPIC_PRICE_MODEL} + summary calls", lambda p: p.cost_with_summaries, False),
    ("facts kept", lambda p: p.retention(), True),
    ("grounded in view", lambda p: p.grounded(), True),
    ("failed approaches kept", lambda p: p.failed_kept(), True),
    ("compactions", lambda p: float(p.compactions), False),
    ("CPU per compaction (p50)", lambda p: p.cpu_ms(50) if p.cpu else None, False),
)


def best_other(
    m: Measured, window: int, value: Callable[[Pool], float | None], higher: bool
) -> tuple[str, float] | None:
    """The best peer or baseline on one figure at ``window``: (name, value)."""
    found = [(name, v) for name in m.others if (v := value(m.pools[window, name])) is not None]
    if not found:
        return None
    return (max if higher else min)(found, key=lambda item: item[1])


def ratio_table(m: Measured, windows: Sequence[int]) -> str:
    rows = []
    for window in windows:
        for preset in (p for p in DEFAULT_PRESETS if p in m.methods):
            cells: list[object] = [f"{window // 1000}k", preset]
            for _, value, higher in RATIO_METRICS:
                ours = value(m.pools[window, preset])
                best = best_other(m, window, value, higher)
                if ours is None or best is None or not best[1]:
                    cells.append("—")
                else:
                    cells.append(f"{ours / best[1]:.2f}x ({_short(best[0])})")
            rows.append(cells)
    headers = ["window", "preset"] + [
        f"{name} ({'higher' if higher else 'lower'} is better)" for name, _, higher in RATIO_METRICS
    ]
    return markdown_table(headers, rows)


def _short(method: str) -> str:
    return (
        method.replace("langchain ", "")
        .replace(" (baseline)", "")
        .replace("SummarizationMiddleware", "SumMiddleware")
    )


def corpus_table(m: Measured, windows: Sequence[int]) -> str:
    rows = []
    for window in windows:
        for name in CORPORA:
            p = m.by_corpus.get((window, name))
            if p is None:
                continue
            rows.append(
                (
                    f"{window // 1000}k",
                    name,
                    p.transcripts,
                    f"{p.compactions} / {p.masks}",
                    f"{p.reuse:.1%}",
                    f"{p.median_share:.1%}",
                    _money(p.cost_anthropic),
                )
            )
    return markdown_table(
        (
            "window",
            "corpus",
            "transcripts",
            "compactions / masks",
            "prefix reuse",
            "median",
            f"$ {ANTHROPIC_PRICE_MODEL}",
        ),
        rows,
    )


# --------------------------------------------------------------------------------------------------
# targets
# --------------------------------------------------------------------------------------------------


def method_kind(name: str) -> str:
    """``ours`` (a preset), ``baseline`` (written here) or ``peer`` (another project's code)."""
    if name in OURS:
        return "ours"
    return "baseline" if "(baseline)" in name else "peer"


def plot_points(m: Measured, windows: Sequence[int]) -> list[PlotPoint]:
    """One point per method and window for the cost × grounding plot."""
    return [
        PlotPoint(
            f"{w // 1000}k",
            name,
            method_kind(name),
            m.pools[w, name].cost_with_summaries,
            m.pools[w, name].grounded() or 0.0,
            m.pools[w, name].over_window,
        )
        for w in windows
        for name in m.methods
        if (w, name) in m.pools
    ]


def _cheapest_fitting(m: Measured, window: int, names: Sequence[str]) -> tuple[str, float] | None:
    """The method of ``names`` with the lowest cost (summary calls priced) among those that
    sent no request over the window."""
    fitting = [(n, m.pools[window, n].cost_with_summaries) for n in names]
    fitting = [(n, c) for n, c in fitting if m.pools[window, n].over_window == 0]
    return min(fitting, key=lambda pair: pair[1], default=None)


def _share_or_uncut(share: float | None) -> str:
    """A share, or why there is none: the method never took anything out."""
    return "nothing cut" if share is None else f"{share:.1%}"


def goal_table(m: Measured, windows: Sequence[int]) -> str:
    """Issue 19's goal, per window: the default preset's cost beside the cheapest other method
    that never overflows, and its grounding and retention beside the best other method's."""
    rows = []
    for w in windows:
        ours = m.pools[w, DEFAULT_PRESET]
        cheapest = _cheapest_fitting(m, w, m.others)
        grounded = best_other(m, w, lambda p: p.grounded(), True)
        facts = best_other(m, w, lambda p: p.retention(), True)
        rows.append(
            [
                f"{w // 1000}k",
                f"{_money(ours.cost_with_summaries)}",
                "—"
                if cheapest is None
                else f"{_money(cheapest[1])} ({_short(cheapest[0])}): "
                f"{ours.cost_with_summaries / cheapest[1]:.2f}x",
                _share_or_uncut(ours.grounded()),
                "—" if grounded is None else f"{grounded[1]:.1%} ({_short(grounded[0])})",
                _share_or_uncut(ours.retention()),
                "—" if facts is None else f"{facts[1]:.1%} ({_short(facts[0])})",
            ]
        )
    return markdown_table(
        [
            "window",
            f"{DEFAULT_PRESET}: $ + summary calls",
            "cheapest other with 0 over the window (ours ÷ it)",
            f"{DEFAULT_PRESET}: grounded in view",
            "best other",
            f"{DEFAULT_PRESET}: facts kept",
            "best other",
        ],
        rows,
    )


def targets(m: Measured, windows: Sequence[int]) -> list[dict[str, object]]:
    reuse = {w: m.pools[w, DEFAULT_PRESET].reuse for w in windows}
    versus = []
    for w in windows:
        best = best_other(m, w, lambda p: p.reuse, True)
        if best is not None:
            versus.append(f"{w // 1000}k: best other {best[1]:.1%} ({_short(best[0])})")
    met_reuse = all(r >= TARGET_REUSE for r in reuse.values())
    reuse_held = ""
    if not met_reuse:
        worst = min(windows, key=lambda w: reuse[w])
        low = min((k for k in m.by_corpus if k[0] == worst), key=lambda k: m.by_corpus[k].reuse)
        reuse_held = (
            f"lowest corpus at {worst // 1000}k: {low[1]} at {m.by_corpus[low].reuse:.1%} "
            f"({m.by_corpus[low].compactions} compactions, {m.by_corpus[low].masks} mask batches)"
        )
    ours_over = {(w, p): m.pools[w, p].over_window for w in windows for p in m.ours}
    requests = sum(m.pools[w, p].requests for w in windows for p in m.ours)
    over = sum(ours_over.values())
    others = ", ".join(
        f"{_short(name)} {sum(m.pools[w, name].over_window for w in windows):,}"
        for name in m.others
    )
    over_held = ""
    if over:
        where = ", ".join(f"{p} at {w // 1000}k: {n}" for (w, p), n in ours_over.items() if n)
        over_held = f"requests over the window: {where}"
    windows_text = " and ".join(f"{w // 1000}k" for w in windows)
    return [
        target(
            "cache",
            f"≥ {TARGET_REUSE:.0%} prefix reuse, default preset ({DEFAULT_PRESET})",
            "; ".join(f"{w // 1000}k: {reuse[w]:.1%}" for w in windows),
            met_reuse,
            versus="; ".join(versus),
            held_back=reuse_held,
        ),
        target(
            "overflow",
            f"0 requests over the window (every preset, {windows_text})",
            f"{over:,} of {requests:,} requests",
            over == 0,
            versus=f"requests over the window: {others}",
            held_back=over_held,
        ),
        *_goal_targets(m, windows),
    ]


def _goal_targets(m: Measured, windows: Sequence[int]) -> list[dict[str, object]]:
    """Issue 19: the default preset cheapest of all methods that fit (summary calls priced),
    with grounding and retention at least the best other method's."""
    cost_rows, cost_versus, quality_rows, quality_versus = [], [], [], []
    cost_met = quality_met = True
    for w in windows:
        ours = m.pools[w, DEFAULT_PRESET]
        cheapest = _cheapest_fitting(m, w, m.others)
        if cheapest is not None:
            ratio = ours.cost_with_summaries / cheapest[1]
            cost_met &= ratio <= 1
            cost_rows.append(f"{w // 1000}k: {_money(ours.cost_with_summaries)}")
            cost_versus.append(
                f"{w // 1000}k: {_money(cheapest[1])} ({_short(cheapest[0])}), ours {ratio:.2f}x"
            )
        grounded = best_other(m, w, lambda p: p.grounded(), True)
        facts = best_other(m, w, lambda p: p.retention(), True)
        # A method that never took anything out kept everything the agent used.
        measured_g, measured_f = ours.grounded(), ours.retention()
        ours_g = 1.0 if measured_g is None else measured_g
        ours_f = 1.0 if measured_f is None else measured_f
        if grounded is not None and facts is not None:
            quality_met &= ours_g >= grounded[1] and ours_f >= facts[1]
            quality_rows.append(
                f"{w // 1000}k: grounded {_share_or_uncut(ours.grounded())}, "
                f"facts {_share_or_uncut(ours.retention())}"
            )
            quality_versus.append(
                f"{w // 1000}k: grounded {grounded[1]:.1%} ({_short(grounded[0])}), "
                f"facts {facts[1]:.1%} ({_short(facts[0])})"
            )
    return [
        target(
            "cost",
            f"default preset ({DEFAULT_PRESET}) cheapest of every method that fits the window "
            "(Anthropic input + summary calls)",
            "; ".join(cost_rows),
            cost_met,
            versus="; ".join(cost_versus),
            held_back="" if cost_met else COST_HELD_BACK,
        ),
        target(
            "grounding",
            f"default preset ({DEFAULT_PRESET}) grounding and retention ≥ the best peer or "
            "baseline",
            "; ".join(quality_rows),
            quality_met,
            versus="; ".join(quality_versus),
            held_back="" if quality_met else GROUNDING_HELD_BACK,
        ),
    ]


# --------------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = benchmark_arguments(__doc__.splitlines()[0])
    parser.add_argument(
        "--transcripts",
        type=Path,
        metavar="DIR",
        help="replay the transcripts under DIR (any format contextfold.transcripts reads; each "
        "folder holding some is a corpus) instead of the shared ones",
    )
    parser.add_argument(
        "--methods",
        type=_methods,
        metavar="NAME,NAME",
        help=f"replay only these methods, comma-separated ({DEFAULT_PRESET} is always among "
        "them); the methods: " + "; ".join(METHODS).replace("%", "%%"),
        # argparse %-formats help texts: a method's name may hold a "%".
    )
    parser.add_argument(
        "--workers",
        type=_workers,
        default=os.cpu_count() or 1,
        metavar="N",
        help="processes replaying transcripts side by side (default: one per core)",
    )
    args = parser.parse_args(argv)
    if args.transcripts is not None and not args.transcripts.is_dir():
        parser.error(f"--transcripts: {args.transcripts} is not a folder")
    partial_run = args.transcripts is not None or args.methods is not None
    if partial_run and args.write:
        parser.error("--write records the full run only (no --transcripts or --methods)")
    if partial_run:
        args.write = False
    methods = args.methods or METHODS
    warnings.simplefilter("ignore", SQLiteVersionWarning)
    started = time.perf_counter()
    transcripts = list(corpus(args.quick, args.transcripts))
    if not transcripts:
        parser.error(f"no transcript found under {args.transcripts}")
    print(
        f"compaction: {len(transcripts)} transcripts x {len(WINDOWS)} windows x "
        f"{len(methods)} methods, {args.workers} workers",
        flush=True,
    )
    for missing in missing_peers():
        print(f"  left out (not installed): {missing}", flush=True)
    m = measure(transcripts, workers=args.workers, methods=methods)
    cache = cache_table(m, WINDOWS)
    compaction = compaction_table(m, WINDOWS)
    ratios = ratio_table(m, WINDOWS)
    corpora = corpus_table(m, WINDOWS)
    goal = goal_table(m, WINDOWS)
    rows = targets(m, WINDOWS)
    seconds = time.perf_counter() - started
    extra = statistics.median(m.engine_extra) if m.engine_extra else 0
    verdicts = "\n".join(
        f"- {r['target']}: {r['measured']} — {'met' if r['met'] else '**not met**'}." for r in rows
    )
    print(cache, compaction, ratios, corpora, goal, verdicts, sep="\n\n")
    print(f"{len(transcripts)} transcripts, {seconds:.0f} s")
    if not should_write(args):
        return
    labels = method_labels()
    what = "\n".join(f"- {name}: {labels[name]}" for name in other_methods())
    requests = m.pools[WINDOWS[0], DEFAULT_PRESET].requests
    big = {w: m.big_transcripts[w] for w in WINDOWS}
    setup = (
        f"{len(transcripts)} shared transcripts ({', '.join(CORPORA)}; {requests:,} requests "
        "per method and window), replayed once per window and method with the recorded "
        "assistant turns; each transcript keeps its own model's tokenizer and reply reserve (at "
        "most a quarter of the window), with the window overridden. Every request of every "
        "method is counted with that model's counter (ours). Peers and baselines "
        "(`benchmarks/baselines.py` says exactly how each is driven):\n\n"
        f"{what}\n\n"
        "Both summarizing peers and the Codex-like and OpenHands-like baselines get our "
        "extractive summarizer as their summary writer, so differences come from what each "
        "decides to summarize and keep. The OpenHands-like baseline counts events, not tokens: "
        "its requests the provider would refuse as too long count as over the window (and in "
        "its request total), at no cost. "
        f"Our requests also carry the engine's own tools (`read_result`, `compact_context`): a "
        f"median {extra:,.0f} tokens per request more than the same messages sent bare."
    )
    cache_body = (
        f"{setup}\n\nPrefix reuse: the share of each request (tools, system prompt, then each "
        "message as rendered for the provider, `cache_control` ignored) identical to the start "
        "of the previous request. Cost: input only; the reused prefix at the cache-read price, "
        f"the rest at the cache-write price of {ANTHROPIC_PRICE_MODEL} (Anthropic; an upper "
        f"bound on hits, which Anthropic finds at breakpoints) and {OPENAI_PRICE_MODEL} (OpenAI, "
        "automatic caching, no write surcharge); requests under the model's minimum cacheable "
        "prefix at the input price. Requests over the window are counted with our counter (the "
        "LangChain peers budget with `count_tokens_approximately`). Summarizer input: the "
        "tokens every summary read (what it summarized, plus the summary it extended); every "
        "method here summarizes with our extractive summarizer, which costs nothing, but a "
        "model-written summary is a call of its own reading them, so the last column adds them "
        f"at {ANTHROPIC_PRICE_MODEL}'s input price (an upper bound: a summary call that "
        "re-sends the cached conversation, as Codex's does, pays less).\n\n"
        f"{cache}\n\nThe default preset per corpus:\n\n{corpora}\n\n{verdicts}"
    )
    write_section(
        "cache",
        "Prefix-cache reuse and input cost: presets, peers and baselines (replay)",
        cache_body,
        quick=args.quick,
    )
    compaction_body = (
        "Same run as the cache section above. Compactions: requests preceded by a compaction "
        "(for `trim_messages` and the sliding window: requests where anything was dropped); "
        "mask batches: ours, in the MASK zone. CPU: thread time of each compaction (for "
        "`trim_messages`: of each call that dropped something). Compression: the whole "
        "transcript as one request ÷ the last request, summed over transcripts. Retention: over "
        "the transcripts larger than the window ("
        + ", ".join(f"{n} at {w // 1000}k" for w, n in big.items())
        + ") and any other transcript the method cut (a method that counts events, not tokens, "
        "cuts smaller ones too; the probed column counts them), the share of the session's "
        "facts the final view holds verbatim or in a summary; (+x%) = only readable through "
        "`read_result`.\n\n"
        "Grounding (issue 19): at every request before which a method took something out of "
        "the view (for ours a mask batch too; for `trim_messages` and the sliding window every "
        "request that dropped anything, so a method that cuts more often is probed more often), "
        f"what the recorded agent used in its next {LOOKAHEAD_TURNS} assistant turns (the reply "
        "to that request included): file paths, identifiers (snake_case, camelCase, dotted), "
        "numbers of 3+ digits and quoted strings in its text and tool-call arguments, kept when "
        "they appeared earlier in the history (system prompt aside). Each is looked up, exact "
        "wording, case-insensitive, in the view sent at that point: in view (verbatim or in a "
        "summary) / recoverable (only behind a ref in the view, through `read_result`: ours "
        "only) / lost; pooled over every point of every transcript, one count per item and "
        "point. Grounding points: the points with at least one such item. Failed approaches: a "
        "tool call whose result failed (an error flag such as a non-zero exit, a traceback, a "
        "line opening `…Error: `, `error: ` or `fatal: `, `command not found`) and that a later, "
        "different call of the same tool on the same target (its file argument, or the first "
        "file-like word of its command) superseded; kept = the first line of its command (for "
        "an edit, of its longest argument) is in the final view, over the same transcripts as "
        "retention, of N such calls (+x% = only through `read_result`). `src/contextfold/"
        "replay/grounding.py` has the exact rules.\n\n"
        f"{compaction}\n\nEach preset as a ratio to the best peer or baseline on that figure "
        "(named in brackets):\n\n"
        f"{ratios}\n\n"
        "Issue 19's goal: the default preset cheapest of every method that fits the window, with "
        "summary calls priced, and its grounding and retention at least the best other "
        f"method's:\n\n{goal}\n\n"
        f"![Cost × grounding: one point per method and window]({PLOT.name})\n\n"
        f"`{PLOT.name}`: x = $ claude-sonnet-4-5 + summary calls, y = grounded in view; our "
        "presets filled, peers hollow circles, baselines hollow squares, red outline = "
        "requests over the window."
    )
    PLOT.write_text(cost_grounding_svg(plot_points(m, WINDOWS)), encoding="utf-8")
    write_section(
        "compaction",
        "Compaction: presets, peers and baselines at 32k and 128k (replay)",
        compaction_body,
        quick=args.quick,
    )
    figures = {
        f"{w // 1000}k": {
            name: {
                "requests": p.requests,
                "over_window": p.over_window,
                "tokens": p.tokens,
                "prefix_reuse": round(p.reuse, 4),
                "cost_anthropic": round(p.cost_anthropic, 2),
                "cost_openai": round(p.cost_openai, 2),
                "cost_with_summaries": round(p.cost_with_summaries, 2),
                "compactions": p.compactions,
                "retention": p.retention(),
                "grounding_points": p.grounding.points,
                "grounding": {
                    "in_view": p.grounding.in_view,
                    "recoverable": p.grounding.recoverable,
                    "lost": p.grounding.lost,
                },
                "grounded_in_view": p.grounded(),
                "failed_approaches": dict(p.failed),
                "cpu_ms_p50": round(p.cpu_ms(50), 3) if p.cpu else None,
            }
            for (window, name), p in m.pools.items()
            if window == w
        }
        for w in WINDOWS
    }
    record_targets("compaction", rows, figures, quick=args.quick)


if __name__ == "__main__":
    main()
