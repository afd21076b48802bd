"""pydantic-ai-harness's compaction capabilities as real peers: three rows.

What runs. ``ClearToolResults``, ``SummarizingCompaction`` and ``TieredCompaction`` from the
installed ``pydantic_ai_harness.compaction``. Each is a pydantic-ai capability whose work is done in
its ``before_model_request`` hook: the agent graph calls it before every model request with the
run context (whose ``messages`` list is the run's history) and the request being prepared; the
hook decides from its own token estimate whether to act, rewrites ``ctx.messages`` in place (so
its edits persist into every later request, as in a real run) and returns the request to send.

How it is driven. We keep the run's history as pydantic-ai ``ModelMessage`` objects, converted
from our messages with :func:`contextfold.integrations.pydantic_ai.from_messages` (the user and
tool messages between two assistant turns become one ``ModelRequest``, as pydantic-ai records
them; the system prompt rides on each request as ``instructions``, as ``Agent(instructions=...)``
puts it). Before every request we call the capability's own ``before_model_request`` with a
``RunContext`` over that history and a ``ModelRequestContext`` holding our tools as pydantic-ai
tool definitions. The messages it returns are the request: converted back to our messages with
:func:`~contextfold.integrations.pydantic_ai.to_messages` (a message the harness left untouched is
given back as the very message we added), a cleared result shows the harness' placeholder, and a
summary (the harness' ``CompactionPart``) becomes a user message of kind ``"summary"`` holding
the text pydantic-ai sends a model for it (its ``<conversation_summary>`` framing included). The
recorded assistant turn is then appended as a ``ModelResponse`` whose usage is what a provider
would report: ``input_tokens`` = the request just sent as our counter counts it (system prompt and
tools included), ``output_tokens`` = the turn. The harness anchors its estimates on that number
(and estimates only what came after it at ~4 characters a token), as it would on a real provider;
without it, its text-only estimate would not see the system prompt and tools at all.

The model. The run's model is a pydantic-ai ``FunctionModel`` that is only ever asked for
summaries: ``SummarizingCompaction`` (alone or as a tier) writes its summary with a nested
``Agent`` on the run's model, sending its own prompt: the messages it chose to summarize rendered
as a transcript (tool returns cut to its default 500 characters), and, from the second
compaction on, the previous summary to update. Our ``FunctionModel`` reads that prompt back into
messages and answers with our extractive summarizer's summary of exactly them, extending the
previous one (through :class:`contextfold.replay.driver.MeteredSummarizer`, so what it read
counts as ``summary_input_tokens``). The harness places the answer where it decides.

Configuration: the installed defaults, except the triggers, which the harness does not default
(a trigger is required) and whose documented examples are absolute (``max_tokens=100_000`` and
``120_000``; ``target_tokens=120_000`` for the tiers) and never fire in a 32k window: there they
are 80 % of the effective window (:data:`benchmarks.baselines.MIDDLEWARE_TRIGGER_FRACTION`, the
share the other peers use).

- ``ClearToolResults(max_tokens=80 %)``: ``keep_pairs=3``, placeholder
  ``"[tool result cleared]"``, inputs kept, no excluded tools, ``min_clear_tokens=None``.
- ``SummarizingCompaction(max_tokens=80 %)``: ``keep_messages=20`` (pydantic-ai messages),
  ``preserve_first_user_message=True``, ``incremental=True``, no receipts.
- ``TieredCompaction(tiers=[ClearToolResults(max_tokens=1), SummarizingCompaction(max_messages=1)],
  target_tokens=80 %)``: the README's cost-ordered stack without ``DeduplicateFileReads``, which
  has no default (which tool call reads which file is agent-specific). The tiers' own triggers are
  bypassed by the orchestrator (the README sets them to 1 for that reason); once over the target
  it clears, re-measures, and summarizes only if still over.

Reported compactions: a request where a new summary was written is a ``summary`` removing the net
number of (non-summary) messages the view lost; otherwise a request that cleared results not
cleared before is a ``drop`` of that many results. Nothing cleared or summarized is recoverable
(no ``read_result`` here), so it counts as out of view.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from importlib import metadata
from typing import Any

# Imported here so that a missing harness leaves this module (and its rows) out.
from pydantic_ai import messages as pa
from pydantic_ai.models import ModelRequestContext, ModelRequestParameters
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.usage import RequestUsage, RunUsage
from pydantic_ai_harness.compaction import (
    ClearToolResults,
    CompactionStrategy,
    SummarizingCompaction,
    TieredCompaction,
)
from pydantic_ai_harness.compaction._summary import is_summary_part

from benchmarks.baselines import MIDDLEWARE_TRIGGER_FRACTION, Compaction
from benchmarks.peers import Peer
from contextfold.compaction.summary import StructuredSummary
from contextfold.integrations.pydantic_ai import from_messages, to_messages
from contextfold.messages import Message, Meta, TextPart, ToolCallPart, ToolResultPart
from contextfold.replay.driver import MeteredSummarizer
from contextfold.replay.probes import SUMMARY_KINDS
from contextfold.tokens.counters import TokenCounter
from contextfold.tool_spec import ToolSpec

__all__ = [
    "PEERS",
    "PEER_HARNESS_CLEAR",
    "PEER_HARNESS_SUMMARIZING",
    "PEER_HARNESS_TIERED",
    "HarnessPeer",
    "transcript_messages",
]

PEER_HARNESS_CLEAR = "pydantic-ai-harness ClearToolResults"
PEER_HARNESS_SUMMARIZING = "pydantic-ai-harness SummarizingCompaction"
PEER_HARNESS_TIERED = "pydantic-ai-harness TieredCompaction"

SUMMARY_MODEL_NAME = "contextfold-extractive"
"""The name our summary-writing ``FunctionModel`` reports."""

Capability = ClearToolResults[None] | SummarizingCompaction[None] | TieredCompaction[None]


# --------------------------------------------------------------------------------------------------
# The summary model: the harness' summary prompt, answered by our extractive summarizer
# --------------------------------------------------------------------------------------------------

_MESSAGES_BLOCK = re.compile(r"<messages>\n(.*)\n</messages>", re.DOTALL)
_PREVIOUS_BLOCK = re.compile(r"<previous-summary>\n(.*)\n</previous-summary>", re.DOTALL)
# The harness escapes its own tags inside content, so a body cannot hold a closing tag.
_ELEMENT = re.compile(
    r'<message role="([a-z_]+)"((?: [a-z]+="[^"]*")*)>\n(.*?)\n</message>', re.DOTALL
)
_NAME = re.compile(r' name="([^"]*)"')


def transcript_messages(prompt: str) -> list[Message]:
    """Our messages for the transcript a ``SummarizingCompaction`` prompt holds, as a model
    reads it: tool returns as the harness cut them, tool calls paired with their returns in order.
    Summaries, system prompts and harness data in it are left out (the previous summary is
    handed over separately).

    Each message's id is derived from its content (:func:`_stable_id`): the summary cites its
    sources by id, and a fresh random id per run made two identical runs send summaries of
    different token counts (3,061,531 against 3,061,079 input tokens at 32k)."""
    block = _MESSAGES_BLOCK.search(prompt)
    if block is None:
        return []
    out: list[Message] = []
    unanswered: list[ToolCallPart] = []
    seen: dict[str, int] = {}
    for role, attributes, body in _ELEMENT.findall(block.group(1)):
        named = _NAME.search(attributes)
        name = named.group(1) if named else ""
        key = _stable_id(role, name, body, seen)
        if role == "user":
            out.append(Message.user(body, id=key))
        elif role == "assistant":
            out.append(Message.assistant(body, id=key))
        elif role == "tool_call":
            call = ToolCallPart(f"call_{len(out)}_{len(unanswered)}", name, body or "{}")
            unanswered.append(call)
            if out and out[-1].role == "assistant":
                out[-1] = out[-1].with_parts((*out[-1].parts, call))
            else:
                out.append(Message.assistant(tool_calls=[call], id=key))
        elif role in ("tool_return", "retry_feedback"):
            match = next((c for c in unanswered if c.name == name), None)
            if match is None:  # its call was not summarized with it: a user-side note
                out.append(Message.user(body, id=key))
                continue
            unanswered.remove(match)
            out.append(Message.tool(ToolResultPart(match.call_id, name, body), id=key))
    return out


def _stable_id(role: str, name: str, body: str, seen: dict[str, int]) -> str:
    """A message id that is the same in every run: a hash of the element, numbered when the
    same element comes again in one prompt."""
    digest = hashlib.sha256(f"{role}\0{name}\0{body}".encode()).hexdigest()[:16]
    seen[digest] = seen.get(digest, 0) + 1
    return f"msg_{digest}" if seen[digest] == 1 else f"msg_{digest}_{seen[digest]}"


class ExtractiveSummaryModel:
    """A pydantic-ai ``FunctionModel`` that answers the harness' summary requests with our
    extractive summarizer, counting what it reads."""

    def __init__(self, counter: TokenCounter) -> None:
        self.summarizer = MeteredSummarizer(counter)
        self.model = FunctionModel(self._answer, model_name=SUMMARY_MODEL_NAME)
        self._written: dict[str, StructuredSummary] = {}
        self._latest: StructuredSummary | None = None

    def _answer(self, messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
        prompt = _last_user_prompt(messages)
        previous: StructuredSummary | None = None
        anchor = _PREVIOUS_BLOCK.search(prompt)
        if anchor is not None:
            # The harness hands back the summary we wrote (tags escaped, which ours never hold).
            previous = self._written.get(anchor.group(1).strip(), self._latest)
        summary = self.summarizer.summarize(transcript_messages(prompt), previous)
        text = summary.render()
        self._written[text.strip()] = summary
        self._latest = summary
        return pa.ModelResponse(parts=[pa.TextPart(text)], model_name=SUMMARY_MODEL_NAME)


def _last_user_prompt(messages: Sequence[pa.ModelMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, pa.ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, pa.UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""


# --------------------------------------------------------------------------------------------------
# The peer
# --------------------------------------------------------------------------------------------------


def _summary_text(part: pa.CompactionPart) -> str:
    """What pydantic-ai sends a model for a summary ``CompactionPart``: framed user text."""
    from pydantic_ai.models import _sendable_request_parts

    request = pa.ModelRequest(parts=[part])
    sent = next(iter(_sendable_request_parts(request.parts)))
    assert isinstance(sent, pa.UserPromptPart) and isinstance(sent.content, str)
    return sent.content


class HarnessPeer:
    """One harness compaction capability, run by its ``before_model_request`` hook before every
    request on a persistent pydantic-ai history."""

    def __init__(
        self,
        name: str,
        capability: Capability,
        summary_model: ExtractiveSummaryModel,
        system: str,
        tools: Sequence[ToolSpec],
        counter: TokenCounter,
        placeholder: str | None = None,
    ) -> None:
        self.name = name
        self.capability = capability
        self.summary_model = summary_model
        self.system = system
        self.tools = list(tools)
        self.counter = counter
        self.placeholder = placeholder
        self.tool_defs = [
            ToolDefinition(
                name=t.name, description=t.description, parameters_json_schema=dict(t.parameters)
            )
            for t in tools
        ]
        self.history: list[pa.ModelMessage] = []
        self.pending: list[Message] = []
        self.last_request_tokens = 0
        # pydantic-ai message (by identity) -> our messages for it; the object is kept so that
        # its id is never reused while the entry stands.
        self._ours: dict[int, tuple[pa.ModelMessage, list[Message]]] = {}

    def add(self, message: Message) -> None:
        if message.role != "assistant":
            self.pending.append(message)
            return
        self._flush()
        response = from_messages([message])[0]
        assert isinstance(response, pa.ModelResponse)
        usage = RequestUsage(
            input_tokens=self.last_request_tokens,
            output_tokens=self.counter.count_message(message),
        )
        response = replace(response, usage=usage)
        self._remember(response, [message])
        self.history.append(response)

    def request(self) -> tuple[list[Message], Compaction | None]:
        self._flush()
        before = list(self.history)
        read_before = self.summary_model.summarizer.read
        sent, cpu = asyncio.run(self._before_model_request())
        view_before = self._view(before)
        view = self._view(sent)
        self.last_request_tokens = self.counter.count_request(
            view, system=self.system, tools=self.tools
        )
        return view, self._compaction(before, sent, view_before, view, cpu, read_before)

    async def _before_model_request(self) -> tuple[list[pa.ModelMessage], float]:
        ctx: RunContext[None] = RunContext(
            deps=None, model=self.summary_model.model, usage=RunUsage(), messages=self.history
        )
        request_context = ModelRequestContext(
            model=self.summary_model.model,
            messages=list(self.history),
            model_settings=None,
            model_request_parameters=ModelRequestParameters(function_tools=self.tool_defs),
        )
        started = time.thread_time()
        result = await self.capability.before_model_request(ctx, request_context)
        return list(result.messages), time.thread_time() - started

    def _compaction(
        self,
        before: list[pa.ModelMessage],
        sent: list[pa.ModelMessage],
        view_before: list[Message],
        view: list[Message],
        cpu: float,
        read_before: int,
    ) -> Compaction | None:
        old = {id(m) for m in before}
        summarized = any(
            id(m) not in old
            and isinstance(m, pa.ModelRequest)
            and any(map(is_summary_part, m.parts))
            for m in sent
        )
        if summarized:
            lost = _ordinary(view_before) - _ordinary(view)
            read = self.summary_model.summarizer.read - read_before
            return Compaction("summary", max(lost, 0), cpu, (), read)
        cleared = _cleared_ids(view, self.placeholder) - _cleared_ids(view_before, self.placeholder)
        if cleared:
            return Compaction("drop", len(cleared), cpu)
        return None

    def _flush(self) -> None:
        """The user and tool messages since the last assistant turn, as one ``ModelRequest``."""
        if not self.pending:
            return
        request = from_messages(self.pending)[0]
        assert isinstance(request, pa.ModelRequest)
        request = replace(request, instructions=self.system or None)
        self._remember(request, self.pending)
        self.history.append(request)
        self.pending = []

    def _remember(self, message: pa.ModelMessage, ours: list[Message]) -> None:
        self._ours[id(message)] = (message, list(ours))

    def _view(self, messages: Sequence[pa.ModelMessage]) -> list[Message]:
        view: list[Message] = []
        for message in messages:
            known = self._ours.get(id(message))
            if known is None or known[0] is not message:
                known = (message, _convert(message))
                self._ours[id(message)] = known
            view.extend(m for m in known[1] if m.role != "system" and m.meta.agent_visible)
        return view


def _convert(message: pa.ModelMessage) -> list[Message]:
    """Our messages for one the harness made or edited: summaries as summary user messages."""
    if not isinstance(message, pa.ModelRequest):
        return to_messages([message])
    out: list[Message] = []
    run: list[pa.ModelRequestPart] = []
    for part in message.parts:
        if is_summary_part(part):
            if run:
                out += to_messages([replace(message, parts=run)])
                run = []
            text = _summary_text(part)
            out.append(Message("user", (TextPart(text),), meta=Meta(kind="summary")))
        else:
            run.append(part)
    if run:
        out += to_messages([replace(message, parts=run)])
    return out


def _ordinary(view: Sequence[Message]) -> int:
    return sum(m.meta.kind not in SUMMARY_KINDS for m in view)


def _cleared_ids(view: Sequence[Message], placeholder: str | None) -> set[str]:
    if placeholder is None:
        return set()
    return {r.call_id for m in view for r in m.tool_results if r.content == placeholder}


# --------------------------------------------------------------------------------------------------
# The rows
# --------------------------------------------------------------------------------------------------


def _trigger(window: int) -> int:
    return int(window * MIDDLEWARE_TRIGGER_FRACTION)


def _make(
    name: str, build: Callable[[int, ExtractiveSummaryModel], Capability]
) -> Callable[[str, Sequence[ToolSpec], TokenCounter, int], HarnessPeer]:
    def make(
        system: str, tools: Sequence[ToolSpec], counter: TokenCounter, window: int
    ) -> HarnessPeer:
        model = ExtractiveSummaryModel(counter)
        capability = build(_trigger(window), model)
        placeholder = _placeholder(capability)
        return HarnessPeer(name, capability, model, system, tools, counter, placeholder)

    return make


def _placeholder(capability: Capability) -> str | None:
    tiers: Sequence[Any] = (
        capability.tiers if isinstance(capability, TieredCompaction) else (capability,)
    )
    return next((t.placeholder for t in tiers if isinstance(t, ClearToolResults)), None)


def _clear(trigger: int, model: ExtractiveSummaryModel) -> Capability:
    return ClearToolResults[None](max_tokens=trigger)


def _summarizing(trigger: int, model: ExtractiveSummaryModel) -> Capability:
    # model=None: the summary is written by the run's model, our FunctionModel.
    return SummarizingCompaction[None](max_tokens=trigger)


def _tiered(trigger: int, model: ExtractiveSummaryModel) -> Capability:
    # The tiers' own triggers are bypassed by the orchestrator; 1 is the README's "any valid value".
    tiers: list[CompactionStrategy[None]] = [
        ClearToolResults[None](max_tokens=1),
        SummarizingCompaction[None](max_messages=1),
    ]
    return TieredCompaction[None](tiers=tiers, target_tokens=trigger)


def _label(what: str) -> Callable[[], str]:
    def label() -> str:
        harness = metadata.version("pydantic-ai-harness")
        slim = metadata.version("pydantic-ai-slim")
        return f"peer: pydantic-ai-harness {harness} ({what}; pydantic-ai-slim {slim})"

    return label


PEERS: tuple[Peer, ...] = (
    Peer(
        PEER_HARNESS_CLEAR,
        _label("ClearToolResults, max_tokens = 80 % of the window, keep_pairs=3"),
        _make(PEER_HARNESS_CLEAR, _clear),
    ),
    Peer(
        PEER_HARNESS_SUMMARIZING,
        _label("SummarizingCompaction, max_tokens = 80 % of the window, keep_messages=20"),
        _make(PEER_HARNESS_SUMMARIZING, _summarizing),
    ),
    Peer(
        PEER_HARNESS_TIERED,
        _label(
            "TieredCompaction: ClearToolResults then SummarizingCompaction, "
            "target_tokens = 80 % of the window"
        ),
        _make(PEER_HARNESS_TIERED, _tiered),
    ),
)
