"""LangChain's ``ContextEditingMiddleware`` (with ``ClearToolUsesEdit``) as a real peer.

How it is driven. The history is kept as LangChain messages (the agent state, never rewritten:
this middleware edits a copy of the messages for each model call and leaves the state alone).
Before every request we build the ``ModelRequest`` ``create_agent`` would build (the state's
messages, our system prompt, our tools as OpenAI tool schemas, a ``GenericFakeChatModel``) and
call the middleware's own ``wrap_model_call`` with a handler that, standing in for the model,
records the messages it was handed. Those edited messages are the request: a tool result
LangChain cleared becomes its placeholder text in our view, so what the view holds is what the
framework left, not what the transcript had.

Configuration: one ``ClearToolUsesEdit`` whose ``trigger`` is 80 % of the effective window
(:data:`benchmarks.baselines.MIDDLEWARE_TRIGGER_FRACTION`, the share at which the
``SummarizationMiddleware`` rows summarize): its default of 100,000 tokens would never be
reached in a 32k window. Everything else is left at the installed defaults: ``keep=3`` recent
tool results, ``clear_at_least=0`` (so once the trigger is passed every older result is cleared),
inputs of the calls kept, no excluded tools, placeholder ``"[cleared]"``, and the
middleware's approximate token count (``count_tokens_approximately`` over the messages, system
prompt and tools not counted).

A cleared result is gone for good: our ``read_result`` cannot bring it back, so it counts as
out of view. Each request that clears results not cleared before reports a ``drop`` of that
many results.

This module also holds :func:`edited_view`, which turns messages a LangChain middleware
returns into our messages with the edits it made (the deepagents peer uses it too).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any

# Imported here so that a missing langchain leaves this module (and its row) out.
from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware

from benchmarks.baselines import (
    MIDDLEWARE_TRIGGER_FRACTION,
    Compaction,
    _LangChainHistory,
)
from benchmarks.peers import Peer
from contextfold.messages import Message, TextPart, ToolCallPart, ToolResultPart
from contextfold.tokens.counters import TokenCounter
from contextfold.tool_spec import ToolSpec
from contextfold.wire.chat_completions import tools_to_openai

__all__ = ["PEERS", "PEER_CONTEXT_EDITING", "ContextEditingPeer", "edited_view", "lc_text"]

PEER_CONTEXT_EDITING = "langchain ContextEditingMiddleware"


def lc_text(lc_message: Any) -> str:
    """The text of a LangChain message's content (a string, or the text of its blocks)."""
    content = lc_message.content
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for block in content:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            texts.append(block["text"])
    return "\n".join(texts)


def edited_view(
    history: _LangChainHistory,
    lc_messages: Sequence[Any],
    foreign: Callable[[Any], Message | None] = lambda _: None,
) -> list[Message]:
    """Our messages for ``lc_messages`` (twins of ``history``'s, possibly edited).

    A message LangChain left as it was comes back as the very neutral message it came from
    (same id, same wire form, so prefix reuse is measured fairly). One whose content it changed
    comes back rebuilt with the new content: a tool result's text (cleared, or replaced by a
    pointer), a user message's text, a call's arguments. A tool result LangChain left out is
    left out. Messages that come from no neutral message (a summary) go to ``foreign``.
    """
    originals = {item.id: item for item in history.lc}
    out: list[Message] = []
    index = 0
    while index < len(lc_messages):
        item = lc_messages[index]
        owner = history.owner(item)
        if owner is None:
            made = foreign(item)
            if made is not None:
                out.append(made)
            index += 1
            continue
        group = [item]
        index += 1
        # The tool results of one neutral message come as several LangChain messages.
        while index < len(lc_messages) and history.owner(lc_messages[index]) == owner:
            group.append(lc_messages[index])
            index += 1
        out.append(_rebuilt(history.messages[owner], group, originals))
    return out


