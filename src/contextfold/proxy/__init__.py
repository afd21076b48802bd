"""``contextfold proxy``: context management for any agent, at the HTTP level.

Agents that can point their base URL elsewhere (Claude Code, Codex, aider, the official SDKs)
send their requests here. Each request continues a stored session (found by a hash chain over
the client's messages); the engine prepares what the upstream receives: outputs cut or
offloaded, old batches masked, summaries, a valid history and cache breakpoints. The engine's
``read_result`` tool is answered here, without the client seeing it.

Needs the ``proxy`` extra (``pip install 'contextfold[proxy]'``): Starlette, uvicorn, httpx.
"""

from __future__ import annotations

from contextfold.proxy.app import AUTH_HEADER, create_app
from contextfold.proxy.config import ProxyConfig

__all__ = ["AUTH_HEADER", "ProxyConfig", "create_app"]
