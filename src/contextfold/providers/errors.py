"""Turn a provider's HTTP error into the contextfold error a caller can act on.

Each adapter's error map (one context manager per SDK) pulls the status, body and headers out of
its SDK's exception and calls :func:`error_from_response`. The decisions are shared here:

- context overflow, recognised by code (``context_length_exceeded``), type (llama.cpp's
  ``exceed_context_size_error``, Anthropic's ``request_too_large``), HTTP 413, or the wording of
  the known messages, whose figures are parsed (:func:`parse_overflow`);
- 401/403 (and the matching error types) -> :class:`AuthenticationError` naming the env var;
- 429, Anthropic 529 and ``overloaded_error`` -> :class:`RateLimitError` with ``retry-after``;
- 5xx, 408, 409 and Anthropic ``api_error`` -> :class:`ProviderUnavailableError` (which of them
  are retried, and how often, is :class:`~contextfold.providers.RetryPolicy`'s decision);
- anything else -> :class:`ProviderError` with the provider's message.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from contextfold.errors import (
    AuthenticationError,
    ContextOverflowError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
)

__all__ = [
    "OverflowFigures",
    "error_from_response",
    "map_sdk_errors",
    "parse_overflow",
    "parse_retry_after",
]


@dataclass(frozen=True, slots=True)
class OverflowFigures:
    """Numbers an overflow message gave: prompt size, window, and whether a smaller reply fits."""

    prompt_tokens: int | None = None
    limit: int | None = None
    max_tokens_adjustable: bool = False


def _int(text: str) -> int:
    return int(text.replace(",", ""))


_N = r"([\d,]+)"

# Each entry: a pattern and how to read its groups. Prompt size first, then the window, then
# (when the message gives it) the requested reply budget, which decides "adjustable".
_OVERFLOW_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Anthropic, recoverable: "input length and `max_tokens` exceed context limit: X + Y > Z"
    (
        re.compile(rf"input length and `?max_tokens`? exceed context limit: {_N} \+ {_N} > {_N}"),
        "prompt,output,limit",
    ),
    # Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
    (re.compile(rf"prompt is too long: {_N} tokens > {_N} maximum"), "prompt,limit"),
    # vLLM (newer): "You passed X input tokens and requested Y output tokens. However, the
    # model's context length is only N tokens"
    (
        re.compile(
            rf"passed {_N} input tokens and requested {_N} output tokens\.\s*However, the model's "
            rf"context length is only {_N} tokens"
        ),
        "prompt,output,limit",
    ),
    # OpenAI / vLLM (older): "maximum context length is N tokens. However, you requested M
    # tokens (X in the messages, Y in the completion)"; also "(X in your prompt; Y for the ...)"
    (
        re.compile(
            rf"maximum context length is {_N} tokens[.,]\s*However,? you requested {_N} tokens "
            rf"\({_N} in (?:the messages|your prompt)[,;] {_N} (?:in|for) the completion\)",
            re.I,
        ),
        "limit,total,prompt,output",
    ),
    # OpenRouter: "... maximum context length is N tokens. However, you requested about M tokens
    # (X of text input, T of tool input, Y in the output)"; the parts vary.
    (
        re.compile(
            rf"maximum context length is {_N} tokens[.,]\s*However,? you requested about {_N} "
            rf"tokens \({_N} of text input(?:, {_N} of tool input)?(?:, {_N} in the output)?\)",
            re.I,
        ),
        "limit,total,prompt,tool,output",
    ),
    # OpenAI: "maximum context length is N tokens. However, your messages resulted in M tokens"
    (
        re.compile(
            rf"maximum context length is {_N} tokens[.,]\s*However,? your messages resulted in "
            rf"{_N} tokens",
            re.I,
        ),
        "limit,prompt",
    ),
    # llama.cpp's server (and Ollama >= 0.32, which runs it): "request (3024 tokens) exceeds the
    # available context size (2048 tokens), try increasing it"
    (
        re.compile(rf"request \({_N} tokens\) exceeds the available context size \({_N} tokens\)"),
        "prompt,limit",
    ),
    # LM Studio: "Trying to keep the first 50785 tokens when context the overflows. However, the
    # model is loaded with context length of only 45217 tokens, which is not enough."
    (
        re.compile(
            rf"keep the first {_N} tokens when context the overflows.*?loaded with context "
            rf"length of only {_N} tokens",
            re.S,
        ),
        "prompt,limit",
    ),
    # Anything else stating the window: "maximum context length is N tokens. However, you
    # requested M tokens." (the request total, split unknown)
    (re.compile(rf"maximum context length is {_N} tokens", re.I), "limit"),
)

# Words that mark an overflow whose wording we do not parse (only trusted on client errors).
_OVERFLOW_WORDS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "context size",
    "maximum context",
    "prompt is too long",
    "input is too long",
    "too many tokens",
)

_OVERFLOW_TYPES = ("exceed_context_size_error", "request_too_large")


def parse_overflow(message: str, body: Mapping[str, Any] | None = None) -> OverflowFigures | None:
    """The figures of a context-overflow error, or None when ``message``/``body`` is not one.

    Recognises the wordings of OpenAI, vLLM, OpenRouter, Anthropic, llama.cpp's server, Ollama
    and LM Studio, and llama.cpp's ``exceed_context_size_error`` body (``n_prompt_tokens``,
    ``n_ctx``), also when Ollama passes it on as a JSON string.
    """
    error = _error_object(body)
    if error.get("type") == "exceed_context_size_error":
        prompt, limit = error.get("n_prompt_tokens"), error.get("n_ctx")
        return OverflowFigures(
            prompt if isinstance(prompt, int) else None, limit if isinstance(limit, int) else None
        )
    for pattern, layout in _OVERFLOW_PATTERNS:
        match = pattern.search(message)
        if match is None:
            continue
        values = {
            name: _int(group)
            for name, group in zip(layout.split(","), match.groups(), strict=True)
            if group is not None
        }
        prompt = values.get("prompt")
        if prompt is not None and "tool" in values:
            prompt += values["tool"]
        limit = values.get("limit")
        # Lowering max_tokens helps only when the prompt alone fits and a reply was requested.
        adjustable = (
            prompt is not None
            and limit is not None
            and values.get("output", 0) > 0
            and prompt < limit
        )
        return OverflowFigures(prompt, limit, adjustable)
    return None


def parse_retry_after(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> float | None:
    """Seconds the provider asked us to wait: ``retry-after-ms``, then ``retry-after`` (seconds
    or an HTTP date). None when neither header is there or readable."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _error_object(body: object, *, unwrap: bool = True) -> Mapping[str, Any]:
    """The dict holding ``message``/``type``/``code``, wherever the provider nested it.

    ``{"error": "text"}`` (Ollama's native API, LM Studio) or ``"text"`` gives
    ``{"message": "text"}``; a message that is itself a JSON error body (Ollama passes llama.cpp's
    on as a string) gives that inner body, whose ``type`` and figures are the precise ones.
    """
    if isinstance(body, str):  # the SDKs hand over only the "error" member when there is one
        body = {"message": body}
    if not isinstance(body, Mapping):
        return {}
    inner = body.get("error")
    if isinstance(inner, str):
        inner = {"message": inner}
    error = inner if isinstance(inner, Mapping) else body
    message = error.get("message")
    if unwrap and isinstance(message, str) and message.lstrip().startswith("{"):
        try:
            nested = _error_object(json.loads(message), unwrap=False)
        except ValueError:
            return error
        if nested.get("message"):
            return nested
    return error


