"""Which failures are tried again, counted in requests a real SDK sends to a local server.

Only what can succeed on a second try is retried: 408, 409, 429, 502, 503, 504, Anthropic's
529, connection failures and timeouts. A 500 is tried once more (local servers answer 500 for
mistakes that repeat, e.g. llama.cpp's "tools param requires --jinja flag"); any other status
goes to the caller at once.
"""

from __future__ import annotations

import pytest

from contextfold import Message, ProviderError
from contextfold.providers import ChatRequest, OpenAIChat, RetryPolicy
from contextfold.providers._retry import DEFAULT_MAX_ATTEMPTS
from tests.providers.conftest import LocalServer, Reply, Sleeps
from tests.providers.payloads import openai_completion, openai_error

ASK = ChatRequest(messages=(Message.user("hi"),), max_tokens=8)


@pytest.mark.parametrize(
    ("status", "requests"),
    [
        pytest.param(500, 2, id="500-once-more"),
        pytest.param(501, 1, id="501-never"),
        pytest.param(502, DEFAULT_MAX_ATTEMPTS, id="502"),
        pytest.param(503, DEFAULT_MAX_ATTEMPTS, id="503"),
        pytest.param(504, DEFAULT_MAX_ATTEMPTS, id="504"),
        pytest.param(408, DEFAULT_MAX_ATTEMPTS, id="408"),
        pytest.param(409, DEFAULT_MAX_ATTEMPTS, id="409"),
        pytest.param(429, DEFAULT_MAX_ATTEMPTS, id="429"),
        pytest.param(400, 1, id="400"),
        pytest.param(404, 1, id="404"),
        pytest.param(422, 1, id="422"),
    ],
)
def test_a_failure_that_repeats_is_sent_as_often_as_it_can_succeed(
    server: LocalServer, retry: RetryPolicy, status: int, requests: int
) -> None:
    for _ in range(DEFAULT_MAX_ATTEMPTS + 1):
        server.add(Reply(status, openai_error("it failed", type="server_error")))
    model = OpenAIChat("m", base_url=f"{server.url}/v1", retry=retry)

    with pytest.raises(ProviderError) as caught:
        model.complete(ASK)

    assert caught.value.status == status
    assert len(server.requests) == requests


def test_llamacpp_500_that_repeats_is_sent_twice_and_says_so(
    server: LocalServer, retry: RetryPolicy, sleeps: Sleeps
) -> None:
    # What llama.cpp's server answers to tools when started without --jinja: it never changes.
    body = {
        "error": {
            "code": 500,
            "message": "tools param requires --jinja flag",
            "type": "server_error",
        }
    }
    server.add(Reply(500, body), Reply(500, body), Reply(500, body))
    model = OpenAIChat("m", base_url=f"{server.url}/v1", retry=retry)

    with pytest.raises(ProviderError, match=r"--jinja flag.*gave up after 2 attempts"):
        model.complete(ASK)
    assert len(server.requests) == 2
    assert len(sleeps.delays) == 1


def test_a_500_then_success_recovers(server: LocalServer, retry: RetryPolicy) -> None:
    server.add(Reply(500, openai_error("blip", type="server_error")))
    server.add(Reply(json=openai_completion("ok")))
    response = OpenAIChat("m", base_url=f"{server.url}/v1", retry=retry).complete(ASK)
    assert response.text == "ok"


def test_retries_of_a_500_are_a_policy_setting(server: LocalServer, sleeps: Sleeps) -> None:
    retry = RetryPolicy(max_server_error_retries=0, sleep=sleeps.sleep, asleep=sleeps.asleep)
    server.add(Reply(500, openai_error("no", type="server_error")))
    with pytest.raises(ProviderError):
        OpenAIChat("m", base_url=f"{server.url}/v1", retry=retry).complete(ASK)
    assert len(server.requests) == 1
