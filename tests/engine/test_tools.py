"""Tools through the engine: deferral with tool_search, and the engine's own tools."""

from __future__ import annotations

import re

from contextfold import Message, ToolCallPart, ToolSpec
from contextfold.events import CompactionFinished, ToolsDeferred
from tests.engine.helpers import EngineFactory, start

_SERVICES = ["calendar", "jira", "github", "slack", "drive", "billing", "crm", "wiki", "dns", "k8s"]
_ACTIONS = [
    "create", "update", "delete", "list", "search", "archive", "export", "import", "share", "sync",
    "lock", "unlock", "tag", "untag", "assign", "comment", "approve", "reject", "merge", "close",
]  # fmt: skip


def mcp_tools() -> list[ToolSpec]:
    """200 MCP-like tools, each with its own description and a small schema."""
    tools = []
    for service in _SERVICES:
        for action in _ACTIONS:
            tools.append(
                ToolSpec(
                    f"mcp__{service}__{action}_item",
                    f"{action.capitalize()} an item in the {service} service. Use it when the "
                    f"user asks to {action} something that lives in {service}.",
                    {
                        "type": "object",
                        "properties": {
                            "item_id": {"type": "string", "description": f"The {service} id."},
                            "note": {"type": "string", "description": "Free text."},
                        },
                        "required": ["item_id"],
                    },
                    source="mcp",
                )
            )
    return tools


def test_many_mcp_tools_are_deferred_behind_tool_search(make_engine: EngineFactory) -> None:
    engine, sink = make_engine(window=32_000, max_output=4_000)
    tools = mcp_tools()
    driver = start(engine, tools=tuple(tools))
    request = driver.prepare()

    names = [t.name for t in request.tools]
    assert "tool_search" in names and {"read_result", "compact_context"} <= set(names)
    assert len(request.deferred_tools) > 100
    assert len(names) + len(request.deferred_tools) == 200 + 3  # engine tools + tool_search
    assert "deferred" in request.note and "tool_search" in request.note
    assert request.messages[-1].text == request.note  # the model is told, in the note
    event = next(e for e in request.events if isinstance(e, ToolsDeferred))
    assert event.count == len(request.deferred_tools)
    assert sink.of_type(ToolsDeferred)
    description_tokens = engine.counter.count_tools(request.tools)
    assert description_tokens <= 0.1 * engine.effective_window * 1.2
    assert request.tokens <= engine.effective_window


def test_tool_search_activates_tools_for_the_next_request(make_engine: EngineFactory) -> None:
    engine, _ = make_engine(window=32_000, max_output=4_000)
    driver = start(engine, tools=tuple(mcp_tools()))
    first = driver.prepare()
    target = first.deferred_tools[-1]  # e.g. mcp__k8s__close_item
    _, service, action = target.split("__")
    query = f"{action.removesuffix('_item')} {service} items"

    call = ToolCallPart.from_args("search_1", "tool_search", {"query": query})
    driver.session.add_assistant(Message.assistant("Let me find the billing tools.", [call]))
    result = driver.session.run_engine_tool(call)
    assert result is not None and not result.is_error
    assert target in result.content
    driver.session.add_tool_results([result])
    following = driver.prepare()

    assert target in {t.name for t in following.tools}
    assert target not in following.deferred_tools


def test_run_engine_tool_leaves_other_tools_to_the_agent(make_engine: EngineFactory) -> None:
    engine, _ = make_engine()
    session = start(engine).session
    assert session.run_engine_tool(ToolCallPart.from_args("c1", "bash", {"command": "ls"})) is None


def _stored_ref(engine_factory: EngineFactory) -> tuple[object, str, str]:
    engine, _ = engine_factory()
    driver = start(engine)
    session = driver.session
    log = "\n".join(f"line {i:05d}: {'ok' if i % 97 else 'ERROR disk full'}" for i in range(3_000))
    call = ToolCallPart.from_args("c1", "bash", {"command": "make test"})
    session.add_assistant(Message.assistant("Running the tests.", [call]))
    stored = session.add_tool_result("c1", log)
    ref = stored.tool_results[0].ref
    assert ref is not None
    return session, ref, log


def test_read_result_pages_lines_and_pattern(make_engine: EngineFactory) -> None:
    session, ref, log = _stored_ref(make_engine)
    run = session.run_engine_tool  # type: ignore[attr-defined]

    page = run(
        ToolCallPart.from_args("r1", "read_result", {"ref": ref, "offset": 100, "limit": 50})
    )
    assert not page.is_error and log[100:150] in page.content
    assert "150" in page.content  # where to continue

    lines = run(
        ToolCallPart.from_args("r2", "read_result", {"ref": ref, "start_line": 10, "end_line": 12})
    )
    assert not lines.is_error
    assert "line 00009" in lines.content and "line 00011" in lines.content
    assert "line 00012" not in lines.content

    found = run(ToolCallPart.from_args("r3", "read_result", {"ref": ref, "pattern": "ERROR"}))
    assert not found.is_error
    assert "line 00097: ERROR disk full" in found.content
    assert "line 00001" not in found.content

    missing = run(ToolCallPart.from_args("r4", "read_result", {"ref": "ref_000000000000"}))
    assert missing.is_error and "ref_" in missing.content


