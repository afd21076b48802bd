"""``contextfold proxy``: context management for any agent, at the HTTP level.

Agents that can point their base URL elsewhere (Claude Code, Codex, aider, the official SDKs)
send their requests here. Each request continues a stored session (found by a hash chain over
the client's messages); the engine prepares what the upstream receives: outputs cut or
offloaded, old batches masked, summaries, a valid history and cache breakpoints. The engine's
``read_result`` tool is answered here, without the client seeing it.

Needs the ``proxy`` extra (from a checkout: ``pip install ".[proxy]"``): Starlette, uvicorn, httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from contextfold.proxy.config import ProxyConfig

if TYPE_CHECKING:
    from contextfold.proxy.app import AUTH_HEADER, create_app

__all__ = ["AUTH_HEADER", "ProxyConfig", "create_app"]


def __getattr__(name: str) -> Any:
    # The server needs the proxy extra; the CLI reads the proxy's figures from any install.
    if name in ("AUTH_HEADER", "create_app"):
        from contextfold.proxy import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
