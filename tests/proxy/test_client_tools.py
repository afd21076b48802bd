"""The client's tools reach the engine as the same specs request after request (the engine
remembers each tool's schema encoding by tool object), and as the client's (deferrable)."""

from __future__ import annotations

from contextfold.proxy._conversation import _ClientTools
from contextfold.tool_spec import ToolSpec


def _tools(*names: str) -> tuple[ToolSpec, ...]:
    return tuple(
        ToolSpec(name, f"{name} it", {"type": "object", "properties": {}}) for name in names
    )


def test_a_resent_tool_list_gives_the_same_specs_marked_as_the_clients() -> None:
    made = _ClientTools()
    tools = _tools("read", "write")
    first, again = made.of(tools), made.of(tools)
    assert [t.source for t in first] == ["client", "client"]
    assert [t.name for t in first] == ["read", "write"]
    assert all(a is b for a, b in zip(first, again, strict=True))
    assert first is not again  # a list of the caller's own
    assert [(t.name, t.description, t.parameters) for t in first] == [
        (t.name, t.description, t.parameters) for t in tools
    ]


def test_another_list_or_one_that_can_change_is_made_anew() -> None:
    made = _ClientTools(size=1)
    tools, other = _tools("read"), _tools("read")
    kept = made.of(tools)
    assert made.of(other)[0] is not kept[0]  # equal, but not the list it was made from
    assert made.of(tools)[0] is not kept[0]  # size 1: the other list took its place
    listed = list(tools)
    assert made.of(listed)[0] is not made.of(listed)[0]
