"""``LLMSummarizer``: the eight-section summary written by a model, with a safe fallback.

The model sees the previous summary (to extend, not rewrite), the project instructions, an
optional focus, and the messages to summarize rendered as plain text with their ids (tool outputs
clipped: the model needs their gist, and the full text stays recoverable by ref). Its reply must
contain all eight ``## Section`` headings; it is parsed back into a
:class:`~contextfold.compaction.summary.StructuredSummary` and merged into the previous one
(earlier items are kept even if the model dropped them). Any failure (an exception, a missing
section, an empty reply) falls back to the extractive summary: the result carries
``fallback_reason`` and, when ``on_event`` is given, a ``SummarizerFellBack`` event is sent. Inside
a compaction leave ``on_event`` unset: the compaction reports the fallback itself, once, from
``fallback_reason``.

Every request fits the summarizing model's own window
-----------------------------------------------------

The summarizing model is often a small local one with a small window (a 4k llama.cpp server), not
the agent's model. Its window is the ``context_window`` given, else the registry's entry for the
model, else :data:`DEFAULT_SUMMARIZER_WINDOW`. The reply budget comes out of it first, then a
margin for the counter's error, the system prompt, and a bounded share for the summary so far;
what is left holds the messages. When they do not fit in one request they are **folded
progressively**: the first chunk is summarized, that summary is the "summary so far" of the
request for the next chunk, and so on. Folding reuses the one operation the model already does
(extend a summary), keeps the chronology (the latest chunk sets Current Task and Next Steps), and
needs no merge call at the end, which a summarize-chunks-then-merge scheme would (with the merge
request itself to fit). At most ``max_calls`` requests are made: older chunks are folded in by the
extractive summarizer first (no model call), so nothing is left out.

A provider that still refuses a request as too long (its real window smaller than told, a
tokenizer that counts more) is answered once: the window and the count it reported are learned
(kept for later summaries too), the remaining messages are chunked again, and the request is
retried; a second refusal falls back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from contextfold.chat import ChatRequest, SystemBlock
from contextfold.compaction.summary import (
    SECTION_NAMES,
    ExtractiveSummarizer,
    StructuredSummary,
    Summarizer,
    SummaryCaps,
    present_sections,
)
from contextfold.errors import ContextOverflowError
from contextfold.events import SummarizerFellBack
from contextfold.messages import Message, SummaryPart
from contextfold.model_registry import ModelInfo, default_registry
from contextfold.providers.base import ChatModel
from contextfold.tokens.counters import TokenCounter, counter_for

__all__ = [
    "DEFAULT_LLM_ESTIMATE_MARGIN",
    "DEFAULT_LLM_INPUT_CHARS",
    "DEFAULT_LLM_MAX_CALLS",
    "DEFAULT_LLM_MAX_TOKENS",
    "DEFAULT_LLM_REPLY_SHARE",
    "DEFAULT_LLM_RESULT_CHARS",
    "DEFAULT_SUMMARIZER_WINDOW",
    "LLMSummarizer",
]

DEFAULT_LLM_INPUT_CHARS = 60_000
"""Most characters of conversation the model reads for one summary; older messages are folded
in by the extractive summarizer (the previous summary already covers the distant past)."""
DEFAULT_LLM_RESULT_CHARS = 1_800
"""Characters of each tool output shown to the summarizing model: the gist (the command's
outcome, the error) without letting one output crowd the others out of its window."""
DEFAULT_LLM_MAX_TOKENS = 2_000
"""Reply budget of the summarizing model (less in a small window: see the reply share)."""
DEFAULT_SUMMARIZER_WINDOW = 4_096
"""Window assumed for a summarizing model the registry does not know and no one described: the
context llama.cpp's server and Ollama give a model unless told otherwise."""
DEFAULT_LLM_REPLY_SHARE = 0.25
"""Most of the window the reply budget may take (a 4k window keeps 3k for the request)."""
DEFAULT_LLM_ESTIMATE_MARGIN = 0.15
"""Share of the request budget kept free for the counter's error: the model's own tokenizer and
chat template may count more than contextfold's estimate."""
DEFAULT_LLM_MAX_CALLS = 4
"""Most model calls one summary makes; older messages are folded in extractively."""
PREVIOUS_SUMMARY_SHARE = 1 / 3
"""Most of a request's room the summary so far may take (it is shown capped; the full one is
what the reply extends)."""
MIN_CHUNK_TOKENS = 256
"""Least room for messages a request must leave; below it the window is too small to summarize
in and the extractive summary is used."""

