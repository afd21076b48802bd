"""Small helpers both SDK adapters need: the wire form of SDK objects, the API key, and the
client pair."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from contextfold.errors import AuthenticationError, ProviderError

__all__ = ["SDKClients", "resolve_api_key", "wire_dict"]


def wire_dict(value: Any) -> dict[str, Any]:
    """The wire form of an SDK response object: only the fields the server sent, extras kept."""
    if isinstance(value, Mapping):
        return dict(value)
    data = value.to_dict()
    if not isinstance(data, dict):
        raise ProviderError(f"unexpected response object {type(value).__name__}")
    return data


def resolve_api_key(
    provider: str, api_key: str | None, env_var: str, *, fallback: str | None = None
) -> str:
    """``api_key``, else the ``env_var`` variable, else ``fallback``; with none of them, an
    :class:`AuthenticationError` that names the variable to set."""
    key = api_key or os.environ.get(env_var) or fallback
    if not key:
        raise AuthenticationError(
            f"{provider}: no API key", provider=provider, status=None, env_var=env_var
        )
    return key


class _SyncClient(Protocol):
    def with_options(self, *, max_retries: int) -> Any: ...
    def close(self) -> None: ...


class _AsyncClient(Protocol):
    def with_options(self, *, max_retries: int) -> Any: ...
    async def close(self) -> None: ...


SyncT = TypeVar("SyncT", bound=_SyncClient)
AsyncT = TypeVar("AsyncT", bound=_AsyncClient)


class SDKClients(Generic[SyncT, AsyncT]):
    """The sync and async clients of one SDK adapter, each built on first use.

    Clients passed in belong to the caller: their own retries are switched off (the adapter's
    :class:`~contextfold.providers.RetryPolicy` owns retrying) and closing leaves them open.
    Clients built here are closed by :meth:`close` / :meth:`aclose`.
    """

    def __init__(
        self,
        build_sync: Callable[[], SyncT],
        build_async: Callable[[], AsyncT],
        client: SyncT | None = None,
        async_client: AsyncT | None = None,
    ) -> None:
        self._build_sync = build_sync
        self._build_async = build_async
        self._owns_sync = client is None
        self._owns_async = async_client is None
        self._sync: SyncT | None = client.with_options(max_retries=0) if client else None
        self._async: AsyncT | None = (
            async_client.with_options(max_retries=0) if async_client else None
        )

    def sync(self) -> SyncT:
        """The sync client (built now if needed)."""
        if self._sync is None:
            self._sync = self._build_sync()
        return self._sync

    def async_(self) -> AsyncT:
        """The async client (built now if needed)."""
        if self._async is None:
            self._async = self._build_async()
        return self._async

    def close(self) -> None:
        """Close the sync client if it was built here."""
        if self._owns_sync and self._sync is not None:
            self._sync.close()
            self._sync = None

    async def aclose(self) -> None:
        """Close the async client if it was built here."""
        if self._owns_async and self._async is not None:
            await self._async.close()
            self._async = None
