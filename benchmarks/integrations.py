"""The three framework integrations on real transcripts: each framework's agent loop alone, with
its own context option, and with contextfold, through a 32k window.

Each shared mini-swe-agent (DeepSeek) transcript is replayed through the framework's real agent
loop: the framework's own fake model answers each call with the transcript's next assistant
message (its text and tool calls, call ids kept), and the ``bash`` tool returns the output the
transcript recorded for that command. The first ``MAX_CALLS`` assistant messages are replayed;
one last text reply ends the run. So every configuration of a framework makes the same calls and
the tool outputs are the same; only what the model is given differs.

Configurations, per framework:

- **alone**: the framework as it comes; the model gets the whole history every call.
- **own option**: the framework's own context feature.
  OpenAI Agents SDK: ``agents.extensions.ToolOutputTrimmer()`` (its defaults) as
  ``RunConfig.call_model_input_filter``. LangChain: ``SummarizationMiddleware`` with
  ``trigger=("fraction", 0.8)`` of a 32k model profile and its default ``keep=("messages", 20)``;
  the summary text comes from its ``summarizer`` hook, given contextfold's extractive summarizer
  (the one ``benchmarks/baselines.py`` gives every summarizing peer) instead of a model, so what
  it keeps depends on what the middleware chooses to summarize. pydantic-ai: a
  history processor keeping the last 20 messages (the pattern of its docs' "keep recent
  messages" example, 20 as LangChain's ``keep``), as ``ProcessHistory`` (v2 replaced
  ``history_processors=`` with that capability).
- **contextfold**: the integration (``ContextfoldSession``, ``ContextFoldMiddleware``,
  ``ContextFold`` capability) on an engine for a 32k window (``model_for_window(32_000)``: 4,096
  tokens reserved for the reply), SQLite store, background work off.

Measured on what the fake model received, for every call, with one counter for all
(tiktoken ``o200k_base``, exact, OpenAI framing): calls over 32,000 tokens, the total input
tokens, the prefix reuse between consecutive calls (:class:`contextfold.replay.cache.PrefixMeter`
on the OpenAI wire JSON, as ``benchmarks/baselines.py`` measures its peers), and the retention
probes (:mod:`contextfold.replay.probes`, the facts of the replayed part of the transcript) on
the last model input; contextfold's refs count as recoverable when the store holds them.
Overhead: the wall time of the whole run (``Runner.run`` / ``agent.invoke`` / ``run_sync``,
conversions for counting done afterwards) divided by the calls, as a ratio to the framework alone;
and the process's CPU time over the same run (every thread), which other work on a shared machine
does not inflate: the added CPU per call is the figure the 2 ms target is read on. Each
configuration runs ``REPEATS`` times per transcript, the configurations taking turns (so that a
machine's load drifting over the minutes of a run weighs on each alike), and the fastest run of
each counts; every run starts without contextfold's process-wide caches (token counts, digests,
redactions of the texts it saw), which a repeat of the same transcript would otherwise find full.

Usage: ``python -m benchmarks.integrations [--quick] [--write/--no-write]``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import tempfile
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: import as a package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import (
    TRAJECTORIES,
    benchmark_arguments,
    markdown_table,
    require_shared_data,
    should_write,
    write_section,
)
from benchmarks.baselines import wire_segments
from contextfold import ContextEngine, ContextPolicy, model_for_window
from contextfold.engine import Session
from contextfold.hosts import digests
from contextfold.lru import LRU
from contextfold.messages import Message, TextPart, ToolCallPart, reproducible_ids
from contextfold.replay.cache import PrefixMeter
from contextfold.replay.driver import MeteredSummarizer, _ref_reader
from contextfold.replay.probes import Probe, Retention, check_retention, probes_for
from contextfold.store import SQLiteStore
from contextfold.tokens import counters
from contextfold.tokens.counters import TiktokenCounter, TokenCounter
from contextfold.tool_spec import ToolSpec
from contextfold.transcripts import load_transcript

WINDOW = 32_000
MAX_CALLS = 60
QUICK_CALLS = 12
KEEP_MESSAGES = 20
"""LangChain's default ``keep`` and the pydantic-ai processor's N."""
REPEATS = 3
"""Timed runs of each configuration and transcript in a full run, the configurations taking
turns (:func:`timed_runs`); the fastest one of each counts."""
END_TEXT = "Replay ended here."
CONFIGS = ("alone", "own option", "contextfold")
BASH = ToolSpec(
    "bash",
    "Run a bash command and return its output.",
    {
        "type": "object",
        "properties": {"command": {"type": "string", "description": "The command to run."}},
        "required": ["command"],
    },
)


# -- the script: what the fake model says and what the tool returns -------------------------------


@dataclass
class Script:
    """One transcript cut to its first calls: replies for the fake model, outputs for the tool."""

    name: str
    system: str
    task: str
    replies: list[Message]
    """Assistant messages, in order; the last one is text only (it ends the run)."""
    outputs: dict[str, deque[str]]
    """Recorded outputs by (tool name + canonical arguments), first recorded first."""
    replayed: list[Message]
    """The part of the transcript the replay covers (for the probes)."""

    def output(self, name: str, arguments: dict[str, Any]) -> str:
        queue = self.outputs.get(_key(name, arguments))
        # A command the transcript never ran cannot happen (the model only emits recorded
        # calls); an empty answer keeps the run going if a framework re-ran one.
        return queue.popleft() if queue else ""

    def fresh(self) -> Script:
        """A copy whose output queues are full again (each run consumes them)."""
        outputs = {k: deque(v) for k, v in self.outputs.items()}
        return Script(self.name, self.system, self.task, self.replies, outputs, self.replayed)


def _key(name: str, arguments: dict[str, Any]) -> str:
    return name + json.dumps(arguments, sort_keys=True, ensure_ascii=False)


def load_script(path: Path, max_calls: int) -> Script:
    transcript = load_transcript(path)
    messages = [m for m in transcript.messages if m.meta.agent_visible]
    system = "\n\n".join(m.text for m in messages if m.role == "system")
    task = next(m.text for m in messages if m.role == "user")
    results: dict[str, str] = {}
    for message in messages:
        for result in message.tool_results:
            results[result.call_id] = result.content
    replies: list[Message] = []
    outputs: dict[str, deque[str]] = defaultdict(deque)
    replayed: list[Message] = []
    for message in messages:
        if message.role == "assistant":
            if len(replies) == max_calls:
                break
            parts = tuple(p for p in message.parts if isinstance(p, TextPart | ToolCallPart))
            replies.append(Message("assistant", parts))
            for call in message.tool_calls:
                outputs[_key(call.name, call.args())].append(results.get(call.call_id, ""))
            if not message.tool_calls:
                break  # the agent loop ends at a reply without tool calls
        replayed.append(message)
    if not replies or replies[-1].tool_calls:
        replies.append(Message("assistant", (TextPart(END_TEXT),)))
    name = path.name.rsplit("__", 1)[-1].removesuffix(".traj.json")
    return Script(name, system, task, replies, dict(outputs), replayed)


# -- what one run measured ------------------------------------------------------------------------


@dataclass
class Received:
    """What the fake model received on one call, in contextfold's terms."""

    messages: list[Message]
    system: str
    tools: list[ToolSpec]


