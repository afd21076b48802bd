"""What ``Session.prepare()`` costs per turn as the history grows, beside LangChain's trimming.

One agent session grows turn by turn (prepare, reply with usage, tool outputs) through a
200k-token Claude window, with turns taken from the shared DeepSeek trajectories (synthetic
turns when ``../shared`` is absent). ``prepare()`` is timed in CPU time (``time.thread_time``;
background compaction is off so every compaction runs in the timed thread) on the turns right
after the history reaches 100, 1k, 10k and 100k messages (``--quick``: 100 and 1k), 400 turns
each (at 100 messages: 50 turns in each of 8 sessions, so one session stays near 100). A turn
on which the engine masked or compacted is a *compaction turn*; the others are *steady turns*
(a mask batch planned and then declined stays a steady turn: the agent waits for it).

Two peers do the same fitting on the same history, each turn:

- LangChain's ``trim_messages`` with ``count_tokens_approximately``, keeping the most recent
  messages within the same effective window (``strategy="last"``), over the whole history
  converted to ``langchain_core`` messages once (stateless: it walks the history every turn);
- LangChain's ``SummarizationMiddleware.before_model`` on its own agent state (stateful: once it
  summarized, its state is the summary and the kept messages), triggered at 80 % of the same
  window, keeping its default 20 messages. Its summary text is a fixed stand-in (in real use a
  model call: latency, not CPU), so its compaction turns time only its cutoff logic.

The histories the peers see hold the tool outputs as the agent produced them. Both peers are
timed on every measured turn (trim_messages on a sample at the largest histories, where one call
costs close to a second).

Garbage collection: Python's cyclic collector runs when allocations pile up, inside whichever
call happens to allocate; its passes over the older generations cost more as the process holds
more objects. The time each turn spent in collections is recorded (``gc.callbacks``), so the
verdict can say how much of the slowest turns is the collector rather than the engine.

Peak memory: a separate run to 10k messages under ``tracemalloc`` (Python allocations: the
engine, its view and caches; SQLite's own page cache is not counted).

Targets: steady-turn p99 flat in history length (at most 2x between the cheapest and the
costliest history length); at 10k messages a steady turn at least 10x cheaper than the peer (by
median); under 50 MiB at 10k messages.

Run: ``python -m benchmarks.engine_overhead [--quick] [--write]`` (quick: histories of 100 and 1k
messages, memory at 1k, nothing written unless ``--write``).
"""

from __future__ import annotations

import cProfile
import gc
import itertools
import json
import pstats
import statistics
import tempfile
import time
import tracemalloc
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._results import (
    TRAJECTORIES,
    benchmark_arguments,
    markdown_table,
    percentile,
    record_targets,
    should_write,
    target,
    write_section,
)
from contextfold import (
    ChatResponse,
    ContextEngine,
    ContextPolicy,
    Message,
    PreparedRequest,
    Session,
    ToolCallPart,
    Usage,
)

MODEL = "anthropic/claude-sonnet-4-5"
SYSTEM = (
    "You are a helpful assistant that can interact with a computer shell to solve programming "
    "tasks. Work in small steps, read before you edit, and run the tests after every change."
)
TASK = "Consider the following PR description and make the minimal change that resolves it."
CHECKPOINTS = (100, 1_000, 10_000, 100_000)
MEASURED_TURNS = {100: 50, 1_000: 400, 10_000: 400, 100_000: 400}
"""Turns timed after each checkpoint (about two messages each: 100 → 200, 1k → 1.8k...)."""
SMALL_SESSIONS = 8
"""Sessions timed at the first checkpoint: 50 turns each (more would carry one session far past
100 messages), so its p99 is over 400 turns like the others' and not the maximum of 50."""
PEER_SAMPLES = {100: 50, 1_000: 50, 10_000: 30, 100_000: 8}
"""trim_messages calls timed per checkpoint (each one walks the whole history)."""
QUICK_CHECKPOINTS = (100, 1_000)
QUICK_TURNS = 60
"""Turns timed per checkpoint in ``--quick`` mode (a check that the script runs, not a figure)."""
QUICK_PROFILE_TURNS = 10
"""Turns profiled (cProfile) after each checkpoint's timed turns, for the diagnosis: as many as
were timed (:data:`MEASURED_TURNS`), so the profile sees the rare slow turns as often as the
timing did; this many in ``--quick`` mode."""
MEMORY_AT = 10_000
QUICK_MEMORY_AT = 1_000
MIDDLEWARE_TRIGGER_FRACTION = 0.8
"""The middleware summarizes at 80 % of the window: our compact threshold (DESIGN.md §4)."""
STAND_IN_SUMMARY = "Summary of the earlier conversation (a fixed stand-in for a model's). " * 25
MIB = 1024 * 1024


