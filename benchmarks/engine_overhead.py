"""What ``Session.prepare()`` costs per turn as the history grows, beside LangChain's trimming.

One agent session grows turn by turn (prepare, reply with usage, tool outputs) through a
200k-token Claude window, with turns taken from the shared DeepSeek trajectories (synthetic
turns when ``../shared`` is absent). ``prepare()`` is timed in CPU time (``time.thread_time``;
background compaction is off so every compaction runs in the timed thread) on the turns right
after the history reaches 100, 1k, 10k and 100k messages (``--quick``: 100 and 1k), 400 turns
each (at 100 messages: 50 turns in each of 8 sessions, so one session stays near 100). A turn
on which the engine masked or compacted is a *compaction turn*; the others are *steady turns*
(a mask batch planned and then declined stays a steady turn: the agent waits for it).

The rest of the engine's work in a turn, adding the reply and its tool results
(``add_assistant``, ``add_tool_result``: redaction, token counts, the store's writes, the state
saved once a turn), is timed too, right after each ``prepare()``. Work an engine moved out of
``prepare()`` into message arrival would otherwise vanish from the figures: the compaction
targets read whole turns (adds included), and the totals target must hold both ways.

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

Side by side: the steady turns are timed a second time, one turn at each history length in
turn (:func:`side_by_side`: a session held at each length, the short ones in fresh sessions).
Timed one length after another, each length meets the machine at a different moment (its load,
the other work on its cores): on a shared machine, a young session timed in the first minute and
a grown one timed later differed by 1.5-2x, while the same sessions timed turn about differed by
under 1.1x. The flatness target reads the side-by-side turns.

Garbage collection: Python's cyclic collector runs when allocations pile up, inside whichever
call happens to allocate; its passes over the older generations cost more as the process holds
more objects. The time each turn spent in collections is recorded (``gc.callbacks``), so the
verdict can say how much of the slowest turns is the collector rather than the engine.

Peak memory: a separate run to 10k messages under ``tracemalloc`` (Python allocations: the
engine, its view and caches; SQLite's own page cache is not counted).

The floor: rendering the same request into what is sent, the Anthropic Messages API payload
(``request.to_anthropic(model=...)``: system blocks, tools, every message of the view), timed
right after each ``prepare()`` in the same run. No agent sends a request without rendering it,
whatever manages its context, so a steady turn is judged against what rendering that very request
costs.

Targets (issue 28), each a ratio within this run:

- steady ``prepare()`` at 10k messages: p50 at most 2x the render floor, and at least 2x faster
  than ``SummarizationMiddleware.before_model`` on the same history;
- steady p99 flat in history length: max/min at most 1.5 over the history lengths, garbage
  collection included, timed side by side;
- a compaction turn at 10k messages, its adds included, at most 25 % of one ``trim_messages``
  call on the same history (p50);
- over the whole run, compaction turns cost no more in total than steady turns, both in
  ``prepare()`` alone and in whole turns;
- at 10k messages, a steady turn at least 10x cheaper than ``trim_messages``; under 50 MiB.

Run: ``python -m benchmarks.engine_overhead [--quick] [--write] [--histories 100,1000,10000]
[--transcripts DIR]`` (quick: histories of 100 and 1k messages, memory at 1k, nothing written
unless ``--write``; ``--transcripts``: a folder of agent transcripts in any format
:mod:`contextfold.transcripts` reads, in place of the shared DeepSeek trajectories).
"""

from __future__ import annotations

import argparse
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
from collections.abc import Generator, Iterator, Sequence
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
WIRE_MODEL = "claude-sonnet-4-5"
"""The model named in the rendered payload (the floor)."""
SYSTEM = (
    "You are a helpful assistant that can interact with a computer shell to solve programming "
    "tasks. Work in small steps, read before you edit, and run the tests after every change."
)
TASK = "Consider the following PR description and make the minimal change that resolves it."
CHECKPOINTS = (100, 1_000, 10_000, 100_000)
TURNS_PER_HISTORY = 400
"""Turns timed after each checkpoint (about two messages each: 1k → 1.8k...)."""
SMALL_HISTORY = 300
"""A first checkpoint at most this long is timed in :data:`SMALL_SESSIONS` sessions of 50 turns
each (more would carry one session far past it), so its p99 is over 400 turns like the others'
and not the maximum of 50."""
SMALL_SESSIONS = 8