@dataclass
class Run:
    framework: str
    config: str
    transcript: str
    seconds: float
    inputs: list[Received]
    read_ref: Callable[[str], str | None] | None = None
    error: str = ""
    cpu: float = 0.0
    """CPU seconds of the whole process during the run (every thread): unlike the wall time, it
    does not grow when other work shares the machine."""


@dataclass
class Figures:
    calls: int = 0
    over: int = 0
    tokens: int = 0
    largest: int = 0
    reused: int = 0
    seconds: float = 0.0
    cpu: float = 0.0
    kept: int = 0
    reachable: int = 0
    probed: int = 0
    errors: list[str] = field(default_factory=list)


def measure(run: Run, probes: Sequence[Probe], counter: TokenCounter, figures: Figures) -> None:
    """Add ``run``'s counts to ``figures``: tokens, calls over the window, reuse, retention."""
    meter = PrefixMeter(counter, "openai")
    figures.seconds += run.seconds
    figures.cpu += run.cpu
    if run.error:
        figures.errors.append(f"{run.transcript}: {run.error}")
    for received in run.inputs:
        tokens = counter.count_request(
            received.messages, system=received.system, tools=received.tools
        )
        segments = wire_segments(received.messages, received.system, received.tools, "openai")
        figures.calls += 1
        figures.over += tokens > WINDOW
        figures.tokens += tokens
        figures.largest = max(figures.largest, tokens)
        figures.reused += meter.measure_segments(segments, tokens).reused_tokens
    if run.inputs:
        last = run.inputs[-1]
        view = [Message.system(last.system), *last.messages] if last.system else last.messages
        retention: Retention = check_retention(probes, view, run.read_ref)
        figures.kept += retention.kept()
        figures.reachable += retention.reachable()
        figures.probed += retention.total()


