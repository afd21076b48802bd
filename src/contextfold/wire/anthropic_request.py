"""The messages-API request for a :class:`ChatRequest`: one encoder, whoever sends it.

:func:`encode_request` gives the keyword arguments of the official SDK's
``client.messages.create``. :class:`~contextfold.providers.anthropic.AnthropicChat` sends them,
and so does a caller that drives the SDK itself from an engine's prepared request. It is pure
and needs no SDK installed, so the wire form can be inspected or measured without the
``anthropic`` extra.

Empty blocks. The API refuses empty text blocks, so empty system blocks and empty or
whitespace-only text parts are not sent (:func:`~contextfold.wire.anthropic.to_anthropic`);
a cache breakpoint asked for on an empty system block moves to the nearest earlier block that
is sent, which caches the same prefix.

Cache breakpoints. A request may ask for breakpoints after system blocks
(:attr:`SystemBlock.cache`), after the last tool (``cache_tools``) and after messages
(``message_breakpoints``, negative ones counting from the end; one on a message hidden from the
agent moves to the visible one before it). Anthropic accepts at most
:data:`MAX_CACHE_BREAKPOINTS` in one request, so when more are asked for, these are kept, in this
order, until the cap is reached:

1. the last message breakpoint: it caches the most (the whole conversation up to it);
2. the end of the stable prefix: the last system breakpoint, or the tools one when no system
   block is marked; it survives compaction, which rewrites the messages but not the prefix;
3. the other message breakpoints, latest first;
4. the other system breakpoints, latest first; then the tools breakpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextfold.chat import ChatRequest
from contextfold.messages import Message
from contextfold.wire.anthropic import (
    _AGENT_VISIBLE,
    WireBlocks,
    to_anthropic,
    tools_to_anthropic,
)

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "MAX_CACHE_BREAKPOINTS",
    "encode_request",
    "limit_cache_breakpoints",
]

DEFAULT_MAX_TOKENS = 8192
"""The reply budget when a request gives none (the API requires one); every current Claude model
accepts it. Set ``ChatRequest.max_tokens`` from the model's registry entry to use more."""

MAX_CACHE_BREAKPOINTS = 4
"""The most ``cache_control`` markers the messages API accepts in one request."""


def encode_request(
    request: ChatRequest,
    *,
    model: str | None = None,
    stream: bool = False,
    default_max_tokens: int = DEFAULT_MAX_TOKENS,
    inline_system: bool = False,
    remembered: WireBlocks | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``client.messages.create`` that send ``request``.

    With ``model`` they are complete; without it they are the request's wire form alone, to
    inspect or measure. Empty blocks are left out and the cache breakpoints capped at
    :data:`MAX_CACHE_BREAKPOINTS` (see the module docstring). ``default_max_tokens`` is the
    reply budget when the request gives none; ``inline_system`` keeps system messages of the
    conversation in place (see :func:`~contextfold.wire.anthropic.to_anthropic`), and
    ``remembered`` renders each message once across calls (its blocks' values then shared:
    :class:`~contextfold.wire.anthropic.WireBlocks`).
    ``temperature`` and ``extra`` travel as the SDK's
    ``extra_body`` (fields of the same body); ``prompt_cache_key`` is OpenAI's and is not sent.
    """
    message_breakpoints = _visible_breakpoints(request.messages, request.message_breakpoints)
    wire = to_anthropic(
        request.messages,
        system=[b.text for b in request.system],
        system_breakpoints=[i for i, b in enumerate(request.system) if b.cache],
        message_breakpoints=message_breakpoints,
        inline_system=inline_system,
        remembered=remembered,
    )
    tools = tools_to_anthropic(request.tools, cache_last=request.cache_tools)
    # to_anthropic marks at most one block per message breakpoint (a message's own blocks carry
    # none): when even that many are within the cap, there is nothing to remove, and the
    # history's blocks need not be looked through for marks.
    most = len(set(message_breakpoints)) + _marked(wire.system) + _marked(tools)
    if most > MAX_CACHE_BREAKPOINTS:
        limit_cache_breakpoints(tools, wire.system, wire.messages)
    kwargs: dict[str, Any] = {} if model is None else {"model": model}
    kwargs["max_tokens"] = (
        request.max_tokens if request.max_tokens is not None else default_max_tokens
    )
    kwargs.update(wire.kwargs())
    if tools:
        kwargs["tools"] = tools
    if request.stop:
        kwargs["stop_sequences"] = list(request.stop)
    # Through extra_body: the SDK's create() refuses some body fields as keyword arguments
    # (temperature, in the versions we support), while the body it sends is the same.
    body = dict(request.extra)
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if body:
        kwargs["extra_body"] = body
    if stream:
        kwargs["stream"] = True
    return kwargs


def _marked(blocks: list[dict[str, Any]]) -> int:
    return sum(1 for block in blocks if "cache_control" in block)


def limit_cache_breakpoints(
    tools: list[dict[str, Any]],
    system: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    limit: int = MAX_CACHE_BREAKPOINTS,
) -> int:
    """Remove ``cache_control`` markers beyond ``limit`` by the rule in the module docstring.

    Works in place on the wire lists; returns how many markers were removed.
    """
    marked_tools = [t for t in tools if "cache_control" in t]
    marked_system = [b for b in system if "cache_control" in b]
    marked_messages = [
        block
        for message in messages
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and "cache_control" in block
    ]
    if len(marked_tools) + len(marked_system) + len(marked_messages) <= limit:
        return 0
    order: list[dict[str, Any]] = []
    if marked_messages:
        order.append(marked_messages[-1])
    if marked_system:
        order.append(marked_system[-1])
    elif marked_tools:
        order.append(marked_tools[-1])
    order.extend(reversed(marked_messages[:-1]))
    order.extend(reversed(marked_system[:-1]))
    order.extend(reversed(marked_tools))
    keep = {id(block) for block in order[:limit]}
    removed = 0
    for block in (*marked_tools, *marked_system, *marked_messages):
        if id(block) not in keep:
            del block["cache_control"]
            removed += 1
    return removed


def _visible_breakpoints(messages: Sequence[Message], breakpoints: Sequence[int]) -> list[int]:
    """Message breakpoints as indexes among the agent-visible messages (what the wire adapter
    counts). A breakpoint on a hidden message moves to the visible one before it: the cached
    prefix is the same, since hidden messages are not sent."""
    if not breakpoints:
        return []
    visible = list(map(_AGENT_VISIBLE, messages))  # in C: a view is long, and mostly visible
    if all(visible):
        visible_before: Sequence[int] = range(len(messages))
    else:
        visible_before = []
        count = 0
        for shown in visible:
            visible_before.append(count if shown else count - 1)
            if shown:
                count += 1
    out: list[int] = []
    for bp in breakpoints:
        index = bp + len(messages) if bp < 0 else bp
        if 0 <= index < len(messages) and visible_before[index] >= 0:
            out.append(visible_before[index])
    return out
