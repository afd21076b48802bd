"""Usage for a call whose provider reported none: counted by contextfold, marked estimated.

Some OpenAI-compatible servers send no ``usage`` (older ones ignore
``stream_options.include_usage``; some proxies strip it). Without usage the session never anchors
its token counts and shows 0 calls and 0 tokens. Counting the request and the reply with the
model's token counter keeps the figures moving; :attr:`Usage.estimated` says they are ours, and
:class:`UsageEstimatedWarning` tells the user once per model.
"""

from __future__ import annotations

from contextfold.chat import ChatRequest
from contextfold.messages import Message, Usage
from contextfold.tokens.counters import TokenCounter

__all__ = ["UsageEstimatedWarning", "estimated_usage"]


class UsageEstimatedWarning(UserWarning):
    """A provider reported no token usage, so contextfold counts its calls itself."""


def estimated_usage(request: ChatRequest, reply: Message, counter: TokenCounter) -> Usage:
    """The usage of ``request`` answered by ``reply`` as ``counter`` counts them, marked
    estimated."""
    prompt = counter.count_request(
        request.messages, system=request.system_text, tools=request.tools
    )
    return Usage(prompt, counter.count_message(reply), estimated=True)
