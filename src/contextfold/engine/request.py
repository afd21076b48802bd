"""A prepared request: what the model receives next, and what the engine did to make it fit."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from contextfold.budget import ContextBudget, Zone
from contextfold.chat import ChatRequest, SystemBlock
from contextfold.compaction import CompactResult
from contextfold.events import Event
from contextfold.history.repair import RepairReport
from contextfold.messages import Message
from contextfold.tool_spec import ToolSpec
from contextfold.wire import anthropic_request as anthropic_wire
from contextfold.wire import chat_completions_request as openai_wire

__all__ = ["PreparedRequest"]


@dataclass(frozen=True)
class PreparedRequest:
    """One request, ready for any provider, and what the engine did to make it fit.

    ``messages`` is the repaired view followed, when there is one, by a note for the model
    (context usage, deferred tools, wind-down) that is never stored. ``system`` holds the prompt
    blocks (``cache=True`` on Anthropic breakpoints); ``message_breakpoints`` index ``messages``.
    ``zone`` is where the context stood before the engine acted, ``budget`` where it stands now.
    """

    messages: tuple[Message, ...]
    system: tuple[SystemBlock, ...]
    tools: tuple[ToolSpec, ...]
    max_tokens: int
    budget: ContextBudget
    zone: Zone
    tokens: int
    cache_tools: bool = False
    message_breakpoints: tuple[int, ...] = ()
    prompt_cache_key: str | None = None
    deferred_tools: tuple[str, ...] = ()
    compaction: CompactResult | None = None
    repairs: RepairReport = field(default_factory=RepairReport)
    events: tuple[Event, ...] = ()
    note: str = ""

    @property
    def system_text(self) -> str:
        """The system prompt as one string."""
        return "\n\n".join(b.text for b in self.system)

    def to_chat_request(self, **overrides: Any) -> ChatRequest:
        """The provider-neutral request for a :class:`~contextfold.providers.ChatModel`."""
        request = ChatRequest(
            messages=self.messages,
            system=self.system,
            tools=self.tools,
            max_tokens=self.max_tokens,
            cache_tools=self.cache_tools,
            message_breakpoints=self.message_breakpoints,
            prompt_cache_key=self.prompt_cache_key,
        )
        return replace(request, **overrides) if overrides else request

    def to_openai(self, *, model: str | None = None) -> dict[str, Any]:
        """Keyword arguments for the official SDK's ``client.chat.completions.create``.

        With ``model`` they are complete: ``client.chat.completions.create(**request.to_openai(
        model="gpt-4.1"))``; give the reply to ``session.add_assistant`` as it comes back.
        Without it, they are the request's wire form alone (messages, tools, reply budget), to
        inspect or measure. They are what :class:`~contextfold.providers.OpenAIChat` sends (one
        encoder: :func:`contextfold.wire.chat_completions_request.encode_request`); the reply budget
        goes in ``max_completion_tokens``, which OpenAI's newer models require.
        """
        return openai_wire.encode_request(self.to_chat_request(), model=model)

    def to_anthropic(self, *, model: str | None = None) -> dict[str, Any]:
        """Keyword arguments for the official SDK's ``client.messages.create``, cache
        breakpoints included.

        With ``model`` they are complete: ``client.messages.create(**request.to_anthropic(
        model="claude-sonnet-4-5"))``; give the reply to ``session.add_assistant`` as it comes
        back. Without it, they are the request's wire form alone, to inspect or measure. They
        are what :class:`~contextfold.providers.AnthropicChat` sends (one encoder:
        :func:`contextfold.wire.anthropic_request.encode_request`).
        """
        return anthropic_wire.encode_request(self.to_chat_request(), model=model)