SYSTEM_PROMPT = """\
You write checkpoint summaries of a coding agent's session, so the agent can continue after its
earlier messages are removed from its context. Be precise and terse; never invent facts.

Reply with exactly these eight markdown sections, in this order, each a heading followed by
bullet items (write "- (none)" for an empty section):
## Session Intent
## Current Task
## Files Modified
## Files Read
## Key Decisions
## Failed Approaches
## Errors Encountered
## Next Steps

Rules:
- Files: the path, then a few words on what changed or why it was read. No file contents.
- Errors: quote the exact error line. Failed approaches: what was tried and why it failed, so
  it is not tried again.
- Decisions: state the choice and the reason.
- End an item with [src: <message id>] naming the message it comes from, and keep any ref_...
  identifiers you see next to the output they refer to (the agent can read those outputs again).
- A summary so far may be given: do not repeat its items; write only what is new or changed.
  Current Task and Next Steps describe the state now."""

_MIN_CAP_CHARS = 200
"""Capping a summary below this many characters keeps only its headings and the task."""
_PREVIOUS_HEADER = "Summary so far (extend it):\n"
_MESSAGES_HEADER = "Messages to summarize:\n"


@dataclass(frozen=True, slots=True)
class _Entry:
    """One message as the model reads it."""

    message: Message
    text: str


