"""Responses replies: the stream encoder's events validated by the openai SDK's own models, the
decoder reading them back, non-streamed responses, and the official SDK against a tiny server
speaking through the encoder."""

from __future__ import annotations

import json
import typing
from collections.abc import Iterator
from typing import Any

import pytest

from contextfold.errors import ContextOverflowError, ProviderError
from contextfold.messages import Message, TextPart, ThinkingPart, ToolCallPart, Usage
from contextfold.wire.responses import error_body, read_request
from contextfold.wire.responses_stream import (
    Finished,
    NeutralEvent,
    ProviderItem,
    ResponsesStreamDecoder,
    ResponsesStreamEncoder,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStarted,
    UsageReport,
    read_response,
    sse_bytes,
    write_response,
)

openai = pytest.importorskip("openai")
from openai.types.responses import Response, ResponseStreamEvent  # noqa: E402


def _event_models() -> dict[str, Any]:
    """Each stream event model of the SDK by its ``type`` (the union is not discriminated for
    pydantic, so validating against it reports every member's complaint)."""
    union = typing.get_args(ResponseStreamEvent)[0]
    out: dict[str, Any] = {}
    for model in typing.get_args(union):
        (literal,) = typing.get_args(model.model_fields["type"].annotation)
        out[literal] = model
    return out


class _Events:
    models = _event_models()

    def validate_python(self, event: dict[str, Any]) -> Any:
        return self.models[event["type"]].model_validate(event)


EVENTS = _Events()

REPLY: list[NeutralEvent] = [
    ThinkingDelta("Let me "),
    ThinkingDelta("look."),
    TextDelta("Listing "),
    TextDelta("files."),
    ToolCallStarted("call_1", "shell_command"),
    ToolCallDelta("call_1", '{"command":'),
    ToolCallDelta("call_1", '"ls"}'),
    ToolCallDone("call_1"),
    ToolCallStarted("call_2", "apply_patch"),
    ToolCallDelta("call_2", '{"input": "*** Begin Patch\\n"}'),
    ToolCallDone("call_2"),
    ToolCallStarted("call_3", "mcp__github__list_issues"),
    ToolCallDone("call_3", "{}"),
    UsageReport(Usage(input_tokens=1200, output_tokens=80, cache_read_tokens=1024), 32),
    Finished("tool_calls"),
]


def _encoder() -> ResponsesStreamEncoder:
    return ResponsesStreamEncoder(
        model="gpt-5-codex",
        custom_tools={"apply_patch"},
        namespaces={"mcp__github__list_issues": ("mcp__github", "list_issues")},
    )


def _encode(events: list[NeutralEvent]) -> list[dict[str, Any]]:
    encoder = _encoder()
    out: list[dict[str, Any]] = []
    for event in events:
        out += encoder.feed(event)
    return out


def test_stream_events_are_what_the_sdk_parses() -> None:
    events = _encode(REPLY)
    for event in events:
        EVENTS.validate_python(event)  # raises when a field is missing or mistyped
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    for needed in (
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
    ):
        assert needed in kinds, needed
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [i["type"] for i in done] == [
        "reasoning",
        "message",
        "function_call",
        "custom_tool_call",
        "function_call",
    ]
    assert done[0]["summary"] == [{"type": "summary_text", "text": "Let me look."}]
    assert done[1]["content"][0]["text"] == "Listing files."
    assert done[2]["arguments"] == '{"command":"ls"}'
    assert done[3]["input"] == "*** Begin Patch\n"
    assert (done[4]["namespace"], done[4]["name"]) == ("mcp__github", "list_issues")
    completed = events[-1]["response"]
    Response.model_validate(completed)
    assert completed["status"] == "completed"
    assert completed["usage"] == {
        "input_tokens": 1200,
        "input_tokens_details": {"cached_tokens": 1024, "cache_write_tokens": 0},
        "output_tokens": 80,
        "output_tokens_details": {"reasoning_tokens": 32},
        "total_tokens": 1280,
    }
    assert [i["id"] for i in completed["output"]] == [i["id"] for i in done]


