"""Overflow messages, retry-after headers and the retry decisions, without a server."""

from __future__ import annotations

import email.utils

import pytest

from contextfold import (
    AuthenticationError,
    ContextOverflowError,
    Message,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
)
from contextfold.providers import ChatRequest, RetryPolicy
from contextfold.providers.errors import (
    OverflowFigures,
    error_from_response,
    parse_overflow,
    parse_retry_after,
)

OVERFLOW_MESSAGES = [
    pytest.param(
        "This model's maximum context length is 8192 tokens. However, your messages resulted in "
        "11433 tokens. Please reduce the length of the messages.",
        OverflowFigures(11433, 8192, False),
        id="openai-messages-resulted-in",
    ),
    pytest.param(
        "This model's maximum context length is 4097 tokens. However, you requested 4203 tokens "
        "(3703 in the messages, 500 in the completion). Please reduce the length of the messages "
        "or completion.",
        OverflowFigures(3703, 4097, True),
        id="openai-vllm-requested-split",
    ),
    pytest.param(
        "This model's maximum context length is 16384 tokens. However, you requested 122946 "
        "tokens (112946 in the messages, 10000 in the completion).",
        OverflowFigures(112946, 16384, False),
        id="vllm-prompt-alone-too-big",
    ),
    pytest.param(
        "This model's maximum context length is 8192 tokens, however you requested 8977 tokens "
        "(8977 in your prompt; 0 for the completion). Please reduce your prompt; or completion "
        "length.",
        OverflowFigures(8977, 8192, False),
        id="openai-compatible-your-prompt",
    ),
    pytest.param(
        "You passed 170753 input tokens and requested 32000 output tokens. However, the model's "
        "context length is only 202752 tokens, resulting in a maximum input length of 170752 "
        "tokens. Please reduce the length of the input prompt. (parameter=input_tokens, "
        "value=170753)",
        OverflowFigures(170753, 202752, True),
        id="vllm-passed-input-tokens",
    ),
    pytest.param(
        "You passed 131073 input tokens and requested 0 output tokens. However, the model's "
        "context length is only 131072 tokens, resulting in a maximum input length of 131072 "
        "tokens.",
        OverflowFigures(131073, 131072, False),
        id="vllm-no-output-requested",
    ),
    pytest.param(
        "This endpoint's maximum context length is 131072 tokens. However, you requested about "
        "138956 tokens (7884 of text input, 131072 in the output). Please reduce the length of "
        'either one, or use the "middle-out" transform to compress your prompt automatically.',
        OverflowFigures(7884, 131072, True),
        id="openrouter-output-too-big",
    ),
    pytest.param(
        "This endpoint's maximum context length is 16384 tokens. However, you requested about "
        "94307 tokens (94000 of text input, 307 of tool input). Please reduce the length.",
        OverflowFigures(94307, 16384, False),
        id="openrouter-text-and-tool-input",
    ),
    pytest.param(
        "prompt is too long: 209353 tokens > 199999 maximum",
        OverflowFigures(209353, 199999, False),
        id="anthropic-prompt-too-long",
    ),
    pytest.param(
        "input length and `max_tokens` exceed context limit: 189136 + 20000 > 204648, decrease "
        "input length or `max_tokens` and try again",
        OverflowFigures(189136, 204648, True),
        id="anthropic-input-plus-max-tokens",
    ),
    pytest.param(
        "This model's maximum context length is 131072 tokens. However, you requested 351430 "
        "tokens. Please reduce the length of the messages or completion.",
        OverflowFigures(None, 131072, False),
        id="window-only",
    ),
]


@pytest.mark.parametrize(("message", "figures"), OVERFLOW_MESSAGES)
def test_overflow_wordings_give_their_figures(message: str, figures: OverflowFigures) -> None:
    assert parse_overflow(message) == figures


