"""What the rest of contextfold needs from a token counter: the :class:`TokenCounter` protocol.

The counters themselves live in :mod:`contextfold.tokens.counters`, which re-exports this name. The
protocol sits here, beside the value types it speaks of (messages and tool specs), so that what
only *uses* a counter (the usage estimator, the tool deferral) need not import the counters.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from contextfold.messages import Message
from contextfold.tool_spec import ToolSpec

__all__ = ["TokenCounter"]


@runtime_checkable
class TokenCounter(Protocol):
    """Anything that counts tokens the way one model family's tokenizer would."""

    @property
    def name(self) -> str:
        """A short label, e.g. ``"o200k_base"`` or ``"heuristic"``."""
        ...

    def count_text(self, text: str) -> int:
        """Tokens of a bare string."""
        ...

    def count_message(self, message: Message) -> int:
        """Tokens of one message as rendered in a request, template overhead included."""
        ...

    def count_messages(self, messages: Iterable[Message]) -> int:
        """Tokens of a message list as sent (messages hidden from the agent count zero)."""
        ...

    def count_tools(self, tools: Iterable[ToolSpec]) -> int:
        """Tokens the tool definitions add to a request."""
        ...

    def count_request(
        self, messages: Iterable[Message], *, system: str = "", tools: Iterable[ToolSpec] = ()
    ) -> int:
        """Prompt tokens of a whole request: system text, tool definitions and messages."""
        ...