def _engine(folder: Path, name: str) -> ContextEngine:
    return ContextEngine(
        model_for_window(WINDOW),
        store=SQLiteStore(folder / f"{name}.db", warn_wal_reset=False),
        policy=ContextPolicy(background=False),
    )


def _split_system(messages: Sequence[Message]) -> tuple[str, list[Message]]:
    system = "\n\n".join(m.text for m in messages if m.role == "system")
    return system, [m for m in messages if m.role != "system"]


def _reader(engine: ContextEngine, session: Session) -> Callable[[str], str | None]:
    return _ref_reader(engine, session)


# -- OpenAI Agents SDK ----------------------------------------------------------------------------


def run_openai_agents(script: Script, config: str, folder: Path) -> Run:
    from agents import Agent, FunctionTool, RunConfig, Runner
    from agents.extensions import ToolOutputTrimmer
    from agents.testing import ScriptedModel, assistant_message, function_call
    from agents.tool_context import ToolContext

    from contextfold.integrations.openai_agents import (
        ContextfoldSession,
        messages_from_items,
        tool_specs,
    )

    steps: list[Any] = []
    for reply in script.replies:
        items: list[Any] = [assistant_message(reply.text)] if reply.text else []
        items += [function_call(c.name, c.args(), call_id=c.call_id) for c in reply.tool_calls]
        steps.append(items)
    model = ScriptedModel(steps)

    async def bash(context: ToolContext[Any], arguments: str) -> str:
        return script.output("bash", json.loads(arguments or "{}"))

    tool = FunctionTool(
        name=BASH.name,
        description=BASH.description,
        params_json_schema=dict(BASH.parameters),
        on_invoke_tool=bash,
        strict_json_schema=False,
    )
    tools: list[Any] = [tool]
    session: ContextfoldSession | None = None
    engine: ContextEngine | None = None
    if config == "contextfold":
        engine = _engine(folder, "openai-agents")
        session = ContextfoldSession("bench", engine, title="benchmark")
        tools.append(session.read_result_tool())
        run_config = session.run_config(tracing_disabled=True)
    elif config == "own option":
        run_config = RunConfig(call_model_input_filter=ToolOutputTrimmer(), tracing_disabled=True)
    else:
        run_config = RunConfig(tracing_disabled=True)
    agent = Agent(name="replay", instructions=script.system, model=model, tools=tools)
    error = ""
    started, cpu_started = time.perf_counter(), time.process_time()
    try:
        asyncio.run(
            Runner.run(
                agent,
                script.task,
                session=session,
                run_config=run_config,
                max_turns=len(script.replies) + 5,
            )
        )
    except Exception as exc:  # a framework failure is a result to report, not a crash
        error = f"{type(exc).__name__}: {exc}"[:200]
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    inputs = [
        Received(
            messages_from_items(call.input), call.system_instructions or "", tool_specs(call.tools)
        )
        for call in model.calls
    ]
    reader = _reader(engine, session.sync.session) if engine and session else None
    return Run("openai-agents", config, script.name, seconds, inputs, reader, error, cpu)


