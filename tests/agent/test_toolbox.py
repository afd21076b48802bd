"""The Toolbox: every call gets an answer the model can act on, whatever went wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import contextfold.agent as agent
from contextfold import ToolCallPart, ToolResultPart, UsageError
from contextfold.agent import (
    CODING_TOOL_NAMES,
    ApprovalPolicy,
    Toolbox,
    ToolOutcome,
    Workspace,
    coding_toolbox,
)
from contextfold.tools.deferral import ToolSpec

ECHO = ToolSpec(
    name="echo",
    description="Repeat the text.",
    parameters={
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "times": {"type": "integer", "minimum": 1, "maximum": 3},
            "loud": {"type": "boolean"},
        },
        "required": ["text"],
        "additionalProperties": False,
    },
)


def echo(args: dict[str, Any]) -> str:
    text: str = args["text"] * args.get("times", 1)
    return text.upper() if args.get("loud") else text


@pytest.fixture
def box() -> Toolbox:
    toolbox = Toolbox()
    toolbox.register(ECHO, echo)
    return toolbox


def call(name: str, arguments: str) -> ToolCallPart:
    return ToolCallPart("call_1", name, arguments)


def test_a_call_runs_and_becomes_a_result(box: Toolbox) -> None:
    tool_call = call("echo", '{"text": "hi", "times": 2}')
    outcome = box.run(tool_call)
    assert outcome == ToolOutcome("hihi")
    assert outcome.to_result(tool_call) == ToolResultPart("call_1", "echo", "hihi")


def test_unknown_tool_lists_the_tools(box: Toolbox) -> None:
    outcome = box.run(call("ehco", "{}"))
    assert outcome.is_error
    assert outcome.content == "there is no tool named 'ehco'; the available tools are: echo"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"text": "hi"', "the arguments of echo are not valid JSON"),
        ('["hi"]', "must be a JSON object"),
        ("{}", "missing required argument 'text'"),
        ('{"txt": "hi"}', "missing required argument 'text'; unknown argument 'txt'"),
        ('{"text": "hi", "extra": 1}', "unknown argument 'extra'"),
        ('{"text": 5}', "text must be a string"),
        ('{"text": "hi", "times": 9}', "times must be between 1 and 3, got 9"),
        ('{"text": "hi", "times": "two"}', "times must be a whole number"),
    ],
)
def test_bad_arguments_are_named(box: Toolbox, arguments: str, expected: str) -> None:
    outcome = box.run(call("echo", arguments))
    assert outcome.is_error
    assert expected in outcome.content
    assert outcome.metadata["error"] == "invalid_arguments"


def test_signature_is_shown_with_missing_arguments(box: Toolbox) -> None:
    content = box.run(call("echo", "{}")).content
    assert "echo takes: text: string, times: integer (optional), loud: boolean (optional)" in (
        content
    )


def test_numbers_and_booleans_sent_as_strings_are_accepted(box: Toolbox) -> None:
    outcome = box.run(call("echo", '{"text": "a", "times": "3", "loud": "true"}'))
    assert outcome == ToolOutcome("AAA")


def test_empty_arguments_mean_none(box: Toolbox) -> None:
    box.register(ToolSpec("ping", "Answer pong."), lambda args: "pong")
    assert box.run(call("ping", "")).content == "pong"


def test_a_handler_exception_becomes_an_error_outcome(box: Toolbox) -> None:
    def broken(args: dict[str, Any]) -> str:
        raise RuntimeError("disk on fire")

    box.register(ToolSpec("broken", "Fail."), broken)
    outcome = box.run(call("broken", "{}"))
    assert outcome.is_error
    assert outcome.content == "broken failed: RuntimeError: disk on fire"


def test_keyboard_interrupt_still_stops_the_agent(box: Toolbox) -> None:
    def interrupted(args: dict[str, Any]) -> str:
        raise KeyboardInterrupt

    box.register(ToolSpec("slow", "Wait."), interrupted)
    with pytest.raises(KeyboardInterrupt):
        box.run(call("slow", "{}"))


def test_a_handler_may_return_a_ready_result(box: Toolbox) -> None:
    # The engine's read_result answers with a ToolResultPart; it registers as it is.
    box.register(
        ToolSpec("read_result", "Read.", source="engine"),
        lambda args: ToolResultPart("", "read_result", "no such ref", is_error=True),
    )
    assert box.run(call("read_result", "{}")) == ToolOutcome("no such ref", True)


def test_registration_rules(box: Toolbox) -> None:
    with pytest.raises(UsageError, match="already registered"):
        box.register(ECHO, echo)
    box.register(ECHO, lambda args: "replaced", replace=True)
    assert box.run(call("echo", '{"text": "x"}')).content == "replaced"
    box.unregister("echo")
    assert "echo" not in box
    with pytest.raises(UsageError):
        box.unregister("echo")


def test_coding_toolbox_offers_the_coding_tools(tmp_path: Path) -> None:
    toolbox = coding_toolbox(tmp_path, ApprovalPolicy.auto())
    specs = toolbox.specs()
    assert tuple(spec.name for spec in specs) == CODING_TOOL_NAMES
    for spec in specs:
        assert spec.source == "builtin"
        assert spec.parameters["type"] == "object"
        assert len(spec.description) > 80
        assert set(spec.parameters.get("required", ())) <= set(spec.parameter_names())
        json.dumps(spec.to_openai())
        json.dumps(spec.to_anthropic())
    assert isinstance(coding_toolbox(Workspace(tmp_path), ApprovalPolicy.auto()), Toolbox)


def test_agent_all_is_complete() -> None:
    names = list(agent.__all__)
    assert len(names) == len(set(names))
    for name in names:
        assert getattr(agent, name) is not None
