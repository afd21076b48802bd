"""Warn before Ollama silently cuts a prompt down to its context size.

Ollama does not reject a prompt longer than the context it allocated for a model (``num_ctx``): it
drops the oldest tokens and answers anyway, so the system prompt and the task can vanish without
an error. :func:`check_ollama_context` asks the server what window it will really use and warns
when the window contextfold plans to fill is larger.

Where the figure comes from, most reliable first:

1. ``/api/ps``: the context of the model as currently loaded (``context_length``), when it is;
2. ``/api/show``: a ``num_ctx`` line in the model's ``parameters`` (set by its Modelfile);
3. otherwise the server default (``OLLAMA_CONTEXT_LENGTH``), which no endpoint reports; we assume
   :data:`OLLAMA_DEFAULT_NUM_CTX`, the smallest default Ollama picks.

The result is capped by what the model was trained for (``model_info["<arch>.context_length"]``).
A server that does not answer ``/api/show`` is not taken for Ollama: the warning says so, and
what the server itself states (llama.cpp's ``/props``, vLLM's ``/v1/models``) is used when it
states anything. Only the standard library is used, so the check works without any SDK installed.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contextfold.providers._http_json import failure_reason, get_json, post_json
from contextfold.providers._server_window import (
    ContextWindowWarning,
    probe_server_window,
    server_root,
)

__all__ = [
    "OLLAMA_BASE_URL",
    "OLLAMA_DEFAULT_NUM_CTX",
    "OllamaContext",
    "OllamaContextWarning",
    "check_ollama_context",
    "ollama_native_url",
]

OLLAMA_BASE_URL = "http://localhost:11434"
"""Where a local Ollama server listens; its OpenAI-compatible API is under ``/v1``."""

OLLAMA_DEFAULT_NUM_CTX = 4096
"""The context assumed when neither the loaded model nor its Modelfile states one: Ollama's
smallest default (it picks more on machines with more VRAM, or ``OLLAMA_CONTEXT_LENGTH``)."""

OLLAMA_CHECK_TIMEOUT = 5.0
"""Seconds to wait for ``/api/show`` and ``/api/ps``."""

_NUM_CTX_LINE = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


class OllamaContextWarning(ContextWindowWarning):
    """The planned context is larger than what Ollama will keep (prompts would be truncated), or
    the server could not confirm it."""


@dataclass(frozen=True, slots=True)
class OllamaContext:
    """What an Ollama server said about a model's context, and what it means for a plan.

    ``window`` is the number of tokens Ollama will keep; ``source`` says where it came from
    (``"loaded"``, ``"num_ctx"``, ``"assumed_default"``; ``"server"`` when ``/api/show`` failed
    but the server stated its context another way, read from ``server_source``; ``"unknown"``
    when nothing did). ``error`` says why ``/api/show`` failed. ``truncates`` is true when
    ``planned_window`` is larger than ``window``.
    """

    model: str
    planned_window: int
    window: int | None
    source: str
    model_context_length: int | None = None
    num_ctx: int | None = None
    loaded_context_length: int | None = None
    error: str | None = None
    server_source: str = ""

    @property
    def truncates(self) -> bool:
        """True when Ollama would silently drop part of a prompt of ``planned_window`` tokens."""
        return self.window is not None and self.planned_window > self.window

    @property
    def message(self) -> str:
        """A sentence for the user: the risk and how to fix it (empty when there is none)."""
        if self.error is not None:
            return self._not_answered_message()
        if not self.truncates:
            return ""
        where = {
            "loaded": "as loaded now",
            "num_ctx": "num_ctx from its Modelfile",
            "assumed_default": "Ollama's default; /api/show states no num_ctx",
        }.get(self.source, self.source)
        return (
            f"Ollama keeps only {self.window} tokens of context for {self.model!r} ({where}), but "
            f"contextfold plans to use {self.planned_window}: longer prompts would be cut silently."
            f" Raise the context (`PARAMETER num_ctx {self.planned_window}` in a Modelfile, or "
            f"OLLAMA_CONTEXT_LENGTH={self.planned_window} for `ollama serve`) or plan a window of "
            f"at most {self.window} tokens."
        )

    def _not_answered_message(self) -> str:
        name, planned = f"ollama/{self.model}", self.planned_window
        setting = f'[models."{name}"] context_window'
        if self.window is None:
            return (
                f"{name}: could not confirm the context window: the server did not answer "
                f"Ollama's /api/show ({self.error}); assuming {planned} tokens. If it holds "
                f"fewer, pass --window N (or set {setting} = N)."
            )
        verdict = (
            f"but contextfold plans {planned}: larger requests would be refused or cut. Pass "
            f"--window {self.window} (or set {setting} = {self.window})."
            if self.truncates
            else f"enough for the planned {planned}."
        )
        return (
            f"{name}: the server did not answer Ollama's /api/show ({self.error}), so it is not "
            f"Ollama; it states {self.window} tokens per request ({self.server_source}), {verdict}"
        )


def ollama_native_url(base_url: str | None) -> str:
    """The native API root for an OpenAI-compatible Ollama URL (``.../v1`` stripped)."""
    return server_root(base_url or OLLAMA_BASE_URL)


def check_ollama_context(
    model: str,
    planned_window: int,
    *,
    base_url: str | None = None,
    timeout: float = OLLAMA_CHECK_TIMEOUT,
    warn: bool = True,
) -> OllamaContext:
    """Ask Ollama how much context it keeps for ``model``; warn when ``planned_window`` exceeds it.

    ``base_url`` may be the native root or the OpenAI-compatible ``.../v1`` URL. The warning is an
    :class:`OllamaContextWarning`; the returned :class:`OllamaContext` says the same in data.
    A server that does not answer ``/api/show`` always warns: the window is unconfirmed, or
    comes from what the server states otherwise (``source="server"``).
    """
    root = ollama_native_url(base_url)
    try:
        show = post_json(f"{root}/api/show", {"model": model}, timeout)
    except (OSError, ValueError) as exc:
        server = probe_server_window(f"{root}/v1", model=model, timeout=timeout)
        info = OllamaContext(
            model,
            planned_window,
            server.window,
            "server" if server.window is not None else "unknown",
            error=failure_reason(exc),
            server_source=server.source,
        )
        if warn:
            warnings.warn(info.message, OllamaContextWarning, stacklevel=2)
        return info
    trained = _trained_context(show.get("model_info"))
    num_ctx = _num_ctx(show.get("parameters"))
    loaded = _loaded_context(root, model, timeout)
    if loaded is not None:
        window, source = loaded, "loaded"
    elif num_ctx is not None:
        window, source = num_ctx, "num_ctx"
    else:
        window, source = OLLAMA_DEFAULT_NUM_CTX, "assumed_default"
    if trained is not None:
        window = min(window, trained)
    info = OllamaContext(model, planned_window, window, source, trained, num_ctx, loaded)
    if warn and info.truncates:
        warnings.warn(info.message, OllamaContextWarning, stacklevel=2)
    return info


def _trained_context(model_info: Any) -> int | None:
    if not isinstance(model_info, Mapping):
        return None
    arch = model_info.get("general.architecture")
    value = model_info.get(f"{arch}.context_length") if arch else None
    if value is None:
        # Some builds omit general.architecture; any "<arch>.context_length" key will do.
        value = next((v for k, v in model_info.items() if k.endswith(".context_length")), None)
    return value if isinstance(value, int) else None


def _num_ctx(parameters: Any) -> int | None:
    if not isinstance(parameters, str):
        return None
    match = _NUM_CTX_LINE.search(parameters)
    return int(match.group(1)) if match else None


def _loaded_context(root: str, model: str, timeout: float) -> int | None:
    """The context of ``model`` as loaded right now (``/api/ps``), or None."""
    try:
        running = get_json(f"{root}/api/ps", timeout)
    except (OSError, ValueError):
        return None
    for entry in running.get("models") or ():
        if not isinstance(entry, Mapping):
            continue
        if model in (entry.get("name"), entry.get("model")) or (
            ":" not in model and entry.get("name") == f"{model}:latest"
        ):
            value = entry.get("context_length")
            return value if isinstance(value, int) else None
    return None
