"""Response and error bodies shaped like the providers' documented ones."""

from __future__ import annotations

from typing import Any

from contextfold import ToolSpec

READ_FILE = ToolSpec(
    "read_file",
    "Read a file",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
"""A typical tool definition, for requests that carry tools."""

# -- OpenAI chat completions -----------------------------------------------------------------------


def openai_usage(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }


def openai_completion(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    *,
    finish_reason: str = "stop",
    usage: dict[str, Any] | None = None,
    model: str = "gpt-4.1-mini-2025-04-14",
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion",
        "created": 1741569952,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        ],
        "usage": usage or openai_usage(19, 10),
        "service_tier": "default",
        "system_fingerprint": "fp_44709d6fcb",
    }


def openai_tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def openai_chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
    choices: bool = True,
) -> dict[str, Any]:
    """One ``chat.completion.chunk``; ``choices=False`` gives the final usage-only chunk."""
    chunk: dict[str, Any] = {
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1694268190,
        "model": "gpt-4.1-mini-2025-04-14",
        "system_fingerprint": "fp_44709d6fcb",
        "choices": (
            [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish_reason}]
            if choices
            else []
        ),
    }
    chunk["usage"] = usage
    return chunk


def openai_error(
    message: str, *, type: str = "invalid_request_error", code: Any = None, param: Any = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


# -- Anthropic messages ----------------------------------------------------------------------------


def anthropic_usage(
    input_tokens: int, output_tokens: int, cache_write: int = 0, cache_read: int = 0
) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_write,
        "cache_read_input_tokens": cache_read,
        "output_tokens": output_tokens,
    }


def anthropic_message(
    content: list[dict[str, Any]],
    *,
    stop_reason: str = "end_turn",
    usage: dict[str, Any] | None = None,
    model: str = "claude-test-model-20260101",
) -> dict[str, Any]:
    return {
        "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage or anthropic_usage(25, 12),
    }


def anthropic_error(type: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": type, "message": message},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }


def anthropic_stream_start(usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_014p7gG3wDgGV9EUtLvnow3U",
            "type": "message",
            "role": "assistant",
            "model": "claude-test-model-20260101",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        },
    }
