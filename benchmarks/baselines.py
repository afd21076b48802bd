"""The peers and baselines the benchmarks put beside contextfold, all driven the same way.

Peers run the code of other projects, installed from PyPI (dev dependencies):

- ``langchain trim_messages`` — ``langchain_core.messages.trim_messages`` before every request,
  stateless: ``strategy="last"``, ``max_tokens`` = the effective window,
  ``token_counter=count_tokens_approximately`` (langchain's own estimate, as its docs suggest),
  ``include_system=True``, ``start_on=("human", "ai")`` (the kept tail never opens on an orphan
  tool result; ``"human"`` alone would keep nothing past the one task message of a SWE-agent run).
- ``langchain SummarizationMiddleware`` — the installed ``langchain.agents.middleware.
  SummarizationMiddleware`` itself: its ``before_model`` hook runs before every request on the
  agent state, so its trigger check, its cutoff search (which keeps AI/tool pairs together), its
  trimming of what it summarizes (``trim_tokens_to_summarize``) and its state rewrite are
  LangChain's code. Configuration: ``trigger=("fraction", 0.8)`` (the same 80 % as our compact
  threshold) of a model profile whose ``max_input_tokens`` is the effective window,
  ``keep=("messages", 20)`` (its default). The model is a ``GenericFakeChatModel`` that is never
  called: the summary text comes from the ``summarizer`` hook, for which we pass our extractive
  summarizer (see below). The system prompt stays outside the state, as ``create_agent`` keeps it.
  Two rows: its default ``trim_tokens_to_summarize=4000`` (before summarizing, it keeps the last
  4,000 tokens of what it cuts, starting on a human message: in an agent session whose only human
  message is the task, that is nothing, and LangChain's fallback "Previous conversation was too
  long to summarize." becomes the summary), and ``untrimmed`` (``trim_tokens_to_summarize=None``:
  the summarizer sees everything it cuts), the generous setting.

Baselines are written here (labelled as baselines everywhere they are shown):

- ``sliding window (baseline)`` — before each request, drop the oldest whole steps (a user
  message, or an assistant message with its tool results) until the request fits the effective
  window; nothing else (the task can go too), no summary.
- ``Codex-like (baseline)`` — modelled on Codex's local compaction (``codex-rs/core/src/
  compact.rs``): when a request passes 90 % of the window (Codex's ``auto_compact_token_limit``
  default), the history becomes the user messages, newest first up to
  ``COMPACT_USER_MESSAGE_MAX_TOKENS`` = 20,000 tokens (bytes / 4, as Codex estimates; the one
  that does not fit is cut in its middle), followed by one summary message (Codex's summary
  prefix + the summary). Later compactions collect the user messages again (never an earlier
  summary) and summarize the whole current history, earlier summary included.
- ``OpenHands-like (baseline)`` — modelled on the condenser of OpenHands' default agent
  (openhands-sdk ``LLMSummarizingCondenser(max_size=80, keep_first=4)``, the
  ``get_default_condenser`` preset): it counts *events* (a user message, each tool call, each tool
  result), and when the view holds more than 80 it keeps the first 4 events and the newest
  ``80 // 2 - 4 - 1`` = 35, and puts one summary of what it forgot between them. It does not count
  tokens: it learns of an overflow from the provider's error, after which the agent asks for a
  condensation that halves the view (``target_size = len(view) // 2``). Those refused requests
  are counted here as requests over the window (at no cost: a refused request is not billed).
  Cuts never split a call from its results (OpenHands' view drops unmatched calls and results).

The summary text. Every summarizing method gets our :class:`ExtractiveSummarizer` (deterministic,
no model), the same one our ``summarize`` preset uses, so what they lose or keep comes from *what
they decide to summarize and keep*, not from a weaker summarizer. The middleware hands the
summarizer only what its own ``trim_tokens_to_summarize`` (4,000 tokens, ``start_on="human"``)
left, exactly as it would hand it to a model; when that trim leaves nothing, LangChain's own
fallback text is the summary. The Codex-like baseline summarizes the whole history it replaces;
the OpenHands-like one what it forgets, extending its previous summary.

All methods are driven by :func:`replay_method`, which measures them like the engine's replay
(:mod:`contextfold.replay`): every request is counted with the transcript's own counter (ours),
its unchanged prefix measured on the wire JSON, priced at cache prices, and the final view is
probed for retention.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Literal, Protocol

from contextfold.budget import ContextBudget
from contextfold.compaction.summary import StructuredSummary
from contextfold.messages import Message, Meta, TextPart, ToolCallPart
from contextfold.model_registry import ModelInfo
from contextfold.replay import (
    EditMark,
    Probe,
    ReplayRun,
    TurnRecord,
    check_retention,
    input_cost,
)
from contextfold.replay.cache import PrefixMeter, price_models
from contextfold.replay.driver import MeteredSummarizer
from contextfold.replay.grounding import (
    FailedApproach,
    GroundingPlan,
    check_failed_approaches,
    failed_approaches,
)
from contextfold.replay.probes import SUMMARY_KINDS, ViewText
from contextfold.tokens.counters import TokenCounter
from contextfold.tool_spec import ToolSpec
from contextfold.transcripts import Transcript
from contextfold.wire import to_anthropic, to_openai
from contextfold.wire.anthropic import tools_to_anthropic
from contextfold.wire.chat_completions import tools_to_openai

__all__ = [
    "BASELINE_CODEX",
    "BASELINE_OPENHANDS",
    "BASELINE_SLIDING",
    "METHOD_NAMES",
    "PEER_SUMMARIZATION",
    "PEER_SUMMARIZATION_UNTRIMMED",
    "PEER_TRIM",
    "CodexLikeBaseline",
    "ContextMethod",
    "OpenHandsLikeBaseline",
    "SlidingWindowBaseline",
    "SummarizationMiddlewarePeer",
    "TrimMessagesPeer",
    "make_method",
    "method_labels",
    "other_methods",
    "replay_method",
    "wire_segments",
]

PEER_TRIM = "langchain trim_messages"
PEER_SUMMARIZATION = "langchain SummarizationMiddleware"
PEER_SUMMARIZATION_UNTRIMMED = "langchain SummarizationMiddleware, untrimmed"
BASELINE_SLIDING = "sliding window (baseline)"
BASELINE_CODEX = "Codex-like (baseline)"
BASELINE_OPENHANDS = "OpenHands-like (baseline)"
METHOD_NAMES: tuple[str, ...] = (
    PEER_TRIM,
    PEER_SUMMARIZATION,
    PEER_SUMMARIZATION_UNTRIMMED,
    BASELINE_SLIDING,
    BASELINE_CODEX,
    BASELINE_OPENHANDS,
)
"""Every peer and baseline written into this module, in display order (the real peers of
:mod:`benchmarks.peers` follow them: :func:`other_methods`)."""


def other_methods() -> tuple[str, ...]:
    """Every peer and baseline the run can measure: this module's, then the real peers."""
    from benchmarks.peers import real_peers

    return (*METHOD_NAMES, *(peer.name for peer in real_peers()))


