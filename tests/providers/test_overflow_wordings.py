"""Every provider's context-overflow answer, through the real SDK, becomes a
ContextOverflowError carrying the window (``limit``) and the prompt size when the answer gives
them: what the engine needs to learn the real window and compact to it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextfold import ContextOverflowError, Message
from contextfold.providers import AnthropicChat, ChatRequest, OpenAIChat, RetryPolicy
from tests.providers.conftest import LocalServer, Reply
from tests.providers.payloads import anthropic_error, openai_error

ASK = ChatRequest(messages=(Message.user("a long prompt"),), max_tokens=512)

LLAMACPP_BODY = {
    "error": {
        "code": 400,
        "message": "request (3024 tokens) exceeds the available context size (2048 tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 3024,
        "n_ctx": 2048,
    }
}

OPENAI_COMPATIBLE: list[Any] = [
    pytest.param(
        400,
        openai_error(
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 131072 tokens. Please reduce the length of the messages.",
            code="context_length_exceeded",
            param="messages",
        ),
        (131072, 128000),
        id="openai",
    ),
    pytest.param(
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 32768 tokens. However, you "
            "requested 34768 tokens (34000 in the messages, 768 in the completion).",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        (34000, 32768),
        id="vllm-old",
    ),
    pytest.param(
        400,
        {
            "error": {
                "message": "You passed 40001 input tokens and requested 512 output tokens. "
                "However, the model's context length is only 32768 tokens, resulting in a "
                "maximum input length of 32256 tokens.",
                "type": "BadRequestError",
                "param": "input_tokens",
                "code": 400,
            }
        },
        (40001, 32768),
        id="vllm-new",
    ),
    pytest.param(
        400,
        {
            "error": {
                "message": "This endpoint's maximum context length is 16384 tokens. However, "
                "you requested about 94307 tokens (94000 of text input, 307 of tool input).",
                "code": 400,
            }
        },
        (94307, 16384),
        id="openrouter",
    ),
    pytest.param(400, LLAMACPP_BODY, (3024, 2048), id="llamacpp"),
    pytest.param(
        # llama.cpp's body with its figures dropped by a proxy: the wording still has them.
        400,
        {"error": {"message": LLAMACPP_BODY["error"]["message"], "type": "invalid_request_error"}},
        (3024, 2048),
        id="llamacpp-message-only",
    ),
    pytest.param(
        # Ollama >= 0.32 runs llama.cpp's server and passes its error on as a JSON string.
        400,
        openai_error(json.dumps(LLAMACPP_BODY, separators=(",", ":"))),
        (3024, 2048),
        id="ollama-llama-server",
    ),
    pytest.param(
        # Ollama with context shift off (its own runner): no figures to read.
        400,
        openai_error(
            "the prompt is longer than the context length currently available to the model; "
            "shorten the prompt, adjust the context length in settings, or use a model with a "
            "longer context length"
        ),
        (None, None),
        id="ollama-no-shift",
    ),
    pytest.param(
        400,
        {
            "error": "Trying to keep the first 50785 tokens when context the overflows. However, "
            "the model is loaded with context length of only 45217 tokens, which is not enough. "
            "Try to load the model with a larger context length, or provide a shorter input"
        },
        (50785, 45217),
        id="lm-studio",
    ),
]


@pytest.mark.parametrize(("status", "body", "figures"), OPENAI_COMPATIBLE)
def test_openai_compatible_overflow_carries_the_figures(
    server: LocalServer,
    retry: RetryPolicy,
    status: int,
    body: dict[str, Any],
    figures: tuple[int | None, int | None],
) -> None:
    server.add(Reply(status, body))
    model = OpenAIChat("m", base_url=f"{server.url}/v1", retry=retry)

    with pytest.raises(ContextOverflowError) as caught:
        model.complete(ASK)

    assert (caught.value.prompt_tokens, caught.value.limit) == figures
    assert len(server.requests) == 1  # nothing a blind retry would fix


@pytest.mark.parametrize(
    ("message", "figures"),
    [
        pytest.param(
            "prompt is too long: 210000 tokens > 200000 maximum", (210000, 200000), id="prompt"
        ),
        pytest.param(
            "input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, "
            "decrease input length or `max_tokens` and try again",
            (199759, 200000),
            id="input-plus-max-tokens",
        ),
    ],
)
def test_anthropic_overflow_carries_the_figures(
    server: LocalServer, message: str, figures: tuple[int, int]
) -> None:
    server.add(Reply(400, anthropic_error("invalid_request_error", message)))
    model = AnthropicChat(
        "claude-test", base_url=server.url, api_key="k", retry=RetryPolicy.never()
    )

    with pytest.raises(ContextOverflowError) as caught:
        model.complete(ASK)

    assert (caught.value.prompt_tokens, caught.value.limit) == figures
