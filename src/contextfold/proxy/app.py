"""The proxy's ASGI application: :func:`create_app`."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any

import anyio.to_thread
import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from contextfold.chat import ProviderItem
from contextfold.errors import ContextfoldError
from contextfold.messages import Usage
from contextfold.private_files import open_private
from contextfold.proxy import anthropic_side, openai_side, responses_side
from contextfold.proxy._codex_compaction import (
    CompactionSeal,
    compacted_output,
    open_compactions,
)
from contextfold.proxy._engines import Engines, ProxyStore
from contextfold.proxy._exchange import (
    SESSION_HEADER,
    CountedRequests,
    Exchange,
    ProxyState,
    Serving,
    UpstreamRefused,
    WireSide,
    client_error,
    first_party,
    write_access_log,
)
from contextfold.proxy._identity import ANONYMOUS, tenant_of
from contextfold.proxy._previous_response import continued, remember
from contextfold.proxy._request_json import ResentBodies, known_messages, read_json
from contextfold.proxy._wire import PROTOCOL_OPTIONS, ClientError, ClientRequest, ProtocolName
from contextfold.proxy.config import ProxyConfig
from contextfold.proxy.sessions import proxied_sessions
from contextfold.store import SQLiteStore, open_store

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

_SIDES: dict[ProtocolName, WireSide] = {
    "anthropic": anthropic_side,
    "openai": openai_side,
    "responses": responses_side,
}

_FALLBACKS: tuple[ProtocolName, ...] = ("openai", "anthropic", "responses")
"""The protocols tried, after the client's own, on an upstream that does not serve that one."""


def _credential(request: Request) -> str | None:
    if key := request.headers.get("x-api-key"):
        return key
    authorization = request.headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token:
        return token.strip()
    return request.headers.get(AUTH_HEADER)


def _error(protocol: ProtocolName, error: ClientError, run: Exchange | None = None) -> Response:
    """``error`` in the client's protocol. A streamed Responses request that overflows gets it
    as a stream ending in ``response.failed``: Codex compacts on that, not on an HTTP 400."""
    if (
        run is not None
        and protocol == "responses"
        and run.client.stream
        and error.kind == "context_length"
        and run.writer is not None
    ):
        return StreamingResponse(iter(run.writer.fail(error)), media_type="text/event-stream")
    return JSONResponse(_SIDES[protocol].error_body(error), status_code=error.status)


def _refused(protocol: ProtocolName, refused: UpstreamRefused, run: Exchange | None) -> Response:
    """The upstream's error: as it came to a client of the upstream's protocol, else in the
    client's own."""
    same = run is not None and run.upstream_protocol == protocol
    if same and not (protocol == "responses" and run is not None and run.client.stream):
        return refused.to_response()
    return _error(protocol, client_error(refused.error, refused.status), run)


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


def _parse_json(raw: bytes, resent: ResentBodies | None = None) -> tuple[Any, list[bytes] | None]:
    """The body, and a key per message (see :mod:`contextfold.proxy._request_json`)."""
    try:
        return read_json(raw, parse_constant=_refuse_constant, resent=resent)
    except (ValueError, RecursionError) as exc:
        raise ClientError(f"the request body is not valid JSON: {exc}") from None


def _refuse_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; Python's parser accepts them, no upstream would.
    raise ValueError(f"{name} is not a JSON value")


def _no_cookies() -> CookieJar:
    """A jar that keeps no cookie. One HTTP client serves every tenant: a cookie the upstream
    set in answer to one client's request would go up with every other client's."""
    return CookieJar(DefaultCookiePolicy(allowed_domains=[]))


UPSTREAM_KEEPALIVE_SECONDS = 2.0
"""How long an idle connection to the upstream is kept for reuse: under the idle timeout of
common servers (uvicorn 5 s, llama.cpp's and Ollama's longer), so a reused one is still open."""


