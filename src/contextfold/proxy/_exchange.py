"""One client request from arrival to answer: the engine's rounds with the upstream.

The engine work runs on worker threads (:mod:`._conversation` writes to the store); the calls
to the upstream and the streaming to the client run on the event loop.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio.to_thread
import httpx
from starlette.responses import JSONResponse, Response, StreamingResponse

from contextfold.errors import ConfigError, ContextOverflowError
from contextfold.model_registry import Provider
from contextfold.providers.errors import error_from_response
from contextfold.proxy._conversation import ENGINE_TOOL_NAMES, Conversation
from contextfold.proxy._engines import Engines, ProxyStore
from contextfold.proxy._in_flight import InFlight
from contextfold.proxy._wire import (
    ClientError,
    ClientRequest,
    ProtocolName,
    RoundReply,
    add_usage,
    too_long,
)
from contextfold.proxy.config import ProxyConfig
from contextfold.redaction.redactor import redact_text
from contextfold.wire.sse import SSEDecoder, sse_events

__all__ = ["Exchange", "ProxyState", "UpstreamRefused", "WireSide"]

logger = logging.getLogger("contextfold.proxy")

SESSION_HEADER = "x-contextfold-session"

_CLAIM_LAPSE = 600.0
"""Seconds after which a claim on a session lapses if its request never ended (see
:mod:`._in_flight`)."""


class StreamRelay(Protocol):
    round_over: bool

    @property
    def visible(self) -> Any: ...
    def feed(self, event: str | None, text: str, /) -> list[bytes]: ...
    def reply(self) -> RoundReply: ...
    def finish(self, stop: str | None, /) -> list[bytes]: ...


class StreamRelayFactory(Protocol):
    def __call__(self, engine_tools: Collection[str], client: ClientRequest, /) -> StreamRelay: ...


class WireSide(Protocol):
    """What each protocol module (:mod:`.anthropic_side`, :mod:`.openai_side`) provides."""

    @property
    # Named like the class each module defines: a read-only member, so the class itself fits.
    def StreamRelay(self) -> StreamRelayFactory: ...

    def parse_request(self, body: Any, /) -> ClientRequest: ...
    def upstream_body(
        self, client: ClientRequest, prepared: Any, /, *, max_tokens: int | None
    ) -> dict[str, Any]: ...
    def read_body(
        self, body: Mapping[str, Any], engine_tools: Collection[str], /
    ) -> tuple[RoundReply, Any]: ...
    def join(self, pieces: Sequence[Any], /) -> Any: ...
    def visible_digest(self, visible: Any, /) -> bytes: ...
    def client_body(
        self, final: Mapping[str, Any], visible: Any, stop: str | None, usage: Mapping[str, Any], /
    ) -> dict[str, Any]: ...
    def error_body(self, error: ClientError, /) -> dict[str, Any]: ...
    def stream_error(self, error: ClientError, /) -> bytes: ...


@dataclass
class ProxyState:
    """What every request of one proxy process shares."""

    config: ProxyConfig
    store: ProxyStore
    engines: Engines
    http: httpx.AsyncClient
    salt: bytes
    in_flight: InFlight = field(default_factory=lambda: InFlight(lapse=_CLAIM_LAPSE))


class UpstreamRefused(Exception):
    """The upstream answered with an error the proxy passes on as it came."""

    def __init__(self, response: httpx.Response, body: bytes) -> None:
        super().__init__(f"upstream answered HTTP {response.status_code}")
        self.status = response.status_code
        self.body = body
        self.content_type = response.headers.get("content-type", "application/json")

    def to_response(self) -> Response:
        return Response(self.body, status_code=self.status, media_type=self.content_type)


@dataclass
class Exchange:
    """One client request: the conversation it continues, and its rounds with the upstream."""

    state: ProxyState
    side: WireSide
    protocol: ProtocolName
    path: str
    client: ClientRequest
    upstream_headers: dict[str, str]
    tenant: str
    explicit_session: str | None
    log: dict[str, Any] = field(default_factory=dict)
    tally: dict[str, int] = field(default_factory=dict)

    # -- the whole request -------------------------------------------------------------------

    async def run(self) -> Response:
        provider = _provider(self.protocol, self.state.config.upstream)
        made = self.state.engines.for_model(self.client.model, provider)
        conversation = Conversation(
            made.engine,
            self.state.store,
            self.tenant,
            self.client,
            explicit_session=self.explicit_session,
            kept=made.kept,
            in_flight=self.state.in_flight,
        )
        response: Response | None = None
        try:
            body = await anyio.to_thread.run_sync(self._begin, conversation)
            if body is None:
                response = await self._shadow(conversation)
            elif self.client.stream:
                first = await self._call(conversation, body, 0)
                # Sent before the reply exists: the session was claimed when it was opened,
                # so no other request of this worker can take the reply's place in it.
                response = StreamingResponse(
                    self._stream(conversation, first),
                    media_type="text/event-stream",
                    headers={SESSION_HEADER: conversation.current.id},
                )
            else:
                response = await self._plain(conversation, body)
            return response
        except (ClientError, UpstreamRefused):
            # Nothing the client will continue: a session this request made goes too.
            await anyio.to_thread.run_sync(conversation.abandon)
            raise
        finally:
            if not isinstance(response, StreamingResponse):  # a stream frees them as it ends
                conversation.end()

    # -- the engine's work (on a worker thread: it reads and writes the store) -------------------

    def _begin(self, conversation: Conversation) -> dict[str, Any] | None:
        """Open the conversation and count what the client sent; the first upstream body, or
        None in a dry run (the client's own body goes up)."""
        session = conversation.open()
        self.log.update(
            session=session.id, forked_from=conversation.forked_from, appended=conversation.appended
        )
        self.tally["client_tokens"] = self.state.engines.client_tokens.count(
            conversation.engine.counter, self.client
        )
        if self.state.config.dry_run:
            return None
        return self._body_for(conversation, 0)

    def _body_for(self, conversation: Conversation, rounds: int) -> dict[str, Any]:
        """The engine's next request, as the upstream's body."""
        # The last round the proxy may take offers no engine tool: its reply is the client's.
        offer = rounds + 1 < self.state.config.max_engine_rounds
        try:
            prepared = conversation.prepare(engine_tools=offer)
        except ContextOverflowError as exc:
            tokens = exc.prompt_tokens or self.tally.get("client_tokens", 0)
            limit = exc.limit or conversation.current.effective_window
            raise too_long(self.protocol, tokens, limit, str(exc)) from None
        except ConfigError as exc:  # the window leaves the conversation nothing at all
            tokens = self.tally.get("client_tokens", 0)
            limit = conversation.current.effective_window
            raise too_long(self.protocol, tokens, limit, exc.detail) from None
        missing = conversation.latest_turn_missing(prepared)
        if missing is not None:
            tokens = self.tally.get("client_tokens", 0)
            limit = conversation.current.effective_window
            raise too_long(self.protocol, tokens, limit, f"{missing} to fit the window")
        max_tokens, clamped = conversation.reply_budget(prepared)
        if clamped:
            logger.info(
                "max_tokens %s cut to %s: the window %s holds a %s-token prompt",
                self.client.max_tokens,
                max_tokens,
                conversation.current.context_window,
                prepared.tokens,
            )
            self.log["max_tokens_clamped"] = [self.client.max_tokens, max_tokens]
        self.tally["estimated_upstream_tokens"] = (
            self.tally.get("estimated_upstream_tokens", 0) + prepared.tokens
        )
        self.log["zone"] = prepared.zone
        return self.side.upstream_body(self.client, prepared, max_tokens=max_tokens)

    def _after_reply(
        self, conversation: Conversation, reply: RoundReply, rounds: int, visible: Callable[[], Any]
    ) -> dict[str, Any] | None:
        """Record one upstream reply; the next upstream body when the engine's own tools were
        answered and the model must go on, else None once the exchange is recorded whole
        (``visible``: what the client received, read when it is complete)."""
        self._count(reply)
        # A final reply and the head the client's next request will carry are one write: a
        # crash between them would make the retry fork a session that only holds its answer.
        final = not reply.engine_calls
        with self.state.store.atomic() if final else contextlib.nullcontext():
            more = conversation.add_reply(reply)
            if not more:
                conversation.finish(self.side.visible_digest(visible()), self.tally)
        if more:
            return self._body_for(conversation, rounds)
        conversation.release()
        self.log["rounds"] = rounds
        return None

    async def _next_body(self, conversation: Conversation, rounds: int) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(self._body_for, conversation, rounds)

    async def _call(
        self, conversation: Conversation, body: dict[str, Any], rounds: int
    ) -> httpx.Response:
        """The upstream's response (its body not read yet). An overflow is answered once, as
        the engine does: learn the limit, compact hard, send the smaller request."""
        recovered = False
        while True:
            response = await self._send(body)
            if response.status_code < 400:
                return response
            raw = await response.aread()
            await response.aclose()
            overflow = self._overflow(response, raw)
            if overflow is None or recovered:
                raise UpstreamRefused(response, raw)
            self.log["overflow_recovered"] = True
            if not await anyio.to_thread.run_sync(conversation.recover, overflow):
                raise UpstreamRefused(response, raw)
            recovered = True
            body = await self._next_body(conversation, rounds)

    async def _send(self, body: Mapping[str, Any]) -> httpx.Response:
        state = self.state
        request = state.http.build_request(
            "POST",
            state.config.upstream_url(self.path),
            content=json.dumps(body, ensure_ascii=False).encode(),
            headers={**self.upstream_headers, "content-type": "application/json"},
        )
        self.tally["upstream_calls"] = self.tally.get("upstream_calls", 0) + 1
        try:
            return await state.http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise ClientError(
                f"contextfold proxy could not reach the upstream {state.config.upstream}: "
                f"{type(exc).__name__}: {exc}",
                status=502,
                kind="upstream",
            ) from None

    def _overflow(self, response: httpx.Response, raw: bytes) -> ContextOverflowError | None:
        try:
            body: object = json.loads(raw)
        except ValueError:
            body = {}
        error = error_from_response(
            provider=self.protocol,
            status=response.status_code,
            body=body,
            headers=dict(response.headers),
            fallback_message=raw[:500].decode("utf-8", errors="replace"),
            env_var="",
        )
        return error if isinstance(error, ContextOverflowError) else None

    def _count(self, reply: RoundReply) -> None:
        usage = reply.usage
        if usage is not None:
            self.tally["upstream_tokens"] = (
                self.tally.get("upstream_tokens", 0) + usage.input_tokens
            )
            self.tally["cache_read_tokens"] = (
                self.tally.get("cache_read_tokens", 0) + usage.cache_read_tokens
            )
            self.tally["output_tokens"] = self.tally.get("output_tokens", 0) + usage.output_tokens
        if reply.engine_calls:
            self.tally["engine_calls"] = self.tally.get("engine_calls", 0) + len(reply.engine_calls)

    def _engine_tools(self, conversation: Conversation) -> Collection[str]:
        return ENGINE_TOOL_NAMES if conversation.engine_tools else ()

    # -- answering -------------------------------------------------------------------------------

    async def _plain(self, conversation: Conversation, body: dict[str, Any]) -> Response:
        pieces: list[Any] = []
        usage: dict[str, Any] = {}
        rounds = 0
        next_body: dict[str, Any] | None = body
        while next_body is not None:
            response = await self._call(conversation, next_body, rounds)
            final = _json_object(await response.aread())
            await response.aclose()
            reply, piece = self.side.read_body(final, self._engine_tools(conversation))
            pieces.append(piece)
            usage = add_usage(usage, reply.raw_usage)
            rounds += 1
            next_body = await anyio.to_thread.run_sync(
                self._after_reply, conversation, reply, rounds, lambda: self.side.join(pieces)
            )
        visible = self.side.join(pieces)
        # Named now, after any fork: the session that holds this reply.
        headers = {SESSION_HEADER: conversation.current.id}
        return JSONResponse(
            self.side.client_body(final, visible, reply.stop, usage), headers=headers
        )

    async def _stream(
        self, conversation: Conversation, response: httpx.Response
    ) -> AsyncIterator[bytes]:
        relay = self.side.StreamRelay(self._engine_tools(conversation), self.client)
        rounds = 0
        try:
            while True:
                async for event, data in sse_events(response):
                    for chunk in relay.feed(event, data):
                        yield chunk
                    if relay.round_over:
                        break
                await response.aclose()
                if not relay.round_over:
                    self.log["error"] = "the upstream stream ended before the reply did"
                    return
                reply = relay.reply()
                rounds += 1
                try:
                    body = await anyio.to_thread.run_sync(
                        self._after_reply, conversation, reply, rounds, lambda: relay.visible
                    )
                    if body is None:
                        break
                    response = await self._call(conversation, body, rounds)
                except UpstreamRefused as refused:
                    message = refused.body[:2000].decode("utf-8", errors="replace")
                    yield self.side.stream_error(ClientError(message, kind="upstream"))
                    self.log["error"] = f"upstream HTTP {refused.status} after an engine round"
                    return
                except ClientError as exc:
                    yield self.side.stream_error(exc)
                    self.log["error"] = exc.message
                    return
            for chunk in relay.finish(reply.stop):
                yield chunk
        finally:
            await response.aclose()
            conversation.end()
            write_access_log(self.log, self.tally)

    async def _shadow(self, conversation: Conversation) -> Response:
        """Dry run: the client's request goes up untouched; the engine's would-be request is
        measured and the exchange recorded."""
        prepared = await anyio.to_thread.run_sync(conversation.prepare)
        self.tally["estimated_upstream_tokens"] = prepared.tokens
        response = await self._send(self.client.body)
        if response.status_code >= 400:
            raise UpstreamRefused(response, await response.aread())
        if not self.client.stream:
            raw = await response.aread()
            await response.aclose()
            reply, piece = self.side.read_body(_json_object(raw), ())
            await anyio.to_thread.run_sync(
                self._after_reply, conversation, reply, 1, lambda: self.side.join([piece])
            )
            media = response.headers.get("content-type", "application/json")
            headers = {SESSION_HEADER: conversation.current.id}
            return Response(
                raw, status_code=response.status_code, media_type=media, headers=headers
            )
        headers = {SESSION_HEADER: conversation.current.id}
        return StreamingResponse(
            self._shadow_stream(conversation, response),
            media_type="text/event-stream",
            headers=headers,
        )

    async def _shadow_stream(
        self, conversation: Conversation, response: httpx.Response
    ) -> AsyncIterator[bytes]:
        relay = self.side.StreamRelay((), self.client)
        decoder = SSEDecoder()
        try:
            # Decoded (a compressed stream's encoding header is not passed on), otherwise as sent.
            async for chunk in response.aiter_bytes():
                yield chunk
                for event, data in decoder.feed(chunk):
                    relay.feed(event, data)
            if relay.round_over:
                await anyio.to_thread.run_sync(
                    self._after_reply, conversation, relay.reply(), 1, lambda: relay.visible
                )
        finally:
            await response.aclose()
            conversation.end()
            write_access_log(self.log, self.tally)


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise ClientError(
            "contextfold proxy: the upstream answered with something that is not a JSON object",
            status=502,
            kind="upstream",
        )
    return value


def _provider(protocol: ProtocolName, upstream: str) -> Provider:
    """Whose history rules and cache style requests follow: Anthropic's, OpenAI's own API's
    (lenient), or those of any other server speaking OpenAI's protocol."""
    if protocol == "anthropic":
        return "anthropic"
    return "openai" if httpx.URL(upstream).host == "api.openai.com" else "openai-compatible"


access_logger = logging.getLogger("contextfold.proxy.access")


LOGGED_TEXT_CHARS = 200
"""The longest text one access-log field keeps (the model name and an error's message come
from the client, and could be anything)."""


def write_access_log(log: Mapping[str, Any], tally: Mapping[str, int]) -> None:
    """One JSON line per request (never a key or a message's content). Every text is redacted
    and cut to :data:`LOGGED_TEXT_CHARS`: the client chose some of it."""
    fields = {key: _loggable(value) for key, value in {**log, **tally}.items()}
    access_logger.info(json.dumps(fields, default=str, separators=(",", ":")))


def _loggable(value: Any) -> Any:
    if isinstance(value, str):
        text = redact_text(value)
        return text if len(text) <= LOGGED_TEXT_CHARS else text[:LOGGED_TEXT_CHARS] + "…"
    if isinstance(value, list | tuple):
        return [_loggable(item) for item in value]
    return value
