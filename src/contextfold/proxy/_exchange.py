"""One client request from arrival to answer: the engine's rounds with the upstream.

The rounds are one generator (:meth:`Exchange._flow`), as httpx's ``auth_flow`` is: it yields
the body of each upstream request and receives what came of it (:class:`Round`: the reply, or
:class:`Overflowed`: the upstream's refusal as too long). It holds all the synchronous work
(the :class:`~._conversation.Conversation`, which reads and writes the store), so each step of
it is one hop to a worker thread: the first, then one per upstream reply. The driver
(:meth:`Exchange._rounds`) is the one loop on the event loop: it sends each body upstream, reads
the reply (streamed or whole) through the upstream protocol's decoder into neutral events, and
writes those to the client in the client's protocol, holding back calls to the engine's own
tools. The client's protocol and the upstream's need not be the same.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import json
import logging
from collections.abc import AsyncIterator, Callable, Collection, Generator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar, TypeVarTuple, Unpack

import anyio.to_thread
import httpx
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from contextfold.chat import (
    ChatRequest,
    ChatResponse,
    Finished,
    TextDelta,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStarted,
    UsageReport,
    WireEvent,
)
from contextfold.errors import ConfigError, ContextOverflowError, ProviderError
from contextfold.hosts.digests import DigestCache
from contextfold.hosts.prefixes import RecentHeads
from contextfold.messages import Message, ThinkingPart, Usage
from contextfold.model_registry import Provider
from contextfold.proxy._conversation import ENGINE_TOOL_NAMES, Conversation
from contextfold.proxy._engines import Engines, ProxyStore
from contextfold.proxy._request_json import KnownMessages, ResentBodies
from contextfold.proxy._upstream_json import BodyEncoder
from contextfold.proxy._wire import (
    ClientError,
    ClientRequest,
    ProtocolName,
    RoundReply,
    error_kind,
    too_long,
)
from contextfold.proxy.config import ProxyConfig
from contextfold.proxy.responses_side import has_encrypted
from contextfold.redaction.redactor import redact_text
from contextfold.wire.neutral import StreamFailed, events_of_message
from contextfold.wire.sse import SSEDecoder

__all__ = [
    "ClientWriter",
    "CountedRequests",
    "Exchange",
    "ProxyState",
    "Serving",
    "UpstreamRefused",
    "WireSide",
    "client_error",
    "off_loop",
    "upstream_request",
]

logger = logging.getLogger("contextfold.proxy")

SESSION_HEADER = "x-contextfold-session"


class ClientWriter(Protocol):
    """One reply to the client, in its protocol: neutral events in, bytes out (streamed), or
    the whole body at the end."""

    def feed(self, event: WireEvent, /) -> list[bytes]: ...
    def end_round(self) -> list[bytes]: ...
    def finish(self, stop: str | None, usage: Usage | None, /) -> list[bytes]: ...
    def fail(self, error: ClientError, /) -> list[bytes]: ...
    def body(self) -> dict[str, Any]: ...
    def visible_digest(self) -> bytes: ...


class StreamDecoder(Protocol):
    """One streamed upstream reply read into neutral events (``done`` at its end)."""

    @property
    def done(self) -> bool: ...
    def feed_sse(self, data: str, /) -> list[WireEvent]: ...
    def response(self) -> ChatResponse: ...


class WireSide(Protocol):
    """What each protocol module (:mod:`.anthropic_side`, :mod:`.openai_side`,
    :mod:`.responses_side`) provides, as the client's protocol and as the upstream's."""

    @property
    def UPSTREAM_PATH(self) -> str: ...

    def parse_request(self, body: Any, known: KnownMessages | None = None, /) -> ClientRequest: ...
    def error_body(self, error: ClientError, /) -> dict[str, Any]: ...
    def writer(self, client: ClientRequest, model: str, /) -> ClientWriter: ...
    def upstream_body(
        self,
        client: ClientRequest,
        request: ChatRequest,
        /,
        *,
        model: str,
        stream: bool,
        first_party: bool,
    ) -> dict[str, Any]: ...
    def decoder(self) -> StreamDecoder: ...
    def read_body(self, body: Mapping[str, Any], /) -> ChatResponse: ...
    def upstream_error(
        self, status: int, body: object, headers: Mapping[str, str], /
    ) -> ProviderError: ...


class Serving:
    """How many HTTP requests this proxy process is answering now (see
    :class:`CountedRequests`). Read and written on the event loop only."""

    def __init__(self) -> None:
        self.requests = 0


class CountedRequests:
    """ASGI middleware: each HTTP request counted in ``serving`` from its arrival to its last
    byte (a streamed reply counts until its stream ends)."""

    def __init__(self, app: ASGIApp, serving: Serving) -> None:
        self.app = app
        self.serving = serving

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.serving.requests += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.serving.requests -= 1


@dataclass
class ProxyState:
    """What every request of one proxy process shares."""

    config: ProxyConfig
    store: ProxyStore
    engines: Engines
    http: httpx.AsyncClient
    salt: bytes
    steps_on_loop: bool = False
    """A request this process serves alone may do its engine steps on the event loop (see
    :func:`off_loop`): the store is a file on this machine (SQLite) that no other worker of
    this proxy writes to."""
    serving: Serving = field(default_factory=Serving)
    digests: DigestCache = field(default_factory=DigestCache)
    """Digests of the messages clients sent, by their exact text (they resend them all)."""
    heads: RecentHeads = field(default_factory=RecentHeads)
    """The prefix heads of each conversation's last request (the next one resends them)."""
    bodies: BodyEncoder = field(default_factory=BodyEncoder)
    """Upstream bodies as JSON, the long texts they resend escaped once."""
    resent: ResentBodies = field(default_factory=ResentBodies)
    """Each conversation's last ``messages`` as read: a body resending them reads only what
    follows."""
    served: dict[str, bool] = field(default_factory=dict)
    """Which upstream paths the upstream serves, as probed (``--upstream-protocol auto``)."""
    merged_headers: dict[tuple[tuple[str, str], ...], httpx.Headers] = field(default_factory=dict)
    """Each set of upstream request headers, merged with the HTTP client's own (see
    :func:`upstream_request`)."""
    answered: dict[tuple[str, str], list[Message]] = field(default_factory=dict)
    """The conversations of the Responses this proxy answered, by tenant and response id, for
    a later ``previous_response_id`` (the most recent :data:`ANSWERED_KEPT`)."""