class LLMSummarizer:
    """A :class:`~contextfold.compaction.summary.Summarizer` backed by any ``ChatModel``.

    ``context_window`` is the summarizing model's window (see the module docstring for the
    default); ``counter`` counts tokens for it (by default the counter of its registry entry).
    The window and token scale a provider's overflow revealed are kept for later summaries.
    """

    name = "llm"

    def __init__(
        self,
        model: ChatModel,
        *,
        instructions: str | Callable[[], str | None] | None = None,
        fallback: Summarizer | None = None,
        caps: SummaryCaps | None = None,
        max_input_chars: int = DEFAULT_LLM_INPUT_CHARS,
        max_result_chars: int = DEFAULT_LLM_RESULT_CHARS,
        max_tokens: int = DEFAULT_LLM_MAX_TOKENS,
        context_window: int | None = None,
        counter: TokenCounter | None = None,
        max_calls: int = DEFAULT_LLM_MAX_CALLS,
        on_event: Callable[[SummarizerFellBack], None] | None = None,
    ) -> None:
        self.model = model
        self.instructions = instructions
        self.caps = caps or SummaryCaps()
        self.fallback = fallback or ExtractiveSummarizer(self.caps)
        self.max_input_chars = max_input_chars
        self.max_result_chars = max_result_chars
        self.max_tokens = max_tokens
        self.max_calls = max(1, max_calls)
        self.on_event = on_event
        known = _registry_window(model)
        self.context_window = context_window or known or DEFAULT_SUMMARIZER_WINDOW
        self.counter = counter or counter_for(_known_info(model) or "heuristic")
        self._scale = 1.0
        """How many tokens the provider counted for each one the counter did (learned, >= 1)."""

    # -- the budget --------------------------------------------------------------------------------

    @property
    def reply_tokens(self) -> int:
        """The reply budget each request asks for (``max_tokens``, within the reply share)."""
        return max(1, min(self.max_tokens, int(self.context_window * DEFAULT_LLM_REPLY_SHARE)))

    @property
    def prompt_tokens(self) -> int:
        """Counted tokens a request may take: the window less the reply, less the margin."""
        room = self.context_window - self.reply_tokens
        return int(room * (1 - DEFAULT_LLM_ESTIMATE_MARGIN) / self._scale)

    def _tokens(self, text: str) -> int:
        return self.counter.count_text(text)

    # -- summarizing -------------------------------------------------------------------------------

    def summarize(
        self,
        messages: Sequence[Message],
        previous: StructuredSummary | None = None,
        focus: str | None = None,
    ) -> StructuredSummary:
        """The model's summary of ``messages`` extending ``previous``; the fallback's on failure."""
        try:
            return self._fold(messages, previous, focus)
        except Exception as exc:  # any failure of the model's summary: the extractive one stands in
            reason = f"{type(exc).__name__}: {exc}"
            if self.on_event is not None:
                self.on_event(SummarizerFellBack(error=reason))
            summary = self.fallback.summarize(messages, previous, focus)
            return StructuredSummary(summary.sections, summary.omitted, reason)

    def _fold(
        self,
        messages: Sequence[Message],
        previous: StructuredSummary | None,
        focus: str | None,
    ) -> StructuredSummary:
        """The summary, folded chunk by chunk (see the module docstring)."""
        older, entries = self._entries(messages)
        running = self.fallback.summarize(older, previous, focus) if older else previous
        calls = self.max_calls
        refused: ContextOverflowError | None = None  # the one overflow answered by a retry
        while entries:
            try:
                chunks = self._chunks(entries, focus)
            except ValueError:
                if refused is not None:  # what was learned left no room: the refusal says why
                    raise refused from None
                raise
            if len(chunks) > calls:  # the oldest are folded in without a model call
                folded = [e.message for chunk in chunks[:-calls] for e in chunk]
                running = self.fallback.summarize(folded, running, focus)
                entries, chunks = entries[len(folded) :], chunks[-calls:]
            try:
                for chunk in chunks:
                    running = self._summarize_chunk(chunk, running, focus)
                    entries, calls = entries[len(chunk) :], calls - 1
            except ContextOverflowError as error:
                if refused is not None or calls == 0:
                    raise
                refused = error  # learned from: what is left is chunked again, once
        return running if running is not None else StructuredSummary().capped(self.caps)

    def _summarize_chunk(
        self, chunk: Sequence[_Entry], running: StructuredSummary | None, focus: str | None
    ) -> StructuredSummary:
        request = self._request(chunk, running, focus)
        try:
            reply = self.model.complete(request).text
        except ContextOverflowError as error:
            self._learn(error, self._count(request))
            raise
        missing = [s for s in SECTION_NAMES if s not in present_sections(reply)]
        if missing:
            raise ValueError(f"the reply lacks the section(s) {', '.join(missing)}")
        written = StructuredSummary.from_markdown(reply)
        return running.extend(written, self.caps) if running else written.capped(self.caps)

    def _learn(self, error: ContextOverflowError, counted: int) -> None:
        """Take in what an overflow said: the provider's window, and how many tokens it counted
        for each of ours. Whatever it said, the budget ends below the ``counted`` tokens it
        refused (at half of them when its figures do not say more), so a retry is smaller."""
        if error.limit and error.limit < self.context_window:
            self.context_window = error.limit
        if error.prompt_tokens and counted:
            self._scale = max(self._scale, error.prompt_tokens / counted)
        if self.prompt_tokens >= counted:
            self._scale *= 2 * self.prompt_tokens / counted

    def _count(self, request: ChatRequest) -> int:
        """Counted tokens of a request's prompt."""
        system = "\n\n".join(b.text for b in request.system)
        return self.counter.count_request(request.messages, system=system)

    # -- the requests ------------------------------------------------------------------------------

    def request(
        self,
        messages: Sequence[Message],
        previous: StructuredSummary | None,
        focus: str | None,
    ) -> ChatRequest:
        """The request for the first chunk of ``messages`` that fits the model's window (for
        inspection and logs); :meth:`summarize` sends one per chunk."""
        chunks = self._chunks(self._entries(messages)[1], focus)
        return self._request(chunks[0] if chunks else [], previous, focus)

    def _system(self) -> tuple[SystemBlock, ...]:
        blocks = [SystemBlock(SYSTEM_PROMPT, cache=True)]
        instructions = self.instructions() if callable(self.instructions) else self.instructions
        if instructions:
            blocks.append(SystemBlock(f"Project instructions the agent follows:\n{instructions}"))
        return tuple(blocks)

    def _request(
        self, chunk: Sequence[_Entry], previous: StructuredSummary | None, focus: str | None
    ) -> ChatRequest:
        parts = []
        if previous is not None:
            parts.append(_PREVIOUS_HEADER + self._previous_text(previous, focus))
        if focus:
            parts.append(f"Focus on: {focus}")
        parts.append(_MESSAGES_HEADER + "\n".join(e.text for e in chunk))
        return ChatRequest(
            messages=(Message.user("\n\n".join(parts)),),
            system=self._system(),
            max_tokens=self.reply_tokens,
        )

    def _room(self, focus: str | None) -> int:
        """Counted tokens left for the summary so far and the messages in one request."""
        frame = [_PREVIOUS_HEADER, _MESSAGES_HEADER, f"Focus on: {focus}" if focus else ""]
        empty = ChatRequest(messages=(Message.user("\n\n".join(frame)),), system=self._system())
        return self.prompt_tokens - self._count(empty)

    def _previous_text(self, previous: StructuredSummary, focus: str | None) -> str:
        """The summary so far within its share of the room: capped while capping helps, then
        clipped (the full summary is the one the reply extends)."""
        room = int(self._room(focus) * PREVIOUS_SUMMARY_SHARE)
        text = previous.render()
        chars = len(text)
        while self._tokens(text) > room and chars > _MIN_CAP_CHARS:
            chars = max(_MIN_CAP_CHARS, chars * 2 // 3)
            text = previous.capped(SummaryCaps(self.caps.per_section, chars)).render()
        return self._clip_to(text, room)

    def _chunks(self, entries: Sequence[_Entry], focus: str | None) -> list[list[_Entry]]:
        """``entries`` packed in order into chunks that fit one request each."""
        room = self._room(focus)
        chunk_room = room - int(room * PREVIOUS_SUMMARY_SHARE)
        if chunk_room < MIN_CHUNK_TOKENS:
            raise ValueError(
                f"the summarizing model's window of {self.context_window:,} tokens leaves "
                f"{max(0, chunk_room):,} for the messages (at least {MIN_CHUNK_TOKENS} needed); "
                "give LLMSummarizer a model with a larger context_window"
            )
        chunks: list[list[_Entry]] = [[]]
        used = 0
        for entry in entries:
            tokens = self._tokens(entry.text) + 1  # the line break
            if tokens > chunk_room:
                entry = _Entry(entry.message, self._clip_to(entry.text, chunk_room - 1))
                tokens = chunk_room
            if used + tokens > chunk_room and chunks[-1]:
                chunks.append([])
                used = 0
            chunks[-1].append(entry)
            used += tokens
        return [c for c in chunks if c]

    def _clip_to(self, text: str, tokens: int) -> str:
        """``text`` clipped in its middle to about ``tokens`` counted tokens."""
        clipped, chars = text, len(text)
        while chars > 0 and self._tokens(clipped) > tokens:
            chars = int(chars * min(0.9, tokens / max(1, self._tokens(clipped))))
            clipped = _clip(text, chars)
        return clipped

    # -- rendering the conversation -------------------------------------------------------------

    def _entries(self, messages: Sequence[Message]) -> tuple[list[Message], list[_Entry]]:
        """The visible messages beyond the newest ``max_input_chars`` (folded in extractively),
        and the newest as the model reads them."""
        entries = [_Entry(m, self._render(m)) for m in messages if m.meta.agent_visible]
        total = 0
        for start in range(len(entries) - 1, 0, -1):
            total += len(entries[start].text) + 1
            if total > self.max_input_chars:
                keep = min(start + 1, len(entries) - 1)  # the newest message at least
                return [e.message for e in entries[:keep]], entries[keep:]
        return [], entries

    def _render(self, message: Message) -> str:
        out = [f"[{message.id}] {message.role}:"]
        for part in message.parts:
            if isinstance(part, SummaryPart):
                out.append(part.text)
        if message.text and not any(isinstance(p, SummaryPart) for p in message.parts):
            out.append(message.text)
        for call in message.tool_calls:
            out.append(f"call {call.name} {_clip(call.arguments, self.max_result_chars)}")
        for result in message.tool_results:
            status = " (error)" if result.is_error else ""
            ref = f" {result.ref}" if result.ref else ""
            body = _clip(result.content, self.max_result_chars)
            out.append(f"result of {result.name}{status}{ref}: {body}")
        return "\n".join(out)


def _known_info(model: ChatModel) -> ModelInfo | None:
    """The registry's entry for ``model`` (``provider/name``), or ``None``."""
    return default_registry().find(f"{model.provider}/{model.name}")


def _registry_window(model: ChatModel) -> int | None:
    info = _known_info(model)
    return info.context_window if info is not None else None


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} […{len(text) - limit} chars…] {text[-half:]}"
