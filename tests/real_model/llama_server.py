"""Running llama.cpp servers kept for reuse by the real-model tier (the server itself is
:mod:`contextfold.providers.local_server`, which ``contextfold serve-local`` runs too)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from contextfold.providers.local_server import (
    DEFAULT_N_CTX,
    DEFAULT_TEMPLATE,
    LocalServer,
    running_local_server,
)

__all__ = ["LlamaServerPool"]


@dataclass
class LlamaServerPool:
    """Servers kept running for reuse, one per (n_ctx, template); :meth:`close` stops them all.

    Starting one costs 1-2 s; a test session asks for the same few sizes many times. The model
    file is assembled into ``model_dir`` (the session's temporary home: tests never write to
    ``~``).
    """

    model_dir: Path
    _servers: dict[tuple[int, str, bool], LocalServer] = field(default_factory=dict)
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def get(
        self, n_ctx: int = DEFAULT_N_CTX, *, template: str = DEFAULT_TEMPLATE, jinja: bool = True
    ) -> LocalServer:
        """The running server with these settings (started on first use)."""
        key = (n_ctx, template, jinja)
        server = self._servers.get(key)
        if server is None:
            started = running_local_server(
                n_ctx, template=template, jinja=jinja, model_dir=self.model_dir
            )
            server = self._stack.enter_context(started)
            self._servers[key] = server
        return server

    def close(self) -> None:
        """Stop every server this pool started."""
        self._servers.clear()
        self._stack.close()
