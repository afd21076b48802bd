"""The OpenAI Responses API, both directions: requests, input items, tools and errors.

A Responses request is ``instructions`` plus a flat list of ``input`` items (messages,
``function_call``, ``function_call_output``, ``reasoning``...), where Chat Completions has role
messages. :func:`read_request` checks a client's body against typed models and reads it into
contextfold values (:class:`ResponsesRequest`); :func:`write_request` builds a body from neutral
messages, for an upstream that speaks Responses when the client spoke something else. The
streamed and non-streamed *responses* are in :mod:`contextfold.wire.responses_stream`.

How items become :class:`~contextfold.messages.Message` values:

- a ``message`` item is one message (``developer`` reads as ``system`` flagged ``"developer"``);
- consecutive model-side items (``reasoning``, assistant ``message``, ``function_call``,
  ``custom_tool_call``, ``local_shell_call``) form one assistant message, in their order, as the
  Chat and Anthropic formats hold an assistant turn;
- each ``*_output`` item is one ``tool`` message with one result;
- what the Message model has no part for (the item ids, a message's ``phase``, a reasoning item's
  ``encrypted_content``, a call's ``namespace``) is kept in ``meta.provider["responses"]`` and
  written back verbatim, so a history read and written again is the one the client sent;
- items contextfold cannot read (``web_search_call``, ``compaction``, ``item_reference``...) are
  kept whole as *opaque* messages (no parts, flag ``"responses_opaque"``): written back to a
  Responses upstream untouched, and for any other protocol dropped by the bridge;
- a ``compaction_trigger`` item (Codex asking the server to compact) is not a message: it sets
  :attr:`ResponsesRequest.compaction_trigger`; ``additional_tools`` items are hoisted into the
  tools.

Tools: ``function`` tools become :class:`~contextfold.tool_spec.ToolSpec` values; ``custom``
(freeform, grammar) tools become a function of one string parameter ``input`` so that another
protocol can call them, and their calls carry ``{"input": ...}`` as arguments; a ``namespace``
tool's functions are named ``<namespace>__<name>``. Hosted tools (``web_search``, ``local_shell``,
``mcp``...) are kept only as raw dicts, for a Responses upstream.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field, StrictBool, StrictInt, StrictStr

from contextfold.errors import ContextOverflowError, ProviderError, RateLimitError
from contextfold.messages import Message
from contextfold.tool_spec import ToolSpec
from contextfold.wire._checked import ModelT, RequestBodyError, WireModel, check, check_unicode
from contextfold.wire.responses_items import (
    NAMESPACE_SEPARATOR,
    OPAQUE_FLAG,
    PROVIDER_KEY,
    items_to_messages,
    messages_to_items,
    new_id,
    read_tools,
    tool_to_spec,
    tools_to_wire,
)

__all__ = [
    "NAMESPACE_SEPARATOR",
    "OPAQUE_FLAG",
    "PROVIDER_KEY",
    "ResponsesRequest",
    "ResponsesRequestError",
    "error_body",
    "error_from_body",
    "items_to_messages",
    "messages_to_items",
    "new_id",
    "read_request",
    "tool_to_spec",
    "tools_to_wire",
    "write_request",
]

# --------------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------------


class ResponsesRequestError(RequestBodyError):
    """A Responses request body that is not one: ``param`` names the field (``input[3].call_id``),
    which the 400 answer carries as OpenAI's ``param``."""

    def body(self) -> dict[str, Any]:
        """The 400 body the client gets."""
        return error_body(str(self), param=self.param)


def error_body(
    message: str,
    *,
    type: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
) -> dict[str, Any]:
    """An error as the Responses API answers one over HTTP (``{"error": {...}}``).

    Overflow is ``code="context_length_exceeded"`` with ``type="invalid_request_error"``. Note that
    Codex reads an HTTP 400 as a fatal invalid request: to make it compact, a streamed request's
    overflow must go as ``response.failed`` instead (see
    :meth:`~contextfold.wire.responses_stream.ResponsesStreamEncoder.fail`).
    """
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def error_from_body(body: Any, *, status: int | None = None) -> ProviderError:
    """The contextfold error an upstream's Responses error body (HTTP JSON, or the ``error`` of a
    failed response) stands for: :class:`ContextOverflowError` for ``context_length_exceeded``,
    :class:`RateLimitError` for ``rate_limit_exceeded``, else :class:`ProviderError`."""
    error = body.get("error", body) if isinstance(body, Mapping) else {}
    if not isinstance(error, Mapping):
        error = {"message": str(error)}
    code = error.get("code")
    message = str(error.get("message") or code or "the upstream failed")
    if code == "context_length_exceeded":
        return ContextOverflowError(message, provider="openai-responses", status=status)
    if code == "rate_limit_exceeded" or status == 429:
        return RateLimitError(message, provider="openai-responses", status=status or 429)
    return ProviderError(message, provider="openai-responses", status=status)


