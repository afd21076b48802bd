"""The values a model call is made of: the neutral request, the response and the stream events.

The engine builds a :class:`ChatRequest` (messages, system blocks, tools, cache breakpoints) and
hands it to a :class:`~contextfold.providers.base.ChatModel`. ``complete`` returns a
:class:`ChatResponse`; ``stream`` yields the neutral stream events (:data:`WireEvent`: text,
reasoning, tool calls and their arguments, usage, the finish) and ends with one
:class:`StreamDone` carrying the same :class:`ChatResponse` ``complete`` would have returned.
The same events are what each protocol's stream decoder in :mod:`contextfold.wire` makes, and
what the proxy relays from an upstream of one protocol to a client of another.

Plain values with no behaviour beyond their own fields, kept apart from the adapters' base class
so that what only reads or builds a request (the retry policy, the wire encoders, the prompt
builder) does not import the model machinery. :mod:`contextfold.providers.base` and
:mod:`contextfold.providers` re-export every name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias

from contextfold.messages import Message, ToolCallPart, Usage
from contextfold.tool_spec import ToolSpec

__all__ = [
    "ChatRequest",
    "ChatResponse",
    "Finished",
    "ProviderItem",
    "RedactedThinking",
    "StreamDone",
    "StreamEvent",
    "SystemBlock",
    "TextDelta",
    "ThinkingDelta",
    "ThinkingSignature",
    "ToolCallDelta",
    "ToolCallDone",
    "ToolCallStarted",
    "UsageReport",
    "WireEvent",
    "neutral_stop_reason",
]


@dataclass(frozen=True, slots=True)
class SystemBlock:
    """One block of the system prompt. ``cache=True`` puts a cache breakpoint right after it."""

    text: str
    cache: bool = False


@dataclass(frozen=True)
class ChatRequest:
    """Everything a model call needs, independent of the provider.

    - ``system``: system prompt blocks, stable ones first (see :class:`SystemBlock`);
    - ``messages``: the conversation (messages with ``meta.agent_visible=False`` are not sent);
    - ``tools``: the tools the model may call; ``cache_tools`` puts a breakpoint after the last one;
    - ``message_breakpoints``: indexes into ``messages`` (negative ones count from the end) after
      which a cache breakpoint goes. Providers with automatic prefix caching ignore breakpoints;
      Anthropic honours at most four in a request (see :mod:`contextfold.providers.anthropic`);
    - ``max_tokens``: the reply budget (Anthropic needs one: the adapter has a documented default);
    - ``prompt_cache_key``: routing hint for OpenAI's prompt cache, sent only when set;
    - ``stop``: stop sequences; ``extra``: provider-specific body fields sent verbatim
      (e.g. ``{"thinking": {"type": "enabled", "budget_tokens": 4000}}`` for Anthropic).

    Sequences given as lists are stored as tuples, and a plain string ``system`` becomes one block.
    """

    messages: tuple[Message, ...]
    system: tuple[SystemBlock, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None
    temperature: float | None = None
    cache_tools: bool = False
    message_breakpoints: tuple[int, ...] = ()
    prompt_cache_key: str | None = None
    stop: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Accept lists (and a bare system string) from callers, but keep the request a value.
        system: Any = self.system
        if isinstance(system, str):
            system = (SystemBlock(system),) if system else ()
        system = tuple(SystemBlock(b) if isinstance(b, str) else b for b in system)
        object.__setattr__(self, "system", system)
        for name in ("messages", "tools", "message_breakpoints", "stop"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))

    @property
    def system_text(self) -> str:
        """The system blocks joined by blank lines (for providers with a single system string)."""
        return "\n\n".join(b.text for b in self.system if b.text)

    def with_max_tokens(self, max_tokens: int | None) -> ChatRequest:
        """A copy with another reply budget."""
        return replace(self, max_tokens=max_tokens)


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """What one model call produced.

    ``message`` is the assistant message (``message.meta.usage`` is ``usage``); ``stop_reason`` is
    the provider's own word (``"stop"``, ``"tool_calls"``, ``"length"`` for OpenAI-compatible
    servers; ``"end_turn"``, ``"tool_use"``, ``"max_tokens"`` for Anthropic); ``model`` the model
    name the provider reported.
    """

    message: Message
    usage: Usage | None = None
    stop_reason: str | None = None
    model: str | None = None

    @property
    def text(self) -> str:
        """The reply's text."""
        return self.message.text

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool calls the model made, in order."""
        return self.message.tool_calls

    @property
    def truncated(self) -> bool:
        """True when the reply stopped because it ran out of ``max_tokens``."""
        return self.stop_reason in ("length", "max_tokens")


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of reply text, in order."""

    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    """A piece of model reasoning, in order."""

    text: str


@dataclass(frozen=True, slots=True)
class ThinkingSignature:
    """The signature of the reasoning streamed so far (Anthropic's ``signature_delta``): the
    reasoning block it closes must go back to that provider with it, unchanged."""

    signature: str


@dataclass(frozen=True, slots=True)
class RedactedThinking:
    """A block of reasoning the provider sent encrypted (Anthropic's ``redacted_thinking``)."""

    data: str


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """The model began a tool call (``name`` is the neutral name, a Responses namespace
    included); its arguments follow as :class:`ToolCallDelta` events, or arrive whole with the
    final :class:`StreamDone`."""

    call_id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of a call's JSON arguments."""

    call_id: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ToolCallDone:
    """A call is complete; ``arguments`` is its whole JSON text when the source gave it."""

    call_id: str
    arguments: str | None = None


@dataclass(frozen=True, slots=True)
class UsageReport:
    """The tokens of the call (``reasoning_tokens`` are among the output tokens)."""

    usage: Usage
    reasoning_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Finished:
    """The end of the reply. ``stop_reason`` in the Chat words: ``"stop"``, ``"tool_calls"``,
    ``"length"``, ``"content_filter"`` (:func:`neutral_stop_reason` reads the others')."""

    stop_reason: str | None = None


@dataclass(frozen=True, slots=True)
class ProviderItem:
    """A Responses output item passed whole (a reasoning item with its ``encrypted_content``, a
    ``web_search_call``), when the upstream speaks Responses too."""

    item: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class StreamDone:
    """The last event of every stream: the assembled response, usage included."""

    response: ChatResponse


WireEvent: TypeAlias = (
    TextDelta
    | ThinkingDelta
    | ThinkingSignature
    | RedactedThinking
    | ToolCallStarted
    | ToolCallDelta
    | ToolCallDone
    | UsageReport
    | Finished
    | ProviderItem
)
"""What one protocol's stream decoder (:mod:`contextfold.wire`) makes of the provider's events,
and what another protocol's encoder turns into its own: the neutral stream a proxy relays."""

StreamEvent: TypeAlias = WireEvent | StreamDone
"""What a chat model's ``stream`` yields: the neutral events, then one :class:`StreamDone`."""

_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
    "function_call": "tool_calls",
}


def neutral_stop_reason(stop_reason: str | None) -> str | None:
    """A provider's stop reason in the Chat words :class:`Finished` uses (Anthropic's
    ``end_turn`` is ``stop``, ``tool_use`` is ``tool_calls``, ``max_tokens`` is ``length``)."""
    if stop_reason is None:
        return None
    return _STOP_REASONS.get(stop_reason, stop_reason)