# -- LangChain ------------------------------------------------------------------------------------


def run_langchain(script: Script, config: str, folder: Path) -> Run:
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.language_models import BaseChatModel
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import StructuredTool

    from contextfold.integrations.langchain import ContextFoldMiddleware, to_messages, tool_spec

    received: list[tuple[list[BaseMessage], tuple[Any, ...]]] = []
    replies = script.replies

    class ReplayModel(BaseChatModel):
        """Answers call n with the transcript's n-th assistant message."""

        bound: tuple[Any, ...] = ()

        @property
        def _llm_type(self) -> str:
            return "replay"

        def bind_tools(self, tools: Any, **kwargs: Any) -> ReplayModel:
            return self.model_copy(update={"bound": tuple(tools)})

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
            reply = replies[min(len(received), len(replies) - 1)]
            received.append((list(messages), self.bound))
            calls = [{"name": c.name, "args": c.args(), "id": c.call_id} for c in reply.tool_calls]
            message = AIMessage(content=reply.text, tool_calls=calls)
            return ChatResult(generations=[ChatGeneration(message=message)])

    def bash(command: str) -> str:
        return script.output("bash", {"command": command})

    tool = StructuredTool.from_function(
        func=bash, name=BASH.name, description=BASH.description, args_schema=dict(BASH.parameters)
    )
    middleware: list[Any] = []
    engine: ContextEngine | None = None
    fold: ContextFoldMiddleware | None = None
    counter = TiktokenCounter("o200k_base")
    if config == "contextfold":
        engine = _engine(folder, "langchain")
        fold = ContextFoldMiddleware(engine, title="benchmark")
        middleware.append(fold)
    elif config == "own option":
        summarizer = MeteredSummarizer(counter)

        def summarize(lc_messages: list[Any]) -> str:
            return summarizer.summarize(to_messages(lc_messages), None).render()

        # The model is never called (the summarizer hook writes the summary); it lends the
        # middleware its profile, from which ("fraction", 0.8) is computed.
        profile_model = GenericFakeChatModel(
            messages=iter(()), profile={"max_input_tokens": WINDOW}
        )
        middleware.append(
            SummarizationMiddleware(
                profile_model,
                trigger=("fraction", 0.8),
                keep=("messages", KEEP_MESSAGES),
                summarizer=summarize,
            )
        )
    agent = create_agent(ReplayModel(), [tool], system_prompt=script.system, middleware=middleware)
    error = ""
    started, cpu_started = time.perf_counter(), time.process_time()
    try:
        agent.invoke(
            {"messages": [HumanMessage(script.task)]},
            config={"recursion_limit": 4 * len(replies) + 10},
        )
    except Exception as exc:  # a framework failure is a result to report, not a crash
        error = f"{type(exc).__name__}: {exc}"[:200]
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    inputs = []
    for messages, bound in received:  # bound: the tools the agent bound for that call
        system, view = _split_system(to_messages(messages))
        inputs.append(Received(view, system, [tool_spec(t) for t in bound]))
    reader = _reader(engine, fold.session()) if engine and fold else None
    return Run("langchain", config, script.name, seconds, inputs, reader, error, cpu)


# -- pydantic-ai ----------------------------------------------------------------------------------