# --------------------------------------------------------------------------------------------------
# the turns an agent takes
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One agent turn: the reply's text, its tool calls (name, arguments) and their outputs."""

    text: str
    calls: tuple[tuple[str, str], ...]
    outputs: tuple[str, ...]


def corpus_turns() -> tuple[list[Turn], str]:
    """Turns from the DeepSeek trajectories, or synthetic ones; and where they came from."""
    folder = TRAJECTORIES / "mini-swe-agent-deepseek"
    if folder.exists():
        from contextfold.transcripts import iter_transcripts

        turns: list[Turn] = []
        for transcript in iter_transcripts(folder):
            if isinstance(transcript, Exception):  # an unreadable file: skip it
                continue
            messages = transcript.messages
            for i, message in enumerate(messages):
                calls = message.tool_calls
                if message.role != "assistant" or not calls:
                    continue
                results = {
                    r.call_id: r.content for m in messages[i + 1 : i + 1 + len(calls)]
                    for r in m.tool_results
                }  # fmt: skip
                outputs = tuple(results.get(c.call_id, "") for c in calls)
                turns.append(
                    Turn(message.text, tuple((c.name, c.arguments) for c in calls), outputs)
                )
        if turns:
            return turns, f"{len(turns):,} turns of the DeepSeek mini-swe-agent trajectories"
    return synthetic_turns(), "synthetic turns (shared trajectories absent)"