def test_a_reply_cut_short_ends_incomplete() -> None:
    events = _encode([TextDelta("half"), Finished("length")])
    last = events[-1]
    EVENTS.validate_python(last)
    assert last["type"] == "response.incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_overflow_is_a_failed_response_with_the_code_codex_reads() -> None:
    """Codex compacts on ``response.failed`` whose ``response.error.code`` is
    ``context_length_exceeded``. The SDK's ResponseError lists no such code in its Literal, but
    the SDK reads stream events leniently (construct_type), as it does for the real API."""
    encoder = _encoder()
    events = encoder.start() + encoder.fail("prompt too long", code="context_length_exceeded")
    from openai._models import construct_type

    for event in events[:-1]:
        EVENTS.validate_python(event)
    failed = construct_type(type_=ResponseStreamEvent, value=events[-1])
    assert failed.type == "response.failed"
    assert failed.response.status == "failed"
    assert failed.response.error.code == "context_length_exceeded"
    with pytest.raises(ContextOverflowError):
        decoder = ResponsesStreamDecoder()
        for event in events:
            decoder.feed(event)


def test_the_decoder_reads_the_encoders_stream_back() -> None:
    decoder = ResponsesStreamDecoder()
    neutral: list[NeutralEvent] = []
    for event in _encode(REPLY):
        neutral += decoder.feed(json.loads(json.dumps(event)))
    assert [e for e in neutral if isinstance(e, TextDelta)] == [
        TextDelta("Listing "),
        TextDelta("files."),
    ]
    assert ToolCallStarted("call_3", "mcp__github__list_issues") in neutral
    assert neutral[-1] == Finished("tool_calls")
    reply = decoder.reply()
    assert reply.usage == Usage(input_tokens=1200, output_tokens=80, cache_read_tokens=1024)
    assert reply.reasoning_tokens == 32
    parts = reply.message.parts
    assert parts[0] == ThinkingPart("Let me look.")
    assert parts[1] == TextPart("Listing files.")
    assert parts[2:] == (
        ToolCallPart("call_1", "shell_command", '{"command":"ls"}'),
        ToolCallPart("call_2", "apply_patch", '{"input": "*** Begin Patch\\n"}'),
        ToolCallPart("call_3", "mcp__github__list_issues", "{}"),
    )
    assert reply.message.meta.usage == reply.usage


def test_the_decoder_reads_an_openai_stream() -> None:
    """A hand-made stream in the shape OpenAI sends: two summary parts, encrypted reasoning."""
    stream = [
        {"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1"}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"id": "rs_1", "type": "reasoning", "summary": []},
        },
        {"type": "response.reasoning_summary_part.added", "item_id": "rs_1", "summary_index": 0},
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs_1",
            "summary_index": 0,
            "delta": "A",
        },
        {"type": "response.reasoning_summary_part.added", "item_id": "rs_1", "summary_index": 1},
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs_1",
            "summary_index": 1,
            "delta": "B",
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {
                "id": "rs_1",
                "type": "reasoning",
                "summary": [
                    {"type": "summary_text", "text": "A"},
                    {"type": "summary_text", "text": "B"},
                ],
                "encrypted_content": "ENC",
            },
        },
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {
                "id": "fc_1",
                "type": "function_call",
                "call_id": "c1",
                "name": "f",
                "arguments": "",
            },
        },
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "{}"},
        {
            "type": "response.output_item.done",
            "output_index": 1,
            "item": {
                "id": "fc_1",
                "type": "function_call",
                "call_id": "c1",
                "name": "f",
                "arguments": "{}",
                "status": "completed",
            },
        },
        {
            "type": "response.completed",
            "response": {
                "id": "resp_1",
                "model": "gpt-5",
                "status": "completed",
                "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
            },
        },
    ]
    decoder = ResponsesStreamDecoder()
    neutral = [e for event in stream for e in decoder.feed_sse(json.dumps(event))]
    thinking = "".join(e.text for e in neutral if isinstance(e, ThinkingDelta))
    assert thinking == "A\n\nB"
    assert neutral[-2:] == [UsageReport(Usage(10, 5)), Finished("tool_calls")]
    reply = decoder.reply()
    assert reply.response_id == "resp_1" and reply.model == "gpt-5"
    assert reply.message.parts[0] == ThinkingPart("A\n\nB")
    stored = reply.message.meta.provider["responses"]["reasoning"][0]
    assert stored["encrypted_content"] == "ENC"
    # Relayed to a Responses client, the reasoning item goes whole, encrypted content included.
    again = write_response(reply.message, model="gpt-5")
    assert again["output"][0]["encrypted_content"] == "ENC"


def test_a_stream_without_its_end_has_no_reply() -> None:
    decoder = ResponsesStreamDecoder()
    decoder.feed({"type": "response.output_text.delta", "delta": "x"})
    with pytest.raises(ProviderError, match=r"before response\.completed"):
        decoder.reply()
    with pytest.raises(ProviderError, match="boom"):
        decoder.feed({"type": "error", "code": "server_error", "message": "boom"})