def run_pydantic_ai(script: Script, config: str, folder: Path) -> Run:
    from pydantic_ai import Agent, Tool
    from pydantic_ai import messages as pa
    from pydantic_ai.capabilities import ProcessHistory
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

    from contextfold.integrations.pydantic_ai import ContextFold, to_messages

    received: list[tuple[list[pa.ModelMessage], list[ToolSpec]]] = []
    replies = script.replies

    def model(messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
        reply = replies[min(len(received), len(replies) - 1)]
        tools = [
            ToolSpec(t.name, t.description or "", dict(t.parameters_json_schema))
            for t in info.function_tools
        ]
        received.append((list(messages), tools))
        parts: list[Any] = [pa.TextPart(reply.text)] if reply.text else []
        parts += [pa.ToolCallPart(c.name, c.arguments, c.call_id) for c in reply.tool_calls]
        # FunctionModel fills in its own word-count usage guess (about half the o200k count
        # here); the integration does not anchor the engine on pydantic-ai's own models.
        return pa.ModelResponse(parts=parts)

    def bash(command: str) -> str:
        return script.output("bash", {"command": command})

    tool = Tool[Any].from_schema(
        bash, name=BASH.name, description=BASH.description, json_schema=dict(BASH.parameters)
    )
    engine: ContextEngine | None = None
    fold: ContextFold | None = None
    options: dict[str, Any] = {}
    if config == "contextfold":
        engine = _engine(folder, "pydantic-ai")
        fold = ContextFold(engine, title="benchmark")
        options["capabilities"] = [fold]
    elif config == "own option":
        # Annotated with Any: pydantic-ai resolves a processor's annotations in this module's
        # globals, where ``pa`` (imported here, so the framework stays optional) is absent.
        def keep_recent_messages(messages: list[Any]) -> list[Any]:
            return messages[-KEEP_MESSAGES:] if len(messages) > KEEP_MESSAGES else messages

        options["capabilities"] = [ProcessHistory(keep_recent_messages)]
    agent = Agent(FunctionModel(model), system_prompt=script.system, tools=[tool], **options)
    error = ""
    started, cpu_started = time.perf_counter(), time.process_time()
    try:
        # No request limit: the replay's length is bounded by the script (default: 50).
        agent.run_sync(script.task, usage_limits=UsageLimits(request_limit=None))
    except Exception as exc:  # a framework failure is a result to report, not a crash
        error = f"{type(exc).__name__}: {exc}"[:200]
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    inputs = []
    for messages, tools in received:
        system, view = _split_system(to_messages(messages))
        inputs.append(Received(view, system, tools))
    reader = _reader(engine, fold.sync.session) if engine and fold else None
    return Run("pydantic-ai", config, script.name, seconds, inputs, reader, error, cpu)


FRAMEWORKS: dict[str, tuple[str, Callable[[Script, str, Path], Run]]] = {
    "openai-agents": ("openai-agents", run_openai_agents),
    "langchain": ("langchain", run_langchain),
    "pydantic-ai": ("pydantic-ai-slim", run_pydantic_ai),
}


# -- the report -----------------------------------------------------------------------------------


def pick_transcripts(quick: bool, counter: TokenCounter) -> list[Path]:
    """Full: the three DeepSeek transcripts whose first ``MAX_CALLS`` calls grow the history the
    most (so the window matters); quick: the smallest transcript file."""
    files = sorted((TRAJECTORIES / "mini-swe-agent-deepseek").glob("*.json"))
    if quick:
        return [min(files, key=lambda p: p.stat().st_size)]

    def size(path: Path) -> int:
        return counter.count_messages(load_script(path, MAX_CALLS).replayed)

    return sorted(files, key=size, reverse=True)[:3]


def replay(
    runner: Callable[[Script, str, Path], Run], script: Script, config: str, folder: Path
) -> Run:
    """One run of ``script`` in ``config``, repeatable: the ids the engine makes (messages,
    ``read_result`` refs, summaries citing them) reach what the model reads, and fresh ids hold
    the clock and a random part, whose token counts differ run to run (two identical runs gave
    775,914 and 774,471 input tokens). Within :func:`reproducible_ids` they count from 1.

    The run starts on a settled heap: what exists before it (the scripts, the tokenizer's
    tables, the frameworks' modules, earlier runs' garbage) is collected or frozen, out of the
    collector's passes. Whether a full pass over that heap fell inside a run or not moved a
    configuration's CPU per call by up to 2 ms (the Agents SDK alone: 2.1 ms of collection per
    call, 0.25 ms on a settled heap), more than the integrations' own work; the collections of
    what the run itself allocates still count.

    And it starts with no memory of earlier runs (:func:`forget_earlier_runs`): contextfold
    keeps what it computed from each text and message (token counts, digests, redactions, the
    facts of commands) in caches that last as long as the process, and a repeat of the same
    transcript, its ids made alike, found all of it there. The fastest of three runs was a run
    with most of that work skipped, as no real conversation sees it: 0.4 to 0.9 ms of CPU per
    call less than a first run, by how much of it the caches still held (the figure moved by
    that much from one benchmark run to the next)."""
    forget_earlier_runs()
    with reproducible_ids(), _settled_heap():
        return runner(script.fresh(), config, folder)


def forget_earlier_runs() -> None:
    """Empty contextfold's process-wide caches: every ``functools`` cache and :class:`LRU`
    a contextfold module holds, the digests of messages, and the shared token counters (each
    with its memory of the texts it counted; an engine made afterwards gets a new one). What a
    process pays once (imports, tokenizer tables, compiled patterns) stays: the warm-up run
    paid it."""
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "contextfold" or name.startswith("contextfold.")):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, LRU):
                value.clear()
            elif getattr(value, "__module__", None) == name and hasattr(value, "cache_clear"):
                value.cache_clear()  # a functools cache defined in this module
    digests._digests.clear()
    counters._shared_counters.clear()


