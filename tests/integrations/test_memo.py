"""The framework tools' specs, made once per tool while what they are made from stays; the
shared prefix of two lists of objects."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contextfold.integrations._memo import ToolSpecs, schema_fields
from contextfold.tool_spec import ToolSpec


@dataclass
class _Tool:
    name: str
    description: str
    schema: dict[str, Any]


def _specs() -> ToolSpecs[_Tool]:
    return ToolSpecs(
        lambda t: schema_fields(t.name, t.description, t.schema),
        lambda t: ToolSpec(t.name, t.description, dict(t.schema)),
    )


def test_a_tool_made_again_from_the_same_schema_keeps_its_spec() -> None:
    """pydantic-ai makes new tool definitions for every request, from the same schema object:
    the spec is the same object, so the engine's memories of it hold."""
    schema = {"type": "object", "properties": {"command": {"type": "string"}}}
    specs = _specs()
    [first] = specs.specs([_Tool("bash", "Run it.", schema)])
    [again] = specs.specs([_Tool("bash", "Run it.", schema)])
    assert again is first
    assert first == ToolSpec("bash", "Run it.", schema)


def test_a_schema_changed_in_place_or_another_description_makes_a_new_spec() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    specs = _specs()
    [first] = specs.specs([_Tool("bash", "Run it.", schema)])
    schema["required"] = ["command"]
    [changed] = specs.specs([_Tool("bash", "Run it.", schema)])
    assert changed is not first and changed.parameters == schema
    schema["properties"] = {"command": {"type": "string"}}  # a value replaced
    [replaced] = specs.specs([_Tool("bash", "Run it.", schema)])
    assert replaced is not changed and replaced.parameters == schema
    [described] = specs.specs([_Tool("bash", "Run it now.", schema)])
    assert described.description == "Run it now."


def test_a_tool_without_fields_is_converted_every_time() -> None:
    made: list[str] = []

    def convert(name: str) -> ToolSpec:
        made.append(name)
        return ToolSpec(name, "")

    specs: ToolSpecs[str] = ToolSpecs(lambda _: None, convert)
    specs.specs(["a", "b"])
    specs.specs(["a"])
    assert made == ["a", "b", "a"]
