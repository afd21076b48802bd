"""The proxy's ASGI application: :func:`create_app`."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio.to_thread
import httpx
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from contextfold.errors import ContextfoldError
from contextfold.private_files import open_private
from contextfold.proxy import anthropic_side, openai_side
from contextfold.proxy._engines import Engines, ProxyStore
from contextfold.proxy._exchange import (
    SESSION_HEADER,
    Exchange,
    ProxyState,
    UpstreamRefused,
    WireSide,
    write_access_log,
)
from contextfold.proxy._identity import ANONYMOUS, tenant_of
from contextfold.proxy._wire import ClientError, ProtocolName
from contextfold.proxy.config import ProxyConfig
from contextfold.proxy.sessions import proxied_sessions
from contextfold.store import open_store

__all__ = ["AUTH_HEADER", "app_from_environment", "create_app", "log_to"]

logger = logging.getLogger("contextfold.proxy")

AUTH_HEADER = "x-contextfold-key"
"""Where a client presents the proxy's own key, when the proxy has one."""

_FORWARDED_HEADERS = (
    "authorization",
    "x-api-key",
    "anthropic-version",
    "anthropic-beta",
    "openai-organization",
    "openai-project",
    "user-agent",
)
"""Request headers the upstream receives as the client sent them (credentials included: the
proxy holds none of its own)."""

_SIDES: dict[ProtocolName, WireSide] = {"anthropic": anthropic_side, "openai": openai_side}


def _credential(request: Request) -> str | None:
    if key := request.headers.get("x-api-key"):
        return key
    authorization = request.headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token:
        return token.strip()
    return request.headers.get(AUTH_HEADER)


def _error(protocol: ProtocolName, error: ClientError) -> JSONResponse:
    return JSONResponse(_SIDES[protocol].error_body(error), status_code=error.status)


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ClientError(
            f"request body of {int(declared):,} bytes is over the proxy's limit of {limit:,}",
            status=413,
            kind="request_too_large",
        )
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ClientError(
                    f"request body is over the proxy's limit of {limit:,} bytes",
                    status=413,
                    kind="request_too_large",
                )
            chunks.append(chunk)
    except ClientDisconnect:
        # Not an error of the proxy's: nobody is left to answer, and nothing was stored.
        raise ClientError(
            "the client disconnected while sending its request", status=_CLIENT_GONE
        ) from None
    return b"".join(chunks)


_CLIENT_GONE = 499
"""The status logged for a client that left before its request was whole (nginx's code)."""