@contextmanager
def _settled_heap() -> Iterator[None]:
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _folder(tmp: str, *names: object) -> Path:
    """A new folder for one run's store."""
    folder = Path(tmp) / "-".join(str(n).replace(" ", "-") for n in names)
    folder.mkdir()
    return folder


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def table(figures: dict[tuple[str, str], Figures]) -> str:
    rows = []
    for (framework, config), f in figures.items():
        alone = figures.get((framework, "alone"))
        per_call = f.seconds / f.calls * 1000 if f.calls else 0.0
        base = alone.seconds / alone.calls * 1000 if alone and alone.calls else 0.0
        cpu = f.cpu / f.calls * 1000 if f.calls else 0.0
        cpu_base = alone.cpu / alone.calls * 1000 if alone and alone.calls else 0.0
        rows.append(
            (
                framework,
                config,
                f.calls,
                f.over,
                f"{f.tokens:,}",
                f"{f.largest:,}",
                f"{f.reused / f.tokens:.0%}" if f.tokens else "—",
                f"{f.kept}/{f.probed}",
                f"{f.reachable}/{f.probed}",
                f"{per_call:.1f}",
                f"{per_call - base:+.1f}" if base else "—",
                f"{per_call / base:.2f}" if base else "—",
                f"{cpu:.1f}",
                f"{cpu - cpu_base:+.1f}" if cpu_base else "—",
            )
        )
    return markdown_table(
        (
            "framework",
            "configuration",
            "model calls",
            "calls over 32k",
            "input tokens",
            "largest call",
            "prefix reuse",
            "facts kept",
            "facts reachable",
            "ms / call",
            "ms added / call",
            "x alone",
            "CPU ms / call",
            "CPU ms added / call",
        ),
        rows,
    )


def findings(figures: dict[tuple[str, str], Figures]) -> list[str]:
    """What the table shows that needs saying, each read from the figures."""
    notes = []
    alone, own = (
        figures.get(("openai-agents", "alone")),
        figures.get(("openai-agents", "own option")),
    )
    if alone and own and alone.calls and own.tokens == alone.tokens:
        notes.append(
            "`ToolOutputTrimmer` changed nothing here: it never trims the items after the last "
            "`recent_turns` user messages (2 by default, at least 1), and an agent run on one "
            "task has one user message, so every tool output of the run is protected."
        )
    notes.append(
        "`FunctionModel` reports a word-count guess of its usage, about half the real count. "
        "The `ContextFold` capability does not anchor the engine's estimates on the usage of "
        "pydantic-ai's own models (when it did, 12 of these 183 calls went past the window)."
    )
    return notes