Result = TypeVar("Result")
Arguments = TypeVarTuple("Arguments")


async def off_loop(
    state: ProxyState, function: Callable[[Unpack[Arguments]], Result], *args: *Arguments
) -> Result:
    """``function(*args)``, the engine's and the store's synchronous work: on a worker thread,
    so that the event loop goes on serving other requests meanwhile; or, when this request is
    the only one the process is answering and :attr:`ProxyState.steps_on_loop`, right here. A
    hop to a worker thread and back wakes two threads, some 0.15-0.2 ms of the request's time
    on an idle machine (and more on a busy one), two hops a request; when nothing else is being
    served the loop has nobody to serve meanwhile. A request that arrives during the work waits
    for it to end (as long as the work takes: a compaction turn, some tens of ms), as it would
    wait for the interpreter's lock while a worker thread ran it. The hop stays when the store
    can keep the loop waiting on someone else: PostgreSQL (a loop stuck on its socket would
    answer nothing at all), or a SQLite file the proxy's other workers write to (SQLite waits
    for another process's write lock by sleeping: with 2 workers and 50 concurrent sessions,
    one step in eight found its process alone, and the loops so stopped cost some 20% of the
    requests per second)."""
    if state.steps_on_loop and state.serving.requests <= 1:
        return function(*args)
    return await anyio.to_thread.run_sync(function, *args)


ANSWERED_KEPT = 256
"""How many answered Responses conversations a proxy process keeps for ``previous_response_id``."""


class UpstreamRefused(Exception):
    """The upstream answered with an error. A client of the upstream's own protocol gets it as
    it came; any other gets it in its own protocol (:func:`client_error`)."""

    def __init__(self, response: httpx.Response, body: bytes, error: ProviderError) -> None:
        super().__init__(f"upstream answered HTTP {response.status_code}")
        self.status = response.status_code
        self.body = body
        self.error = error
        self.content_type = response.headers.get("content-type", "application/json")

    def to_response(self) -> Response:
        return Response(self.body, status_code=self.status, media_type=self.content_type)


