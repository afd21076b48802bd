"""The system prompt: stable → dynamic order, byte-stable prefix, cache breakpoints per provider."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextfold.chat import SystemBlock
from contextfold.errors import UsageError
from contextfold.messages import Message
from contextfold.prompt.instructions import InstructionsLoader
from contextfold.prompt.sections import (
    MAX_CACHE_BREAKPOINTS,
    BuiltPrompt,
    CachePlan,
    PromptBuilder,
    PromptSection,
    SectionName,
    plain_prompt,
    plan_cache_breakpoints,
    prompt_cache_key,
    render_prompt,
)
from contextfold.wire.anthropic import to_anthropic


class WordCounter:
    """One token per whitespace-separated word: easy to reason about in assertions."""

    def count_text(self, text: str) -> int:
        return len(text.split())


COUNTER = WordCounter()


def words(n: int, word: str = "rule") -> str:
    return " ".join([word] * n)


def full_builder(turn: int = 0) -> PromptBuilder:
    return (
        PromptBuilder()
        .set(SectionName.BASE, "You are a careful coding agent.")
        .set(SectionName.INSTRUCTIONS, "Run the tests before you commit.")
        .set(SectionName.MEMORIES, "The user prefers short answers.")
        .set(SectionName.SKILLS, "Skill: release notes.")
        .set(SectionName.SCRATCHPAD, f"Plan step {turn % 7}")
        .set(SectionName.CONTEXT_STATUS, f"[Context: {40 + turn}% used]")
    )


def anthropic_system_json(
    built: BuiltPrompt, min_cacheable_tokens: int = 0
) -> list[dict[str, Any]]:
    rendered = render_prompt(
        built, "anthropic", counter=COUNTER, min_cacheable_tokens=min_cacheable_tokens
    )
    request = to_anthropic(
        [Message.user("hi")],
        system=[b.text for b in rendered.system],
        system_breakpoints=[i for i, b in enumerate(rendered.system) if b.cache],
    )
    return request.system


def stable_blocks(system: list[dict[str, Any]]) -> str:
    """The Anthropic system blocks up to and including the last cache_control, as bytes."""
    last = max(i for i, block in enumerate(system) if "cache_control" in block)
    return json.dumps(system[: last + 1], sort_keys=True)


# -- order -----------------------------------------------------------------------------------------


def test_sections_come_out_stable_first_whatever_order_they_were_added_in() -> None:
    sections = list(full_builder().sections)
    expected = [s.name for s in sections]
    for seed in range(20):
        random.Random(seed).shuffle(sections)
        built = PromptBuilder(sections).build()
        assert [s.name for s in built.sections] == expected
    assert expected == [
        "base",
        "instructions",
        "memories",
        "skills",
        "scratchpad",
        "context_status",
    ]


def test_unknown_sections_slot_in_by_their_cacheable_flag_then_by_name() -> None:
    builder = full_builder()
    builder.add(PromptSection("zeta_tools_guide", "guide", cacheable=True))
    builder.add(PromptSection("alpha_repo_map", "map", cacheable=True))
    builder.add(PromptSection("todo", "todo list", cacheable=False))
    names = [s.name for s in builder.build().sections]
    assert names == [
        "base",
        "instructions",
        "memories",
        "skills",
        "alpha_repo_map",
        "zeta_tools_guide",
        "scratchpad",
        "todo",
        "context_status",
    ]


def test_a_known_section_marked_dynamic_moves_behind_every_stable_one() -> None:
    builder = full_builder().set(SectionName.SKILLS, "Skill: changing", cacheable=False)
    built = builder.build()
    assert [s.name for s in built.sections][:3] == ["base", "instructions", "memories"]
    assert built.sections[3].name == "skills"
    assert built.stable_count == 3


def test_empty_sections_are_skipped_and_sections_are_joined_by_one_blank_line() -> None:
    built = (
        PromptBuilder()
        .set("base", "\n\n  Be brief.  \n\n")
        .set("instructions", "   \n\t")
        .set("memories", "")
        .set("context_status", "[Context: 12% used]\n")
        .build()
    )
    assert [s.name for s in built.sections] == ["base", "context_status"]
    assert built.text == "  Be brief.\n\n[Context: 12% used]"


def test_setting_a_section_again_replaces_it() -> None:
    builder = full_builder(turn=1).set(SectionName.SCRATCHPAD, "new plan")
    built = builder.build()
    assert [s.content for s in built.sections if s.name == "scratchpad"] == ["new plan"]
    assert len(built.sections) == 6


def test_unknown_names_need_an_explicit_cacheable_flag() -> None:
    with pytest.raises(UsageError, match="not a known section name"):
        PromptBuilder().set("repo_map", "...")
    with pytest.raises(UsageError):
        PromptSection("", "x", cacheable=True)


# -- breakpoints in the built prompt ---------------------------------------------------------------


def test_breakpoints_follow_the_long_lived_part_and_the_whole_stable_part() -> None:
    built = full_builder().build()
    # after memories (longest-lived part) and after skills (end of the stable prefix)
    assert built.breakpoints == (2, 3)
    assert built.stable_text.endswith("Skill: release notes.")
    assert "Context" in built.dynamic_text


def test_without_a_short_lived_stable_section_there_is_one_breakpoint() -> None:
    built = full_builder().remove(SectionName.SKILLS).build()
    assert built.breakpoints == (2,)


def test_a_prompt_of_dynamic_sections_only_has_no_breakpoint() -> None:
    built = PromptBuilder().set("context_status", "[Context: 3% used]").build()
    assert built.breakpoints == ()
    assert built.stable_text == ""


# -- stability over turns --------------------------------------------------------------------------


def test_stable_prefix_is_byte_identical_over_50_turns() -> None:
    base = words(600, "base")
    first = None
    for turn in range(50):
        built = full_builder(turn).set(SectionName.BASE, base).build()
        system = anthropic_system_json(built, min_cacheable_tokens=100)
        prefix = (built.stable_text, stable_blocks(system))
        if first is None:
            first = prefix
        assert prefix == first
        assert f"[Context: {40 + turn}% used]" in built.text
        assert built.text.startswith(built.stable_text)


def test_stable_prefix_changes_exactly_when_an_agents_md_edit_is_reloaded(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    agents = tmp_path / "AGENTS.md"
    agents.write_text("Use tabs.\n")
    loader = InstructionsLoader(tmp_path)
    instructions = loader.load().text
    seen: list[str] = []
    for turn in range(50):
        if turn == 25:
            agents.write_text("Use spaces.\n")
        if loader.reload_if_changed():
            instructions = loader.current.text if loader.current else ""
        built = full_builder(turn).set(SectionName.INSTRUCTIONS, instructions).build()
        system = anthropic_system_json(built)
        seen.append(stable_blocks(system))
    changes = [turn for turn in range(1, 50) if seen[turn] != seen[turn - 1]]
    assert changes == [25]
    assert "Use spaces." in seen[-1]


def test_with_tail_placement_the_whole_system_prompt_is_stable() -> None:
    systems = set()
    tails = set()
    for turn in range(50):
        rendered = render_prompt(
            full_builder(turn).build(), "anthropic", counter=COUNTER, dynamic_placement="tail"
        )
        systems.add(rendered.system)
        tails.add(rendered.tail_text)
        assert "Plan step" in rendered.tail_text
        assert all("Context:" not in b.text for b in rendered.system)
    assert len(systems) == 1
    assert len(tails) == 50


def test_output_does_not_depend_on_the_hash_seed() -> None:
    script = (
        "from contextfold.prompt.sections import PromptBuilder, PromptSection\n"
        "b = PromptBuilder([PromptSection(n, 'text of ' + n, c) for n, c in "
        "{('x', True), ('y', False), ('base', True), ('memories', True), ('w', True)}])\n"
        "p = b.build()\n"
        "print(repr((p.text, p.breakpoints)))\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outputs) == 1


# -- cache planning --------------------------------------------------------------------------------


def blocks(*cache: bool) -> list[SystemBlock]:
    return [SystemBlock(f"block {i}", cache=c) for i, c in enumerate(cache)]


def test_plan_puts_the_tail_on_the_last_message_and_the_system_on_the_stable_end() -> None:
    plan = plan_cache_breakpoints(
        blocks(False, True, False),
        system_tokens=[2000, 100, 50],
        message_tokens=[10] * 6,
        min_cacheable_tokens=1024,
    )
    assert plan == CachePlan(system_breakpoints=(1,), cache_tools=False, message_breakpoints=(5,))


def test_plan_keeps_the_previous_tail_so_the_next_request_still_hits() -> None:
    plan = plan_cache_breakpoints(
        blocks(True, True),
        system_tokens=[2000, 500],
        tools_tokens=1500,
        message_tokens=[300] * 10,
        min_cacheable_tokens=1024,
        previous_tail=6,
    )
    # all five candidates qualify; the budget of 4 drops the tools (lowest priority)
    assert plan.message_breakpoints == (6, 9)
    assert plan.system_breakpoints == (0, 1)
    assert plan.cache_tools is False
    assert plan.count == MAX_CACHE_BREAKPOINTS


def test_plan_caches_the_tools_when_the_budget_allows() -> None:
    plan = plan_cache_breakpoints(
        blocks(False, True),
        system_tokens=[200, 300],
        tools_tokens=1500,
        message_tokens=[100, 100],
        min_cacheable_tokens=1024,
    )
    assert plan.cache_tools is True
    assert plan.system_breakpoints == (1,)
    assert plan.message_breakpoints == (1,)


def test_without_a_stable_system_block_the_tools_end_the_prefix() -> None:
    plan = plan_cache_breakpoints(
        blocks(False),
        system_tokens=[50],
        tools_tokens=1500,
        message_tokens=[300] * 10,
        min_cacheable_tokens=1024,
        previous_tail=6,
    )
    assert plan == CachePlan(cache_tools=True, message_breakpoints=(6, 9))


def test_plan_skips_every_breakpoint_below_the_minimum_cacheable_prefix() -> None:
    plan = plan_cache_breakpoints(
        blocks(True, True),
        system_tokens=[300, 300],
        tools_tokens=200,
        message_tokens=[100, 100],
        min_cacheable_tokens=2048,
    )
    assert plan == CachePlan()
    # the same request with a bigger conversation: only the tail is long enough
    plan = plan_cache_breakpoints(
        blocks(True, True),
        system_tokens=[300, 300],
        tools_tokens=200,
        message_tokens=[100, 1500],
        min_cacheable_tokens=2048,
    )
    assert plan == CachePlan(message_breakpoints=(1,))


def test_render_for_anthropic_marks_only_planned_blocks() -> None:
    built = full_builder().set(SectionName.BASE, words(1500)).build()
    rendered = render_prompt(
        built,
        "anthropic",
        counter=COUNTER,
        tools_tokens=800,
        message_tokens=[50, 50, 50],
        min_cacheable_tokens=1024,
        previous_tail=0,
    )
    assert [b.cache for b in rendered.system] == [False, False, True, True, False, False]
    assert rendered.cache_plan.message_breakpoints == (0, 2)
    assert rendered.cache_plan.cache_tools is False
    assert rendered.prompt_cache_key is None


@given(
    cache=st.lists(st.booleans(), max_size=8),
    sizes=st.lists(st.integers(0, 5000), min_size=8, max_size=8),
    tools=st.integers(0, 5000),
    messages=st.lists(st.integers(0, 3000), max_size=30),
    minimum=st.integers(0, 4096),
    previous=st.none() | st.integers(-2, 32),
)
def test_plan_never_exceeds_four_and_never_marks_a_short_prefix(
    cache: list[bool],
    sizes: list[int],
    tools: int,
    messages: list[int],
    minimum: int,
    previous: int | None,
) -> None:
    system = blocks(*cache)
    system_tokens = sizes[: len(system)]
    plan = plan_cache_breakpoints(
        system,
        system_tokens=system_tokens,
        tools_tokens=tools,
        message_tokens=messages,
        min_cacheable_tokens=minimum,
        previous_tail=previous,
    )
    assert plan.count <= MAX_CACHE_BREAKPOINTS
    for index in plan.system_breakpoints:
        assert system[index].cache
        assert tools + sum(system_tokens[: index + 1]) >= minimum
    for index in plan.message_breakpoints:
        assert 0 <= index < len(messages)
        assert tools + sum(system_tokens) + sum(messages[: index + 1]) >= minimum
    if plan.cache_tools:
        assert tools >= max(minimum, 1)
    long_enough = tools + sum(system_tokens) + sum(messages) >= max(minimum, 1)
    if messages and long_enough:
        assert plan.message_breakpoints[-1] == len(messages) - 1


def test_plan_rejects_sizes_that_do_not_match_the_blocks() -> None:
    with pytest.raises(UsageError, match="2 system blocks"):
        plan_cache_breakpoints(blocks(True, False), system_tokens=[1])


# -- OpenAI and Ollama -----------------------------------------------------------------------------


def test_openai_gets_one_unmarked_block_and_a_key_that_never_changes_per_turn() -> None:
    keys = set()
    for turn in range(10):
        rendered = render_prompt(full_builder(turn).build(), "openai", counter=COUNTER)
        assert len(rendered.system) == 1
        assert rendered.system[0].cache is False
        assert rendered.cache_plan == CachePlan()
        assert rendered.system[0].text == full_builder(turn).build().text
        keys.add(rendered.prompt_cache_key)
    assert len(keys) == 1
    key = keys.pop()
    assert key is not None and key.startswith("contextfold-")


def test_openai_key_follows_the_session_when_there_is_one() -> None:
    built = full_builder().build()
    edited = full_builder().set(SectionName.INSTRUCTIONS, "Another rule.").build()
    assert prompt_cache_key(built, "s1") == prompt_cache_key(edited, "s1")
    assert prompt_cache_key(built, "s1") != prompt_cache_key(built, "s2")
    assert "s1" not in prompt_cache_key(built, "s1")
    # without a session the key follows the stable prefix, not the dynamic sections
    assert prompt_cache_key(built) == prompt_cache_key(full_builder(turn=9).build())
    assert prompt_cache_key(built) != prompt_cache_key(edited)


def test_ollama_gets_one_unmarked_block_and_no_key() -> None:
    rendered = render_prompt(full_builder().build(), "ollama", counter=COUNTER)
    assert rendered.system == (SystemBlock(full_builder().build().text),)
    assert rendered.prompt_cache_key is None


# -- fallback --------------------------------------------------------------------------------------


def test_plain_fallback_concatenates_in_the_given_order_and_tolerates_junk() -> None:
    text = plain_prompt(
        [
            PromptSection("context_status", "[Context: 5%]", cacheable=False),
            None,
            "  ",
            "Be brief.\n",
        ]
    )
    assert text == "[Context: 5%]\n\nBe brief."


# -- end to end: what the Anthropic adapter puts on the wire ---------------------------------------


def test_fifty_turns_through_the_anthropic_adapter_keep_the_cached_prefix() -> None:
    pytest.importorskip("anthropic")
    from contextfold.chat import ChatRequest
    from contextfold.providers.anthropic import AnthropicChat
    from contextfold.tools.deferral import ToolSpec

    model = AnthropicChat("claude-sonnet-4-5", api_key="test-key")
    tools = (ToolSpec("read_file", words(300, "read")), ToolSpec("shell", words(300, "run")))
    conversation: list[Message] = []
    previous_tail: int | None = None
    prefixes = set()
    for turn in range(50):
        conversation += [Message.user(f"step {turn}"), Message.assistant(f"done {turn}")]
        built = full_builder(turn).set(SectionName.BASE, words(1200, "base")).build()
        message_tokens = [COUNTER.count_text(m.text) for m in conversation]
        rendered = render_prompt(
            built,
            "anthropic",
            counter=COUNTER,
            tools_tokens=600,
            message_tokens=message_tokens,
            min_cacheable_tokens=1024,
            previous_tail=previous_tail,
        )
        request = ChatRequest(
            tuple(conversation),
            system=rendered.system,
            tools=tools,
            cache_tools=rendered.cache_plan.cache_tools,
            message_breakpoints=rendered.cache_plan.message_breakpoints,
        )
        wire = model.request_kwargs(request)
        markers = json.dumps(wire).count('"cache_control"')
        assert markers == rendered.cache_plan.count <= MAX_CACHE_BREAKPOINTS
        assert "cache_control" in wire["messages"][-1]["content"][-1]
        last_stable = max(i for i, b in enumerate(wire["system"]) if "cache_control" in b)
        prefixes.add(json.dumps([wire["tools"], wire["system"][: last_stable + 1]]))
        previous_tail = rendered.cache_plan.message_breakpoints[-1]
    assert len(prefixes) == 1
