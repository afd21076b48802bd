"""Small JSON requests to a model server's side endpoints, with the standard library only (the
context checks must work without any SDK installed)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

__all__ = ["failure_reason", "get_json", "post_json"]


def get_json(url: str, timeout: float, *, api_key: str | None = None) -> dict[str, Any]:
    """The JSON object ``GET url`` answers; raises ``OSError`` (HTTP errors included) or
    ``ValueError`` (not a JSON object)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return _read(urllib.request.Request(url, headers=headers), timeout)


def post_json(url: str, payload: Mapping[str, Any], timeout: float) -> dict[str, Any]:
    """The JSON object ``POST url`` with ``payload`` answers; raises as :func:`get_json`."""
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    return _read(request, timeout)


def _read(request: urllib.request.Request, timeout: float) -> dict[str, Any]:
    with urllib.request.urlopen(request, timeout=timeout) as response:
        value = json.loads(response.read().decode("utf-8"))
    if not isinstance(value, dict):
        raise ValueError(f"{request.full_url} answered with something other than a JSON object")
    return value


def failure_reason(exc: BaseException) -> str:
    """A short reason for a failed request: ``HTTP 404 Not Found``, ``[Errno 111] Connection
    refused``, ``timed out``."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return str(exc) or type(exc).__name__