def client_error(error: ProviderError, status: int | None = None) -> ClientError:
    """An upstream's error as the client's protocol will say it."""
    status = status or error.status or 502
    kind = "context_length" if isinstance(error, ContextOverflowError) else error_kind(status)
    message = f"upstream: {error}"
    return ClientError(message, status=status if status >= 400 else 502, kind=kind)


@dataclass(frozen=True)
class Round:
    """What one upstream request came to: its reply, and the digest of everything the client
    has received so far (what it will send back)."""

    reply: ChatResponse
    visible_digest: bytes


@dataclass(frozen=True)
class Overflowed:
    """The upstream refused the request as too long."""

    error: ContextOverflowError


@dataclass(frozen=True)
class CutShort:
    """The reply stopped at the ``max_tokens`` the proxy set below the client's, and the
    conversation made more room: the same round is asked again (the reply was not relayed)."""

    reply: ChatResponse


NO_RETRY: dict[str, Any] = {}
"""What the flow answers a :class:`CutShort` with when no more room can be made (by identity):
the round is then relayed as it came, cut, and sent back as a :class:`Round`."""


class Unrecoverable(Exception):
    """The engine cannot make the request smaller: the client gets the upstream's refusal."""


Step = Generator[dict[str, Any], "Round | Overflowed | CutShort", None]


