"""The scripted upstreams on their own, without a real client: the Responses route as the
official ``openai`` SDK reads it (streamed and not, overflow included), and the plan script's
refusals."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.clients.plans import PlanScript, Step
from tests.clients.responses_upstream import ResponsesUpstream
from tests.proxy.servers import serve
from tests.proxy.upstreams import Reply, ToolCall, UpstreamError

TOOLS: list[Any] = [
    {"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {}}}
]


def _script(protocol: str, body: dict[str, Any]) -> Reply:
    return Reply(
        text="Listing.",
        tool_calls=[ToolCall("call_1", "shell", {"cmd": "ls"})],
        thinking="Look first.",
    )


def test_responses_streamed_and_not_as_the_sdk_reads_them() -> None:
    upstream = ResponsesUpstream(_script)
    with serve(upstream) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="dummy", max_retries=0)
        plain = client.responses.create(model="scripted", input="hi", tools=TOOLS)
        kinds = [item.type for item in plain.output]
        assert kinds == ["reasoning", "message", "function_call"]
        assert plain.output_text == "Listing."
        assert plain.usage is not None and plain.usage.input_tokens > 0
        assert plain.usage.input_tokens_details.cached_tokens == 0
        events = list(client.responses.create(model="scripted", input="hi", stream=True))
    types = [e.type for e in events]
    assert types[0] == "response.created" and types[-1] == "response.completed"
    assert "response.output_text.delta" in types
    assert "response.reasoning_summary_text.delta" in types
    done = [e.item for e in events if e.type == "response.output_item.done"]
    call = next(i for i in done if i.type == "function_call")
    assert (call.call_id, call.name, call.arguments) == ("call_1", "shell", '{"cmd": "ls"}')
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert upstream.requests[0].path == "/v1/responses"


def test_responses_overflow_is_what_codex_compacts_on() -> None:
    upstream = ResponsesUpstream(_script, window=1_024)
    big = "word " * 3_000
    with serve(upstream) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="dummy", max_retries=0)
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(model="scripted", input=big)
        assert refused.value.code == "context_length_exceeded"
        events = list(client.responses.create(model="scripted", input=big, stream=True))
    failed = events[-1]
    assert failed.type == "response.failed"
    assert failed.response.error is not None
    assert failed.response.error.code == "context_length_exceeded"


def _chat(*messages: dict[str, Any]) -> dict[str, Any]:
    tools = [{"type": "function", "function": {"name": "bash"}}]
    return {"messages": [{"role": "user", "content": "do the plan"}, *messages], "tools": tools}


def _call(call_id: str) -> dict[str, Any]:
    function = {"name": "bash", "arguments": '{"command": "ls"}'}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "function": function}],
    }


def test_the_plan_goes_on_from_what_it_sees_and_refuses_what_hides_a_step() -> None:
    first_step = Step((("bash", {"command": "ls"}),), expect=("a.py",), user="do the plan")
    steps = [first_step] + [Step((("bash", {"command": "ls"}),), expect=("a.py",))] * 2
    script = PlanScript(steps, marker_tool="bash")
    first = script("openai", _chat())
    assert isinstance(first, Reply) and first.tool_calls[0].id.startswith("call_cf000s0")
    step0 = first.tool_calls[0].id
    # A retry of the same request gets the same step.
    assert isinstance(script("openai", _chat()), Reply)
    second = script(
        "openai", _chat(_call(step0), {"role": "tool", "tool_call_id": step0, "content": "a.py"})
    )
    assert isinstance(second, Reply) and "cf001s0" in second.tool_calls[0].id
    assert script.completed == 1
    # The newest result missing: refused.
    step1 = second.tool_calls[0].id
    hidden = script(
        "openai",
        _chat(
            _call(step0), {"role": "tool", "tool_call_id": step0, "content": "a.py"}, _call(step1)
        ),
    )
    assert isinstance(hidden, UpstreamError) and hidden.status == 400
    assert "result of step 1" in script.refusals[-1]
    # The result cut so that it no longer shows what the step produced: refused.
    cut = script(
        "openai",
        _chat(_call(step1), {"role": "tool", "tool_call_id": step1, "content": "[masked]"}),
    )
    assert isinstance(cut, UpstreamError)
    assert "does not show" in script.refusals[-1]
    # A step asked a third time: refused (its call and result keep vanishing).
    assert isinstance(script("openai", _chat()), UpstreamError)
    assert "third time" in script.refusals[-1]


def test_side_requests_get_a_short_answer() -> None:
    script = PlanScript([Step()], marker_tool="bash")
    answer = script("openai", {"messages": [{"role": "user", "content": "title?"}]})
    assert isinstance(answer, Reply) and script.side_requests == 1 and script.main_requests == 0