# --------------------------------------------------------------------------------------------------
# typed wire models (what is checked; everything else of an item is kept verbatim)
# --------------------------------------------------------------------------------------------------


_Wire = WireModel


class _Part(_Wire):
    type: StrictStr


class _TextPart(_Wire):
    type: StrictStr
    text: StrictStr


class _ImagePart(_Wire):
    type: StrictStr
    image_url: StrictStr | None = None
    file_id: StrictStr | None = None
    detail: StrictStr | None = None


class _MessageItem(_Wire):
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: StrictStr | list[dict[str, Any]]
    id: StrictStr | None = None


class _SummaryText(_Wire):
    type: StrictStr
    text: StrictStr


class _ReasoningItem(_Wire):
    type: Literal["reasoning"]
    summary: list[_SummaryText] = Field(default_factory=list)
    content: list[_SummaryText] | None = None
    encrypted_content: StrictStr | None = None
    id: StrictStr | None = None


class _FunctionCall(_Wire):
    type: Literal["function_call"]
    call_id: StrictStr
    name: StrictStr
    arguments: StrictStr
    namespace: StrictStr | None = None
    id: StrictStr | None = None


class _CustomToolCall(_Wire):
    type: Literal["custom_tool_call"]
    call_id: StrictStr
    name: StrictStr
    input: StrictStr
    namespace: StrictStr | None = None
    id: StrictStr | None = None


class _LocalShellCall(_Wire):
    type: Literal["local_shell_call"]
    call_id: StrictStr | None = None
    id: StrictStr | None = None
    action: dict[str, Any]
    status: StrictStr | None = None


class _CallOutput(_Wire):
    type: StrictStr
    call_id: StrictStr
    output: StrictStr | list[dict[str, Any]]
    id: StrictStr | None = None


class _LocalShellOutput(_Wire):
    type: Literal["local_shell_call_output"]
    id: StrictStr
    output: StrictStr


class _AdditionalTools(_Wire):
    type: Literal["additional_tools"]
    tools: list[dict[str, Any]]


class _AnyItem(_Wire):
    type: StrictStr


class _FunctionTool(_Wire):
    type: Literal["function"]
    name: StrictStr
    description: StrictStr | None = None
    parameters: dict[str, Any] | None = None
    strict: StrictBool | None = None


class _CustomTool(_Wire):
    type: Literal["custom"]
    name: StrictStr
    description: StrictStr | None = None
    format: dict[str, Any] | None = None


class _NamespaceTool(_Wire):
    type: Literal["namespace"]
    name: StrictStr
    description: StrictStr | None = None
    tools: list[dict[str, Any]]


class _AnyTool(_Wire):
    type: StrictStr


_ITEM_MODELS: dict[str, type[_Wire]] = {
    "message": _MessageItem,
    "reasoning": _ReasoningItem,
    "function_call": _FunctionCall,
    "custom_tool_call": _CustomToolCall,
    "local_shell_call": _LocalShellCall,
    "function_call_output": _CallOutput,
    "custom_tool_call_output": _CallOutput,
    "local_shell_call_output": _LocalShellOutput,
    "additional_tools": _AdditionalTools,
}

_TOOL_MODELS: dict[str, type[_Wire]] = {
    "function": _FunctionTool,
    "custom": _CustomTool,
    "namespace": _NamespaceTool,
}

_PositiveInt = Annotated[StrictInt, Field(ge=1)]


class _Body(_Wire):
    model: StrictStr | None = None
    instructions: StrictStr | None = None
    input: StrictStr | list[Any] = Field(default_factory=list)
    tools: list[Any] | None = None
    tool_choice: StrictStr | dict[str, Any] | None = None
    parallel_tool_calls: StrictBool | None = None
    reasoning: dict[str, Any] | None = None
    include: list[StrictStr] | None = None
    store: StrictBool | None = None
    stream: StrictBool | None = None
    stream_options: dict[str, Any] | None = None
    prompt_cache_key: StrictStr | None = None
    text: dict[str, Any] | None = None
    max_output_tokens: _PositiveInt | None = None
    previous_response_id: StrictStr | None = None
    temperature: float | None = None
    top_p: float | None = None
    metadata: dict[str, Any] | None = None
    service_tier: StrictStr | None = None
    client_metadata: dict[str, Any] | None = None