@dataclass
class Exchange:
    """One client request: the conversation it continues, and its rounds with the upstream."""

    state: ProxyState
    client_side: WireSide
    upstream_side: WireSide
    upstream_protocol: ProtocolName
    upstream_model: str
    client: ClientRequest
    upstream_headers: dict[str, str]
    tenant: str
    explicit_session: str | None
    log: dict[str, Any] = field(default_factory=dict)
    clamped_at: int | None = None
    """The ``max_tokens`` of the latest upstream body when the proxy set it below the
    client's: a round so limited is held back until it shows whether it was cut short."""
    tally: dict[str, int] = field(default_factory=dict)
    writer: ClientWriter | None = None
    passthrough: bool = False
    """The client's request goes up as it is (it continues a response made upstream)."""
    _reply: ChatResponse | None = field(default=None, init=False)
    _body_tokens: int = field(default=0, init=False)
    """About how many tokens the latest upstream body holds."""
    on_answered: Callable[[ClientWriter], None] | None = None
    """Called once the client has its whole reply (a Responses client's is remembered for a
    later ``previous_response_id``)."""

    @property
    def verbatim(self) -> bool:
        """Dry run (or a continued upstream response): the client's own body goes up and the
        upstream's answer comes back as it was sent; the engine only measures and records."""
        if self.passthrough:
            return True
        return self.state.config.dry_run and self.client.protocol == self.upstream_protocol

    # -- the whole request -------------------------------------------------------------------

    async def run(self) -> Response:
        made = self.state.engines.for_model(self.upstream_model, _provider(self))
        conversation = Conversation(
            made.engine,
            self.state.store,
            self.tenant,
            self.client,
            explicit_session=self.explicit_session,
            kept=made.kept,
            breaker=made.breaker,
            recent_heads=self.state.heads,
        )
        response: Response | None = None
        try:
            response = await self._answer(conversation)
            return response
        except (ClientError, UpstreamRefused):
            # Nothing the client will continue: a session this request made goes too.
            await off_loop(self.state, conversation.abandon)
            raise
        finally:
            if not isinstance(response, StreamingResponse):  # a stream frees them as it ends
                await _end(self.state, conversation)

    async def _answer(self, conversation: Conversation) -> Response:
        # Made first: a refusal before any round is written by it too (a Responses stream).
        writer = self.writer = self.client_side.writer(self.client, self.client.model)
        flow = self._flow(conversation)
        body = await off_loop(self.state, next, flow)
        response = await self._call(flow, body)
        relay = _Relay(writer, ENGINE_TOOL_NAMES if conversation.engine_tools else ())
        if self.client.stream:
            # Sent before the reply exists: the session was claimed in the store when it was
            # opened, so no other request, of any worker, can take the reply's place in it.
            return _ClaimedStream(
                self._rounds(flow, response, relay, conversation),
                self.state,
                conversation,
                media_type="text/event-stream",
                headers={SESSION_HEADER: conversation.current.id},
            )
        chunks = [chunk async for chunk in self._rounds(flow, response, relay, conversation)]
        # Named now, after any fork: the session that holds this reply.
        headers = {SESSION_HEADER: conversation.current.id}
        if self.verbatim:
            media = response.headers.get("content-type", "application/json")
            return Response(
                b"".join(chunks),
                status_code=response.status_code,
                media_type=media,
                headers=headers,
            )
        return JSONResponse(writer.body(), headers=headers)

    # -- the engine's work: one generator, each step on a worker thread ----------------------

    def _flow(self, conversation: Conversation) -> Step:
        """The rounds of this request: yields each upstream body, receives what came of it."""
        self._begin(conversation)
        rounds = 0
        body = self._body_for(conversation, rounds)
        recovered = False
        while True:
            outcome = yield body
            if isinstance(outcome, CutShort):
                # Never handed over as if the model had stopped: asked again with more room,
                # or (no room can be made) relayed as cut, its stop reason saying so.
                self.log["reply_cut_by_proxy"] = self.log.get("reply_cut_by_proxy", 0) + 1
                retry = self._retry_body(conversation, rounds)
                if retry is not None:
                    self._count(self._round_reply(outcome.reply, conversation))
                body = NO_RETRY if retry is None else retry
                continue
            if isinstance(outcome, Overflowed):
                # Answered once, as the engine does: learn the limit, compact hard, go again.
                if recovered or not conversation.recover(outcome.error):
                    raise Unrecoverable
                recovered = True
                self.log["overflow_recovered"] = True
                body = self._body_for(conversation, rounds)
                continue
            rounds += 1
            recovered = False
            reply = self._round_reply(outcome.reply, conversation)
            self._count(reply)
            # A final reply and the head the client's next request will carry are one write: a
            # crash between them would make the retry fork a session that only holds its answer.
            # A reply that also calls the client's tools is final, whatever engine tools it calls
            # besides (they are answered inside the same write).
            final = not reply.engine_calls or reply.client_calls > 0
            with self.state.store.atomic() if final else contextlib.nullcontext():
                more = conversation.add_reply(reply)
                if not more:
                    conversation.finish(outcome.visible_digest, self.tally)
            if more:
                body = self._body_for(conversation, rounds)
                continue
            conversation.release()
            # Recorded: the client's next turn may come before the last bytes of this one.
            conversation.end()
            self.log["rounds"] = rounds
            return

    def _retry_body(self, conversation: Conversation, rounds: int) -> dict[str, Any] | None:
        """The round asked again with more room for the reply; None when none can be made."""
        assert self.clamped_at is not None
        if not conversation.more_room(self.clamped_at):
            return None
        try:
            return self._body_for(conversation, rounds)
        except ClientError:
            return None  # the view cannot give the reply more room

    def _begin(self, conversation: Conversation) -> None:
        """Open the conversation and count what the client sent."""
        session = conversation.open()
        self.log.update(
            session=session.id, forked_from=conversation.forked_from, appended=conversation.appended
        )
        self.tally["client_tokens"] = self.state.engines.client_tokens.count(
            conversation.engine.counter, self.client
        )

    def _body_for(self, conversation: Conversation, rounds: int) -> dict[str, Any]:
        """The engine's next request, as the upstream's body (the client's own in a dry run)."""
        # The last round the proxy may take offers no engine tool: its reply is the client's.
        offer = rounds + 1 < self.state.config.max_engine_rounds and not self.verbatim
        try:
            prepared = conversation.prepare(engine_tools=offer)
        except ContextOverflowError as exc:
            tokens = exc.prompt_tokens or self.tally.get("client_tokens", 0)
            limit = exc.limit or conversation.current.effective_window
            raise too_long(self.client.protocol, tokens, limit, str(exc)) from None
        except ConfigError as exc:  # the window leaves the conversation nothing at all
            tokens = self.tally.get("client_tokens", 0)
            limit = conversation.current.effective_window
            raise too_long(self.client.protocol, tokens, limit, exc.detail) from None
        missing = conversation.latest_turn_missing(prepared)
        if missing is not None:
            tokens = self.tally.get("client_tokens", 0)
            limit = conversation.current.effective_window
            raise too_long(self.client.protocol, tokens, limit, f"{missing} to fit the window")
        self.tally["estimated_upstream_tokens"] = (
            self.tally.get("estimated_upstream_tokens", 0) + prepared.tokens
        )
        # A verbatim body is the client's own, as long as its whole request.
        verbatim_tokens = self.tally.get("client_tokens", 0)
        self._body_tokens = verbatim_tokens if self.verbatim else prepared.tokens
        if self.verbatim:
            return dict(self.client.body)
        max_tokens, clamped = conversation.reply_budget(prepared)
        self.clamped_at = max_tokens if clamped else None
        if clamped:
            logger.info(
                "max_tokens %s cut to %s: the window %s holds a %s-token prompt",
                self.client.max_tokens,
                max_tokens,
                conversation.current.context_window,
                prepared.tokens,
            )
            self.log["max_tokens_clamped"] = [self.client.max_tokens, max_tokens]
        self.log["zone"] = prepared.zone  # written as "ok" by the log's JSON fallback
        request = self._carried(prepared.to_chat_request(max_tokens=max_tokens))
        return self.upstream_side.upstream_body(
            self.client,
            request,
            model=self.upstream_model,
            stream=self.client.stream,
            first_party=first_party(self.upstream_protocol, self.state.config.upstream),
        )

    def _carried(self, request: ChatRequest) -> ChatRequest:
        """``request`` without what the upstream cannot take from another provider: thinking
        the Messages API did not sign, reasoning only OpenAI can read (each dropped with a
        log line)."""
        if self.upstream_protocol == self.client.protocol:
            return request
        if self.client.protocol == "responses" and any(has_encrypted(m) for m in request.messages):
            self._note("encrypted reasoning and compaction items dropped", "openai-encrypted")
        if self.upstream_protocol != "anthropic":
            return request
        messages = []
        for message in request.messages:
            kept = tuple(
                p
                for p in message.parts
                if not isinstance(p, ThinkingPart) or p.signature or p.redacted_data is not None
            )
            if len(kept) != len(message.parts):
                self._note("unsigned thinking dropped", "thinking")
                message = Message(message.role, kept, meta=message.meta)
            messages.append(message)
        return replace(request, messages=tuple(messages))

    def _note(self, what: str, key: str) -> None:
        dropped = self.log.setdefault("dropped", [])
        if key not in dropped:
            dropped.append(key)
            logger.info(
                "%s: the upstream speaks %s, the client %s",
                what,
                self.upstream_protocol,
                self.client.protocol,
            )

    def _round_reply(self, reply: ChatResponse, conversation: Conversation) -> RoundReply:
        engine = ENGINE_TOOL_NAMES if conversation.engine_tools else frozenset()
        calls = reply.message.tool_calls
        return RoundReply(
            message=reply.message,
            usage=reply.usage,
            raw_usage={},
            stop=reply.stop_reason,
            engine_calls=[c for c in calls if c.name in engine],
            client_calls=sum(1 for c in calls if c.name not in engine),
        )

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

    # -- the upstream ----------------------------------------------------------------------------

    async def _call(self, flow: Step, body: dict[str, Any]) -> httpx.Response:
        """The upstream's response (its body not read yet). An overflow goes to the flow, which
        answers with a smaller request or gives up."""
        while True:
            response = await self._send(body)
            if response.status_code < 400:
                return response
            raw = await response.aread()
            await response.aclose()
            error = self.upstream_side.upstream_error(
                response.status_code, _json_or_empty(raw), response.headers
            )
            if not isinstance(error, ContextOverflowError):
                raise UpstreamRefused(response, raw, error)
            try:
                step = await off_loop(self.state, _step, flow, Overflowed(error))
            except Unrecoverable:
                raise UpstreamRefused(response, raw, error) from None
            if step is None:  # a flow always answers an overflow with a body, or gives up
                raise UpstreamRefused(response, raw, error)
            body = step

    async def _send(self, body: Mapping[str, Any]) -> httpx.Response:
        state = self.state
        request = upstream_request(
            state.http,
            state.merged_headers,
            _url(state.config.upstream_url(self.upstream_side.UPSTREAM_PATH)),
            state.bodies.encode(body, tokens=self._body_tokens),
            {**self.upstream_headers, "content-type": "application/json"},
        )
        self.tally["upstream_calls"] = self.tally.get("upstream_calls", 0) + 1
        try:
            # A reply the client gets whole is read whole here: its body is the upstream's to
            # send, and a failure reading it is the upstream's too (a 502, as for its head).
            return await state.http.send(request, stream=self.client.stream)
        except httpx.HTTPError as exc:
            raise ClientError(
                f"contextfold proxy could not reach the upstream {state.config.upstream}: "
                f"{type(exc).__name__}: {exc}",
                status=502,
                kind="upstream",
            ) from None

    # -- the one loop ----------------------------------------------------------------------------

    async def _rounds(
        self, flow: Step, response: httpx.Response, relay: _Relay, conversation: Conversation
    ) -> AsyncIterator[bytes]:
        """Every round of the request, relayed to the client as one reply."""
        try:
            while True:
                relay.begin_round(hold=self.clamped_at is not None and not self.verbatim)
                async for chunk, events in self._read(response):
                    if self.verbatim:
                        yield chunk
                    for event in events:
                        for out in relay.feed(event):
                            if not self.verbatim:
                                yield out
                for out in relay.end_round():
                    if not self.verbatim:
                        yield out
                reply = self._reply
                assert reply is not None  # _read sets it, or raises
                await response.aclose()
                if relay.round_held and reply.truncated:
                    body = await off_loop(self.state, _step, flow, CutShort(reply))
                    if body is not NO_RETRY:
                        relay.settle_round(retried=True)
                        assert body is not None
                        response = await self._call(flow, body)
                        continue
                for out in relay.settle_round(retried=False):
                    if not self.verbatim:
                        yield out
                body = await off_loop(self.state, _step, flow, Round(reply, relay.visible_digest()))
                if body is None:
                    break
                response = await self._call(flow, body)
            if relay.held_back_chars:
                self.log["text_held_back"] = relay.held_back_chars
            if reply.truncated and self.clamped_at is not None:
                self.log["reply_cut_by_proxy_handed_over"] = True
            if not self.verbatim:
                for out in relay.finish():
                    yield out
            if self.on_answered is not None:
                self.on_answered(relay.writer)
        except (ClientError, UpstreamRefused, StreamFailed) as exc:
            if not self.client.stream:
                raise  # answered by the app's error boundary, with its HTTP status
            error = _as_client_error(exc, self.upstream_side)
            self.log["error"] = error.message
            if not self.verbatim:
                for out in relay.fail(error):
                    yield out
        finally:
            await response.aclose()
            if self.client.stream:  # (its claims are given back by _ClaimedStream)
                write_access_log(self.log, self.tally)

    async def _read(self, response: httpx.Response) -> AsyncIterator[tuple[bytes, list[WireEvent]]]:
        """One upstream reply as it comes: each chunk of raw bytes (a dry run passes them on)
        with the neutral events it completed; then :attr:`_reply` is the reply read whole."""
        self._reply = None
        if not self.client.stream:
            raw = await response.aread()
            reply = self.upstream_side.read_body(_json_object(raw))
            self._reply = reply
            usage = [UsageReport(reply.usage)] if reply.usage is not None else []
            yield raw, [*events_of_message(reply.message), *usage, Finished(reply.stop_reason)]
            return
        decoder = self.upstream_side.decoder()
        sse = SSEDecoder()
        async for chunk in response.aiter_bytes():
            yield chunk, [e for _, data in sse.feed(chunk) for e in decoder.feed_sse(data)]
            if decoder.done:
                break
        yield b"", [e for _, data in sse.close() for e in decoder.feed_sse(data)]
        if not decoder.done:
            raise ClientError(
                "contextfold proxy: the upstream stream ended before the reply did",
                status=502,
                kind="upstream",
            )
        self._reply = decoder.response()


