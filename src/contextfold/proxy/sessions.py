"""What the proxy has done for each conversation: the figures ``/contextfold/sessions`` and
``contextfold sessions list`` show."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextfold.store import BrowsableSessionStore, SessionInfo

__all__ = ["METADATA_KEY", "proxied_sessions", "proxy_figures"]

METADATA_KEY = "proxy"
"""The session metadata key the proxy keeps its tenant and figures under."""


def proxy_figures(info: SessionInfo) -> dict[str, Any] | None:
    """The proxy's figures for one session (``None`` for a session the proxy did not make):
    requests, tokens the client sent and the upstream received, the share saved, cache reads."""
    figures = (info.metadata or {}).get(METADATA_KEY)
    if not isinstance(figures, Mapping):
        return None
    client = int(figures.get("client_tokens", 0))
    sent = int(figures.get("estimated_upstream_tokens", 0))
    upstream = int(figures.get("upstream_tokens", 0))
    cached = int(figures.get("cache_read_tokens", 0))
    return {
        "requests": int(figures.get("requests", 0)),
        "client_tokens": client,
        "sent_tokens": sent,
        "upstream_tokens": upstream,
        # Both sides counted by the same counter: the share of the client's tokens the engine
        # kept out of the upstream's requests (engine tools included, so it can be negative).
        "saved": round(1 - sent / client, 4) if client and sent else None,
        "cache_read_tokens": cached,
        "cache_reuse": round(cached / upstream, 4) if upstream else None,
        "engine_calls": int(figures.get("engine_calls", 0)),
        "protocol": figures.get("protocol"),
        "model": figures.get("model"),
    }


def proxied_sessions(
    store: BrowsableSessionStore, tenant: str, *, limit: int = 50
) -> list[dict[str, Any]]:
    """``tenant``'s proxied sessions, most recent first, with their figures."""
    rows: list[dict[str, Any]] = []
    for info in store.list_sessions():
        figures = proxy_figures(info)
        if figures is None or info.metadata[METADATA_KEY].get("tenant") != tenant:
            continue
        rows.append(
            {
                "id": info.id,
                "parent_id": info.parent_id,
                "title": info.title,
                "created": info.created,
                "updated": info.updated,
                **figures,
            }
        )
        if len(rows) >= limit:
            break
    return rows
