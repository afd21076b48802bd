"""The OpenAI Agents SDK's own context management, run offline as two benchmark rows.

Both rows feed the transcript to the SDK as Responses input items, made by the converters our
integration already uses (:func:`~contextfold.integrations._openai_agents_items.items_from_messages`
one message at a time, so every item is known to come from one of our messages), and map what
the SDK hands back to our messages: an item the SDK left alone becomes the very message it was
made from (its id, its thinking, its meta), so the benchmark counts the same request a real
run would send.

- ``openai-agents ToolOutputTrimmer`` — ``agents.extensions.ToolOutputTrimmer()`` with its
  defaults (the last 2 user messages and everything after them untouched; older tool outputs
  over 500 characters replaced by a 200-character preview under a ``[Trimmed: ...]`` header).
  It is a ``call_model_input_filter``: before every request we call it with the whole history
  as ``ModelInputData``, as the Runner does, and send what it returns. A trimmed output keeps
  the SDK's text. It is stateless, so each request trims afresh; the row counts as removed the
  outputs trimmed for the first time. Note: with a single user message (one task, then a tool
  loop) it has no "old turn" and never trims, which is what the SDK does with such a run.
- ``openai-agents compaction session`` — ``agents.memory.OpenAIResponsesCompactionSession``
  over the SDK's in-memory ``SQLiteSession``. Each message's items are added to the session as
  the transcript goes; before every request we call its ``run_compaction()``, so the session's
  own code reads the stored history, asks its decision hook, sends the history to
  ``responses.compact`` (input mode: there is no stored response to point at) and replaces the
  stored history with what comes back. The view is the session's items.

  Two things differ from a live run, both said here. The decision hook: the SDK's default
  compacts as soon as 10 items other than user messages are stored (three or four tool calls
  with their outputs), whatever their size, which would compact at almost every request of a
  coding session; we pass instead a
  hook that compacts when the request (system prompt and tools included, counted with the
  benchmark's counter) reaches 80 % of the effective window, the same threshold as our own
  compaction and the LangChain middleware row. The timing: the Runner asks for compaction
  only after a turn that produced no local tool outputs (a tool turn only marks it as due),
  so within one long tool loop it would never compact; we ask before every request instead.

  The client is a fake standing in for ``AsyncOpenAI``: its ``responses.compact`` answers with
  a ``CompactedResponse`` shaped as the API's (every user message it was sent, kept as it
  was, then one ``compaction`` item) whose ``encrypted_content`` is a summary written by our
  :class:`~contextfold.replay.driver.MeteredSummarizer` (the extractive summarizer every
  summarizing row gets) of the items it was sent, extending the summary of an earlier
  compaction item among them. The tokens the summarizer reads are the row's summary input.
  In the view, the compaction item becomes a user message of kind ``summary`` holding that
  text (where the real API's item is opaque to us but read by the model).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import metadata
from typing import Any

from agents import Agent
from agents.extensions import ToolOutputTrimmer
from agents.memory import OpenAIResponsesCompactionSession, SQLiteSession
from agents.run_config import CallModelData, ModelInputData
from openai.types.responses.compacted_response import CompactedResponse

from benchmarks.baselines import Compaction, ContextMethod
from benchmarks.peers import Peer
from contextfold.compaction.summary import StructuredSummary
from contextfold.hosts.digests import message_digest
from contextfold.integrations._openai_agents_items import (
    Item,
    items_from_messages,
    messages_from_items,
)
from contextfold.messages import Message, Meta, TextPart, ToolResultPart
from contextfold.replay.driver import MeteredSummarizer
from contextfold.tokens.counters import TokenCounter
from contextfold.tool_spec import ToolSpec

__all__ = [
    "COMPACTION_TRIGGER_FRACTION",
    "PEERS",
    "PEER_COMPACTION_SESSION",
    "PEER_TOOL_OUTPUT_TRIMMER",
    "CompactionSessionPeer",
    "FakeCompactClient",
    "ToolOutputTrimmerPeer",
]

PEER_TOOL_OUTPUT_TRIMMER = "openai-agents ToolOutputTrimmer"
PEER_COMPACTION_SESSION = "openai-agents compaction session"
COMPACTION_TRIGGER_FRACTION = 0.8
"""The compaction session compacts at this share of the effective window (our threshold)."""
COMPACTION_MODEL = "gpt-4.1"
"""The model named in ``responses.compact`` calls (the session's default; the fake ignores it)."""


def _version() -> str:
    return metadata.version("openai-agents")


# --------------------------------------------------------------------------------------------------
# Our messages as SDK items, and back
# --------------------------------------------------------------------------------------------------


def _item_key(item: Item) -> bytes:
    """What one item says, the same whatever shape the SDK or the API gave it (a user message
    as a string or as ``input_text`` parts, with or without an id)."""
    return message_digest(messages_from_items([item])[0])


class _ItemLedger:
    """The messages fed so far, the SDK items each one became, and which message each item
    came from, so that a list of items the SDK hands back maps to our messages."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.items: list[Item] = []
        self.owners: list[int] = []
        """For each item, the index of the message it was made from."""
        self._by_key: dict[bytes, list[int]] = {}

    def add(self, message: Message) -> list[Item]:
        index = len(self.messages)
        self.messages.append(message)
        made = items_from_messages([message])
        for item in made:
            self._by_key.setdefault(_item_key(item), []).append(len(self.items))
            self.items.append(item)
            self.owners.append(index)
        return made

    def to_messages(
        self, items: Sequence[Item], special: Callable[[Item], Message | None]
    ) -> list[Message]:
        """``items`` as our messages: each item's source message once (consecutive items of
        one message are one message); ``special`` gives the message for an item we did not
        make (``None``: convert it as the integration does)."""
        # Equal items (the same user text twice) are matched to the newest ones made: the SDK
        # keeps a suffix of what it was given, plus the user messages it always keeps.
        keys = [_item_key(item) for item in items]
        seen_in_view: dict[bytes, int] = {}
        for key in keys:
            seen_in_view[key] = seen_in_view.get(key, 0) + 1
        taken: dict[bytes, int] = {}
        out: list[Message] = []
        last_owner = -1
        for item, key in zip(items, keys, strict=True):
            made = special(item)
            if made is None:
                candidates = self._by_key.get(key, [])
                nth = taken.get(key, 0)
                taken[key] = nth + 1
                position = len(candidates) - seen_in_view[key] + nth
                if 0 <= position < len(candidates):
                    owner = self.owners[candidates[position]]
                    if owner != last_owner:
                        out.append(self.messages[owner])
                        last_owner = owner
                    continue
                made = messages_from_items([item])[0]
            out.append(made)
            last_owner = -1
        return out


# --------------------------------------------------------------------------------------------------
# ToolOutputTrimmer
# --------------------------------------------------------------------------------------------------


class ToolOutputTrimmerPeer:
    """The SDK's ``ToolOutputTrimmer`` (its defaults) as the input filter of every request."""

    name = PEER_TOOL_OUTPUT_TRIMMER

    def __init__(self, system: str) -> None:
        self.trimmer = ToolOutputTrimmer()
        self.ledger = _ItemLedger()
        self.system = system
        # The filter is handed the agent with the data; the trimmer does not look at it.
        self.agent: Agent[Any] = Agent(name="benchmark", instructions=system or None)
        self.trimmed_before: set[str] = set()

    def add(self, message: Message) -> None:
        self.ledger.add(message)

    def request(self) -> tuple[list[Message], Compaction | None]:
        started = time.process_time()
        given = list(self.ledger.items)
        data = CallModelData(
            model_data=ModelInputData(input=given, instructions=self.system or None),  # type: ignore[arg-type]
            agent=self.agent,
            context=None,
        )
        sent = self.trimmer(data).input
        view, trimmed = self._view(given, sent)
        cpu = time.process_time() - started
        new = trimmed - self.trimmed_before
        self.trimmed_before |= trimmed
        return view, (Compaction("drop", len(new), cpu) if new else None)

    def _view(self, given: list[Item], sent: Sequence[Any]) -> tuple[list[Message], set[str]]:
        """The messages sent, and the call ids of the outputs the trimmer replaced. The
        trimmer keeps positions (it swaps an output for a trimmed copy), so item ``i`` sent
        stands for item ``i`` given."""
        owners = self.ledger.owners
        changed: dict[int, dict[int, str]] = {}  # message index -> {result index: trimmed text}
        first_item_of: dict[int, int] = {}
        for position, owner in enumerate(owners):
            first_item_of.setdefault(owner, position)
            if sent[position] is given[position]:
                continue
            trimmed = messages_from_items([sent[position]])[0].tool_results[0].content
            changed.setdefault(owner, {})[position - first_item_of[owner]] = trimmed
        view: list[Message] = []
        trimmed_ids: set[str] = set()
        for index, message in enumerate(self.ledger.messages):
            edits = changed.get(index)
            if not edits:
                view.append(message)
                continue
            results = [p for p in message.parts if isinstance(p, ToolResultPart)]
            new_results = {
                id(results[k]): replace(results[k], content=text) for k, text in edits.items()
            }
            trimmed_ids |= {results[k].call_id for k in edits}
            parts = tuple(new_results.get(id(p), p) for p in message.parts)
            view.append(replace(message, parts=parts))
        return view, trimmed_ids


