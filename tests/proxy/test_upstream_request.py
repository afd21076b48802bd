"""The proxy's upstream request is the one ``httpx.AsyncClient.build_request`` builds: the same
method, URL, headers (in order), body and timeout, for each set of headers a client sends, the
first time and when the merged set is taken again (issue 28)."""

from __future__ import annotations

import httpx
import pytest

from contextfold.proxy._exchange import upstream_request

_HEADER_SETS = [
    {"x-api-key": "k1", "anthropic-version": "2023-06-01", "content-type": "application/json"},
    {"authorization": "Bearer t", "user-agent": "claude-cli/2", "content-type": "application/json"},
    {"User-Agent": "Codex", "openai-organization": "org", "content-type": "application/json"},
    {"content-type": "application/json"},
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize("timeout", [httpx.Timeout(600.0, connect=30.0), httpx.Timeout(5.0)])
async def test_the_request_is_the_one_build_request_builds(timeout: httpx.Timeout) -> None:
    url = httpx.URL("http://127.0.0.1:8080/v1/messages")
    merged: dict[tuple[tuple[str, str], ...], httpx.Headers] = {}
    async with httpx.AsyncClient(timeout=timeout) as http:
        for headers in _HEADER_SETS + _HEADER_SETS:  # the second time, from what was merged
            content = f'{{"n": {len(merged)}}}'.encode()
            made = upstream_request(http, merged, url, content, headers)
            built = http.build_request("POST", url, content=content, headers=headers)
            assert (made.method, made.url, made.headers.raw) == (
                built.method,
                built.url,
                built.headers.raw,
            )
            assert (made.content, made.extensions) == (built.content, built.extensions)
    assert len(merged) == len(_HEADER_SETS)
