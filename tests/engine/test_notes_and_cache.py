"""The note for the model, and a request that stays cache-friendly turn after turn."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest

from contextfold import ContextPolicy, InstructionsLoader, Message, PreparedRequest
from contextfold.budget import Thresholds
from contextfold.providers.anthropic import AnthropicChat
from contextfold.tokens.counters import TokenCounter
from tests.engine.helpers import EngineFactory, listing, start

SONNET = "anthropic/claude-sonnet-4-5"


def _without_note(request: PreparedRequest) -> list[Message]:
    return [m for m in request.messages if m.meta.kind != "context_note"]


def _cache_markers(wire: dict[str, Any]) -> int:
    return json.dumps(wire).count('"cache_control"')


def _cached_prefixes(request: PreparedRequest, counter: TokenCounter) -> list[int]:
    """Tokens before each cache breakpoint, in Anthropic's order: tools, system, messages."""
    tools = counter.count_tools(request.tools)
    prefixes = [tools] if request.cache_tools else []
    total = tools
    for block in request.system:
        total += counter.count_text(block.text)
        if block.cache:
            prefixes.append(total)
    for index, message in enumerate(request.messages):
        total += counter.count_message(message)
        if index in request.message_breakpoints:
            prefixes.append(total)
    return prefixes


def test_awareness_note_is_the_last_message_and_never_stored(make_engine: EngineFactory) -> None:
    policy = ContextPolicy(
        background=False, cost_schedule=False, thresholds=Thresholds(awareness_at=0.4)
    )
    engine, _ = make_engine(policy=policy, provider="anthropic")
    driver = start(engine)
    assert driver.turn().note == ""  # below awareness_at: no note
    request = driver.until(lambda r: bool(r.note))

    assert request.budget.fraction >= 0.4
    note = request.messages[-1]
    assert note.text == request.note
    assert note.text.startswith("[Context: ") and "% used" in note.text
    shown = re.match(r"\[Context: (\d+)% used", note.text)
    assert shown is not None and abs(int(shown[1]) - 100 * request.budget.fraction) < 2
    assert "compact_context" in note.text
    # The model got it last, after every cache breakpoint (the cached prefix stays the same).
    sent = driver.model.requests[-1]
    assert sent.messages[-1].text == note.text
    assert request.message_breakpoints
    assert max(request.message_breakpoints) < len(request.messages) - 1
    wire = request.to_anthropic()
    last_blocks = wire["messages"][-1]["content"]
    assert "cache_control" not in json.dumps(last_blocks[-1])
    # Never part of the transcript or of the view.
    stored = [m for _, m in engine.store.iter_messages(driver.session.id)]
    assert not any("[Context:" in m.text for m in stored)
    assert not any("[Context:" in m.text for m in driver.session.view)
    following = driver.turn()
    assert sum("[Context:" in m.text for m in following.messages) == 1


@pytest.mark.parametrize("system_repeats", [8, 60])
def test_fifty_turns_without_edits_extend_one_cached_prefix(
    make_engine: EngineFactory, system_repeats: int
) -> None:
    """Stable system blocks and tools, append-only messages (the note aside), and a cache plan
    Anthropic accepts: at most 4 breakpoints, none on a prefix too short to be cached."""
    policy = ContextPolicy(
        background=False, cost_schedule=False, thresholds=Thresholds(awareness_at=0.01)
    )
    engine, _ = make_engine(SONNET, policy=policy)
    base = "You are a careful coding agent; read before you edit and run the tests. "
    driver = start(engine, system=base * system_repeats)
    for _ in range(50):
        driver.turn()
    requests = driver.requests
    assert list(engine.store.iter_edits(driver.session.id)) == []
    minimum = engine.model.min_cacheable_tokens
    chat = AnthropicChat("claude-sonnet-4-5")
    for previous, current in itertools.pairwise(requests):
        assert [b.text for b in current.system] == [b.text for b in previous.system]
        assert current.tools == previous.tools
        earlier = _without_note(previous)
        assert list(current.messages[: len(earlier)]) == earlier
        assert current.note and current.messages[-1].meta.kind == "context_note"
    marked = 0
    for request in requests:
        prefixes = _cached_prefixes(request, engine.counter)
        assert len(prefixes) <= 4
        assert all(p >= minimum for p in prefixes), prefixes
        assert _cache_markers(request.to_anthropic()) == len(prefixes)
        assert _cache_markers(chat.request_kwargs(request.to_chat_request())) == len(prefixes)
        marked += bool(prefixes)
    assert marked >= 45  # once the prefix is long enough, every request is cached
    if system_repeats == 8:  # a short system prompt: the first requests are too short to cache
        assert _cached_prefixes(requests[0], engine.counter) == []
    else:
        assert all(any(b.cache for b in r.system) for r in requests)


def test_agents_md_edit_changes_the_system_prompt_only_then(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    agents = project / "AGENTS.md"
    agents.write_text("Run the tests with pytest -q.\n", encoding="utf-8")
    engine, _ = make_engine(instructions=InstructionsLoader(project, include_global=False))
    driver = start(engine)
    systems = []
    for turn in range(6):
        if turn == 3:
            agents.write_text(
                "Run the tests with pytest -q.\nNever edit generated files.\n", encoding="utf-8"
            )
        systems.append(driver.turn().system_text)

    assert "Run the tests with pytest -q." in systems[0]
    assert systems[0] == systems[1] == systems[2]
    assert systems[3] != systems[2] and "Never edit generated files." in systems[3]
    assert systems[3] == systems[4] == systems[5]
    # The conversation itself still only grew.
    requests = driver.requests
    assert list(requests[3].messages[: len(requests[2].messages)]) == list(requests[2].messages)


def test_tool_outputs_enter_the_request_cut_with_a_ref(make_engine: EngineFactory) -> None:
    engine, _ = make_engine()
    driver = start(engine, output=lambda turn: listing(turn, lines=2_000))
    driver.turn()
    request = driver.prepare()
    result = request.messages[-1].tool_results[0]
    assert result.ref is not None
    assert engine.counter.count_text(result.content) <= 0.06 * engine.effective_window
    assert driver.session.read_result(result.ref, pattern="f1999").content.count("f1999") >= 1