def measured_turns(history: int) -> int:
    """Turns timed in each session at ``history`` messages."""
    return TURNS_PER_HISTORY // SMALL_SESSIONS if history <= SMALL_HISTORY else TURNS_PER_HISTORY


def peer_samples(history: int) -> int:
    """trim_messages calls timed at ``history`` messages (each one walks the whole history)."""
    return 50 if history <= 1_000 else 30 if history <= 10_000 else 8


QUICK_CHECKPOINTS = (100, 1_000)
QUICK_TURNS = 60
"""Turns timed per checkpoint in ``--quick`` mode (a check that the script runs, not a figure)."""
QUICK_PROFILE_TURNS = 10
"""Turns profiled (cProfile) after each checkpoint's timed turns, for the diagnosis: as many as
were timed (:func:`measured_turns`), so the profile sees the rare slow turns as often as the
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


def corpus_turns(folder: Path | None = None) -> tuple[list[Turn], str]:
    """Turns from ``folder`` (default: the DeepSeek trajectories), or synthetic ones when it is
    absent or holds no tool calls; and where they came from."""
    folder = folder or TRAJECTORIES / "mini-swe-agent-deepseek"
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
            return turns, f"{len(turns):,} turns of the transcripts in `{folder.name}`"
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
    floor: list[float] = field(default_factory=list)
    """CPU seconds of rendering each steady turn's request (same order as ``steady``)."""
    compaction: list[float] = field(default_factory=list)
    steady_added: list[float] = field(default_factory=list)
    """CPU seconds of each steady turn's adds (same order as ``steady``)."""
    compaction_added: list[float] = field(default_factory=list)
    """CPU seconds of each compaction turn's adds (same order as ``compaction``)."""
    views: list[int] = field(default_factory=list)
    peer: list[float] = field(default_factory=list)
    middleware: list[float] = field(default_factory=list)
    middleware_compaction: list[float] = field(default_factory=list)
    profile: dict[str, float] = field(default_factory=dict)
    """Own CPU seconds per steady turn by function, under cProfile (after the timed turns)."""
    slow: list[str] = field(default_factory=list)
    """Where the slowest profiled steady turns spent their time, one line each."""
    compaction_steps: dict[str, float] = field(default_factory=dict)
    """Cumulative CPU seconds per compaction turn in each step of :data:`COMPACTION_STEPS`,
    and in the whole ``prepare()`` (key ``""``), under cProfile (after the timed turns)."""
    compaction_profiled: int = 0
    side: list[float] = field(default_factory=list)
    """CPU seconds of the steady turns timed side by side with the other history lengths
    (:func:`side_by_side`), garbage collection included."""
    side_gc: list[float] = field(default_factory=list)
    """CPU seconds of garbage collection inside each of ``side`` (same order)."""

    def record(self, timed: Timed) -> None:
        """One measured turn of the engine: its CPU seconds, GC and floor seconds, view."""
        if is_compaction(timed.request):
            self.compaction.append(timed.spent)
            self.compaction_added.append(timed.added)
        else:
            self.steady.append(timed.spent)
            self.steady_gc.append(timed.collected)
            self.floor.append(timed.rendered)
            self.steady_added.append(timed.added)
        self.views.append(len(timed.request.messages))

    def whole_compaction(self) -> list[float]:
        """CPU seconds of each compaction turn, its adds included."""
        return [a + b for a, b in zip(self.compaction, self.compaction_added, strict=True)]


@dataclass
class Totals:
    """CPU seconds of every turn of the grown session, measured or not, by kind: whether
    compaction turns cost more in total than steady ones over the whole run. ``steady`` and
    ``compaction`` are ``prepare()``'s; the ``_added`` ones the same turns' adds."""

    steady: float = 0.0
    compaction: float = 0.0
    steady_turns: int = 0
    compaction_turns: int = 0
    steady_added: float = 0.0
    compaction_added: float = 0.0

    def add(self, timed: Timed) -> None:
        if is_compaction(timed.request):
            self.compaction += timed.spent
            self.compaction_added += timed.added
            self.compaction_turns += 1
        else:
            self.steady += timed.spent
            self.steady_added += timed.added
            self.steady_turns += 1

    def whole(self) -> tuple[float, float]:
        """CPU seconds of the compaction turns and of the steady turns, adds included."""
        return self.compaction + self.compaction_added, self.steady + self.steady_added

    def cheaper_compaction(self) -> bool:
        """Compaction turns cost no more in total than steady turns, read both ways: their
        ``prepare()`` alone, and the whole turns. Either alone could be met by moving work
        between ``prepare()`` and the adds."""
        compaction, steady = self.whole()
        return self.compaction <= self.steady and compaction <= steady