class _ClaimedStream(StreamingResponse):
    """A streamed reply that gives its conversation's claims back when the response is over,
    however it ends: finished, failed, cancelled, or the client gone before the first byte (its
    body's generator then never runs, nor the cleanup inside it)."""

    def __init__(
        self,
        content: AsyncIterator[bytes],
        state: ProxyState,
        conversation: Conversation,
        **kwargs: Any,
    ) -> None:
        super().__init__(content, **kwargs)
        self.state = state
        self.conversation = conversation

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await _end(self.state, self.conversation)


async def _end(state: ProxyState, conversation: Conversation) -> None:
    """``conversation.end()`` (a claim on PostgreSQL is a query: see :func:`off_loop`), even
    while the request is being cancelled. Nothing to do when there is nothing to free (the flow
    freed its claims as it recorded the reply)."""
    if not conversation.claimed:
        return
    with anyio.CancelScope(shield=True):
        await off_loop(state, conversation.end)


PREAMBLE_CHARS = 600
"""Text a round opens with is held back up to this long: the words a model writes before
calling one of the engine's tools ("Reading back ref_…") stay with the proxy. Longer text is
an answer, and streams on."""


class _Relay:
    """Neutral events of every round to the client's writer, as one reply: calls to the
    engine's own tools held back with the text beside them, usage added up, the last round's
    stop reason at the end.

    A round's opening text is held (up to :data:`PREAMBLE_CHARS`) until the round shows what it
    is: a call to an engine tool drops it (the transcript keeps it; the client never sees the
    proxy's round), a call to a client tool, any other event, the end of the round or more text
    than a preamble let it through.
    """

    def __init__(self, writer: ClientWriter, engine_tools: Collection[str]) -> None:
        self.writer = writer
        self.engine_tools = frozenset(engine_tools)
        self.hidden: set[str] = set()
        self.usage: Usage | None = None
        self.stop: str | None = None
        self.held: list[TextDelta] = []
        self.holding = bool(self.engine_tools)
        self.engine_round = False
        self.round_events: list[WireEvent] | None = None
        """A whole round held back (its ``max_tokens`` was the proxy's): relayed or dropped
        by :meth:`settle_round`."""
        self.held_back_chars = 0
        """Characters of text kept from the client because they went with an engine call."""

    @property
    def round_held(self) -> bool:
        return self.round_events is not None

    def begin_round(self, *, hold: bool) -> None:
        """A round begins; ``hold``: keep all of it until :meth:`settle_round`."""
        self.round_events = [] if hold else None

    def settle_round(self, *, retried: bool) -> list[bytes]:
        """A held round, relayed now; or dropped (its usage kept) when it is asked again."""
        events, self.round_events = self.round_events, None
        if events is None:
            return []
        if retried:
            for event in events:
                if isinstance(event, UsageReport):
                    self._feed(event)
            return []
        return [*(out for e in events for out in self._feed(e)), *self._end_round()]

    def feed(self, event: WireEvent) -> list[bytes]:
        if self.round_events is not None:
            self.round_events.append(event)
            return []
        return self._feed(event)

    def _feed(self, event: WireEvent) -> list[bytes]:
        if isinstance(event, ToolCallStarted) and event.name in self.engine_tools:
            self.hidden.add(event.call_id)
            self.engine_round = True
            self._drop_held()
            return []
        if isinstance(event, ToolCallDelta | ToolCallDone) and event.call_id in self.hidden:
            return []
        if isinstance(event, UsageReport):
            self.usage = event.usage if self.usage is None else self.usage + event.usage
            return []
        if isinstance(event, Finished):
            self.stop = event.stop_reason
            return []
        if isinstance(event, TextDelta) and (self.holding or self.engine_round):
            self.held.append(event)
            if self.engine_round or sum(len(e.text) for e in self.held) <= PREAMBLE_CHARS:
                return []
        return [*self._release(), *self.writer.feed(event)]

    def _release(self) -> list[bytes]:
        """The held text, to the client; nothing is held for the rest of the round."""
        held, self.held, self.holding = self.held, [], False
        return [out for e in held for out in self.writer.feed(e)]

    def _drop_held(self) -> None:
        self.held_back_chars += sum(len(e.text) for e in self.held)
        self.held.clear()

    def end_round(self) -> list[bytes]:
        """The round is over (a held round ends in :meth:`settle_round`)."""
        return [] if self.round_events is not None else self._end_round()

    def _end_round(self) -> list[bytes]:
        """Text still held was the client's, unless the round called an engine tool (then it
        went with that call, and stays with the proxy)."""
        if self.engine_round:
            self._drop_held()
        released = self._release()
        self.holding, self.engine_round = bool(self.engine_tools), False
        return [*released, *self.writer.end_round()]

    def visible_digest(self) -> bytes:
        return self.writer.visible_digest()

    def finish(self) -> list[bytes]:
        return self.writer.finish(self.stop, self.usage)

    def fail(self, error: ClientError) -> list[bytes]:
        return self.writer.fail(error)