def test_compact_context_tool_compacts_and_tells_the_model(make_engine: EngineFactory) -> None:
    engine, sink = make_engine(window=32_000, max_output=4_000)
    driver = start(engine)
    # Above the compaction target (a compaction aims there; below it there is nothing to do).
    driver.until(lambda r: r.budget.fraction > 0.52)
    before = driver.prepare()

    call = ToolCallPart.from_args("cc1", "compact_context", {"focus": "the parser bug"})
    driver.session.add_assistant(Message.assistant("Freeing some room first.", [call]))
    result = driver.session.run_engine_tool(call)
    assert result is not None and not result.is_error
    figures = re.search(r"from ([\d,]+) to ([\d,]+) tokens", result.content)
    assert figures is not None
    assert int(figures[2].replace(",", "")) < int(figures[1].replace(",", ""))
    assert "read_result" in result.content
    finished = sink.of_type(CompactionFinished)[-1]
    assert finished.trigger == "agent"
    driver.session.add_tool_results([result])
    after = driver.prepare()
    assert after.tokens < before.tokens
    assert after.messages[-1].tool_results[0].content == result.content  # the model reads it


def test_compact_context_below_the_target_still_frees_room(make_engine: EngineFactory) -> None:
    # An agent that asks before a large read gets room even when the context is under 50 %.
    engine, _ = make_engine(window=32_000, max_output=4_000)
    driver = start(engine)
    driver.until(lambda r: 0.25 < r.budget.fraction < 0.45)
    before = driver.prepare()
    call = ToolCallPart.from_args("cc2", "compact_context", {})
    driver.session.add_assistant(Message.assistant("Room before a big read.", [call]))
    result = driver.session.run_engine_tool(call)
    assert result is not None and "Compacted the conversation" in result.content
    driver.session.add_tool_results([result])
    assert driver.prepare().tokens < before.tokens


def test_read_result_pages_fit_a_small_window_without_a_second_cut(
    make_engine: EngineFactory,
) -> None:
    from contextfold.events import OutputTruncated

    engine, sink = make_engine(window=6_000, max_output=1_500)
    session = engine.new_session()
    session.add_user("Which products have 0% VAT?")
    log = "\n".join(f"SKU-{i:04d} product {i} vat {'0%' if i % 3 else '20%'}" for i in range(600))
    call = ToolCallPart.from_args("c1", "bash", {"command": "python -m tests --verbose"})
    session.add_assistant(Message.assistant("", [call]))
    ref = session.add_tool_result("c1", log).tool_results[0].ref
    assert ref is not None
    read = ToolCallPart.from_args("r1", "read_result", {"ref": ref, "pattern": "vat 0%"})
    session.add_assistant(Message.assistant("", [read]))
    page = session.run_engine_tool(read)
    assert page is not None and not page.is_error and "SKU-" in page.content
    before = len(sink.of_type(OutputTruncated))
    stored = session.add_tool_results([page])[0].tool_results[0]
    assert stored.content == page.content  # it fit: not cut again under a new ref
    assert len(sink.of_type(OutputTruncated)) == before


def test_a_resumed_session_keeps_the_tools_the_model_used_most_recently(
    make_engine: EngineFactory,
) -> None:
    engine, _ = make_engine(window=32_000, max_output=4_000)
    tools = tuple(mcp_tools())
    driver = start(engine, tools=tools)
    target = driver.prepare().deferred_tools[-1]
    session = driver.session
    session.run_engine_tool(ToolCallPart.from_args("s1", "tool_search", {"query": target}))
    used = ToolCallPart.from_args("u1", target, {"item_id": "42"})
    session.add_assistant(Message.assistant("Closing the item.", [used]))
    session.add_tool_result("u1", "closed item 42")
    session.add_user("Thanks. What next?")  # a new turn: tool_search's activation is over
    assert target in {t.name for t in driver.prepare().tools}  # kept: the most recently used

    resumed = engine.resume(session.id)
    request = resumed.prepare(system=driver.system, tools=tools)
    assert target in {t.name for t in request.tools}
    assert target not in request.deferred_tools


def test_prepare_offers_the_one_list_of_engine_tools(make_engine: EngineFactory) -> None:
    from contextfold.tools.deferral import engine_tools

    engine, _ = make_engine(window=32_000, max_output=4_000)
    few = start(engine, tools=(ToolSpec("bash", "Run a command."),)).prepare()
    many = start(engine, tools=tuple(mcp_tools())).prepare()

    assert list(few.tools) == [ToolSpec("bash", "Run a command."), *engine_tools(deferred=False)]
    assert many.deferred_tools  # held back: tool_search joins the engine's own, last
    assert [t for t in many.tools if t.source == "engine"] == engine_tools(deferred=True)