MIDDLEWARE_TRIGGER_FRACTION = 0.8
"""The middleware summarizes at this share of the window: our compact threshold (DESIGN.md §4)."""
MIDDLEWARE_KEEP_MESSAGES = 20
"""The middleware's default ``keep=("messages", 20)``."""
CODEX_AUTO_COMPACT_FRACTION = 0.9
"""Codex's ``auto_compact_token_limit``: 90 % of the model's context window."""
CODEX_USER_MESSAGE_MAX_TOKENS = 20_000
"""Codex's ``COMPACT_USER_MESSAGE_MAX_TOKENS``: recent user messages kept after compaction."""
CODEX_BYTES_PER_TOKEN = 4
"""Codex's ``APPROX_BYTES_PER_TOKEN`` (how it sizes the user messages it keeps)."""
CODEX_SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its "
    "thinking process. You also have access to the state of the tools that were used by that "
    "language model. Use this to build on the work that has already been done and avoid "
    "duplicating work. Here is the summary produced by the other language model, use the "
    "information in this summary to assist with your own analysis:"
)
"""Codex's ``templates/compact/summary_prefix.md``: what opens its summary message."""
OPENHANDS_MAX_SIZE = 80
"""Events the OpenHands default agent's condenser lets the view hold (``get_default_condenser``)."""
OPENHANDS_KEEP_FIRST = 4
"""Events at the start of the view that its condenser never forgets."""


