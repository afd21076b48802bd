"""What every protocol shares: the client's request read into neutral values, one upstream reply
read the same way, errors the client can read, and usage added up across rounds."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, TypeVar

from contextfold.errors import ProviderError
from contextfold.messages import Message, ToolCallPart, Usage
from contextfold.providers.errors import error_from_response
from contextfold.tool_spec import ToolSpec

__all__ = [
    "PROTOCOL_OPTIONS",
    "ClientError",
    "ClientRequest",
    "MessageReader",
    "ProtocolName",
    "RoundReply",
    "add_usage",
    "call_names_before",
    "error_kind",
    "http_upstream_error",
    "message_reader",
    "sse",
    "stream_bytes",
    "too_long",
]

ProtocolName: TypeAlias = Literal["anthropic", "openai", "responses"]
"""The wire protocols the proxy speaks, to clients and to upstreams: Anthropic Messages, OpenAI
Chat Completions (``"openai"``, as sessions record it) and OpenAI Responses."""

PROTOCOL_OPTIONS: dict[str, ProtocolName] = {
    "anthropic": "anthropic",
    "chat": "openai",
    "responses": "responses",
}
"""``--upstream-protocol`` names for each protocol."""


class ClientError(Exception):
    """A request the proxy refuses before anything is stored, answered in the client's protocol.

    ``kind`` is the protocol-neutral error kind: ``invalid_request``, ``authentication``,
    ``not_found``, ``request_too_large``, ``rate_limit``, ``context_length`` (the conversation
    does not fit the window: see :func:`too_long`; each protocol says so the way its clients
    recognise) or ``upstream`` (the provider failed or could not be reached). ``param`` names
    the request's field at fault, where one is.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        kind: str = "invalid_request",
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.kind = kind
        self.param = param


MessageReader: TypeAlias = Callable[[int, int], list[list[Message]]]
"""Reads the client's messages ``start:stop`` into neutral messages, one list per client message
(an Anthropic user turn with tool results reads as two); raises :class:`ClientError`."""


def call_names_before(
    raw_messages: Sequence[Mapping[str, Any]],
    stop: int,
    wanted: Collection[str],
    calls: Callable[[Mapping[str, Any]], Iterable[tuple[str, str]]],
) -> dict[str, str]:
    """The name of each ``wanted`` call id: that of the last call with the id among
    ``raw_messages[:stop]`` (``calls`` gives a message's calls, as id and name, in order).

    What a tool result names its tool by. Searched backwards from ``stop``, so a result's own
    call, a message or two before it, is found at once: reading a client's new messages costs
    what they hold, not the whole history before them (an id no call has still costs a scan).
    """
    names: dict[str, str] = {}
    missing = set(wanted)
    index = min(stop, len(raw_messages))
    while missing and index > 0:
        index -= 1
        for call_id, name in reversed(list(calls(raw_messages[index]))):
            if call_id in missing:
                names[call_id] = name
                missing.discard(call_id)
    return names


def message_reader(
    raw_messages: Sequence[Mapping[str, Any]],
    result_ids: Callable[[Mapping[str, Any]], Collection[str]],
    calls: Callable[[Mapping[str, Any]], Iterable[tuple[str, str]]],
    convert: Callable[[Mapping[str, Any], Mapping[str, str], int], list[Message]],
) -> MessageReader:
    """The :data:`MessageReader` of one request's ``raw_messages``: ``convert`` reads one
    message (given the names of the calls the results among ``raw_messages[:stop]`` answer,
    see :func:`call_names_before`, and its index), ``result_ids`` gives the call ids a
    message's tool results answer and ``calls`` a message's calls.

    Each message is converted once per request: the breaker's latest step, the token tally
    and the append each read the newest messages, and a message read again gets the groups
    read before, as long as the names its own results get are the ones they got then (a
    message's reading depends on nothing else: a range that ends later may find a later call
    reusing an id, and then reads it anew)."""
    read_before: dict[int, tuple[dict[str, str], list[Message]]] = {}

    def read(start: int, stop: int) -> list[list[Message]]:
        own_ids = [result_ids(raw_messages[index]) for index in range(start, stop)]
        names = call_names_before(raw_messages, stop, set().union(*own_ids), calls)
        groups: list[list[Message]] = []
        for index, ids in enumerate(own_ids, start):
            own = {call_id: names[call_id] for call_id in ids if call_id in names}
            before = read_before.get(index)
            if before is not None and before[0] == own:
                groups.append(before[1])
                continue
            group = convert(raw_messages[index], names, index)
            read_before[index] = (own, group)
            groups.append(group)
        return groups

    return read


