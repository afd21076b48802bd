"""How much context a local OpenAI-compatible server really holds, read from the server.

A server started with less context than its model knows (llama.cpp's ``-c``, vLLM's
``--max-model-len``) refuses or cuts requests that the registry's window allows. Where the
figure comes from:

1. llama.cpp's server: ``GET /props`` -> ``default_generation_settings.n_ctx`` (per slot: what one
   request may hold), or ``n_ctx`` at the top level, where some builds put it;
2. vLLM (and servers copying its API): ``GET /v1/models`` -> the served model's ``max_model_len``.

:func:`check_server_window` compares it with the window contextfold plans to fill, and warns
(:class:`ContextWindowWarning`, one line saying what to do) when the plan is larger or when the
server confirms nothing. Only the standard library is used.
"""

from __future__ import annotations

import urllib.error
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contextfold.providers._http_json import failure_reason, get_json

__all__ = [
    "SERVER_PROBE_TIMEOUT",
    "ContextWindowWarning",
    "ServerWindow",
    "WindowCheck",
    "check_server_window",
    "probe_server_window",
    "server_root",
]

SERVER_PROBE_TIMEOUT = 2.0
"""Seconds to wait for each probe (``/props``, ``/v1/models``): it runs once, when the model is
built, and a local server answers a GET at once."""


class ContextWindowWarning(UserWarning):
    """The window contextfold plans to fill is larger than what the server holds, or the server
    could not confirm it."""


@dataclass(frozen=True, slots=True)
class ServerWindow:
    """What the server at ``url`` said about its context: ``window`` tokens per request (None
    when it said nothing; ``error`` says why), read from ``source``."""

    url: str
    window: int | None
    source: str = ""
    error: str | None = None


@dataclass(frozen=True, slots=True)
class WindowCheck:
    """The window contextfold plans for ``name`` (``provider/model``) against the server's."""

    name: str
    planned_window: int
    server: ServerWindow

    @property
    def confirmed(self) -> bool:
        """True when the server stated its window."""
        return self.server.window is not None

    @property
    def exceeds(self) -> bool:
        """True when the plan is larger than what the server holds."""
        return self.server.window is not None and self.planned_window > self.server.window

    @property
    def message(self) -> str:
        """One line for the user: the risk and what to do (empty when there is none)."""
        name, planned, server = self.name, self.planned_window, self.server
        setting = f'[models."{name}"] context_window'
        if server.window is None:
            return (
                f"{name}: could not confirm the context window of the server at {server.url} "
                f"({server.error}); assuming {planned} tokens. If it holds fewer, pass "
                f"--window N (or set {setting} = N)."
            )
        if not self.exceeds:
            return ""
        return (
            f"{name}: the server at {server.url} holds {server.window} tokens per request "
            f"({server.source}), but contextfold plans a window of {planned}: larger requests "
            f"would be refused or cut. Pass --window {server.window} (or set {setting} = "
            f"{server.window}), or start the server with a larger context."
        )


def server_root(base_url: str) -> str:
    """The server's root for an OpenAI-compatible base URL (``.../v1`` stripped)."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def probe_server_window(
    base_url: str,
    *,
    model: str | None = None,
    api_key: str | None = None,
    timeout: float = SERVER_PROBE_TIMEOUT,
) -> ServerWindow:
    """Ask the server behind ``base_url`` how many tokens one request may hold.

    ``model`` picks the entry of ``/v1/models`` when the server lists several; ``api_key`` is
    sent to ``/v1/models`` (llama.cpp's ``/props`` is public). Never raises: a server that
    cannot be asked gives ``window=None`` and the reason in ``error``.
    """
    url = base_url.rstrip("/")
    try:
        props = get_json(f"{server_root(url)}/props", timeout)
    except urllib.error.HTTPError as exc:
        props_error = f"GET /props: {failure_reason(exc)}"
    except (OSError, ValueError) as exc:  # nothing answers there: /v1/models would not either
        return ServerWindow(url, None, error=f"GET /props: {failure_reason(exc)}")
    else:
        window = _props_n_ctx(props)
        if window is not None:
            return ServerWindow(url, window, "llama.cpp /props n_ctx")
        props_error = "GET /props: no n_ctx"
    try:
        models = get_json(f"{url}/models", timeout, api_key=api_key)
    except (OSError, ValueError) as exc:
        return ServerWindow(
            url, None, error=f"{props_error}; GET /v1/models: {failure_reason(exc)}"
        )
    window = _max_model_len(models, model)
    if window is not None:
        return ServerWindow(url, window, "/v1/models max_model_len")
    return ServerWindow(url, None, error=f"{props_error}; GET /v1/models: no max_model_len")


def check_server_window(
    name: str,
    planned_window: int,
    *,
    base_url: str,
    model: str | None = None,
    api_key: str | None = None,
    timeout: float = SERVER_PROBE_TIMEOUT,
    warn: bool = True,
) -> WindowCheck:
    """Compare ``planned_window`` for ``name`` (``provider/model``, as the user wrote it) with
    what the server behind ``base_url`` holds; warn when it is larger or unconfirmed."""
    check = WindowCheck(
        name,
        planned_window,
        probe_server_window(base_url, model=model, api_key=api_key, timeout=timeout),
    )
    if warn and check.message:
        warnings.warn(check.message, ContextWindowWarning, stacklevel=2)
    return check


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _props_n_ctx(props: Mapping[str, Any]) -> int | None:
    settings = props.get("default_generation_settings")
    if isinstance(settings, Mapping) and (n_ctx := _positive_int(settings.get("n_ctx"))):
        return n_ctx
    return _positive_int(props.get("n_ctx"))


def _max_model_len(models: Mapping[str, Any], model: str | None) -> int | None:
    entries = [e for e in models.get("data") or () if isinstance(e, Mapping)]
    chosen = [e for e in entries if model is not None and e.get("id") == model]
    if not chosen and len(entries) == 1:
        chosen = entries  # one model served: the name sent does not matter to the server
    return _positive_int(chosen[0].get("max_model_len")) if chosen else None