def _check(model: type[ModelT], value: Any, where: str) -> ModelT:
    return check(model, value, where, error=ResponsesRequestError)


# --------------------------------------------------------------------------------------------------
# the request value
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResponsesRequest:
    """A client's Responses request, checked and read.

    ``system`` is ``instructions`` (the system prompt); ``messages`` the ``input`` items as neutral
    messages (system and developer messages inside ``input`` stay in place). ``tools`` are what
    the model can call, in neutral form; ``raw_tools`` every tool of the request as the client
    wrote it (``additional_tools`` items hoisted to the end), for a Responses upstream.
    ``custom_tools`` names the tools that are freeform (their calls go back as
    ``custom_tool_call``), ``namespaces`` maps a neutral name to its namespace and inner name.
    ``compaction_trigger`` is true when the input ended with a ``compaction_trigger`` item.
    ``extra`` holds every other body field verbatim; ``body`` is the body itself. Nothing here is
    to be mutated.
    """

    model: str | None
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    raw_tools: tuple[Mapping[str, Any], ...] = ()
    custom_tools: frozenset[str] = frozenset()
    namespaces: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    tool_choice: str | Mapping[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    reasoning: Mapping[str, Any] | None = None
    include: tuple[str, ...] = ()
    store: bool | None = None
    stream: bool = False
    prompt_cache_key: str | None = None
    text: Mapping[str, Any] | None = None
    max_output_tokens: int | None = None
    previous_response_id: str | None = None
    compaction_trigger: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)
    body: Mapping[str, Any] = field(default_factory=dict)

    @property
    def wants_encrypted_reasoning(self) -> bool:
        """True when the client asked for ``reasoning.encrypted_content`` (Codex always does)."""
        return "reasoning.encrypted_content" in self.include


_READ_FIELDS = frozenset(
    {
        "model",
        "instructions",
        "input",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
        "include",
        "store",
        "stream",
        "prompt_cache_key",
        "text",
        "max_output_tokens",
        "previous_response_id",
    }
)


def read_request(body: Any) -> ResponsesRequest:
    """A client's ``POST /v1/responses`` body, checked against typed models and read.

    Raises :class:`ResponsesRequestError` naming the first bad field (``input[3].call_id:
    expected a string``): wrong types, unknown roles, text that is not valid Unicode. Nothing is
    read before the whole body has been checked.
    """
    if not isinstance(body, Mapping):
        raise ResponsesRequestError(None, "the request body must be a JSON object")
    check_unicode(body, error=ResponsesRequestError)
    checked: _Body = _check(_Body, body, "")
    raw_items: list[Any] = (
        [{"type": "message", "role": "user", "content": checked.input}]
        if isinstance(checked.input, str)
        else list(checked.input)
    )
    for index, item in enumerate(raw_items):
        _check_item(item, f"input[{index}]")
    raw_tools = list(checked.tools or [])
    for index, tool in enumerate(raw_tools):
        _check_tool(tool, f"tools[{index}]")
    trigger = False
    items: list[Mapping[str, Any]] = []
    for index, item in enumerate(raw_items):
        kind = item.get("type", "message")
        if kind == "compaction_trigger":
            if index != len(raw_items) - 1:
                raise ResponsesRequestError(
                    f"input[{index}]", "a compaction_trigger item must be the last input item"
                )
            trigger = True
        elif kind == "additional_tools":
            raw_tools.extend(item["tools"])
        else:
            items.append(item)
    tools, custom, namespaces = read_tools(raw_tools)
    return ResponsesRequest(
        model=checked.model,
        system=checked.instructions or "",
        messages=tuple(items_to_messages(items)),
        tools=tuple(tools),
        raw_tools=tuple(raw_tools),
        custom_tools=frozenset(custom),
        namespaces=namespaces,
        tool_choice=checked.tool_choice,
        parallel_tool_calls=checked.parallel_tool_calls,
        reasoning=checked.reasoning,
        include=tuple(checked.include or ()),
        store=checked.store,
        stream=bool(checked.stream),
        prompt_cache_key=checked.prompt_cache_key,
        text=checked.text,
        max_output_tokens=checked.max_output_tokens,
        previous_response_id=checked.previous_response_id,
        compaction_trigger=trigger,
        extra={k: v for k, v in body.items() if k not in _READ_FIELDS},
        body=body,
    )