def synthetic_turns(count: int = 500) -> list[Turn]:
    """Turns shaped like a coding agent's: small outputs, listings, and now and then a long log."""
    turns = []
    for i in range(count):
        lines = (5, 60, 400)[i % 7 // 3] if i % 11 else 2_000
        output = "\n".join(
            f"src/pkg/mod{i}.py:{j}: def f{j}(x): return x * {j}" for j in range(lines)
        )
        command = json.dumps({"command": f"grep -rn parse src/pkg/mod{i}.py"})
        turns.append(Turn(f"Step {i}: searching module {i}.", (("bash", command),), (output,)))
    return turns


def endless(turns: list[Turn]) -> Iterator[tuple[int, Turn]]:
    """The corpus turns over and over, numbered (call ids must stay unique in a session)."""
    return enumerate(itertools.cycle(turns))


# --------------------------------------------------------------------------------------------------
# the peer: langchain_core trim_messages
# --------------------------------------------------------------------------------------------------


class Peer:
    """The same history as LangChain messages, trimmed to the window each turn."""

    def __init__(self, max_tokens: int) -> None:
        from langchain_core.messages import HumanMessage, SystemMessage

        self.max_tokens = max_tokens
        self.history: list[Any] = [SystemMessage(SYSTEM), HumanMessage(TASK)]

    def add(self, number: int, turn: Turn) -> list[Any]:
        """Append one turn; returns its LangChain messages (the other peer shares them)."""
        from langchain_core.messages import AIMessage, ToolMessage

        calls = [
            {"name": name, "args": _args(arguments), "id": f"call_{number}_{k}"}
            for k, (name, arguments) in enumerate(turn.calls)
        ]
        added: list[Any] = [AIMessage(turn.text, tool_calls=calls, id=f"ai_{number}")]
        for k, output in enumerate(turn.outputs):
            added.append(
                ToolMessage(output, tool_call_id=f"call_{number}_{k}", id=f"tool_{number}_{k}")
            )
        self.history += added
        return added

    def fit(self) -> list[Any]:
        from langchain_core.messages import trim_messages
        from langchain_core.messages.utils import count_tokens_approximately

        trimmed: list[Any] = trim_messages(
            self.history,
            max_tokens=self.max_tokens,
            token_counter=count_tokens_approximately,
            strategy="last",
            include_system=True,
            start_on=("human", "ai"),
            allow_partial=False,
        )
        return trimmed


class MiddlewarePeer:
    """LangChain's SummarizationMiddleware on its own agent state, before every turn."""

    def __init__(self, max_input_tokens: int) -> None:
        from langchain.agents.middleware.summarization import SummarizationMiddleware
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import HumanMessage

        # Never called: the summarizer hook returns the stand-in; the model lends its profile.
        model = GenericFakeChatModel(
            messages=iter(()), profile={"max_input_tokens": max_input_tokens}
        )
        self.middleware = SummarizationMiddleware(
            model,
            trigger=("fraction", MIDDLEWARE_TRIGGER_FRACTION),
            summarizer=lambda messages: STAND_IN_SUMMARY,
        )
        # The system prompt stays outside the state, as langchain's create_agent keeps it.
        self.state: list[Any] = [HumanMessage(TASK, id="task")]

    def add(self, messages: list[Any]) -> None:
        self.state += messages

    def step(self) -> tuple[float, bool]:
        """One before_model call: CPU seconds, and whether it summarized."""
        started = time.thread_time()
        # before_model reads only the state; the runtime argument is unused by this middleware.
        update = self.middleware.before_model({"messages": self.state}, None)  # type: ignore[arg-type]
        if update is not None:
            self.state = list(update["messages"][1:])  # after RemoveMessage(all)
        return time.thread_time() - started, update is not None


class GcClock:
    """CPU time spent in garbage collections, read before and after a timed call."""

    def __init__(self) -> None:
        self.spent = 0.0
        self.collections = 0
        self._started = 0.0

    def __enter__(self) -> GcClock:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            self.spent += time.thread_time() - self._started
            self.collections += 1


def _args(arguments: str) -> dict[str, Any]:
    try:
        value: Any = json.loads(arguments)
    except ValueError:
        return {"input": arguments}
    return value if isinstance(value, dict) else {"input": value}


# --------------------------------------------------------------------------------------------------
# the engine under test
# --------------------------------------------------------------------------------------------------


@dataclass
class Bucket:
    """Timings taken after one checkpoint."""

    history: int
    steady: list[float] = field(default_factory=list)
    steady_gc: list[float] = field(default_factory=list)
    """CPU seconds of garbage collection inside each steady turn (same order as ``steady``)."""
    compaction: list[float] = field(default_factory=list)
    views: list[int] = field(default_factory=list)
    peer: list[float] = field(default_factory=list)
    middleware: list[float] = field(default_factory=list)
    middleware_compaction: list[float] = field(default_factory=list)
    profile: dict[str, float] = field(default_factory=dict)
    """Own CPU seconds per steady turn by function, under cProfile (after the timed turns)."""
    slow: list[str] = field(default_factory=list)
    """Where the slowest profiled steady turns spent their time, one line each."""

    def record(self, request: PreparedRequest, spent: float, collected: float) -> None:
        """One measured turn of the engine: its CPU seconds, GC seconds and view length."""
        if is_compaction(request):
            self.compaction.append(spent)
        else:
            self.steady.append(spent)
            self.steady_gc.append(collected)
        self.views.append(len(request.messages))


def open_engine(folder: Path) -> ContextEngine:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # this machine's SQLite warns about the WAL-reset bug
        return ContextEngine(
            MODEL, store=folder / "sessions.db", policy=ContextPolicy(background=False)
        )


def agent_turn(
    session: Session,
    number: int,
    turn: Turn,
    clock: GcClock | None = None,
    profiler: cProfile.Profile | None = None,
) -> tuple[PreparedRequest, float, float]:
    """One turn through the engine; returns the request, the CPU seconds of prepare(), and the
    seconds of garbage collection inside it (when a ``clock`` is given). With a ``profiler``,
    prepare() runs under it."""
    collected = clock.spent if clock else 0.0
    started = time.thread_time()
    if profiler is not None:
        profiler.enable()
    request = session.prepare(system=SYSTEM)
    if profiler is not None:
        profiler.disable()
    spent = time.thread_time() - started
    collected = (clock.spent - collected) if clock else 0.0
    calls = [
        ToolCallPart(f"call_{number}_{k}", name, arguments)
        for k, (name, arguments) in enumerate(turn.calls)
    ]
    reply = Message.assistant(turn.text, calls)
    usage = Usage(request.tokens, max(1, len(turn.text) // 4))
    session.add_assistant(ChatResponse(reply, usage))
    for call, output in zip(calls, turn.outputs, strict=True):
        session.add_tool_result(call.call_id, output, name=call.name)
    return request, spent, collected


def is_compaction(request: PreparedRequest) -> bool:
    return request.compaction is not None


def small_sessions(bucket: Bucket, turns: list[Turn], sessions: int) -> None:
    """Time ``sessions`` more fresh sessions at ``bucket``'s history length (each from its own
    place in the corpus), adding their steady and compaction turns to ``bucket``."""
    for k in range(sessions):
        start = (k + 1) * len(turns) // (sessions + 1)
        rotated = turns[start:] + turns[:start]
        with tempfile.TemporaryDirectory() as folder, GcClock() as clock:
            engine = open_engine(Path(folder))
            session = engine.new_session(title=f"engine overhead, small session {k}")
            session.add_user(TASK)
            history, measured = 1, 0
            for number, turn in endless(rotated):
                in_bucket = history >= bucket.history
                request, spent, collected = agent_turn(session, number, turn, clock)
                history += 1 + len(turn.outputs)
                if not in_bucket:
                    continue
                bucket.record(request, spent, collected)
                measured += 1
                if measured >= MEASURED_TURNS[bucket.history]:
                    break
            engine.close()


def run(checkpoints: tuple[int, ...], turns: list[Turn], quick: bool = False) -> list[Bucket]:
    """Grow one session through the checkpoints, timing the turns after each."""
    buckets = [Bucket(n) for n in checkpoints]
    with tempfile.TemporaryDirectory() as folder, GcClock() as clock:
        engine = open_engine(Path(folder))
        session = engine.new_session(title="engine overhead")
        session.add_user(TASK)
        window = engine.effective_window - engine.counter.count_text(SYSTEM)
        peer = Peer(window)
        middleware = MiddlewarePeer(window)
        peer.fit()  # warm-up: the first call imports and builds what later calls reuse
        history = 1
        stream = endless(turns)
        for index, bucket in enumerate(buckets):
            limit = checkpoints[index + 1] if index + 1 < len(checkpoints) else None
            wanted = QUICK_TURNS if quick else MEASURED_TURNS[bucket.history]
            measured = 0
            for number, turn in stream:
                in_bucket = history >= bucket.history
                request, spent, collected = agent_turn(session, number, turn, clock)
                middleware.add(peer.add(number, turn))
                # The stateful peer must see every turn, measured or not, to keep its state.
                peer_spent, summarized = middleware.step()
                history += 1 + len(turn.outputs)
                if not in_bucket:
                    continue
                bucket.record(request, spent, collected)
                (bucket.middleware_compaction if summarized else bucket.middleware).append(
                    peer_spent
                )
                if len(bucket.peer) < min(wanted, PEER_SAMPLES[bucket.history]):
                    started = time.thread_time()
                    peer.fit()
                    bucket.peer.append(time.thread_time() - started)
                measured += 1
                if measured >= wanted or (limit is not None and history >= limit):
                    break
            # Profiled turns come after the timed ones: the profiler would distort the timing.
            stats: pstats.Stats | None = None
            profiled: list[tuple[float, cProfile.Profile]] = []
            for _ in range(QUICK_PROFILE_TURNS if quick else MEASURED_TURNS[bucket.history]):
                number, turn = next(stream)
                profiler = cProfile.Profile()
                request, spent, _ = agent_turn(session, number, turn, profiler=profiler)
                middleware.add(peer.add(number, turn))
                middleware.step()
                history += 1 + len(turn.outputs)
                if not is_compaction(request):
                    profiled.append((spent, profiler))
                    stats = pstats.Stats(profiler) if stats is None else stats.add(profiler)
            bucket.profile = _own_times(stats, len(profiled))
            profiled.sort(key=lambda item: item[0], reverse=True)
            slowest = profiled[: max(1, len(profiled) // 100)]
            bucket.slow = [_breakdown(spent, profiler) for spent, profiler in slowest]
            if index == 0 and not quick:
                small_sessions(bucket, turns, SMALL_SESSIONS - 1)
            print(f"  {history:>7,} messages: {_row(bucket)}", flush=True)
        engine.close()
    return buckets


def _own_times(stats: pstats.Stats | None, turns: int) -> dict[str, float]:
    """Own (not cumulative) seconds per turn of each profiled function."""
    if stats is None or not turns:
        return {}
    table: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = stats.stats  # type: ignore[attr-defined]
    out: dict[str, float] = {}
    for (path, line, name), (_, _, own, _, _) in table.items():
        where = f"{Path(path).name}:{line}({name})" if line else name
        out[where] = out.get(where, 0.0) + own / turns
    return out


def _breakdown(spent: float, profiler: cProfile.Profile) -> str:
    """One profiled turn in a line: its time, the step of ``prepare`` that took most of it, and
    the function with the most own time."""
    table: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = pstats.Stats(
        profiler
    ).stats  # type: ignore[attr-defined]

    def name(key: tuple[str, int, str]) -> str:
        return f"{Path(key[0]).name}:{key[1]}({key[2]})" if key[1] else key[2]

    parent = next((k for k in table if k[2] == "_prepare"), None)
    steps = [
        (callers[parent][3], key)
        for key, (_, _, _, _, callers) in table.items()
        if parent is not None and parent in callers
    ]
    own = max(table.items(), key=lambda item: item[1][2])
    line = f"{spent * 1000:.1f} ms"
    if steps:
        step_time, step = max(steps)
        line += f", {step_time * 1000:.1f} ms of it in `{name(step)}`"
    return line + f" (most own time: `{name(own[0])}`, {own[1][2] * 1000:.1f} ms)"


def peak_memory(history: int, turns: list[Turn]) -> tuple[float, int]:
    """Peak traced MiB of a session grown to ``history`` messages, and its final view length."""
    with tempfile.TemporaryDirectory() as folder:
        tracemalloc.start()
        engine = open_engine(Path(folder))
        session = engine.new_session(title="engine memory")
        session.add_user(TASK)
        count = 1
        for number, turn in endless(turns):
            agent_turn(session, number, turn)
            count += 1 + len(turn.outputs)
            if count >= history:
                break
        view = len(session.view)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        engine.close()
    return peak / MIB, view


# --------------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------------


def _ms(values: list[float], q: float) -> str:
    return f"{percentile(values, q) * 1000:.2f}" if values else "–"


def _without_gc(bucket: Bucket) -> list[float]:
    return [spent - gc_time for spent, gc_time in zip(bucket.steady, bucket.steady_gc, strict=True)]


def _row(bucket: Bucket) -> list[object]:
    steady = percentile(bucket.steady, 50)
    peers = [percentile(v, 50) for v in (bucket.peer, bucket.middleware) if v]
    best = min(peers) if peers else 0.0
    return [
        f"{bucket.history:,}",
        f"{statistics.median(bucket.views):,.0f}" if bucket.views else "–",
        len(bucket.steady),
        _ms(bucket.steady, 50),
        _ms(bucket.steady, 99),
        _ms(_without_gc(bucket), 99),
        f"{len(bucket.compaction)}: {_ms(bucket.compaction, 50)} / {_ms(bucket.compaction, 99)}",
        f"{_ms(bucket.peer, 50)} / {_ms(bucket.peer, 99)}",
        f"{_ms(bucket.middleware, 50)} / {_ms(bucket.middleware, 99)}",
        f"{len(bucket.middleware_compaction)}: {_ms(bucket.middleware_compaction, 50)}",
        f"{best / steady:.1f}x" if steady and best else "–",
    ]


HEADERS = [
    "history (messages)",
    "view (messages, median)",
    "steady turns",
    "steady p50 ms",
    "steady p99 ms",
    "steady p99 ms, GC time left out",
    "compaction turns: p50 / p99 ms",
    "trim_messages p50 / p99 ms",
    "SummarizationMiddleware steady p50 / p99 ms",
    "its summarizing turns: p50 ms",
    "best peer ÷ our steady turn (p50)",
]


def _spread(values: Sequence[float]) -> float:
    return max(values) / min(values) if values and min(values) > 0 else float("inf")


def _flatness_diagnosis(buckets: list[Bucket]) -> str:
    """What makes the steady p99 differ between history lengths, from this run's measurements:
    the view each checkpoint held, and how much of its slowest turns was garbage collection."""
    timed = [b for b in buckets if b.steady]
    low = min(timed, key=lambda b: percentile(b.steady, 99))
    high = max(timed, key=lambda b: percentile(b.steady, 99))
    tail = sorted(
        zip(high.steady, high.steady_gc, strict=True), key=lambda pair: pair[0], reverse=True
    )[: max(1, len(high.steady) // 100)]
    with_gc = [g for _, g in tail if g > 0]
    no_gc = _spread([percentile(_without_gc(b), 99) for b in timed])
    gc_note = (
        f"{len(with_gc)} of its {len(tail)} slowest steady turns ran a garbage collection "
        f"({statistics.mean(with_gc) * 1000:.2f} ms on average)"
        if with_gc
        else f"none of its {len(tail)} slowest steady turns ran a garbage collection"
    )
    growth = sorted(
        ((high.profile.get(k, 0.0) - low.profile.get(k, 0.0), k) for k in high.profile),
        reverse=True,
    )[:3]
    grown = ", ".join(
        f"`{k}` {low.profile.get(k, 0.0) * 1000:.3f} → {high.profile[k] * 1000:.3f} ms"
        for d, k in growth
        if d > 0
    )
    profile_note = (
        f"; profiled (cProfile, own time per steady turn, {low.history:,} → {high.history:,} "
        f"messages), the most grown functions: {grown}"
        if grown
        else ""
    )
    slow_note = (
        "; the slowest profiled steady turns there (cProfile inflates times): "
        + "; ".join(high.slow)
        if high.slow
        else ""
    )
    return (
        f"the p99 is highest at {high.history:,} messages ({_ms(high.steady, 99)} ms, view "
        f"{statistics.median(high.views):,.0f} messages) and lowest at {low.history:,} "
        f"({_ms(low.steady, 99)} ms, view {statistics.median(low.views):,.0f} messages){slow_note}"
        f"; steady turns also have parts that walk the whole view, so they follow its size "
        f"(not the history's){profile_note}; {gc_note}; with collection time left out the "
        f"spread is {no_gc:.2f}x"
    )


def judge(
    buckets: list[Bucket], memory_mib: float, memory_at: int
) -> tuple[list[dict[str, object]], list[str]]:
    """Scoreboard rows for the three targets, and the same verdicts as lines for the section."""
    p99s = [percentile(b.steady, 99) for b in buckets if b.steady]
    spread = _spread(p99s)
    bounded = [percentile(b.steady, 99) for b in buckets if b.steady and b.history >= 1_000]
    p50s = [percentile(b.steady, 50) * 1000 for b in buckets if b.steady]
    at = next((b for b in buckets if b.history == 10_000), buckets[-1])
    where = f"{at.history:,} messages"
    ours = percentile(at.steady, 50)
    trim = percentile(at.peer, 50)
    middleware = percentile(at.middleware, 50)
    ratio = trim / ours if ours else 0.0
    versus_peer = (
        f"trim_messages {trim * 1000:.2f} ms ({ratio:.0f}x ours); SummarizationMiddleware "
        f"{middleware * 1000:.2f} ms ({middleware / ours:.1f}x ours)"
        if ours
        else ""
    )
    flat = spread <= 2
    middleware_p99s = [percentile(b.middleware, 99) for b in buckets if b.middleware]
    peer_p99s = (
        f"trim_messages p99 {_ms(buckets[0].peer, 99)} → {_ms(buckets[-1].peer, 99)} ms; "
        f"SummarizationMiddleware p99 {_ms(buckets[0].middleware, 99)} → "
        f"{_ms(buckets[-1].middleware, 99)} ms ({_spread(middleware_p99s):.2f}x)"
    )
    rows = [
        target(
            "engine overhead",
            f"steady-turn p99 flat in history length (max/min ≤ 2, {buckets[0].history:,} → "
            f"{buckets[-1].history:,} messages)",
            f"{spread:.2f}x ({_spread(bounded):.2f}x from 1k messages on; p99 "
            f"{min(p99s) * 1000:.2f}–{max(p99s) * 1000:.2f} ms, p50 {min(p50s):.2f}–"
            f"{max(p50s):.2f} ms)",
            flat,
            versus=peer_p99s,
            held_back="" if flat else _flatness_diagnosis(buckets),
        ),
        target(
            "engine overhead",
            f"steady turn ≥ 10x cheaper than trim_messages at {where} (p50)",
            f"{ours * 1000:.2f} ms, {ratio:.0f}x cheaper",
            ratio >= 10,
            versus=versus_peer,
            held_back="" if ratio >= 10 else f"trim_messages costs {trim * 1000:.2f} ms here",
        ),
        target(
            "engine overhead",
            f"< 50 MiB at {memory_at:,} messages",
            f"{memory_mib:.1f} MiB peak (traced Python allocations)",
            memory_mib < 50,
            held_back="" if memory_mib < 50 else "see the peak memory line of the section",
        ),
    ]
    lines = [
        f"- {r['target']}: {r['measured']} — {'met' if r['met'] else '**not met**'}."
        + (f" What holds it back: {r['held_back']}." if r["held_back"] else "")
        for r in rows
    ]
    return rows, lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = benchmark_arguments(__doc__.splitlines()[0])
    args = parser.parse_args(argv)
    checkpoints = QUICK_CHECKPOINTS if args.quick else CHECKPOINTS
    memory_at = QUICK_MEMORY_AT if args.quick else MEMORY_AT
    turns, source = corpus_turns()
    print(f"engine overhead: {source}; checkpoints {', '.join(f'{c:,}' for c in checkpoints)}")
    buckets = run(checkpoints, turns, quick=args.quick)
    memory, view = peak_memory(memory_at, turns)
    table = markdown_table(HEADERS, [_row(b) for b in buckets])
    rows, lines = judge(buckets, memory, memory_at)
    print(table)
    print(f"peak memory at {memory_at:,} messages: {memory:.1f} MiB (view {view:,} messages)")
    print("\n".join(lines))
    if not should_write(args):
        return
    body = (
        f"{MODEL} (200k window), SQLite store in a temporary folder, background compaction off; "
        f"{source}. CPU time of `prepare()` per turn on the turns right after each history "
        f"length (400 at each: at 100 messages, 50 in each of {SMALL_SESSIONS} sessions; the "
        "view stays bounded by the window while the transcript grows). Peers, the same history "
        "each turn: "
        "`trim_messages(strategy='last', token_counter=count_tokens_approximately)` over the "
        "whole history (timed on 50, 50, 30 and 8 turns), and `SummarizationMiddleware."
        "before_model` on its own state (trigger at 80 % of the window, its default keep of 20 "
        "messages, a fixed stand-in summary, so its summarizing turns time only its cutoff "
        "logic; timed on every measured turn). Garbage-collection time inside each turn is "
        "measured through `gc.callbacks`.\n\n"
        f"{table}\n\nPeak traced memory of a session grown to {memory_at:,} messages: "
        f"{memory:.1f} MiB (view {view:,} messages).\n\n" + "\n".join(lines)
    )
    write_section("engine_overhead", "Engine overhead per turn (prepare)", body, quick=args.quick)
    figures = {
        f"{b.history}": {
            "steady_p50_ms": percentile(b.steady, 50) * 1000,
            "steady_p99_ms": percentile(b.steady, 99) * 1000,
            "trim_p50_ms": percentile(b.peer, 50) * 1000,
            "middleware_p50_ms": percentile(b.middleware, 50) * 1000,
        }
        for b in buckets
    }
    figures["memory_mib"] = {"peak": memory, "history": memory_at}
    record_targets("engine_overhead", rows, figures, quick=args.quick)


if __name__ == "__main__":
    main()
