"""How a provider's chat template frames messages, and the identity of a message for caches.

Shared by the token counters (:mod:`contextfold.tokens.counters`) and the usage estimator
(:mod:`contextfold.tokens.estimator`).
"""

from __future__ import annotations

from dataclasses import dataclass

from contextfold.messages import Message, SummaryPart

__all__ = ["ChatTemplate", "message_key", "template_of"]


@dataclass(frozen=True, slots=True)
class ChatTemplate:
    """Tokens a provider's chat template adds around the content (role markers, separators).

    The defaults are OpenAI's documented chat-completions framing (3 tokens a message, 3 to prime
    the reply); the tool figures follow OpenAI's function-definition rendering (a namespace
    wrapper once, a few tokens per function). :func:`counter_for` uses measured values where
    we have them (DeepSeek).
    """

    per_message: int = 3
    """Role and separator tokens of each message (each tool result is its own message)."""
    per_request: int = 3
    """Tokens that prime the assistant's reply, once per request."""
    per_tool_call: int = 5
    """Framing of one tool call in an assistant message, beyond its name and arguments."""
    tools_preamble: int = 12
    """Fixed text the provider adds when any tools are defined."""
    per_tool: int = 8
    """Framing of one tool definition, beyond its name, description and schema."""


def message_key(message: Message) -> tuple[str, int]:
    """A cache key that tells a message from a masked copy of it (same id, other parts)."""
    try:
        return message.id, hash(message.parts)
    except TypeError:  # a SummaryPart holds a dict of sections; only its text reaches the model
        return message.id, hash(tuple(_part_hashable(p) for p in message.parts))


def _part_hashable(part: object) -> object:
    if isinstance(part, SummaryPart):
        return ("summary", part.text, part.covers, part.source)
    return part


def template_of(counter: object) -> ChatTemplate:
    """The chat template a counter frames messages with (OpenAI's when it says none)."""
    template = getattr(counter, "template", None)
    return template if isinstance(template, ChatTemplate) else ChatTemplate()