def test_llamacpp_body_gives_its_figures() -> None:
    body = {
        "error": {
            "code": 500,
            "message": "the request exceeds the available context size. try increasing the "
            "context size or enable context shift",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 1407,
            "n_ctx": 256,
        }
    }
    assert parse_overflow(body["error"]["message"], body) == OverflowFigures(1407, 256, False)
    # Its first versions answered with HTTP 500: the type wins over the status.
    error = error_from_response(
        provider="llamacpp",
        status=500,
        body=body,
        headers=None,
        fallback_message="",
        env_var="X",
    )
    assert isinstance(error, ContextOverflowError)


def test_an_invalid_max_tokens_is_not_an_overflow() -> None:
    message = (
        "max_tokens: 10000 > 4096, which is the maximum allowed number of output tokens for "
        "claude-3-5-sonnet-20240620"
    )
    error = error_from_response(
        provider="anthropic",
        status=400,
        body={"type": "error", "error": {"type": "invalid_request_error", "message": message}},
        headers=None,
        fallback_message="",
        env_var="ANTHROPIC_API_KEY",
    )
    assert type(error) is ProviderError
    assert message in str(error)


@pytest.mark.parametrize(
    ("status", "error_type", "expected"),
    [
        (401, "", AuthenticationError),
        (403, "permission_error", AuthenticationError),
        (429, "", RateLimitError),
        (529, "overloaded_error", RateLimitError),
        (None, "overloaded_error", RateLimitError),
        (500, "", ProviderUnavailableError),
        (503, "", ProviderUnavailableError),
        (408, "", ProviderUnavailableError),
        (None, "api_error", ProviderUnavailableError),
        (413, "request_too_large", ContextOverflowError),
        (422, "", ProviderError),
    ],
)
def test_status_and_type_choose_the_error(
    status: int | None, error_type: str, expected: type[ProviderError]
) -> None:
    error = error_from_response(
        provider="p",
        status=status,
        body={"error": {"type": error_type, "message": "something"}},
        headers={"retry-after": "4"},
        fallback_message="",
        env_var="P_KEY",
    )
    assert type(error) is expected
    if isinstance(error, RateLimitError):
        assert error.retry_after == 4.0


def test_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "12"}) == 12.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "12"}) == 0.25
    date = email.utils.formatdate(1_000_030, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=1_000_000) == pytest.approx(30.0)
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


# -- retry decisions -------------------------------------------------------------------------------


def request(max_tokens: int | None = 8000) -> ChatRequest:
    return ChatRequest(messages=(Message.user("x"),), max_tokens=max_tokens)


def test_backoff_doubles_up_to_the_cap_minus_jitter() -> None:
    policy = RetryPolicy(backoff_base=1.0, backoff_max=5.0, jitter=0.5, rng=lambda: 1.0)
    assert [policy.backoff(n) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 2.5]
    assert RetryPolicy(jitter=0.5, rng=lambda: 0.0).backoff(2) == 2.0


def test_adjustable_overflow_lowers_max_tokens_once() -> None:
    attempts = RetryPolicy().start(request(32_000))
    overflow = ContextOverflowError(
        "x", prompt_tokens=190_000, limit=200_000, max_tokens_adjustable=True
    )
    assert attempts.after_failure(overflow) == 0.0  # no wait: the next call differs
    assert attempts.request.max_tokens == 200_000 - 190_000 - 16
    with pytest.raises(ContextOverflowError):
        attempts.after_failure(overflow)  # only once


def test_overflow_without_room_for_a_reply_goes_to_the_caller() -> None:
    attempts = RetryPolicy(min_output_tokens=1024).start(request(8000))
    tight = ContextOverflowError(
        "x", prompt_tokens=199_500, limit=200_000, max_tokens_adjustable=True
    )
    with pytest.raises(ContextOverflowError):
        attempts.after_failure(tight)
    assert attempts.request.max_tokens == 8000


def test_never_policy_hands_everything_over() -> None:
    attempts = RetryPolicy.never().start(request())
    for error in (
        RateLimitError("x", retry_after=1.0),
        ProviderUnavailableError("x"),
        ContextOverflowError("x", prompt_tokens=10, limit=100_000, max_tokens_adjustable=True),
    ):
        with pytest.raises(type(error)) as caught:
            attempts.after_failure(error)
        assert caught.value is error