def test_non_streamed_response_round_trip() -> None:
    message = Message(
        "assistant",
        (TextPart("Hello"), ToolCallPart("c9", "apply_patch", '{"input": "patch"}')),
    )
    body = write_response(
        message,
        model="gpt-5-codex",
        usage=Usage(100, 20, 64),
        stop_reason="tool_calls",
        custom_tools={"apply_patch"},
    )
    Response.model_validate(body)
    assert body["object"] == "response" and body["status"] == "completed"
    assert body["output"][1]["type"] == "custom_tool_call"
    assert body["usage"]["input_tokens_details"]["cached_tokens"] == 64
    reply = read_response(json.loads(json.dumps(body)))
    assert reply.message.parts == message.parts
    assert reply.usage == Usage(100, 20, 64)
    assert reply.stop_reason == "tool_calls"
    with pytest.raises(ContextOverflowError):
        read_response(error_body("too long", code="context_length_exceeded"))


def test_provider_items_pass_whole() -> None:
    item = {
        "id": "ws_1",
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": "q"},
    }
    events = _encode([ProviderItem(item), TextDelta("x"), Finished("stop")])
    for event in events:
        EVENTS.validate_python(event)
    assert events[2] == {**events[2], "type": "response.output_item.added", "item": item}


def test_sse_bytes() -> None:
    event = {"type": "response.output_text.delta", "delta": "é"}
    assert (
        sse_bytes(event)
        == (
            'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
            '"delta":"é"}\n\n'
        ).encode()
    )


# --------------------------------------------------------------------------------------------------
# the official SDK against a server speaking through the encoder
# --------------------------------------------------------------------------------------------------


def _app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.responses import Response as HTTPResponse
    from starlette.routing import Route

    from contextfold.wire.responses import ResponsesRequestError

    async def responses(request: Request) -> HTTPResponse:
        try:
            parsed = read_request(await request.json())
        except ResponsesRequestError as exc:
            return JSONResponse(exc.body(), status_code=400)
        prompt = parsed.messages[-1].text
        encoder = ResponsesStreamEncoder(
            model=parsed.model or "", echo={"tools": list(parsed.raw_tools)}
        )
        if prompt == "overflow":
            events = encoder.fail(
                "Your input exceeds the context window.", code="context_length_exceeded"
            )
        else:
            reply: list[NeutralEvent] = [
                ThinkingDelta("hm"),
                TextDelta(f"You said: {prompt}"),
                ToolCallStarted("call_x", "lookup"),
                ToolCallDelta("call_x", '{"q":1}'),
                UsageReport(Usage(50, 7, 32)),
                Finished("tool_calls"),
            ]
            events = [e for event in reply for e in encoder.feed(event)]
        if not parsed.stream:
            return JSONResponse(encoder.response)

        def chunks() -> Iterator[bytes]:
            for event in events:
                yield sse_bytes(event)

        return StreamingResponse(chunks(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/responses", responses, methods=["POST"])])


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    from tests.proxy.servers import serve

    with serve(_app()) as url:
        yield openai.OpenAI(base_url=f"{url}/v1", api_key="test", max_retries=0)


def test_the_sdk_streams_through_the_encoder(client: Any) -> None:
    with client.responses.stream(
        model="gpt-5-codex",
        input=[{"role": "user", "content": "hi there"}],
        tools=[{"type": "function", "name": "lookup", "parameters": {"type": "object"}}],
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert final.output_text == "You said: hi there"
    call = next(i for i in final.output if i.type == "function_call")
    assert (call.call_id, call.name, call.arguments) == ("call_x", "lookup", '{"q":1}')
    assert final.usage.input_tokens_details.cached_tokens == 32
    assert final.usage.total_tokens == 57


def test_the_sdk_reads_a_raw_stream_and_a_whole_response(client: Any) -> None:
    events = list(client.responses.create(model="m", input="hello", stream=True))
    assert events[-1].type == "response.completed"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == (
        "You said: hello"
    )
    whole = client.responses.create(model="m", input="hello")
    assert whole.output_text == "You said: hello"
    assert whole.usage.output_tokens == 7


def test_the_sdk_sees_overflow_and_bad_requests(client: Any) -> None:
    events = list(client.responses.create(model="m", input="overflow", stream=True))
    assert events[-1].type == "response.failed"
    assert events[-1].response.error.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input=[{"role": "user", "content": 5}])
    assert caught.value.code is None
    assert caught.value.param == "input[0].content"
    assert "expected a string or an array" in caught.value.message