def timed_runs(
    runner: Callable[[Script, str, Path], Run],
    script: Script,
    repeats: int,
    tmp: str,
    framework: str,
    index: int,
) -> dict[str, list[Run]]:
    """``repeats`` runs of ``script`` in each configuration, the configurations taking turns
    (each round in another order). The figures read are differences between configurations
    (CPU added to the framework alone), and the load of a shared machine drifts over minutes:
    all the runs of one configuration, then all of the next, put that drift into the
    difference; taking turns spreads it over every configuration alike."""
    runs: dict[str, list[Run]] = {config: [] for config in CONFIGS}
    for k in range(repeats):
        turn = k % len(CONFIGS)
        for config in CONFIGS[turn:] + CONFIGS[:turn]:
            folder = _folder(tmp, framework, config, index, k)
            runs[config].append(replay(runner, script, config, folder))
    return runs


def main(argv: Sequence[str] | None = None) -> None:
    parser = benchmark_arguments(__doc__.splitlines()[0])
    args = parser.parse_args(argv)
    quick: bool = args.quick
    require_shared_data()
    counter = TiktokenCounter("o200k_base")
    max_calls = QUICK_CALLS if quick else MAX_CALLS
    repeats = 1 if quick else REPEATS
    paths = pick_transcripts(quick, counter)
    scripts = [load_script(p, max_calls) for p in paths]
    figures: dict[tuple[str, str], Figures] = {}
    missing: list[str] = []
    with tempfile.TemporaryDirectory(prefix="contextfold-bench-integrations-") as tmp:
        for framework, (package, runner) in FRAMEWORKS.items():
            if _version(package) == "not installed":
                missing.append(framework)
                print(f"{framework}: skipped ({package} is not installed)")
                continue
            for config in CONFIGS:
                figures.setdefault((framework, config), Figures())
                # Untimed warm-up: the first run of a configuration pays imports and caches.
                replay(runner, scripts[0], config, _folder(tmp, framework, config, "warm-up"))
            for index, script in enumerate(scripts):
                runs = timed_runs(runner, script, repeats, tmp, framework, index)
                for config in CONFIGS:
                    run = runs[config][-1]
                    run.seconds = min(r.seconds for r in runs[config])  # the least disturbed run
                    run.cpu = min(r.cpu for r in runs[config])
                    measure(run, probes_for(script.replayed), counter, figures[framework, config])
                    print(
                        f"{framework} / {config} / {script.name}: {len(run.inputs)} calls, "
                        f"{run.seconds:.2f} s{'; ERROR ' + run.error if run.error else ''}",
                        flush=True,
                    )
    result = table(figures)
    print(result)
    errors = [f"{fw} / {cfg}: {e}" for (fw, cfg), f in figures.items() for e in f.errors]
    for line in errors:
        print("error:", line)
    if not should_write(args):
        return
    versions = ", ".join(f"{name} {_version(package)}" for name, (package, _) in FRAMEWORKS.items())
    described = ", ".join(f"`{s.name}` ({len(s.replies)} calls)" for s in scripts)
    method = __doc__.split("\n\n", 1)[1].split("Usage:")[0].strip()
    method = method.replace("``MAX_CALLS``", str(max_calls)).replace("``REPEATS``", str(repeats))
    method = method.replace("``", "`")
    body = (
        f"{method}\n\n"
        f"Versions: {versions}. Transcripts (mini-swe-agent, DeepSeek): {described}; figures "
        "are sums over them. Facts: the retention probes on the last call's input (kept = "
        "verbatim or in a summary; reachable adds what a `read_result` ref in the view "
        f"recovers).\n\n{result}"
    )
    body += "".join(f"\n\n{note}" for note in findings(figures))
    if errors:
        body += "\n\nErrors:\n\n" + "\n".join(f"- {e}" for e in errors)
    if missing:
        body += f"\n\nSkipped (not installed): {', '.join(missing)}."
    write_section("integrations", "Integrations", body, quick=quick)


if __name__ == "__main__":
    main()