def _check_item(item: Any, where: str) -> None:
    if not isinstance(item, Mapping):
        raise ResponsesRequestError(where, "expected an object")
    kind = item.get("type", "message")
    if kind == "message" and "role" not in item and "type" not in item:
        raise ResponsesRequestError(f"{where}.type", "Field required")
    model = _ITEM_MODELS.get(kind) if isinstance(kind, str) else None
    _check(model or _AnyItem, item if "type" in item else {**item, "type": "message"}, where)
    if kind == "message":
        _check_content(item["content"], f"{where}.content")
    elif kind in ("function_call_output", "custom_tool_call_output"):
        if isinstance(item["output"], list):
            _check_content(item["output"], f"{where}.output")
    elif kind == "additional_tools":
        for index, tool in enumerate(item["tools"]):
            _check_tool(tool, f"{where}.tools[{index}]")


_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})


def _check_content(content: Any, where: str) -> None:
    if isinstance(content, str):
        return
    for index, part in enumerate(content):
        at = f"{where}[{index}]"
        checked: _Part = _check(_Part, part, at)
        if checked.type in _TEXT_PARTS:
            _check(_TextPart, part, at)
        elif checked.type == "refusal":
            if not isinstance(part.get("refusal"), str):
                raise ResponsesRequestError(f"{at}.refusal", "expected a string")
        elif checked.type == "input_image":
            image: _ImagePart = _check(_ImagePart, part, at)
            if image.image_url is None:
                # A file_id names an upload only OpenAI holds; no other model could see it.
                raise ResponsesRequestError(
                    f"{at}.image_url", "contextfold proxy carries images by URL or data URL only"
                )
        else:
            raise ResponsesRequestError(
                f"{at}.type",
                f"content part type {checked.type!r} is not supported by contextfold proxy "
                "(supported: input_text, output_text, input_image, refusal)",
            )


def _check_tool(tool: Any, where: str) -> None:
    if not isinstance(tool, Mapping):
        raise ResponsesRequestError(where, "expected an object")
    kind = tool.get("type")
    model = _TOOL_MODELS.get(kind) if isinstance(kind, str) else None
    _check(model or _AnyTool, tool, where)
    if kind == "namespace":
        for index, inner in enumerate(tool["tools"]):
            _check_tool(inner, f"{where}.tools[{index}]")


# --------------------------------------------------------------------------------------------------
# requests for an upstream
# --------------------------------------------------------------------------------------------------

ToolChoice: TypeAlias = str | Mapping[str, Any] | None


def write_request(
    messages: Iterable[Message],
    *,
    model: str,
    system: str = "",
    tools: Iterable[ToolSpec] = (),
    raw_tools: Iterable[Mapping[str, Any]] = (),
    custom_tools: Iterable[str] = (),
    namespaces: Mapping[str, tuple[str, str]] | None = None,
    tool_choice: ToolChoice = None,
    parallel_tool_calls: bool | None = None,
    reasoning: Mapping[str, Any] | None = None,
    include: Iterable[str] = (),
    store: bool | None = None,
    prompt_cache_key: str | None = None,
    text: Mapping[str, Any] | None = None,
    max_output_tokens: int | None = None,
    previous_response_id: str | None = None,
    stream: bool = False,
    keep_encrypted: bool = True,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Responses request body for ``messages``.

    ``system`` is the ``instructions``; system messages among ``messages`` stay ``input`` items
    in their place (``developer`` ones as ``developer``), as Codex sends them, so a history read by
    :func:`read_request` is written back as it came. Options left ``None`` are not sent.
    With tools, ``tool_choice`` defaults to ``"auto"``. ``keep_encrypted=False`` is for an upstream
    other than the one that made the encrypted reasoning and opaque items (they are dropped).
    ``extra`` fields are sent verbatim (they do not override the fields above).
    """
    body: dict[str, Any] = dict(extra or {})
    body["model"] = model
    if system:
        body["instructions"] = system
    body["input"] = messages_to_items(
        messages,
        custom_tools=custom_tools,
        namespaces=namespaces,
        keep_encrypted=keep_encrypted,
    )
    wire_tools = tools_to_wire(tools, raw_tools=raw_tools)
    if wire_tools:
        body["tools"] = wire_tools
        body["tool_choice"] = tool_choice if tool_choice is not None else "auto"
    elif tool_choice is not None:
        body["tool_choice"] = tool_choice
    options: dict[str, Any] = {
        "parallel_tool_calls": parallel_tool_calls,
        "reasoning": dict(reasoning) if reasoning is not None else None,
        "store": store,
        "prompt_cache_key": prompt_cache_key,
        "text": dict(text) if text is not None else None,
        "max_output_tokens": max_output_tokens,
        "previous_response_id": previous_response_id,
    }
    body.update({k: v for k, v in options.items() if v is not None})
    included = list(include)
    if included:
        body["include"] = included
    if stream:
        body["stream"] = True
    return body