@dataclass(frozen=True)
class Timed:
    """One turn through the engine: the request, and the CPU seconds of ``prepare()``, of the
    garbage collections inside it, of rendering the request it returned (the floor), and of
    adding the reply and its tool results (``added``: ``add_assistant`` and
    ``add_tool_result``, the rest of the engine's work in the turn)."""

    request: PreparedRequest
    spent: float
    collected: float = 0.0
    rendered: float = 0.0
    added: float = 0.0

    @property
    def whole(self) -> float:
        """The engine's CPU seconds in the whole turn: ``prepare()`` and the adds."""
        return self.spent + self.added


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
) -> Timed:
    """One turn through the engine: the request, the CPU seconds of prepare(), of the garbage
    collection inside it (with a ``clock``), of rendering its request (the floor) and of adding
    the reply and its tool results. With a ``profiler``, prepare() runs under it."""
    collected = clock.spent if clock else 0.0
    started = time.thread_time()
    if profiler is not None:
        profiler.enable()
    request = session.prepare(system=SYSTEM)
    if profiler is not None:
        profiler.disable()
    spent = time.thread_time() - started
    collected = (clock.spent - collected) if clock else 0.0
    started = time.thread_time()
    request.to_anthropic(model=WIRE_MODEL)
    rendered = time.thread_time() - started
    calls = [
        ToolCallPart(f"call_{number}_{k}", name, arguments)
        for k, (name, arguments) in enumerate(turn.calls)
    ]
    reply = Message.assistant(turn.text, calls)
    usage = Usage(request.tokens, max(1, len(turn.text) // 4))
    started = time.thread_time()
    session.add_assistant(ChatResponse(reply, usage))
    for call, output in zip(calls, turn.outputs, strict=True):
        session.add_tool_result(call.call_id, output, name=call.name)
    added = time.thread_time() - started
    return Timed(request, spent, collected, rendered, added)


def is_compaction(request: PreparedRequest) -> bool:
    return request.compaction is not None


def grown_session(
    folder: Path, history: int, turns: list[Turn], start: int = 0
) -> tuple[ContextEngine, Session, Iterator[tuple[int, Turn]]]:
    """A new session in ``folder`` grown to ``history`` messages with the corpus's turns from
    ``start`` on, and the turns that follow."""
    folder.mkdir(parents=True, exist_ok=True)
    engine = open_engine(folder)
    session = engine.new_session(title=f"engine overhead at {history:,} messages")
    session.add_user(TASK)
    stream = endless(turns[start:] + turns[:start])
    count = 1
    while count < history:
        number, turn = next(stream)
        agent_turn(session, number, turn)
        count += 1 + len(turn.outputs)
    return engine, session, stream


def lane(
    folder: Path,
    history: int,
    turns: list[Turn],
    sessions: int,
    clock: GcClock | None = None,
) -> Generator[Timed, None, None]:
    """Timed turns of sessions held near ``history`` messages: ``sessions`` new sessions, each
    grown to it from its own place in the corpus, :func:`measured_turns` turns each, one after
    another (the last one goes on as long as it is asked)."""
    for k in range(sessions):
        engine, session, stream = grown_session(
            folder / f"{history}-{k}", history, turns, (k + 1) * len(turns) // (sessions + 1)
        )
        try:
            for taken, (number, turn) in enumerate(stream):
                if taken >= measured_turns(history) and k < sessions - 1:
                    break
                yield agent_turn(session, number, turn, clock)
        finally:
            engine.close()


def small_sessions(bucket: Bucket, turns: list[Turn], sessions: int) -> None:
    """Time ``sessions`` more fresh sessions at ``bucket``'s history length (each from its own
    place in the corpus), adding their steady and compaction turns to ``bucket``."""
    with tempfile.TemporaryDirectory() as folder, GcClock() as clock:
        timed = lane(Path(folder), bucket.history, turns, sessions, clock)
        for turn in itertools.islice(timed, sessions * measured_turns(bucket.history)):
            bucket.record(turn)
        timed.close()


def side_by_side(
    buckets: list[Bucket],
    turns: list[Turn],
    grown: Generator[Timed, None, None],
    folder: Path,
    clock: GcClock,
    quick: bool = False,
) -> None:
    """Time steady turns at every history length again, one turn at each in turn, into each
    bucket's ``side``: taken one length after another, each length's turns meet the machine at
    a different moment (its load, the other work on its cores), and the p99s compared across
    lengths would carry that drift; side by side, every length meets the same moments. The
    last length's turns are ``grown``'s (the session :func:`run` grew); each other length gets
    a session of its own, grown to it, and the short ones fresh sessions as they grow past
    (:func:`lane`)."""
    lanes = [
        lane(folder, b.history, turns, SMALL_SESSIONS if b.history <= SMALL_HISTORY else 1, clock)
        for b in buckets[:-1]
    ]
    lanes.append(grown)
    wanted = QUICK_TURNS if quick else TURNS_PER_HISTORY
    try:
        for _ in range(wanted):
            for bucket, timed_turns in zip(buckets, lanes, strict=True):
                timed = next(timed_turns)
                if not is_compaction(timed.request):
                    bucket.side.append(timed.spent)
                    bucket.side_gc.append(timed.collected)
    finally:
        for timed_turns in lanes:
            timed_turns.close()


def run(
    checkpoints: tuple[int, ...], turns: list[Turn], quick: bool = False
) -> tuple[list[Bucket], Totals]:
    """Grow one session through the checkpoints, timing the turns after each; and the CPU
    seconds of every turn of that session by kind."""
    buckets = [Bucket(n) for n in checkpoints]
    totals = Totals()
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
            wanted = QUICK_TURNS if quick else measured_turns(bucket.history)
            measured = 0
            for number, turn in stream:
                in_bucket = history >= bucket.history
                timed = agent_turn(session, number, turn, clock)
                totals.add(timed)
                middleware.add(peer.add(number, turn))
                # The stateful peer must see every turn, measured or not, to keep its state.
                peer_spent, summarized = middleware.step()
                history += 1 + len(turn.outputs)
                if not in_bucket:
                    continue
                bucket.record(timed)
                (bucket.middleware_compaction if summarized else bucket.middleware).append(
                    peer_spent
                )
                if len(bucket.peer) < min(wanted, peer_samples(bucket.history)):
                    started = time.thread_time()
                    peer.fit()
                    bucket.peer.append(time.thread_time() - started)
                measured += 1
                if measured >= wanted or (limit is not None and history >= limit):
                    break
            # Profiled turns come after the timed ones: the profiler would distort the timing.
            stats: pstats.Stats | None = None
            compactions: pstats.Stats | None = None
            profiled: list[tuple[float, cProfile.Profile]] = []
            for _ in range(QUICK_PROFILE_TURNS if quick else measured_turns(bucket.history)):
                number, turn = next(stream)
                profiler = cProfile.Profile()
                timed = agent_turn(session, number, turn, profiler=profiler)
                middleware.add(peer.add(number, turn))
                middleware.step()
                history += 1 + len(turn.outputs)
                if not is_compaction(timed.request):
                    profiled.append((timed.spent, profiler))
                    stats = pstats.Stats(profiler) if stats is None else stats.add(profiler)
                else:
                    bucket.compaction_profiled += 1
                    compactions = (
                        pstats.Stats(profiler) if compactions is None else compactions.add(profiler)
                    )
            bucket.profile = _own_times(stats, len(profiled))
            bucket.compaction_steps = _step_times(compactions, bucket.compaction_profiled)
            profiled.sort(key=lambda item: item[0], reverse=True)
            slowest = profiled[: max(1, len(profiled) // 100)]
            bucket.slow = [_breakdown(spent, profiler) for spent, profiler in slowest]
            if index == 0 and not quick and bucket.history <= SMALL_HISTORY:
                small_sessions(bucket, turns, SMALL_SESSIONS - 1)
            print(f"  {history:>7,} messages: {_row(bucket)}", flush=True)
        grown = (agent_turn(session, number, turn, clock) for number, turn in stream)
        side_by_side(buckets, turns, grown, Path(folder) / "side", clock, quick)
        engine.close()
    return buckets, totals


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


COMPACTION_STEPS: tuple[tuple[str, str, str], ...] = (
    ("_turn.py", "prepare", ""),
    ("_state.py", "accounted", "the ledger and the loss report (`TurnState.accounted`)"),
    (
        "_fact_index.py",
        "hold",
        "of it, searching new texts for every known fact (`FactIndex.hold`)",
    ),
    ("pipeline.py", "compact", "the strategies (`Compactor.compact`)"),
    ("_compact.py", "_take_edits", "the new view, its edits and snapshot (`_take_edits`)"),
    ("_writer.py", "save_state", "the state (`save_state`)"),
    ("_core.py", "emit", "events, stored (`emit`)"),
)
"""The steps of a compaction turn whose share the benchmark reports: (file, function, what)."""


def _step_times(stats: pstats.Stats | None, turns: int) -> dict[str, float]:
    """Cumulative seconds per turn of each of :data:`COMPACTION_STEPS` (none recurses)."""
    if stats is None or not turns:
        return {}
    table: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = stats.stats  # type: ignore[attr-defined]
    out: dict[str, float] = {}
    for path, name, what in COMPACTION_STEPS:
        out[what] = sum(
            cumulative / turns
            for (file, _, function), (_, _, _, cumulative, _) in table.items()
            if function == name and Path(file).name == path
        )
    return out


def _compaction_diagnosis(bucket: Bucket, totals: Totals | None = None) -> str:
    """Where a compaction turn's time goes at ``bucket`` (cProfile shares of ``prepare()``),
    and with ``totals``, how many steady turns one compaction turn costs."""
    steps = bucket.compaction_steps
    whole = steps.get("", 0.0)
    lines: list[str] = []
    if totals is not None and totals.compaction_turns and totals.steady_turns:
        each = totals.compaction / totals.compaction_turns
        steady = totals.steady / totals.steady_turns
        each_whole = totals.whole()[0] / totals.compaction_turns
        steady_whole = totals.whole()[1] / totals.steady_turns
        lines.append(
            f"in prepare(), one compaction turn ({each * 1000:.1f} ms on average) costs as much "
            f"as {each / steady:.0f} steady turns ({steady * 1000:.2f} ms); whole turns, "
            f"{each_whole * 1000:.1f} ms against {steady_whole * 1000:.2f} ms "
            f"({each_whole / steady_whole:.0f}); one turn in "
            f"{(totals.steady_turns + totals.compaction_turns) / totals.compaction_turns:.0f} "
            "compacts"
        )
    if not whole:
        return "; ".join(lines) or "no compaction turn was profiled there"
    shares = ", ".join(
        f"{what} {seconds / whole:.0%}" for what, seconds in steps.items() if what and seconds
    )
    lines.append(
        f"under cProfile ({bucket.compaction_profiled} compaction "
        f"turn{'' if bucket.compaction_profiled == 1 else 's'} at "
        f"{bucket.history:,} messages), a compaction turn's time goes to: {shares}"
    )
    return "; ".join(lines)


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
        engine, session, _ = grown_session(Path(folder), history, turns)
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


def _flat_turns(bucket: Bucket) -> tuple[list[float], list[float]]:
    """The steady turns the flatness target reads, and their collection times: those timed
    side by side (:func:`side_by_side`), or where there are none, those timed after the
    checkpoint."""
    return (bucket.side, bucket.side_gc) if bucket.side else (bucket.steady, bucket.steady_gc)


def _ratio(numerator: float, denominator: float, digits: int = 1) -> str:
    return f"{numerator / denominator:.{digits}f}x" if numerator and denominator else "–"


def _p50(values: list[float]) -> float:
    return percentile(values, 50) if values else 0.0


def _row(bucket: Bucket) -> list[object]:
    steady = _p50(bucket.steady)
    return [
        f"{bucket.history:,}",
        f"{statistics.median(bucket.views):,.0f}" if bucket.views else "–",
        len(bucket.steady),
        _ms(bucket.steady, 50),
        _ms(bucket.steady, 99),
        _ms(_without_gc(bucket), 99),
        f"{_ms(bucket.side, 50)} / {_ms(bucket.side, 99)}",
        _ms(bucket.floor, 50),
        _ratio(steady, _p50(bucket.floor), 2),
        _ms(bucket.steady_added, 50),
        f"{len(bucket.compaction)}: {_ms(bucket.compaction, 50)} / {_ms(bucket.compaction, 99)}",
        _ms(bucket.whole_compaction(), 50),
        f"{_ms(bucket.peer, 50)} / {_ms(bucket.peer, 99)}",
        f"{_ms(bucket.middleware, 50)} / {_ms(bucket.middleware, 99)}",
        f"{len(bucket.middleware_compaction)}: {_ms(bucket.middleware_compaction, 50)}",
        _ratio(_p50(bucket.middleware), steady),
        _ratio(_p50(bucket.whole_compaction()), _p50(bucket.peer), 2),
    ]


HEADERS = [
    "history (messages)",
    "view (messages, median)",
    "steady turns",
    "steady p50 ms",
    "steady p99 ms",
    "steady p99 ms, GC time left out",
    "steady p50 / p99 ms, side by side",
    "floor p50 ms (rendering the request)",
    "steady ÷ floor (p50)",
    "steady turn's adds p50 ms (reply and tool results)",
    "compaction turns: p50 / p99 ms",
    "compaction turn p50 ms, adds included",
    "trim_messages p50 / p99 ms",
    "SummarizationMiddleware steady p50 / p99 ms",
    "its summarizing turns: p50 ms",
    "SummarizationMiddleware ÷ our steady turn (p50)",
    "our compaction turn, adds included ÷ trim_messages (p50)",
]


def _spread(values: Sequence[float]) -> float:
    return max(values) / min(values) if values and min(values) > 0 else float("inf")


def _flatness_diagnosis(buckets: list[Bucket]) -> str:
    """What makes the steady p99 differ between history lengths, from this run's measurements:
    the view each checkpoint held, and how much of its slowest turns was garbage collection."""
    timed = [b for b in buckets if _flat_turns(b)[0]]
    low = min(timed, key=lambda b: percentile(_flat_turns(b)[0], 99))
    high = max(timed, key=lambda b: percentile(_flat_turns(b)[0], 99))
    spent, collected = _flat_turns(high)
    tail = sorted(zip(spent, collected, strict=True), key=lambda pair: pair[0], reverse=True)[
        : max(1, len(spent) // 100)
    ]
    with_gc = [g for _, g in tail if g > 0]
    no_gc = _spread(
        [percentile([t - g for t, g in zip(*_flat_turns(b), strict=True)], 99) for b in timed]
    )
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
        f"the p99 is highest at {high.history:,} messages ({_ms(spent, 99)} ms, view "
        f"{statistics.median(high.views):,.0f} messages) and lowest at {low.history:,} "
        f"({_ms(_flat_turns(low)[0], 99)} ms, view {statistics.median(low.views):,.0f} "
        f"messages){slow_note}; steady turns also have parts that walk the whole view, so they "
        f"follow its size (not the history's){profile_note}; {gc_note}; with collection time "
        f"left out the spread is {no_gc:.2f}x"
    )


def judge(
    buckets: list[Bucket], totals: Totals, memory_mib: float, memory_at: int
) -> tuple[list[dict[str, object]], list[str]]:
    """Scoreboard rows for the targets, and the same verdicts as lines for the section."""
    flat_turns = [_flat_turns(b)[0] for b in buckets if _flat_turns(b)[0]]
    p99s = [percentile(spent, 99) for spent in flat_turns]
    spread = _spread(p99s)
    p50s = [percentile(spent, 50) * 1000 for spent in flat_turns]
    side = ", timed side by side" if all(b.side for b in buckets) else ""
    at = next((b for b in buckets if b.history == 10_000), buckets[-1])
    where = f"{at.history:,} messages"
    ours, floor = _p50(at.steady), _p50(at.floor)
    trim, middleware = _p50(at.peer), _p50(at.middleware)
    compaction = _p50(at.whole_compaction())
    ratio = trim / ours if ours else 0.0
    versus_peer = (
        f"trim_messages {trim * 1000:.2f} ms ({ratio:.0f}x ours); SummarizationMiddleware "
        f"{middleware * 1000:.2f} ms ({middleware / ours:.1f}x ours)"
        if ours
        else ""
    )
    flat = spread <= 1.5
    middleware_p99s = [percentile(b.middleware, 99) for b in buckets if b.middleware]
    peer_p99s = (
        f"trim_messages p99 {_ms(buckets[0].peer, 99)} → {_ms(buckets[-1].peer, 99)} ms; "
        f"SummarizationMiddleware p99 {_ms(buckets[0].middleware, 99)} → "
        f"{_ms(buckets[-1].middleware, 99)} ms ({_spread(middleware_p99s):.2f}x)"
    )
    over_floor = ours / floor if floor else float("inf")
    faster = middleware / ours if ours else 0.0
    share = compaction / trim if trim and at.compaction else float("nan")
    rows = [
        target(
            "engine overhead",
            f"steady turn p50 ≤ 2x the floor (rendering the same request) at {where}",
            f"{ours * 1000:.2f} ms against a floor of {floor * 1000:.2f} ms: {over_floor:.2f}x",
            over_floor <= 2,
            held_back="" if over_floor <= 2 else _over_floor(at),
        ),
        target(
            "engine overhead",
            f"steady turn ≥ 2x faster than SummarizationMiddleware.before_model at {where} (p50)",
            f"{ours * 1000:.2f} ms against {middleware * 1000:.2f} ms: {faster:.1f}x faster",
            faster >= 2,
            versus=versus_peer,
        ),
        target(
            "engine overhead",
            f"steady-turn p99 flat in history length, GC included (max/min ≤ 1.5, "
            f"{buckets[0].history:,} → {buckets[-1].history:,} messages{side})",
            f"{spread:.2f}x (p99 {min(p99s) * 1000:.2f}–{max(p99s) * 1000:.2f} ms, p50 "
            f"{min(p50s):.2f}–{max(p50s):.2f} ms)",
            flat,
            versus=peer_p99s,
            held_back="" if flat else _flatness_diagnosis(buckets),
        ),
        target(
            "engine overhead",
            f"compaction turn ≤ 25 % of one trim_messages call at {where} (p50, the turn's adds "
            "included)",
            f"{compaction * 1000:.2f} ms ({_ms(at.compaction, 50)} in prepare()) against "
            f"{trim * 1000:.2f} ms: {share:.0%}"
            if at.compaction
            else "no compaction turn was timed there",
            bool(at.compaction) and share <= 0.25,
            held_back="" if at.compaction and share <= 0.25 else _compaction_diagnosis(at),
        ),
        target(
            "engine overhead",
            "compaction turns cost no more in total than steady turns over the run, in "
            "prepare() and in whole turns (adds included)",
            f"prepare(): {totals.compaction:.2f} s in {totals.compaction_turns:,} compaction "
            f"turns, {totals.steady:.2f} s in {totals.steady_turns:,} steady turns "
            f"({_ratio(totals.compaction, totals.steady, 2)}); whole turns: "
            f"{totals.whole()[0]:.2f} s against {totals.whole()[1]:.2f} s "
            f"({_ratio(*totals.whole(), 2)})",
            totals.cheaper_compaction(),
            held_back="" if totals.cheaper_compaction() else _compaction_diagnosis(at, totals),
        ),
        target(
            "engine overhead",
            f"steady turn ≥ 10x cheaper than trim_messages at {where} (p50)",
            f"{ours * 1000:.2f} ms, {ratio:.0f}x cheaper",
            ratio >= 10,
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


def _over_floor(bucket: Bucket) -> str:
    """Where a steady turn spends what rendering does not (cProfile, own time per turn)."""
    top = sorted(bucket.profile.items(), key=lambda item: item[1], reverse=True)[:4]
    return "the most own time per steady turn (cProfile): " + ", ".join(
        f"`{name}` {seconds * 1000:.3f} ms" for name, seconds in top
    )


def _histories(text: str) -> tuple[int, ...]:
    try:
        values = tuple(sorted({int(v.replace("_", "")) for v in text.split(",") if v.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--histories takes message counts separated by commas, got {text!r}"
        ) from None
    if not values or values[0] < 10:
        raise argparse.ArgumentTypeError("--histories: each history is at least 10 messages")
    return values


def main(argv: Sequence[str] | None = None) -> None:
    parser = benchmark_arguments(__doc__.splitlines()[0])
    parser.add_argument(
        "--histories",
        type=_histories,
        metavar="N,N,...",
        help="history lengths (messages) to time at (default: 100,1000,10000,100000; with "
        "--quick 100,1000)",
    )
    parser.add_argument(
        "--transcripts",
        type=Path,
        metavar="DIR",
        help="a folder of agent transcripts to take the turns from (default: the shared "
        "DeepSeek mini-swe-agent trajectories)",
    )
    args = parser.parse_args(argv)
    if args.transcripts is not None and not args.transcripts.is_dir():
        parser.error(f"--transcripts: {args.transcripts} is not a folder")
    checkpoints = args.histories or (QUICK_CHECKPOINTS if args.quick else CHECKPOINTS)
    memory_at = QUICK_MEMORY_AT if args.quick else MEMORY_AT
    turns, source = corpus_turns(args.transcripts)
    print(f"engine overhead: {source}; checkpoints {', '.join(f'{c:,}' for c in checkpoints)}")
    buckets, totals = run(checkpoints, turns, quick=args.quick)
    memory, view = peak_memory(memory_at, turns)
    table = markdown_table(HEADERS, [_row(b) for b in buckets])
    rows, lines = judge(buckets, totals, memory, memory_at)
    print(table)
    print(f"peak memory at {memory_at:,} messages: {memory:.1f} MiB (view {view:,} messages)")
    print("\n".join(lines))
    if not should_write(args):
        return
    body = (
        f"{MODEL} (200k window), SQLite store in a temporary folder, background compaction off; "
        f"{source}. CPU time of `prepare()` per turn on the turns right after each history "
        f"length (400 at each: at {SMALL_HISTORY} messages or fewer, 50 in each of "
        f"{SMALL_SESSIONS} sessions; the view stays bounded by the window while the transcript "
        "grows). The floor: rendering each request `prepare()` returned into the Anthropic "
        "Messages payload (`to_anthropic`), timed right after it. Peers, the same history each "
        "turn: "
        "`trim_messages(strategy='last', token_counter=count_tokens_approximately)` over the "
        "whole history (timed on up to 50, 30 and 8 turns as the history grows), and "
        "`SummarizationMiddleware.before_model` on its own state (trigger at 80 % of the window, "
        "its default keep of 20 messages, a fixed stand-in summary, so its summarizing turns "
        "time only its cutoff logic; timed on every measured turn). Garbage-collection time "
        "inside each turn is measured through `gc.callbacks`. Side by side: the steady turns timed "
        "again after that, one turn at each history length in turn (a session held at each "
        f"length; at {SMALL_HISTORY} messages or fewer, {SMALL_SESSIONS} fresh sessions one "
        "after another), so that every length meets the machine's load alike; the flatness "
        "target reads these. Over the whole run (every turn of "
        f"the grown session): {totals.steady_turns:,} steady turns took {totals.steady:.2f} s "
        f"in `prepare()` and {totals.steady_added:.2f} s in their adds, "
        f"{totals.compaction_turns:,} compaction turns {totals.compaction:.2f} s and "
        f"{totals.compaction_added:.2f} s. The adds (`add_assistant` and `add_tool_result` after "
        "each request) are timed too: work an engine moves out of `prepare()` into them is "
        "still counted, and the compaction targets read the whole turn. Run it "
        "elsewhere with `--histories` and `--transcripts`.\n\n"
        f"{table}\n\nPeak traced memory of a session grown to {memory_at:,} messages: "
        f"{memory:.1f} MiB (view {view:,} messages).\n\n" + "\n".join(lines)
    )
    write_section("engine_overhead", "Engine overhead per turn (prepare)", body, quick=args.quick)
    figures: dict[str, Any] = {
        f"{b.history}": {
            "steady_p50_ms": _p50(b.steady) * 1000,
            "steady_p99_ms": percentile(b.steady, 99) * 1000 if b.steady else 0.0,
            "side_by_side_p50_ms": _p50(b.side) * 1000,
            "side_by_side_p99_ms": percentile(b.side, 99) * 1000 if b.side else 0.0,
            "floor_p50_ms": _p50(b.floor) * 1000,
            "compaction_p50_ms": _p50(b.compaction) * 1000,
            "steady_adds_p50_ms": _p50(b.steady_added) * 1000,
            "compaction_whole_p50_ms": _p50(b.whole_compaction()) * 1000,
            "trim_p50_ms": _p50(b.peer) * 1000,
            "middleware_p50_ms": _p50(b.middleware) * 1000,
        }
        for b in buckets
    }
    figures["memory_mib"] = {"peak": memory, "history": memory_at}
    figures["totals_s"] = {
        "steady": totals.steady,
        "compaction": totals.compaction,
        "steady_adds": totals.steady_added,
        "compaction_adds": totals.compaction_added,
    }
    record_targets("engine_overhead", rows, figures, quick=args.quick)


if __name__ == "__main__":
    main()