def _as_client_error(exc: Exception, upstream: WireSide) -> ClientError:
    if isinstance(exc, ClientError):
        return exc
    if isinstance(exc, UpstreamRefused):
        return client_error(exc.error, exc.status)
    assert isinstance(exc, StreamFailed)
    mapped = upstream.upstream_error(502, exc.body, {})
    return client_error(mapped, 502)


def _step(flow: Step, outcome: Round | Overflowed | CutShort) -> dict[str, Any] | None:
    """The flow's next upstream body; None when it is over (a ``StopIteration`` cannot cross
    back from a worker thread)."""
    try:
        return flow.send(outcome)
    except StopIteration:
        return None


def _json_or_empty(raw: bytes) -> object:
    try:
        return json.loads(raw)
    except ValueError:
        return {}


def _json_object(raw: bytes) -> dict[str, Any]:
    value = _json_or_empty(raw)
    if not isinstance(value, dict):
        raise ClientError(
            "contextfold proxy: the upstream answered with something that is not a JSON object",
            status=502,
            kind="upstream",
        )
    return value


def _provider(exchange: Exchange) -> Provider:
    """Whose history rules and cache style requests follow: Anthropic's, OpenAI's own API's
    (lenient), or those of any other server speaking OpenAI's protocols."""
    if exchange.upstream_protocol == "anthropic":
        return "anthropic"
    host = _host(exchange.state.config.upstream)
    return "openai" if host == "api.openai.com" else "openai-compatible"