# --------------------------------------------------------------------------------------------------
# OpenAIResponsesCompactionSession
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _WrittenSummary:
    """One summary the fake client wrote: the message standing for it and what it extends."""

    message: Message
    summary: StructuredSummary


class FakeCompactClient:
    """Stands in for ``AsyncOpenAI`` where the compaction session uses it: ``responses.compact``
    only, answered here without any network, by ``summarize(items)`` (the summary text)."""

    def __init__(self, summarize: Callable[[list[Item]], tuple[str, int, int]]) -> None:
        self.responses = _FakeResponses(summarize)


class _FakeResponses:
    def __init__(self, summarize: Callable[[list[Item]], tuple[str, int, int]]) -> None:
        self._summarize = summarize
        self.calls = 0

    async def compact(
        self, *, model: str, input: list[Item] | None = None, **options: Any
    ) -> CompactedResponse:
        """A compacted response as the API gives one: each user message sent, then one
        ``compaction`` item (here holding our summary in clear)."""
        if input is None:
            raise ValueError(
                f"the fake compact client needs the items (input mode), got {sorted(options)}"
            )
        self.calls += 1
        text, read, written = self._summarize(list(input))
        kept: list[dict[str, Any]] = []
        for n, item in enumerate(input):
            if item.get("role") != "user":
                continue
            content = item.get("content")
            if isinstance(content, str):
                content = [{"type": "input_text", "text": content}]
            message_id = item.get("id") or f"msg_compact{self.calls}_{n}"
            kept.append(
                {
                    "type": "message",
                    "id": message_id,
                    "role": "user",
                    "status": "completed",
                    "content": content,
                }
            )
        compaction = {"type": "compaction", "id": f"cmp_{self.calls}", "encrypted_content": text}
        usage = {
            "input_tokens": read,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": written,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": read + written,
        }
        # Built the way the openai client builds a parsed reply (lenient: the API sends user
        # messages inside output message items, whose declared role is "assistant").
        return CompactedResponse.construct(
            id=f"resp_compact{self.calls}",
            object="response.compaction",
            created_at=0,
            output=[*kept, compaction],
            usage=usage,
        )