def _rebuilt(source: Message, group: Sequence[Any], originals: dict[str | None, Any]) -> Message:
    """``source`` with the edits LangChain made to its twins in ``group``."""
    if source.role == "tool":
        edited = {item.tool_call_id: item for item in group}
        parts: list[ToolResultPart] = []
        changed = False
        for part in source.tool_results:
            twin = edited.get(part.call_id)
            if twin is None:
                changed = True  # this result was left out of the request
                continue
            original = originals.get(twin.id)
            if original is not None and twin.content == original.content:
                parts.append(part)
                continue
            # Rewritten by the framework: what it left is all the agent sees (no ref to it).
            text = lc_text(twin)
            parts.append(ToolResultPart(part.call_id, part.name, text, part.is_error))
            changed = True
        if not changed:
            return source
        return Message("tool", tuple(parts), id=source.id, meta=source.meta)
    twin = group[0]
    original = originals.get(twin.id)
    if original is None:
        return source
    if source.role == "assistant":
        calls = {call["id"]: call["args"] for call in getattr(twin, "tool_calls", [])}
        before = {call["id"]: call["args"] for call in getattr(original, "tool_calls", [])}
        if calls == before:
            return source
        new_parts = tuple(
            ToolCallPart.from_args(p.call_id, p.name, calls.get(p.call_id, {}))
            if type(p) is ToolCallPart and calls.get(p.call_id) != before.get(p.call_id)
            else p
            for p in source.parts
        )
        return Message("assistant", new_parts, id=source.id, meta=source.meta)
    if twin.content == original.content:
        return source
    return Message(source.role, (TextPart(lc_text(twin)),), id=source.id, meta=source.meta)


class ContextEditingPeer:
    """``ContextEditingMiddleware.wrap_model_call`` before every request; the view is the
    edited copy it hands to the model."""

    name = PEER_CONTEXT_EDITING

    def __init__(self, system: str, tools: Sequence[ToolSpec], max_input_tokens: int) -> None:
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import SystemMessage

        self.trigger = int(max_input_tokens * MIDDLEWARE_TRIGGER_FRACTION)
        self.middleware: ContextEditingMiddleware[Any, Any] = ContextEditingMiddleware(
            edits=[ClearToolUsesEdit(trigger=self.trigger)]
        )
        # Never called: the handler below stands in for the model.
        self.model = GenericFakeChatModel(
            messages=iter(()), profile={"max_input_tokens": max_input_tokens}
        )
        self.system_message = SystemMessage(system) if system else None
        self.tools: list[Any] = list(tools_to_openai(tools))
        self.history = _LangChainHistory()
        self.cleared: set[str] = set()
        """Ids of the tool results cleared in the last request (LangChain message ids)."""

    def add(self, message: Message) -> None:
        self.history.add(message)

    def request(self) -> tuple[list[Message], Compaction | None]:
        from langchain.agents.middleware.types import ModelRequest, ModelResponse
        from langchain_core.messages import AIMessage

        sent: list[Any] = []

        def model(request: ModelRequest[Any]) -> ModelResponse[Any]:
            sent.extend(request.messages)
            return ModelResponse(result=[AIMessage("")])

        request: ModelRequest[Any] = ModelRequest(
            model=self.model,
            messages=list(self.history.lc),
            system_message=self.system_message,
            tools=self.tools,
            state={"messages": self.history.lc},
        )
        started = time.thread_time()
        self.middleware.wrap_model_call(request, model)
        cpu = time.thread_time() - started
        cleared = {item.id for item in sent if _was_cleared(item)}
        new = len(cleared - self.cleared)
        self.cleared = cleared
        view = edited_view(self.history, sent)
        return view, (Compaction("drop", new, cpu) if new else None)


def _was_cleared(lc_message: Any) -> bool:
    """Whether ``ClearToolUsesEdit`` replaced this tool result by its placeholder."""
    meta = getattr(lc_message, "response_metadata", None) or {}
    return bool(meta.get("context_editing", {}).get("cleared"))


def _label() -> str:
    version = metadata.version("langchain")
    share = round(MIDDLEWARE_TRIGGER_FRACTION * 100)
    return (
        f"peer: langchain {version} (ContextEditingMiddleware + ClearToolUsesEdit, "
        f"trigger at {share} % of the window)"
    )


def _make(
    system: str, tools: Sequence[ToolSpec], counter: TokenCounter, window: int
) -> ContextEditingPeer:
    del counter  # the middleware counts with its own approximate counter
    return ContextEditingPeer(system, tools, window)


PEERS = (Peer(PEER_CONTEXT_EDITING, _label, _make),)
