"""Agents that host the engine and resend their whole history on every call: recognising what
is new in it.

- :mod:`~contextfold.hosts.digests` — digests of what a message says;
- :mod:`~contextfold.hosts.prefixes` — :class:`ResentHistory`, a history recognised by its
  prefixes on a store's :class:`~contextfold.store.PrefixIndex` (the proxy's);
- :mod:`~contextfold.hosts.sync` — :class:`HistorySync`, for the framework integrations.
"""

from __future__ import annotations

from contextfold.hosts.digests import (
    message_digest,
)

__all__ = [
    "message_digest",
]