class CompactionSessionPeer:
    """The SDK's ``OpenAIResponsesCompactionSession`` over an in-memory ``SQLiteSession``,
    compacting (through a fake ``responses.compact``) at 80 % of the effective window."""

    name = PEER_COMPACTION_SESSION

    def __init__(
        self, system: str, tools: Sequence[ToolSpec], counter: TokenCounter, window: int
    ) -> None:
        self.counter = counter
        self.fixed = counter.count_request([], system=system, tools=tools)
        self.limit = int(window * COMPACTION_TRIGGER_FRACTION)
        self.ledger = _ItemLedger()
        self.summarizer = MeteredSummarizer(counter)
        self.summaries: dict[str, _WrittenSummary] = {}
        self.client = FakeCompactClient(self._summarize)
        self.session = OpenAIResponsesCompactionSession(
            "benchmark",
            SQLiteSession("benchmark"),
            client=self.client,  # type: ignore[arg-type]
            model=COMPACTION_MODEL,
            should_trigger_compaction=self._should_compact,
        )
        self._view: list[Message] = []

    def add(self, message: Message) -> None:
        items = self.ledger.add(message)
        if items:
            asyncio.run(self.session.add_items(items))  # type: ignore[arg-type]

    def request(self) -> tuple[list[Message], Compaction | None]:
        started, read_before = time.process_time(), self.summarizer.read
        before = self._messages(asyncio.run(self.session.get_items()))
        compactions = len(self.summaries)
        asyncio.run(self.session.run_compaction())
        if len(self.summaries) == compactions:
            return before, None
        view = self._messages(asyncio.run(self.session.get_items()))
        # process_time, not thread_time: the SQLite session works in worker threads.
        cpu = time.process_time() - started
        removed = len(before) - (len(view) - 1)
        read = self.summarizer.read - read_before
        return view, Compaction("summary", removed, cpu, (), read)

    def _messages(self, items: Sequence[Any]) -> list[Message]:
        return self.ledger.to_messages([dict(item) for item in items], self._summary_message)

    def _summary_message(self, item: Item) -> Message | None:
        if item.get("type") != "compaction":
            return None
        text = str(item.get("encrypted_content", ""))
        written = self.summaries.get(text)
        if written is not None:
            return written.message
        return Message("user", (TextPart(text),), meta=Meta(kind="summary"))

    def _should_compact(self, context: Mapping[str, Any]) -> bool:
        """The decision hook: compact when the request reaches 80 % of the window."""
        history = self._messages(context["session_items"])
        return self.fixed + self.counter.count_messages(history) >= self.limit

    def _summarize(self, items: list[Item]) -> tuple[str, int, int]:
        """The fake ``responses.compact``'s summary of ``items`` (extending the summary of the
        last compaction item among them): its text, the tokens read, the tokens written."""
        previous: StructuredSummary | None = None
        for item in items:
            if item.get("type") == "compaction":
                found = self.summaries.get(str(item.get("encrypted_content", "")))
                previous = found.summary if found is not None else previous
        plain = [item for item in items if item.get("type") != "compaction"]
        read_before = self.summarizer.read
        summary = self.summarizer.summarize(
            self.ledger.to_messages(plain, lambda _: None), previous
        )
        text = summary.render()
        message = Message(
            "user",
            (TextPart(text),),
            id=f"openai-agents-compaction{len(self.summaries) + 1}",
            meta=Meta(kind="summary"),
        )
        self.summaries[text] = _WrittenSummary(message, summary)
        return text, self.summarizer.read - read_before, self.counter.count_text(text)


# --------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------


def _make_trimmer(
    system: str, tools: Sequence[ToolSpec], counter: TokenCounter, window: int
) -> ContextMethod:
    return ToolOutputTrimmerPeer(system)


def _make_compaction_session(
    system: str, tools: Sequence[ToolSpec], counter: TokenCounter, window: int
) -> ContextMethod:
    return CompactionSessionPeer(system, tools, counter, window)


PEERS: tuple[Peer, ...] = (
    Peer(
        PEER_TOOL_OUTPUT_TRIMMER,
        lambda: (
            f"peer: openai-agents {_version()} (ToolOutputTrimmer, its defaults: recent_turns=2, "
            "max_output_chars=500, preview_chars=200)"
        ),
        _make_trimmer,
    ),
    Peer(
        PEER_COMPACTION_SESSION,
        lambda: (
            f"peer: openai-agents {_version()} (OpenAIResponsesCompactionSession over "
            "SQLiteSession, run_compaction before every request, compacting at 80 % of the "
            "window instead of its default 10 items; fake responses.compact with our "
            "extractive summary)"
        ),
        _make_compaction_session,
    ),
)