@dataclass(frozen=True, slots=True)
class Compaction:
    """What a method did before one request: the kind of edit, messages removed, CPU seconds."""

    kind: Literal["summary", "drop"]
    removed: int
    cpu_seconds: float
    refused: tuple[int, ...] = ()
    """Sizes (tokens) of the requests sent before this one that the provider refused as over
    the window: a method that does not count tokens learns of an overflow from the error."""
    summary_input_tokens: int = 0
    """Tokens the summarizer read (what it summarized, plus the summary it extended)."""


class ContextMethod(Protocol):
    """A way to fit a growing history into a window, fed the transcript message by message."""

    name: str

    def add(self, message: Message) -> None:
        """Append one agent-visible message (user, assistant or tool results) to the history."""
        ...

    def request(self) -> tuple[list[Message], Compaction | None]:
        """The messages of the next request (system prompt aside), and the compaction done to
        get there (``None`` when nothing was removed)."""
        ...


def method_labels() -> dict[str, str]:
    """Each method's name with what it is: the peer's package and version, or "baseline"."""

    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "not installed"

    from benchmarks.peers import real_peers

    return {
        **{peer.name: peer.label() for peer in real_peers()},
        PEER_TRIM: f"peer: langchain-core {version('langchain-core')}",
        PEER_SUMMARIZATION: f"peer: langchain {version('langchain')} (its defaults)",
        PEER_SUMMARIZATION_UNTRIMMED: (
            f"peer: langchain {version('langchain')}, trim_tokens_to_summarize=None"
        ),
        BASELINE_SLIDING: "baseline (written here)",
        BASELINE_CODEX: "baseline (written here, modelled on codex-rs compact.rs)",
        BASELINE_OPENHANDS: (
            "baseline (written here, modelled on openhands-sdk LLMSummarizingCondenser, "
            "max_size=80, keep_first=4)"
        ),
    }


# --------------------------------------------------------------------------------------------------
# LangChain peers
# --------------------------------------------------------------------------------------------------


class _LangChainHistory:
    """Neutral messages and their LangChain twins, with which neutral message each came from.

    One neutral message can become several LangChain messages (one per tool result); ids are
    ``m{index}.{k}`` so a LangChain message always finds its neutral source.
    """

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.lc: list[Any] = []

    def add(self, message: Message) -> list[Any]:
        from langchain_core.messages import convert_to_messages

        index = len(self.messages)
        self.messages.append(message)
        converted: list[Any] = convert_to_messages(to_openai([message]))
        for k, item in enumerate(converted):
            item.id = f"m{index}.{k}"
        self.lc += converted
        return converted

    @staticmethod
    def owner(lc_message: Any) -> int | None:
        """The neutral index a LangChain message came from (``None`` for one made elsewhere)."""
        ident = lc_message.id or ""
        if not ident.startswith("m") or "." not in ident:
            return None
        return int(ident[1 : ident.index(".")])


class TrimMessagesPeer:
    """``trim_messages`` over the whole history before every request (stateless)."""

    name = PEER_TRIM

    def __init__(self, system: str, max_tokens: int) -> None:
        from langchain_core.messages import SystemMessage

        self.history = _LangChainHistory()
        self.head: list[Any] = [SystemMessage(system)] if system else []
        self.max_tokens = max_tokens

    def add(self, message: Message) -> None:
        self.history.add(message)

    def request(self) -> tuple[list[Message], Compaction | None]:
        from langchain_core.messages.utils import count_tokens_approximately, trim_messages

        started = time.thread_time()
        kept: list[Any] = trim_messages(
            self.head + self.history.lc,
            max_tokens=self.max_tokens,
            strategy="last",
            token_counter=count_tokens_approximately,
            include_system=True,
            start_on=("human", "ai"),
        )
        cpu = time.thread_time() - started
        owners = [o for o in map(self.history.owner, kept) if o is not None]
        messages = self.history.messages
        first = owners[0] if owners else len(messages)
        view = messages[first:]
        if first == 0:
            return view, None
        return view, Compaction("drop", first, cpu)


