"""What a proxy is started with: :class:`ProxyConfig`."""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

from contextfold.compaction.pipeline import preset_named
from contextfold.errors import ConfigError
from contextfold.paths import data_dir
from contextfold.private_files import make_private_dir, open_private
from contextfold.proxy._wire import PROTOCOL_OPTIONS

__all__ = ["AUTH_KEY_ENV", "CONFIG_ENV", "SALT_ENV", "ProxyConfig"]

CONFIG_ENV = "CONTEXTFOLD_PROXY_CONFIG"
"""How ``contextfold proxy --workers N`` hands its settings to each uvicorn worker (JSON)."""

AUTH_KEY_ENV = "CONTEXTFOLD_PROXY_KEY"
"""The proxy's own key, read from the environment (never written into :data:`CONFIG_ENV`)."""

SALT_ENV = "CONTEXTFOLD_PROXY_SALT"
"""Environment variable holding the tenant salt; workers on several machines must share it."""

_DEFAULT_MAX_REQUEST_BYTES = 32 * 1024 * 1024
"""Anthropic's own limit on a Messages request: a larger body is refused before parsing."""


@dataclass(frozen=True)
class ProxyConfig:
    """How ``contextfold proxy`` runs.

    ``upstream`` is the provider's base URL (``https://api.anthropic.com``, or one ending in
    ``/v1`` such as ``http://127.0.0.1:11434/v1``). ``upstream_protocol`` is the API it speaks
    (``anthropic``, ``chat`` or ``responses``); ``None`` detects it: the client's own protocol
    first, and when the upstream answers that path with 404, the others in turn (remembered for
    the process). A client of any protocol then works in front of an upstream of any other.
    ``window`` is the context window requests are planned against, for every model (required
    for models the registry does not know); ``model`` is the upstream's model: every request
    goes to it whatever model the client names, and is planned against its window and
    tokenizer. ``store`` is a path or URL
    for :func:`contextfold.store.open_store` (``None``: the default store). ``auth_key``, when
    set, must be presented by every client (``X-Contextfold-Key``, or as its API key).
    ``dry_run`` forwards every request untouched and records what the engine would have sent.
    """

    upstream: str
    upstream_protocol: str | None = None
    window: int | None = None
    model: str | None = None
    store: str | Path | None = None
    compactor: str = "mask-first"
    auth_key: str | None = None
    tenant_salt: bytes | None = None
    max_request_bytes: int = _DEFAULT_MAX_REQUEST_BYTES
    dry_run: bool = False
    defer_tools: bool = False
    """Let the engine defer the client's tools in a small window (behind ``tool_search``)."""
    max_engine_rounds: int = 4
    """Calls to the upstream one client request may take while the proxy answers the engine's
    own tools (``read_result``) itself."""
    upstream_timeout: float = 600.0
    access_log: str | None = None
    """Where ``contextfold proxy`` writes the JSON access log (``None``: standard error)."""

    def __post_init__(self) -> None:
        parts = urlsplit(self.upstream)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(
                "upstream",
                f"expected an http(s) URL such as https://api.anthropic.com, got {self.upstream!r}",
            )
        if self.upstream_protocol is not None and self.upstream_protocol not in PROTOCOL_OPTIONS:
            raise ConfigError(
                "upstream_protocol",
                f"expected one of {', '.join(PROTOCOL_OPTIONS)}, got {self.upstream_protocol!r}",
            )
        if self.window is not None and self.window < 1_024:
            raise ConfigError("window", f"must be at least 1024 tokens, got {self.window}")
        if self.max_request_bytes < 1_024:
            raise ConfigError(
                "max_request_bytes", f"must be at least 1024, got {self.max_request_bytes}"
            )
        if self.max_engine_rounds < 1:
            raise ConfigError("max_engine_rounds", "must be at least 1")
        preset_named(self.compactor)  # an unknown preset fails here, naming the choices

    def upstream_url(self, path: str) -> str:
        """The upstream URL for one of the proxy's ``/v1/...`` paths."""
        base = self.upstream.rstrip("/")
        if base.endswith("/v1") and path.startswith("/v1/"):
            path = path[len("/v1") :]
        return base + path

    def salt(self) -> bytes:
        """The tenant salt: the configured one, ``$CONTEXTFOLD_PROXY_SALT``, or a random one
        kept in the data directory (made once, readable by its owner only), so every worker on
        this machine hashes keys alike."""
        if self.tenant_salt:
            return self.tenant_salt
        if from_env := os.environ.get(SALT_ENV):
            return from_env.encode()
        path = make_private_dir(data_dir()) / "proxy-salt"
        try:
            if saved := path.read_text().strip():
                return saved.encode()
        except FileNotFoundError:
            pass
        with open_private(path, append=True) as out:  # two workers racing: both append...
            out.write(secrets.token_hex(32) + "\n")
        # ...and both read the first line, so they agree.
        return path.read_text().splitlines()[0].strip().encode()

    def to_environment(self) -> str:
        """The settings as JSON for :data:`CONFIG_ENV`, without the key and the salt (workers
        read those from their own variables)."""
        data = asdict(self)
        data.pop("auth_key")
        data.pop("tenant_salt")
        data["store"] = None if self.store is None else os.fspath(self.store)
        return json.dumps(data)

    @classmethod
    def from_environment(cls) -> ProxyConfig:
        """The settings a parent ``contextfold proxy`` left in :data:`CONFIG_ENV`."""
        text = os.environ.get(CONFIG_ENV)
        if not text:
            raise ConfigError(CONFIG_ENV, "is not set: start workers with `contextfold proxy`")
        return cls(**json.loads(text), auth_key=os.environ.get(AUTH_KEY_ENV) or None)