def create_app(
    config: ProxyConfig,
    *,
    upstream_transport: httpx.AsyncBaseTransport | None = None,
    one_process: bool = True,
) -> Starlette:
    """The proxy as an ASGI application (run it with uvicorn, or ``contextfold proxy``).

    The store, the engines and the upstream HTTP client are made at startup and closed at
    shutdown; between requests the proxy keeps nothing a request needs that is not in the store,
    so several workers (or machines sharing PostgreSQL) can serve the same clients.
    ``upstream_transport`` replaces the network to the upstream (``httpx.ASGITransport(app)``
    drives a scripted upstream in process: with the proxy itself behind another
    ``httpx.ASGITransport``, a test needs no socket and no server thread). ``one_process``:
    no other worker of this proxy writes to its store (False for each worker of
    ``--workers N``: see ``off_loop``).
    """
    holder: dict[str, ProxyState] = {}
    seals: dict[str, CompactionSeal] = {}
    serving = Serving()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        store: ProxyStore = open_store(config.store)
        timeout = httpx.Timeout(config.upstream_timeout, connect=30.0)
        # A pooled connection is reused only while the upstream surely keeps it open: servers
        # close idle ones after a few seconds (uvicorn 5 s), and a request sent on one the
        # server is closing fails with a ReadError before any byte of the answer (seen as a 502
        # in the hostile fuzz run).
        limits = httpx.Limits(keepalive_expiry=UPSTREAM_KEEPALIVE_SECONDS)
        async with httpx.AsyncClient(
            timeout=timeout, limits=limits, transport=upstream_transport, cookies=_no_cookies()
        ) as http:
            state = ProxyState(
                config,
                store,
                Engines(config, store),
                http,
                config.salt(),
                steps_on_loop=one_process and isinstance(store, SQLiteStore),
                serving=serving,
            )
            holder["state"] = state
            seals["seal"] = CompactionSeal(state.salt)
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
            # ``worker``: which process of ``--workers N`` served it.
            log: dict[str, Any] = {
                "method": request.method,
                "path": request.url.path,
                "worker": os.getpid(),
            }
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
                response = _error(protocol, exc, getattr(request.state, "exchange", None))
                log["error"] = exc.message
            except UpstreamRefused as refused:
                response = _refused(protocol, refused, getattr(request.state, "exchange", None))
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
        body, keys = _parse_json(raw, state.resent)
        known = known_messages(state.digests, protocol, body, keys)
        client = _SIDES[protocol].parse_request(body, known)
        tenant = tenant_of(_credential(request), state.salt)
        log: dict[str, Any] = request.state.log
        upstream_model = config.model or client.model
        log.update(protocol=protocol, model=client.model, stream=client.stream, tenant=tenant)
        if upstream_model != client.model:
            log["upstream_model"] = upstream_model
        passthrough = False
        if protocol == "responses":
            client = responses_side.with_parsed(
                client, open_compactions(client.parsed, seals["seal"], tenant)
            )
            client, passthrough = continued(state.answered, tenant, client)
            if client.parsed.compaction_trigger:
                return await compaction(request, raw, client, tenant, endpoint=False)
        on_answered = remember(state.answered, tenant, client) if protocol == "responses" else None
        for upstream_protocol in _upstream_protocols(state, protocol):
            if passthrough and upstream_protocol != "responses":
                raise ClientError(
                    "previous_response_id: not a response this contextfold proxy answered (it "
                    "keeps the last few hundred), and the upstream does not speak the Responses "
                    "API that could: send the whole input instead"
                )
            run = Exchange(
                state=state,
                client_side=_SIDES[protocol],
                upstream_side=_SIDES[upstream_protocol],
                upstream_protocol=upstream_protocol,
                upstream_model=upstream_model,
                client=client,
                upstream_headers=_forwarded(request),
                tenant=tenant,
                explicit_session=request.headers.get(SESSION_HEADER),
                log=log,
                on_answered=on_answered,
                passthrough=passthrough,
            )
            request.state.exchange = run
            request.state.tally = run.tally
            log["upstream_protocol"] = upstream_protocol
            try:
                response = await run.run()
            except UpstreamRefused as refused:
                if not _not_served(state, upstream_protocol, refused):
                    raise
                continue
            state.served.setdefault(upstream_protocol, True)
            return response
        raise ClientError(
            f"contextfold proxy: the upstream {config.upstream} serves none of the Messages, "
            "Chat Completions and Responses APIs (each answered 404): check --upstream",
            status=502,
            kind="upstream",
        )

    def _upstream_protocols(state: ProxyState, protocol: ProtocolName) -> list[ProtocolName]:
        """The upstream protocols to try, in order: the one configured, else the client's own
        unless the upstream was found not to serve it, then the others."""
        if config.upstream_protocol is not None:
            return [PROTOCOL_OPTIONS[config.upstream_protocol]]
        ordered = [protocol, *(p for p in _FALLBACKS if p != protocol)]
        return [p for p in ordered if state.served.get(p, True)]

    def _not_served(state: ProxyState, tried: ProtocolName, refused: UpstreamRefused) -> bool:
        """True (and remembered) when the upstream does not serve ``tried``'s path at all: a
        404 or 405 that is not about a model (Ollama answers 404 for an unknown model)."""
        if config.upstream_protocol is not None or state.served.get(tried):
            return False
        text = refused.body[:2000].decode("utf-8", errors="replace").lower()
        if refused.status == 405 or (refused.status == 404 and "model" not in text):
            logger.warning(
                "the upstream does not serve %s (HTTP %s): trying another protocol",
                _SIDES[tried].UPSTREAM_PATH,
                refused.status,
            )
            state.served[tried] = False
            return True
        return False

    async def messages(request: Request, state: ProxyState) -> Response:
        return await exchange("anthropic", request, state)

    async def chat_completions(request: Request, state: ProxyState) -> Response:
        return await exchange("openai", request, state)

    async def responses(request: Request, state: ProxyState) -> Response:
        return await exchange("responses", request, state)

    async def compact(request: Request, state: ProxyState) -> Response:
        """Codex's ``POST /v1/responses/compact`` (see :mod:`._codex_compaction`)."""
        raw = await _read_body(request, config.max_request_bytes)
        body, _ = _parse_json(raw)
        client = responses_side.parse_request(body)
        tenant = tenant_of(_credential(request), state.salt)
        request.state.log.update(protocol="responses", model=client.model, tenant=tenant)
        client = responses_side.with_parsed(
            client, open_compactions(client.parsed, seals["seal"], tenant)
        )
        return await compaction(request, raw, client, tenant, endpoint=True)

    async def compaction(
        request: Request, raw: bytes, client: ClientRequest, tenant: str, *, endpoint: bool
    ) -> Response:
        """A compaction Codex asked for: passed through to OpenAI itself, else the proxy's own
        (one sealed ``compaction`` item; ``/compact`` keeps the user's messages before it)."""
        openai_itself = (
            first_party("responses", config.upstream)
            and _upstream_protocols(state(), "responses")[0] == "responses"
        )
        request.state.log["compaction"] = "passed through" if openai_itself else "contextfold"
        if openai_itself:
            return await _forward(request, raw)
        conversation = [m for group in client.read() for m in group]
        output = await anyio.to_thread.run_sync(
            lambda: compacted_output(
                client.parsed, conversation, seals["seal"], tenant, keep_user_items=endpoint
            )
        )
        if endpoint:
            return JSONResponse({"output": output})
        writer = responses_side.writer(client, config.model or client.model)
        events = [e for item in output for e in writer.feed(ProviderItem(item))]
        events += writer.finish("stop", Usage())
        if client.stream:
            return Response(b"".join(events), media_type="text/event-stream")
        return JSONResponse(writer.body())

    async def passthrough(request: Request, state: ProxyState) -> Response:
        """The client's question, asked upstream as is."""
        return await _forward(request, await _read_body(request, config.max_request_bytes))

    async def _forward(request: Request, body: bytes) -> Response:
        """``body`` on the client's method and path, asked upstream; the answer as it came."""
        url = config.upstream_url(request.url.path)
        if request.url.query:
            url += "?" + request.url.query
        try:
            response = await state().http.request(
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

    async def count_tokens(request: Request, state: ProxyState) -> Response:
        """Asked upstream when it speaks the Messages API; else counted here, with the
        tokenizer of the model the proxy plans for."""
        if _upstream_protocols(state, "anthropic")[0] == "anthropic" and not config.model:
            return await passthrough(request, state)
        raw = await _read_body(request, config.max_request_bytes)
        body, _ = _parse_json(raw)
        if isinstance(body, dict):
            body = {"max_tokens": 1, **body}
        client = anthropic_side.parse_request(body)
        count = await anyio.to_thread.run_sync(_count, state, client)
        return JSONResponse({"input_tokens": count})

    def _count(state: ProxyState, client: ClientRequest) -> int:
        upstream = _upstream_protocols(state, "anthropic")[0]
        made = state.engines.for_model(
            config.model or client.model, "anthropic" if upstream == "anthropic" else "openai"
        )
        return state.engines.client_tokens.count(made.engine.counter, client)

    async def models(request: Request, state: ProxyState) -> Response:
        """The upstream's models, in the client's protocol (``--model`` first when given)."""
        protocol: ProtocolName = "anthropic" if "anthropic-version" in request.headers else "openai"
        if _upstream_protocols(state, protocol)[0] == protocol and not config.model:
            return await passthrough(request, state)
        names: list[str] = [config.model] if config.model else []
        try:
            response = await state.http.get(
                config.upstream_url("/v1/models"), headers=_forwarded(request, json_body=False)
            )
            listed = response.json().get("data") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            listed = None
        for entry in listed if isinstance(listed, list) else []:
            name = entry.get("id") if isinstance(entry, dict) else None
            if isinstance(name, str) and name not in names:
                names.append(name)
        return JSONResponse(_model_list(protocol, names))

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

    async def no_websocket(request: Request, state: ProxyState) -> Response:
        """A WebSocket upgrade (or a GET) on ``/v1/responses``: refused at once, so that Codex
        falls back to HTTP without retrying (``supports_websockets = false`` avoids even this)."""
        logger.warning(
            "refused a %s on %s: contextfold proxy serves the Responses API over HTTP only "
            "(set supports_websockets = false in Codex's provider)",
            "WebSocket upgrade"
            if "websocket" in request.headers.get("upgrade", "").lower()
            else "GET",
            request.url.path,
        )
        raise ClientError(
            "contextfold proxy serves the Responses API over HTTP POST only (no WebSocket)",
            status=404,
            kind="not_found",
        )

    async def unknown(request: Request, state: ProxyState) -> Response:
        """Any other path: refused, and logged (a client speaking an API the proxy lacks)."""
        logger.warning(
            "no such endpoint: %s %s (contextfold proxy serves /v1/messages, "
            "/v1/chat/completions and /v1/responses)",
            request.method,
            request.url.path,
        )
        raise ClientError(
            f"contextfold proxy has no endpoint {request.method} {request.url.path}",
            status=404,
            kind="not_found",
        )

    routes = [
        Route("/v1/messages", guarded("anthropic", messages), methods=["POST"]),
        Route("/v1/messages/count_tokens", guarded("anthropic", count_tokens), methods=["POST"]),
        Route("/v1/chat/completions", guarded("openai", chat_completions), methods=["POST"]),
        Route("/v1/responses", guarded("responses", responses), methods=["POST"]),
        Route("/v1/responses/compact", guarded("responses", compact), methods=["POST"]),
        Route("/v1/responses", guarded("responses", no_websocket), methods=["GET"]),
        WebSocketRoute("/v1/responses", _refuse_websocket),
        Route("/v1/models", guarded("openai", models), methods=["GET"]),
        Route("/contextfold/sessions", guarded("openai", sessions), methods=["GET"]),
        Route("/contextfold/health", guarded("openai", health), methods=["GET"]),
        # Some clients probe the base URL before their first request (Claude Code sends HEAD /).
        Route("/", guarded("openai", health), methods=["GET", "HEAD"]),
        Route("/{path:path}", guarded("openai", unknown), methods=_ANY_METHOD),
    ]
    # Counted from the outside in: the count decides whether a request's engine work hops to a
    # worker thread (see ``off_loop``).
    middleware = [Middleware(CountedRequests, serving=serving)]
    return Starlette(routes=routes, lifespan=lifespan, middleware=middleware)


_ANY_METHOD = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


async def _refuse_websocket(websocket: WebSocket) -> None:
    """The WebSocket handshake on ``/v1/responses``, refused (HTTP 403) without waiting."""
    logger.warning(
        "refused a WebSocket on %s: contextfold proxy serves the Responses API over HTTP only "
        "(set supports_websockets = false in Codex's provider)",
        websocket.url.path,
    )
    await websocket.close(code=1008)


def _model_list(protocol: ProtocolName, names: list[str]) -> dict[str, Any]:
    """A ``/v1/models`` answer in the protocol's own shape."""
    if protocol == "anthropic":
        data = [
            {"type": "model", "id": n, "display_name": n, "created_at": "1970-01-01T00:00:00Z"}
            for n in names
        ]
        return {
            "data": data,
            "has_more": False,
            "first_id": names[0] if names else None,
            "last_id": names[-1] if names else None,
        }
    listed: list[dict[str, Any]] = [
        {"id": n, "object": "model", "created": 0, "owned_by": "contextfold"} for n in names
    ]
    return {"object": "list", "data": listed}


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
    return create_app(config, one_process=False)


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
