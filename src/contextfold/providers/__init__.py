"""Model adapters: one neutral request/response, several providers.

Build a :class:`ChatRequest`, call ``model.complete(request)`` (or ``stream``, ``acomplete``,
``astream``) and read the :class:`ChatResponse`::


    from contextfold import Message
    from contextfold.providers import ChatRequest, SystemBlock, model_from_name

    model = model_from_name("anthropic/claude-haiku-4-5")
    request = ChatRequest(
        messages=(Message.user("Hi"),),
        system=(SystemBlock("You are terse.", cache=True),),
        max_tokens=1024,
    )
    response = model.complete(request)
    response.message, response.usage

A local server's real context size is read from the server (:func:`served_window`,
:func:`check_server_window`, :func:`check_ollama_context`), with a
:class:`ContextWindowWarning` when the planned window is larger or cannot be confirmed.

Failures arrive as :class:`~contextfold.ProviderError` subclasses after the retries the
:class:`RetryPolicy` allows; a prompt too large for the window raises
:class:`~contextfold.ContextOverflowError` with the provider's figures.

``OpenAIChat`` and ``AnthropicChat`` need the ``openai`` / ``anthropic`` extras. They are imported
on first use, so this package imports without either SDK; naming one that is missing raises
:class:`~contextfold.MissingDependencyError` with the ``pip install`` line.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from contextfold.chat import (
    ChatRequest,
    ChatResponse,
    StreamDone,
    StreamEvent,
    SystemBlock,
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
)
from contextfold.providers._estimated_usage import UsageEstimatedWarning
from contextfold.providers._factory import check_provider, model_from_name, served_window
from contextfold.providers._retry import RetryPolicy
from contextfold.providers._server_window import (
    ContextWindowWarning,
    ServerWindow,
    WindowCheck,
    check_server_window,
    probe_server_window,
)
from contextfold.providers.base import BaseChatModel, ChatModel
from contextfold.providers.ollama import OllamaContext, OllamaContextWarning, check_ollama_context
from contextfold.providers.recorded import ReplayModel
from contextfold.providers.scripted import ScriptedModel

if TYPE_CHECKING:
    from contextfold.providers.anthropic import AnthropicChat
    from contextfold.providers.openai import OpenAIChat

__all__ = [
    "AnthropicChat",
    "BaseChatModel",
    "ChatModel",
    "ChatRequest",
    "ChatResponse",
    "ContextWindowWarning",
    "OllamaContext",
    "OllamaContextWarning",
    "OpenAIChat",
    "ReplayModel",
    "RetryPolicy",
    "ScriptedModel",
    "ServerWindow",
    "StreamDone",
    "StreamEvent",
    "SystemBlock",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallStarted",
    "UsageEstimatedWarning",
    "WindowCheck",
    "check_ollama_context",
    "check_provider",
    "check_server_window",
    "model_from_name",
    "probe_server_window",
    "served_window",
]

_LAZY = {
    "OpenAIChat": "contextfold.providers.openai",
    "AnthropicChat": "contextfold.providers.anthropic",
}


def __getattr__(name: str) -> Any:
    # The SDK adapters load on first access so that a missing extra costs nothing until used.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
