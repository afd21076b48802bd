"""Build a model from a ``provider/model`` name, as the CLI and config files spell it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from contextfold.chat import ChatRequest
from contextfold.errors import ConfigError
from contextfold.providers._server_window import ServerWindow, probe_server_window
from contextfold.providers.base import BaseChatModel
from contextfold.providers.ollama import OLLAMA_BASE_URL

__all__ = ["OPENAI_COMPATIBLE_SERVERS", "check_provider", "model_from_name", "served_window"]

OPENAI_COMPATIBLE_SERVERS: Mapping[str, tuple[str, str, bool]] = {
    "vllm": ("http://localhost:8000/v1", "VLLM_API_KEY", False),
    # llama-server listens on 127.0.0.1 (IPv4) by default; "localhost" may resolve to ::1 first.
    "llamacpp": ("http://127.0.0.1:8080/v1", "LLAMACPP_API_KEY", False),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", True),
}
"""OpenAI-compatible servers known by name: default base URL, API-key variable, and whether a
key is required (a hosted service, whose windows the registry knows) or optional (a local server,
whose window is what it was started with: it is asked, see :func:`served_window`)."""

_PROVIDERS = ("openai", "anthropic", "ollama", *OPENAI_COMPATIBLE_SERVERS, "scripted")


def _echo(request: ChatRequest) -> str:
    """The ``scripted`` model's answer: the last user message, echoed."""
    last = next((m for m in reversed(request.messages) if m.role == "user"), None)
    return f"echo: {last.text}" if last is not None else "echo:"


def _split(name: str) -> tuple[str, str]:
    provider, _, model = name.partition("/")
    return provider.strip().lower().replace(".", ""), model


def check_provider(name: str) -> None:
    """Raise :class:`ConfigError` when ``name`` (``provider/model``) names no known provider:
    the first thing wrong with such a name, before its window or anything else is asked."""
    provider, _ = _split(name)
    if provider not in _PROVIDERS:
        raise ConfigError(
            "model",
            f"{name!r} names no known provider; write provider/model with provider one of "
            f"{', '.join(_PROVIDERS)} (e.g. 'openai/gpt-4.1-mini', 'ollama/qwen3:8b')",
        )


def _asks_the_server(provider: str, base_url: str | None) -> bool:
    """True for a local OpenAI-compatible server: its window is what it was started with."""
    if provider in OPENAI_COMPATIBLE_SERVERS:
        return not OPENAI_COMPATIBLE_SERVERS[provider][2]
    return provider == "openai" and base_url is not None and "api.openai.com" not in base_url


def served_window(name: str, *, base_url: str | None = None) -> ServerWindow | None:
    """The context size the server behind ``name`` states (llama.cpp's ``/props``, vLLM's
    ``/v1/models``), for a local OpenAI-compatible server (``llamacpp/``, ``vllm/``, ``openai/``
    with a ``base_url``); None for providers whose window the registry knows (hosted APIs) or
    that are checked their own way (``ollama/``)."""
    provider, model = _split(name)
    if not _asks_the_server(provider, base_url):
        return None
    url = base_url or OPENAI_COMPATIBLE_SERVERS[provider][0]
    known = OPENAI_COMPATIBLE_SERVERS.get(provider)
    env_var = known[1] if known else "OPENAI_API_KEY"
    return probe_server_window(url, model=model, api_key=os.environ.get(env_var))


def model_from_name(
    name: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    context_window: int | None = None,
    **options: Any,
) -> BaseChatModel:
    """The model that ``name`` (``"provider/model"``) names; ``options`` go to its constructor.

    ================================  ===========================================================
    ``openai/gpt-4.1``                :class:`OpenAIChat` (``OPENAI_API_KEY``)
    ``anthropic/claude-haiku-4-5``   :class:`AnthropicChat` (``ANTHROPIC_API_KEY``)
    ``ollama/qwen3:8b``               :meth:`OpenAIChat.ollama`, ``http://localhost:11434/v1``
    ``vllm/Qwen/Qwen3-8B``            OpenAI-compatible at ``http://localhost:8000/v1``
                                      (``VLLM_API_KEY`` if the server wants one)
    ``llamacpp/any``                  OpenAI-compatible at ``http://127.0.0.1:8080/v1``
    ``openrouter/org/model``          OpenAI-compatible at ``https://openrouter.ai/api/v1``
                                      (``OPENROUTER_API_KEY``)
    ``scripted``                      :class:`ScriptedModel` echoing the last user message
                                      (``scripted/<label>`` names it ``<label>``)
    ================================  ===========================================================

    ``base_url`` and ``api_key`` override the defaults. ``context_window`` (the window
    contextfold will fill) is checked against what a local server holds: Ollama's own check, or
    :meth:`OpenAIChat.check_server_window` for the other local servers, each warning when it is
    larger or cannot be confirmed; hosted APIs are not asked. The SDK adapters are imported only
    when named, so a missing extra fails here with :class:`MissingDependencyError` naming it.
    """
    provider, model = _split(name)
    if provider == "scripted":
        from contextfold.providers.scripted import ScriptedModel

        return ScriptedModel(name=model or "scripted", default=_echo, **options)
    check_provider(name)
    if not model:
        raise ConfigError(
            "model", f"{name!r} names a provider but no model: write {provider}/MODEL"
        )
    if provider == "anthropic":
        from contextfold.providers.anthropic import AnthropicChat

        return AnthropicChat(model, base_url=base_url, api_key=api_key, **options)

    from contextfold.providers.openai import OpenAIChat

    if provider == "ollama":
        if api_key is not None:
            options["api_key"] = api_key
        return OpenAIChat.ollama(
            model, base_url=base_url or OLLAMA_BASE_URL, context_window=context_window, **options
        )
    if provider == "openai":
        chat = OpenAIChat(model, base_url=base_url, api_key=api_key, **options)
    else:
        default_url, env_var, key_required = OPENAI_COMPATIBLE_SERVERS[provider]
        options.setdefault("api_key_env", env_var)
        options.setdefault("key_required", key_required)
        chat = OpenAIChat(
            model, base_url=base_url or default_url, api_key=api_key, provider=provider, **options
        )
    if context_window is not None and _asks_the_server(provider, chat.base_url):
        chat.check_server_window(context_window, name=name)
    return chat