def error_from_response(
    *,
    provider: str,
    status: int | None,
    body: object,
    headers: Mapping[str, str] | None,
    fallback_message: str,
    env_var: str,
) -> ProviderError:
    """The contextfold error for one failed response (``status`` None: no HTTP status known,
    e.g. an error event in the middle of a stream)."""
    error = _error_object(body)
    raw_message = error.get("message")
    message = str(raw_message) if raw_message else fallback_message
    error_type = str(error.get("type") or "")
    code = str(error.get("code") or "")
    if status == 200:
        status = None  # an error event inside a successful stream: the body's type decides
    body_code = error.get("code")
    if status is None and isinstance(body_code, int) and 400 <= body_code < 600:
        status = body_code  # vLLM and llama.cpp put the HTTP status in mid-stream error objects

    if overflow := _overflow(message, error, status, error_type, code):
        return _overflow_error(provider, status, message, overflow)
    if status in (401, 403) or error_type in ("authentication_error", "permission_error"):
        return AuthenticationError(
            f"{provider}: the API key was refused: {message}",
            provider=provider,
            status=status,
            env_var=env_var,
        )
    if status in (429, 529) or error_type in ("rate_limit_error", "overloaded_error"):
        retry_after = parse_retry_after(headers)
        what = "overloaded" if status == 529 or error_type == "overloaded_error" else "rate limited"
        wait = f", retry after {retry_after:g}s" if retry_after is not None else ""
        return RateLimitError(
            f"{provider}: {what}{wait}: {message}",
            provider=provider,
            status=status if status is not None else 429,
            retry_after=retry_after,
        )
    unavailable = status is not None and (status >= 500 or status in (408, 409))
    if unavailable or error_type == "api_error":
        what = "server error" if status is None or status >= 500 else "HTTP"
        return ProviderUnavailableError(
            f"{provider}: {what}{f' {status}' if status else ''}: {message}",
            provider=provider,
            status=status,
        )
    where = f" (HTTP {status})" if status else ""
    return ProviderError(f"{provider}{where}: {message}", provider=provider, status=status)