@dataclass(frozen=True)
class ClientRequest:
    """One request as the client sent it: checked, with a digest per message.

    The messages are read into neutral values only where they are needed (:meth:`read`): a
    request that continues a stored session carries a long prefix the store already holds.
    ``raw_tools`` keeps the client's own tool definitions by name, so the upstream receives
    them exactly as written.
    """

    protocol: ProtocolName
    body: Mapping[str, Any]
    model: str
    digests: Sequence[bytes]
    reader: MessageReader
    system: str
    tools: Sequence[ToolSpec]
    raw_tools: Mapping[str, Mapping[str, Any]]
    stream: bool
    max_tokens: int | None
    max_tokens_field: str | None = None
    """Which body field carried ``max_tokens`` (OpenAI clients use either of two)."""
    first_user_text: str = ""
    has_system_messages: bool = False
    """True when system messages sit inside the conversation (not only before it)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """What carries over to an upstream of another protocol, in neutral form: ``temperature``,
    ``top_p``, ``stop`` (a list) and ``tool_choice`` (``"auto"``, ``"none"``, ``"required"``
    or ``{"name": ...}``)."""
    parsed: Any = None
    """The protocol's own reading of the request, for its writer (a Responses request's
    custom tools and namespaces)."""

    def read(self, start: int = 0, stop: int | None = None) -> list[list[Message]]:
        """The client's messages ``start:stop``, as neutral messages."""
        return self.reader(start, len(self.digests) if stop is None else stop)


@dataclass
class RoundReply:
    """One reply of the upstream, read whole (from a JSON body or a finished stream).

    ``message`` is everything the model said, for the transcript; ``visible`` the client's
    share in the protocol's own wire pieces (Anthropic content blocks; for OpenAI the text,
    reasoning and tool calls), without calls to the engine's tools.
    """

    message: Message
    usage: Usage | None
    raw_usage: dict[str, Any]
    stop: str | None
    engine_calls: list[ToolCallPart] = field(default_factory=list)
    client_calls: int = 0


def too_long(protocol: ProtocolName, tokens: int, limit: int, why: str = "") -> ClientError:
    """A request that does not fit, refused as the client's own provider refuses one, so that
    the client recovers as it knows how (Claude Code compacts its history itself): Anthropic's
    ``prompt is too long: N tokens > M maximum``, OpenAI's ``context_length_exceeded``."""
    tokens = max(tokens, limit + 1)
    if protocol == "anthropic":
        message = f"prompt is too long: {tokens} tokens > {limit} maximum"
    else:
        message = (
            f"This model's maximum context length is {limit} tokens. However, your messages "
            f"resulted in {tokens} tokens. Please reduce the length of the messages."
        )
    if why:
        message += f" (contextfold proxy: {why})"
    return ClientError(message, kind="context_length")


def error_kind(status: int) -> str:
    """The neutral :class:`ClientError` kind of an upstream's HTTP error status."""
    if status in (401, 403):
        return "authentication"
    if status == 404:
        return "not_found"
    if status == 413:
        return "request_too_large"
    if status == 429:
        return "rate_limit"
    return "invalid_request" if 400 <= status < 500 else "upstream"


def add_usage(total: dict[str, Any], more: Mapping[str, Any]) -> dict[str, Any]:
    """``total`` with ``more`` added: counts summed (nested objects too), anything else from
    ``more``. The client is told what all the rounds it caused cost, in the upstream's words."""
    out = dict(total)
    for key, value in more.items():
        before = out.get(key)
        if isinstance(value, bool) or not isinstance(value, int | dict):
            out[key] = value
        elif isinstance(value, int) and isinstance(before, int) and not isinstance(before, bool):
            out[key] = before + value
        elif isinstance(value, dict) and isinstance(before, dict):
            out[key] = add_usage(before, value)
        else:
            out[key] = value
    return out


Event = TypeVar("Event")


def stream_bytes(
    stream: bool, events: Sequence[Event], write: Callable[[Event], bytes]
) -> list[bytes]:
    """``write`` of each of a reply's stream ``events``, for a client that reads the stream;
    none for a client answered whole (a writer's ``body()`` is its reply): its encoder made the
    events all the same, and adds them up into that body."""
    return [write(event) for event in events] if stream else []


def sse(data: Mapping[str, Any] | str, event: str | None = None) -> bytes:
    """One server-sent event."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def http_upstream_error(
    provider: Literal["anthropic", "openai"],
    status: int,
    body: object,
    headers: Mapping[str, str],
) -> ProviderError:
    """The error an upstream's HTTP error stands for, as ``provider``'s SDK would map it (an
    overflow recognised by its wording)."""
    return error_from_response(
        provider=provider,
        status=status,
        body=body,
        headers=dict(headers),
        fallback_message=json.dumps(body)[:500] if body else f"HTTP {status}",
        env_var="",
    )