class SummarizationMiddlewarePeer:
    """LangChain's ``SummarizationMiddleware.before_model`` on the agent state before every
    request; summaries from our extractive summarizer through its ``summarizer`` hook."""

    name = PEER_SUMMARIZATION

    def __init__(
        self, counter: TokenCounter, max_input_tokens: int, *, untrimmed: bool = False
    ) -> None:
        from langchain.agents.middleware.summarization import SummarizationMiddleware
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

        # Never called: `summarizer` writes the summaries; the model only lends its profile.
        model = GenericFakeChatModel(
            messages=iter(()), profile={"max_input_tokens": max_input_tokens}
        )
        self.middleware = SummarizationMiddleware(
            model,
            trigger=("fraction", MIDDLEWARE_TRIGGER_FRACTION),
            keep=("messages", MIDDLEWARE_KEEP_MESSAGES),
            summarizer=self._summarize,
            trim_tokens_to_summarize=None if untrimmed else _default_trim(),
        )
        self.name = PEER_SUMMARIZATION_UNTRIMMED if untrimmed else PEER_SUMMARIZATION
        self.history = _LangChainHistory()
        self.state: list[Any] = []
        self.summaries: dict[str, tuple[Message, StructuredSummary | None]] = {}
        self.summarizer = MeteredSummarizer(counter)
        self._pending: StructuredSummary | None = None

    def add(self, message: Message) -> None:
        self.state += self.history.add(message)

    def request(self) -> tuple[list[Message], Compaction | None]:
        started, read_before = time.thread_time(), self.summarizer.read
        # before_model reads only the state; the runtime argument is unused by this middleware.
        update = self.middleware.before_model({"messages": self.state}, None)  # type: ignore[arg-type]
        cpu = time.thread_time() - started
        if update is None:
            return self._view(), None
        before = len(self.state)
        # The update is [RemoveMessage(all), summary message, *kept messages].
        new_state = list(update["messages"][1:])
        summary = new_state[0]
        summary.id = f"summary{len(self.summaries)}"
        text = summary.content if isinstance(summary.content, str) else str(summary.content)
        neutral = Message("user", (TextPart(text),), id=summary.id, meta=Meta(kind="summary"))
        self.summaries[summary.id] = (neutral, self._pending)
        self._pending = None
        self.state = new_state
        removed = before - len(new_state) + 1
        read = self.summarizer.read - read_before
        return self._view(), Compaction("summary", removed, cpu, (), read)

    def _view(self) -> list[Message]:
        return self._neutral(self.state)

    def _neutral(self, lc_messages: Sequence[Any]) -> list[Message]:
        out: list[Message] = []
        last = -1
        for item in lc_messages:
            owner = self.history.owner(item)
            if owner is None:
                found = self.summaries.get(item.id or "")
                if found is not None:
                    out.append(found[0])
                continue
            if owner != last:  # the tool results of one neutral message come as several
                out.append(self.history.messages[owner])
                last = owner
        return out

    def _summarize(self, lc_messages: list[Any]) -> str:
        """The middleware's ``summarizer`` hook: gets what it chose (and trimmed) to summarize."""
        previous: StructuredSummary | None = None
        for item in lc_messages:
            found = self.summaries.get(item.id or "")
            if found is not None and found[1] is not None:
                previous = found[1]
        messages = [m for m in self._neutral(lc_messages) if m.meta.kind not in SUMMARY_KINDS]
        summary = self.summarizer.summarize(messages, previous)
        self._pending = summary
        return summary.render()


# --------------------------------------------------------------------------------------------------
# Baselines
# --------------------------------------------------------------------------------------------------