def _overflow(
    message: str, error: Mapping[str, Any], status: int | None, error_type: str, code: str
) -> OverflowFigures | None:
    figures = parse_overflow(message, error)
    if figures is not None:
        return figures
    if code == "context_length_exceeded" or error_type in _OVERFLOW_TYPES or status == 413:
        return OverflowFigures()
    if status in (None, 400, 422):
        lowered = message.lower()
        if any(word in lowered for word in _OVERFLOW_WORDS):
            return OverflowFigures()
    return None


def _overflow_error(
    provider: str, status: int | None, message: str, figures: OverflowFigures
) -> ContextOverflowError:
    if figures.prompt_tokens is not None and figures.limit is not None:
        summary = f"{figures.prompt_tokens} prompt tokens, window {figures.limit}"
    elif figures.limit is not None:
        summary = f"window {figures.limit}"
    else:
        summary = "figures not given"
    return ContextOverflowError(
        f"{provider}: the request does not fit the model's context ({summary}): {message}",
        provider=provider,
        status=status,
        prompt_tokens=figures.prompt_tokens,
        limit=figures.limit,
        max_tokens_adjustable=figures.max_tokens_adjustable,
    )


@contextmanager
def map_sdk_errors(sdk: ModuleType, provider: str, env_var: str) -> Iterator[None]:
    """Map the errors of an official SDK (``openai`` or ``anthropic``: both are generated from
    the same template, with the same exception classes) to contextfold's.

    Each adapter wraps its calls in this, and nothing else in it catches SDK errors. An error
    object in the middle of a stream (or a response the SDK could not read) has no HTTP status;
    its body still decides what it becomes.
    """
    try:
        yield
    except sdk.APIStatusError as exc:
        raise error_from_response(
            provider=provider,
            status=exc.status_code,
            body=exc.body,
            headers=exc.response.headers,
            fallback_message=exc.message,
            env_var=env_var,
        ) from exc
    except sdk.APITimeoutError as exc:
        raise ProviderUnavailableError(
            f"{provider}: the request timed out", provider=provider
        ) from exc
    except sdk.APIConnectionError as exc:
        raise ProviderUnavailableError(
            f"{provider}: could not connect to {exc.request.url.host}: {exc.__cause__ or exc}",
            provider=provider,
        ) from exc
    except sdk.APIError as exc:
        raise error_from_response(
            provider=provider,
            status=None,
            body=exc.body,
            headers=None,
            fallback_message=exc.message,
            env_var=env_var,
        ) from exc