def first_party(protocol: ProtocolName, upstream: str) -> bool:
    """True when the upstream is the protocol's own maker (it runs hosted tools, reads its
    encrypted items)."""
    host = _host(upstream)
    return host == ("api.anthropic.com" if protocol == "anthropic" else "api.openai.com")


MERGED_HEADERS_KEPT = 256
"""How many sets of request headers :func:`upstream_request` keeps merged with the client's."""


def upstream_request(
    http: httpx.AsyncClient,
    merged_headers: dict[tuple[tuple[str, str], ...], httpx.Headers],
    url: httpx.URL,
    content: bytes,
    headers: Mapping[str, str],
) -> httpx.Request:
    """``http.build_request("POST", url, content=content, headers=headers)``, made as it makes
    it (the client's default headers, then ``headers``; its timeout), but with the two header
    sets merged once for each set a client sends (the same on every request), kept in
    ``merged_headers``, not on every request. Built by ``build_request`` itself when the client
    would add anything else (a base URL, query parameters, cookies: the proxy's client has
    none)."""
    if http.params or http.cookies or url.is_relative_url:
        return http.build_request("POST", url, content=content, headers=headers)
    key = tuple(headers.items())
    merged = merged_headers.get(key)
    if merged is None:
        merged = httpx.Headers(http.headers)
        merged.update(headers)
        if len(merged_headers) >= MERGED_HEADERS_KEPT:
            merged_headers.clear()
        merged_headers[key] = merged
    # The request copies the headers: the merged set is never changed.
    timeout = {"timeout": http.timeout.as_dict()}
    return httpx.Request("POST", url, content=content, headers=merged, extensions=timeout)