class SlidingWindowBaseline:
    """Baseline: drop the oldest whole steps until the request fits; nothing kept aside."""

    name = BASELINE_SLIDING

    def __init__(self, counter: TokenCounter, fixed_tokens: int, window: int) -> None:
        self.counter = counter
        self.budget = window - fixed_tokens
        self.steps: list[list[Message]] = []
        self.sizes: list[int] = []
        self.total = 0

    def add(self, message: Message) -> None:
        size = self.counter.count_message(message)
        # Tool results belong to the assistant step that called them.
        if message.role == "tool" and self.steps and self.steps[-1][0].role == "assistant":
            self.steps[-1].append(message)
            self.sizes[-1] += size
        else:
            self.steps.append([message])
            self.sizes.append(size)
        self.total += size

    def request(self) -> tuple[list[Message], Compaction | None]:
        started = time.thread_time()
        removed = 0
        while self.total > self.budget and self.steps:
            removed += len(self.steps.pop(0))
            self.total -= self.sizes.pop(0)
        cpu = time.thread_time() - started
        view = [m for step in self.steps for m in step]
        return view, (Compaction("drop", removed, cpu) if removed else None)


class CodexLikeBaseline:
    """Baseline modelled on Codex's local compaction: recent user messages + one summary."""

    name = BASELINE_CODEX

    def __init__(self, counter: TokenCounter, fixed_tokens: int, window: int) -> None:
        self.counter = counter
        self.fixed = fixed_tokens
        self.limit = int(window * CODEX_AUTO_COMPACT_FRACTION)
        self.history: list[Message] = []
        self.summarizer = MeteredSummarizer(counter)
        self.summary: StructuredSummary | None = None
        self.compactions = 0

    def add(self, message: Message) -> None:
        self.history.append(message)

    def request(self) -> tuple[list[Message], Compaction | None]:
        if self.fixed + self.counter.count_messages(self.history) <= self.limit:
            return list(self.history), None
        started = time.thread_time()
        before = len(self.history)
        users = [m for m in self.history if m.role == "user" and m.meta.kind not in SUMMARY_KINDS]
        kept = _recent_user_messages(users, CODEX_USER_MESSAGE_MAX_TOKENS)
        replaced = [m for m in self.history if m.meta.kind not in SUMMARY_KINDS]
        read_before = self.summarizer.read
        self.summary = self.summarizer.summarize(replaced, self.summary)
        read = self.summarizer.read - read_before
        text = f"{CODEX_SUMMARY_PREFIX}\n{self.summary.render()}"
        self.compactions += 1
        note = Message(
            "user",
            (TextPart(text),),
            id=f"codex-summary{self.compactions}",
            meta=Meta(kind="summary"),
        )
        self.history = [*kept, note]
        cpu = time.thread_time() - started
        return list(self.history), Compaction("summary", before - len(kept), cpu, (), read)


