"""The chat-completions request for a :class:`ChatRequest`: one encoder, whoever sends it.

:func:`encode_request` gives the keyword arguments of the official SDK's
``client.chat.completions.create``. :class:`~contextfold.providers.openai.OpenAIChat` sends them,
and so does a caller that drives the SDK itself from an engine's prepared request. It is pure
and needs no SDK installed, so the wire form can be inspected or measured without the
``openai`` extra.

What goes on the wire works with every OpenAI-compatible server tried (OpenAI, vLLM, Ollama,
llama.cpp's server, llama-cpp-python's):

- an assistant turn that only calls tools has ``"content": ""``, not ``null`` (llama-cpp-python's
  server answers HTTP 500 to ``null``; the others accept both);
- a request with tools says ``"tool_choice": "auto"``: it is OpenAI's default, but some servers
  do not assume it and drop the tools silently, while the request was budgeted with them;
- the reply budget goes in ``max_completion_tokens`` by default (OpenAI's newer models refuse
  ``max_tokens``); other servers read ``max_tokens``, which ``max_tokens_field`` selects;
- ``prompt_cache_key`` (OpenAI's cache routing hint), ``temperature`` and ``stop`` are sent only
  when set; ``extra`` travels verbatim as the SDK's ``extra_body``.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from contextfold.chat import ChatRequest
from contextfold.wire.chat_completions import to_openai, tools_to_openai

__all__ = ["DEFAULT_MAX_TOKENS_FIELD", "MaxTokensField", "encode_request"]

MaxTokensField: TypeAlias = Literal["max_tokens", "max_completion_tokens"]
"""The body field that carries the reply budget."""

DEFAULT_MAX_TOKENS_FIELD: MaxTokensField = "max_completion_tokens"
"""OpenAI's own field, which its newer models require (they refuse ``max_tokens``)."""


def encode_request(
    request: ChatRequest,
    *,
    model: str | None = None,
    stream: bool = False,
    max_tokens_field: MaxTokensField = DEFAULT_MAX_TOKENS_FIELD,
    include_reasoning: bool = False,
) -> dict[str, Any]:
    """Keyword arguments for ``client.chat.completions.create`` that send ``request``.

    With ``model`` they are complete; without it they are the request's wire form alone, to
    inspect or measure. ``stream`` asks for a stream whose last chunk carries the usage of the
    whole call. ``include_reasoning`` sends earlier reasoning back as ``reasoning_content``
    (DeepSeek, vLLM). Empty system blocks are left out of the system message.
    """
    kwargs: dict[str, Any] = {} if model is None else {"model": model}
    kwargs["messages"] = _wire_messages(
        to_openai(
            request.messages,
            system=request.system_text or None,
            include_reasoning=include_reasoning,
        )
    )
    if request.tools:
        kwargs["tools"] = tools_to_openai(request.tools)
        # OpenAI's default with tools; servers that do not assume it drop the tools silently
        # while the request was budgeted with them. ``extra`` may still choose another.
        kwargs["tool_choice"] = "auto"
    if request.max_tokens is not None:
        kwargs[max_tokens_field] = request.max_tokens
    if request.temperature is not None:
        kwargs["temperature"] = request.temperature
    if request.stop:
        kwargs["stop"] = list(request.stop)
    if request.prompt_cache_key:
        kwargs["prompt_cache_key"] = request.prompt_cache_key
    if stream:
        kwargs["stream"] = True
        kwargs["stream_options"] = {"include_usage": True}
    if request.extra:
        kwargs["extra_body"] = dict(request.extra)
    return kwargs


def _wire_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` as every OpenAI-compatible server accepts them: an assistant turn that only
    calls tools gets ``"content": ""`` (llama-cpp-python's server answers HTTP 500 to ``null``;
    OpenAI, vLLM, Ollama and llama.cpp accept both). The transcript format keeps ``null``, which
    is what OpenAI itself writes."""
    for message in messages:
        if message["role"] == "assistant" and message.get("content") is None:
            message["content"] = ""
    return messages