def _parse_json(raw: bytes) -> Any:
    try:
        return json.loads(raw, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise ClientError(f"the request body is not valid JSON: {exc}") from None


def _refuse_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; Python's parser accepts them, no upstream would.
    raise ValueError(f"{name} is not a JSON value")


def create_app(config: ProxyConfig) -> Starlette:
    """The proxy as an ASGI application (run it with uvicorn, or ``contextfold proxy``).

    The store, the engines and the upstream HTTP client are made at startup and closed at
    shutdown; between requests the proxy keeps nothing a request needs that is not in the store,
    so several workers (or machines sharing PostgreSQL) can serve the same clients.
    """
    holder: dict[str, ProxyState] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        store: ProxyStore = open_store(config.store)
        timeout = httpx.Timeout(config.upstream_timeout, connect=30.0)
        async with httpx.AsyncClient(timeout=timeout) as http:
            state = ProxyState(config, store, Engines(config, store), http, config.salt())
            holder["state"] = state
            try:
                yield
            finally:
                state.engines.close()
                store.close()

    def state() -> ProxyState:
        return holder["state"]

    def guarded(
        protocol: ProtocolName, handler: Callable[[Request, ProxyState], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """``handler`` behind the proxy key, with every failure answered in ``protocol``'s
        error format and logged (never a traceback to the client)."""

        async def endpoint(request: Request) -> Response:
            log: dict[str, Any] = {"method": request.method, "path": request.url.path}
            started = time.perf_counter()
            try:
                if (
                    config.auth_key is not None
                    and request.headers.get(AUTH_HEADER) != config.auth_key
                ):
                    raise ClientError(
                        f"contextfold proxy: missing or wrong {AUTH_HEADER} header",
                        status=401,
                        kind="authentication",
                    )
                request.state.log = log
                response = await handler(request, state())
            except ClientError as exc:
                response = _error(protocol, exc)
                log["error"] = exc.message
            except UpstreamRefused as refused:
                response = refused.to_response()
                log["error"] = f"upstream HTTP {refused.status}"
            except ContextfoldError as exc:
                logger.warning("request failed: %s", exc)
                response = _error(
                    protocol, ClientError(f"contextfold proxy: {exc}", status=500, kind="upstream")
                )
                log["error"] = str(exc)
            except Exception as exc:  # the last boundary: a bug must not reach the client raw
                logger.exception("unexpected error in contextfold proxy")
                message = f"contextfold proxy: internal error ({type(exc).__name__})"
                response = _error(protocol, ClientError(message, status=500, kind="upstream"))
                log["error"] = message
            log["status"] = response.status_code
            log["ms"] = round((time.perf_counter() - started) * 1000, 2)
            if not isinstance(response, StreamingResponse):
                write_access_log(log, getattr(request.state, "tally", {}))
            return response

        return endpoint

    async def exchange(protocol: ProtocolName, request: Request, state: ProxyState) -> Response:
        raw = await _read_body(request, config.max_request_bytes)
        client = _SIDES[protocol].parse_request(_parse_json(raw))
        log: dict[str, Any] = request.state.log
        log.update(protocol=protocol, model=client.model, stream=client.stream)
        run = Exchange(
            state=state,
            side=_SIDES[protocol],
            protocol=protocol,
            path=request.url.path,
            client=client,
            upstream_headers=_forwarded(request),
            tenant=tenant_of(_credential(request), state.salt),
            explicit_session=request.headers.get(SESSION_HEADER),
            log=log,
        )
        log["tenant"] = run.tenant
        request.state.tally = run.tally
        return await run.run()

    async def messages(request: Request, state: ProxyState) -> Response:
        return await exchange("anthropic", request, state)

    async def chat_completions(request: Request, state: ProxyState) -> Response:
        return await exchange("openai", request, state)

    async def passthrough(request: Request, state: ProxyState) -> Response:
        """``count_tokens`` and ``/v1/models``: the client's question, asked upstream as is."""
        body = await _read_body(request, config.max_request_bytes)
        url = config.upstream_url(request.url.path)
        if request.url.query:
            url += "?" + request.url.query
        try:
            response = await state.http.request(
                request.method,
                url,
                content=body or None,
                headers=_forwarded(request, json_body=bool(body)),
            )
        except httpx.HTTPError as exc:
            raise ClientError(
                f"contextfold proxy could not reach the upstream {config.upstream}: {exc}",
                status=502,
                kind="upstream",
            ) from None
        media = response.headers.get("content-type", "application/json")
        return Response(response.content, status_code=response.status_code, media_type=media)

    async def sessions(request: Request, state: ProxyState) -> Response:
        tenant = tenant_of(_credential(request), state.salt)
        if tenant == ANONYMOUS:
            # Every keyless client shares one tenant: listing it would show each the others'.
            raise ClientError(
                "listing sessions needs a credential (x-api-key or Authorization): "
                "keyless clients share one tenant, and see none of its sessions",
                status=401,
                kind="authentication",
            )
        limit = request.query_params.get("limit", "50")
        rows = await anyio.to_thread.run_sync(
            lambda: proxied_sessions(
                state.store, tenant, limit=int(limit) if limit.isdigit() else 50
            )
        )
        return JSONResponse({"sessions": rows})

    async def health(request: Request, state: ProxyState) -> Response:
        return JSONResponse({"ok": True, "upstream": config.upstream, "dry_run": config.dry_run})

    routes = [
        Route("/v1/messages", guarded("anthropic", messages), methods=["POST"]),
        Route("/v1/messages/count_tokens", guarded("anthropic", passthrough), methods=["POST"]),
        Route("/v1/chat/completions", guarded("openai", chat_completions), methods=["POST"]),
        Route("/v1/models", guarded("openai", passthrough), methods=["GET"]),
        Route("/contextfold/sessions", guarded("openai", sessions), methods=["GET"]),
        Route("/contextfold/health", guarded("openai", health), methods=["GET"]),
        # Some clients probe the base URL before their first request (Claude Code sends HEAD /).
        Route("/", guarded("openai", health), methods=["GET", "HEAD"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def _forwarded(request: Request, *, json_body: bool = True) -> dict[str, str]:
    headers = {
        name: request.headers[name] for name in _FORWARDED_HEADERS if name in request.headers
    }
    if json_body:
        headers["content-type"] = "application/json"
    return headers


def app_from_environment() -> Starlette:
    """The app for one uvicorn worker of ``contextfold proxy --workers N`` (a factory uvicorn
    imports by name, in a process of its own: the settings come from the parent's
    environment, and the logs are set up again here)."""
    config = ProxyConfig.from_environment()
    log_to(config.access_log)
    return create_app(config)


def log_to(access_log: str | None) -> None:
    """Send the access log (one JSON line per request) to ``access_log``, or standard error,
    and the proxy's notices to standard error: what ``contextfold proxy`` shows."""
    # The log is the proxy's own file, created 0600 like every file contextfold writes.
    handler: logging.Handler = logging.StreamHandler(
        open_private(access_log, append=True, errors="replace") if access_log else sys.stderr
    )
    handler.setFormatter(logging.Formatter("%(message)s"))
    access = logging.getLogger("contextfold.proxy.access")
    access.addHandler(handler)
    access.setLevel(logging.INFO)
    access.propagate = False
    logger.addHandler(logging.StreamHandler(sys.stderr))
    logger.setLevel(logging.INFO)