class OpenHandsLikeBaseline:
    """Baseline modelled on OpenHands' default condenser: an event budget, head + summary + tail,
    and a halving condensation after the provider refuses a request as too long."""

    name = BASELINE_OPENHANDS

    def __init__(self, counter: TokenCounter, fixed_tokens: int, window: int) -> None:
        self.counter = counter
        self.fixed = fixed_tokens
        self.window = window
        self.history: list[Message] = []
        self.summarizer = MeteredSummarizer(counter)
        self.summary: StructuredSummary | None = None
        self.condensations = 0

    def add(self, message: Message) -> None:
        self.history.append(message)

    def request(self) -> tuple[list[Message], Compaction | None]:
        started, read_before = time.thread_time(), self.summarizer.read
        removed = 0
        if _events(self.history) > OPENHANDS_MAX_SIZE:
            removed += self._condense(OPENHANDS_MAX_SIZE // 2)
        refused: list[int] = []
        while (tokens := self.fixed + self.counter.count_messages(self.history)) > self.window:
            # The provider refuses this request; the agent then asks for a condensation that
            # halves the view, and sends again.
            cut = self._condense(_events(self.history) // 2)
            if not cut:
                break  # nothing left to forget: the request goes out over the window
            refused.append(tokens)
            removed += cut
        cpu = time.thread_time() - started
        if not removed:
            return list(self.history), None
        read = self.summarizer.read - read_before
        return list(self.history), Compaction("summary", removed, cpu, tuple(refused), read)

    def _condense(self, target_events: int) -> int:
        """Keep the head and the newest events up to ``target_events`` in all, summary
        included; return how many messages were forgotten (0 when nothing can be)."""
        history = self.history
        sizes = [_events((m,)) for m in history]
        head_end = head_events = 0
        while (
            head_end < len(history)
            and head_events + sizes[head_end] <= OPENHANDS_KEEP_FIRST
            and history[head_end].meta.kind not in SUMMARY_KINDS
        ):
            head_events += sizes[head_end]
            head_end += 1
        while 0 < head_end < len(history) and history[head_end].role == "tool":
            head_end -= 1  # a call whose results would be forgotten goes with them
        from_tail = target_events - head_events - 1
        if from_tail <= 0:
            return 0
        tail_start, tail_events = len(history), 0
        while tail_start > head_end and tail_events + sizes[tail_start - 1] <= from_tail:
            tail_events += sizes[tail_start - 1]
            tail_start -= 1
        while tail_start < len(history) and history[tail_start].role == "tool":
            tail_start += 1  # results whose call is forgotten are forgotten too
        forgotten = [m for m in history[head_end:tail_start] if m.meta.kind not in SUMMARY_KINDS]
        if not forgotten:
            return 0
        self.summary = self.summarizer.summarize(forgotten, self.summary)
        self.condensations += 1
        note = Message(
            "user",
            (TextPart(self.summary.render()),),
            id=f"openhands-summary{self.condensations}",
            meta=Meta(kind="summary"),
        )
        self.history = [*history[:head_end], note, *history[tail_start:]]
        return len(forgotten)


def _events(messages: Sequence[Message]) -> int:
    """OpenHands events in ``messages``: one per user or text-only assistant message, one per
    tool call (an action) and one per tool result (an observation)."""
    total = 0
    for message in messages:
        if message.role == "assistant":
            total += max(1, sum(type(p) is ToolCallPart for p in message.parts))
        elif message.role == "tool":
            total += max(1, len(message.parts))
        else:
            total += 1
    return total


def _default_trim() -> int | None:
    """The installed middleware's default ``trim_tokens_to_summarize`` (4,000 in langchain 1.4)."""
    import inspect

    from langchain.agents.middleware.summarization import SummarizationMiddleware

    default: int | None = (
        inspect.signature(SummarizationMiddleware.__init__)
        .parameters["trim_tokens_to_summarize"]
        .default
    )
    return default


def _recent_user_messages(users: Sequence[Message], max_tokens: int) -> list[Message]:
    """Codex's selection: newest first while they fit ``max_tokens`` (bytes / 4); the first one
    that does not fit is cut in its middle to the tokens left, and the walk stops there."""
    selected: list[Message] = []
    remaining = max_tokens
    for message in reversed(users):
        if remaining <= 0:
            break
        text = message.text
        tokens = -(-len(text.encode()) // CODEX_BYTES_PER_TOKEN)
        if tokens <= remaining:
            selected.append(message)
            remaining -= tokens
            continue
        selected.append(Message("user", (TextPart(_cut_middle(text, remaining)),), id=message.id))
        break
    selected.reverse()
    return selected


def _cut_middle(text: str, tokens: int) -> str:
    """Head and tail of ``text`` within ``tokens`` (bytes / 4), marked like Codex's
    ``truncate_text``: ``…N tokens truncated…``."""
    keep = tokens * CODEX_BYTES_PER_TOKEN
    head, tail = text[: keep // 2], text[len(text) - keep // 2 :]
    cut = max(0, (len(text.encode()) - keep) // CODEX_BYTES_PER_TOKEN)
    return f"{head}…{cut} tokens truncated…{tail}"


# --------------------------------------------------------------------------------------------------
# Driving a method through a transcript
# --------------------------------------------------------------------------------------------------


def make_method(
    name: str, system: str, tools: Sequence[ToolSpec], counter: TokenCounter, window: int
) -> ContextMethod:
    """A fresh ``name`` method for one transcript fitting ``window`` tokens (the effective
    window: context window minus the reply reserve)."""
    fixed = counter.count_request([], system=system, tools=tools)
    if name == PEER_TRIM:
        return TrimMessagesPeer(system, window)
    if name in (PEER_SUMMARIZATION, PEER_SUMMARIZATION_UNTRIMMED):
        untrimmed = name == PEER_SUMMARIZATION_UNTRIMMED
        return SummarizationMiddlewarePeer(counter, window, untrimmed=untrimmed)
    if name == BASELINE_SLIDING:
        return SlidingWindowBaseline(counter, fixed, window)
    if name == BASELINE_CODEX:
        return CodexLikeBaseline(counter, fixed, window)
    if name == BASELINE_OPENHANDS:
        return OpenHandsLikeBaseline(counter, fixed, window)
    from benchmarks.peers import real_peers

    for peer in real_peers():
        if peer.name == name:
            return peer.make(system, tools, counter, window)
    raise ValueError(f"unknown method {name!r}; known: {', '.join(other_methods())}")


def wire_segments(
    view: Sequence[Message], system: str, tools: Sequence[ToolSpec], provider: str
) -> list[str]:
    """The request as the provider receives it, cut where a cache prefix can end: the same
    segments :func:`contextfold.replay.cache.request_segments` gives for the engine's requests."""
    import json

    def dumps(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)

    if provider == "anthropic":
        wire = to_anthropic(view, system=system or None)
        head = [dumps(tools_to_anthropic(tools)), dumps(wire.system)]
        return head + [dumps(m) for m in wire.messages]
    messages = to_openai(view, system=system or None)
    return [dumps(tools_to_openai(tools))] + [dumps(m) for m in messages]


def replay_method(
    name: str,
    transcript: Transcript,
    info: ModelInfo,
    counter: TokenCounter,
    probes: Sequence[Probe],
    grounding: GroundingPlan | None = None,
    failed: Sequence[FailedApproach] | None = None,
) -> ReplayRun:
    """Feed ``transcript`` to the method ``name`` and measure every request as the engine's
    replay does (tokens by ``counter``, prefix reuse, cost, fit), probe the view of every
    request it compacted before for grounding (what the agent uses in the next turns), and the
    final view for retention and failed approaches. No method here has refs: nothing it takes
    out is recoverable."""
    if grounding is None:
        grounding = GroundingPlan(transcript.messages)
    if failed is None:
        failed = failed_approaches(transcript.messages)
    system = "\n\n".join(m.text for m in transcript.messages if m.role == "system" and m.text)
    tools = list(transcript.tools)
    window = ContextBudget.for_model(info).effective_window
    method = make_method(name, system, tools, counter, window)
    meter = PrefixMeter(counter, info.provider)
    anthropic, openai = price_models()
    run = ReplayRun(name, info.name, info.context_window, window)
    for index, message in enumerate(transcript.messages):
        kind = message.meta.kind
        if message.role == "system" or kind in SUMMARY_KINDS or not message.meta.agent_visible:
            continue  # the system prompt goes apart; the original agent's summaries are not input
        if message.role != "assistant":
            method.add(message)
            continue
        view, compaction = method.request()
        for refused in compaction.refused if compaction else ():
            # Sent and refused as too long: over the window, not billed, no cache written.
            run.turns.append(TurnRecord(len(run.turns), index, tokens=refused, zone="", fits=False))
        tokens = counter.count_request(view, system=system, tools=tools)
        at = view[-1].meta.created_at if view else None
        reuse = meter.measure_segments(
            wire_segments(view, system, tools, info.provider), tokens, at
        )
        edits = (EditMark(compaction.kind, compaction.removed, 0),) if compaction else ()
        if compaction is not None:
            # With the system prompt, as the engine's requests are probed.
            system_view = [Message.system(system)] if system else []
            run.grounding.add(grounding.items_at(index), ViewText.of([*system_view, *view]))
        run.turns.append(
            TurnRecord(
                turn=len(run.turns),
                message_index=index,
                tokens=tokens,
                zone="",
                fits=tokens <= window,
                edits=edits,
                compaction_cpu_seconds=compaction.cpu_seconds if compaction else 0.0,
                summary_input_tokens=compaction.summary_input_tokens if compaction else 0,
                reused_tokens=reuse.reused_tokens,
                cost_anthropic=input_cost(anthropic, reuse),
                cost_openai=input_cost(openai, reuse),
            )
        )
        method.add(message)
    final, _ = method.request()
    system_messages = [Message.system(system)] if system else []
    run.retention = check_retention(probes, [*system_messages, *final])
    run.failed_approaches = check_failed_approaches(failed, [*system_messages, *final])
    run.final_tokens = counter.count_messages(final)
    return run