@functools.lru_cache(maxsize=16)
def _url(url: str) -> httpx.URL:
    """The upstream's URL, parsed once (a proxy sends to a few, on every request); an
    ``httpx.URL`` cannot be changed, so one serves every request."""
    return httpx.URL(url)


def _host(url: str) -> str:
    return _url(url).host


access_logger = logging.getLogger("contextfold.proxy.access")


LOGGED_TEXT_CHARS = 200
"""The longest text one access-log field keeps (the model name and an error's message come
from the client, and could be anything)."""


def write_access_log(log: Mapping[str, Any], tally: Mapping[str, int]) -> None:
    """One JSON line per request (never a key or a message's content). Every text is redacted
    and cut to :data:`LOGGED_TEXT_CHARS`: the client chose some of it."""
    fields = {key: _loggable(value) for key, value in {**log, **tally}.items()}
    access_logger.info(json.dumps(fields, default=_json_fallback, separators=(",", ":")))


def _json_fallback(value: object) -> object:
    """What JSON cannot write itself: an enum as its word value (``"ok"``, not ``Zone.OK``),
    anything else as its text."""
    if isinstance(value, enum.Enum):
        return value.value
    return str(value)


def _loggable(value: Any) -> Any:
    if isinstance(value, str):
        text = redact_text(value)
        return text if len(text) <= LOGGED_TEXT_CHARS else text[:LOGGED_TEXT_CHARS] + "…"
    if isinstance(value, list | tuple):
        return [_loggable(item) for item in value]
    return value
