"""The two ends of a turn: building the system prompt, and rendering the request.

The prompt is built first, so that it can be measured; the request is rendered last, once the
view is final, with the cache plan for the provider and the note for the model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache

from contextfold.budget import Zone
from contextfold.chat import SystemBlock
from contextfold.engine._deps import SessionDeps
from contextfold.engine._measure import Measurement
from contextfold.engine.request import PreparedRequest
from contextfold.messages import Message, Meta, TextPart
from contextfold.prompt.instructions import InstructionsLoader
from contextfold.prompt.sections import (
    BuiltPrompt,
    PromptBuilder,
    PromptSection,
    RenderedPrompt,
    plain_prompt,
    render_prompt,
)
from contextfold.tokens.counter import TokenCounter
from contextfold.tool_spec import ToolSpec

__all__ = [
    "LEDGER_SECTION",
    "NOTE_ID",
    "PINS_SECTION",
    "SystemPrompt",
    "build_prompt",
    "note_message",
    "render",
    "with_kept",
    "with_ledger",
    "with_pins",
]

SystemPrompt = str | PromptBuilder | Iterable[PromptSection] | None
"""What an agent gives as its system prompt: a string, a builder, or sections."""

NOTE_ID = "context-note"
"""Id of the per-request note message; it is rebuilt every turn and never stored."""


PINS_SECTION = "pins"
"""Name of the system prompt section holding the session's pins
(:mod:`contextfold.retention.pins`)."""


def with_pins(system: SystemPrompt, pins_text: str) -> SystemPrompt:
    """``system`` with the pins rendered as a cacheable section of their own (unchanged when
    there are none).

    Pins live in the system prompt rather than in the conversation (say, right after a summary)
    because compaction only ever edits the conversation: there they cannot be summarized,
    masked or dropped, they need no step to re-inject them after each compaction, and they are
    measured with the rest of the system text, so the budget counts them. As a stable section
    (after the agent's own stable ones) they change the cached prefix only when a pin is added
    or removed, which is rare, and never because a compaction happened.

    Nothing is validated here: :func:`build_prompt` does that, with its fallback.
    """
    return _with_section(system, PINS_SECTION, pins_text)


LEDGER_SECTION = "ledger"
"""Name of the system prompt section holding the artifact ledger
(:mod:`contextfold.retention.ledger`)."""


def with_ledger(system: SystemPrompt, ledger_text: str) -> SystemPrompt:
    """``system`` with the artifact ledger as a cacheable section of its own, after the pins
    (unchanged when the ledger is empty, as it is until the first compaction).

    Used while the view has no summary to send the ledger with (``engine/_turn.py``): like the
    pins, the ledger stays out of the conversation so that no compaction can summarize it away,
    and it changes only when a compaction or mask batch changed the view.
    """
    return _with_section(system, LEDGER_SECTION, ledger_text)


def with_kept(system: SystemPrompt, *, pins: str, ledger: str) -> SystemPrompt:
    """``system`` with what every request carries whatever compaction does: the rendered pins,
    then the rendered artifact ledger (each left out when empty)."""
    return with_ledger(with_pins(system, pins), ledger)


def _with_section(system: SystemPrompt, name: str, text: str) -> SystemPrompt:
    """``system`` with a stable section ``name`` holding ``text`` (unchanged without text)."""
    if not text:
        return system
    section = PromptSection(name, text, True)
    if system is None:
        return [section]
    if isinstance(system, str):
        return PromptBuilder().set("base", system).add(section)
    if isinstance(system, PromptBuilder):
        return PromptBuilder(system.sections).add(section)  # the caller's builder stays as it was
    return [*system, section]


def build_prompt(
    system: SystemPrompt, instructions: InstructionsLoader | None
) -> tuple[BuiltPrompt, str, Exception | None]:
    """The built system prompt, its stable text, and the error when the builder failed.

    On a failure the prompt is the plain concatenation of what was given: no ordering and no
    breakpoints, but a bug in a prompt section or an unreadable AGENTS.md never costs the agent
    its instructions. The caller reports the error once, as a ``ComponentDegraded`` event.
    """
    sections: list[PromptSection | str | None] = []
    try:
        builder = _builder(system)
        sections = list(builder.sections)
        if instructions is not None:
            if instructions.current is None:
                instructions.load()
            else:
                instructions.reload_if_changed()
            loaded = instructions.current
            if loaded is not None and loaded.text:
                builder.set("instructions", loaded.text)
                sections = list(builder.sections)
        built = _build(builder.sections)
        return built, built.stable_text, None
    except Exception as exc:
        if not sections and isinstance(system, str):
            sections = [system]
        text = plain_prompt(sections)
        fallback = (PromptSection("base", text, True),) if text else ()
        return BuiltPrompt(fallback, (), len(fallback)), text, exc


@lru_cache(maxsize=32)
def _build(sections: tuple[PromptSection, ...]) -> BuiltPrompt:
    """The built prompt of ``sections`` (remembered: the same sections come every turn, and a
    built prompt is a value)."""
    return PromptBuilder(sections).build()


def _builder(system: SystemPrompt) -> PromptBuilder:
    if system is None:
        return PromptBuilder()
    if isinstance(system, str):
        return PromptBuilder().set("base", system)
    if isinstance(system, PromptBuilder):
        return PromptBuilder(system.sections)  # a copy: the caller's builder stays as it was
    return PromptBuilder(system)


def note_message(text: str) -> Message:
    """The per-request note for the model: usage, deferred tools, wind-down. Never stored."""
    return Message(
        "user", (TextPart(text),), id=NOTE_ID, meta=Meta(kind="context_note", user_visible=False)
    )


def render(
    deps: SessionDeps,
    session_id: str,
    *,
    built: BuiltPrompt,
    view: Sequence[Message],
    tools: Sequence[ToolSpec],
    notes: Sequence[str],
    measurement: Measurement,
    zone: Zone,
    previous_tail: int | None,
    message_tokens: Sequence[int] | None = None,
    counter: TokenCounter | None = None,
) -> tuple[PreparedRequest, Exception | None]:
    """The request for ``deps.provider``: system blocks, cache plan, view plus the note, and
    the error when the cache plan failed (the prompt is then sent unmarked).

    ``message_tokens`` are the raw sizes of ``view``'s messages when the caller has them;
    ``counter`` counts the rest (default: ``deps.counter``; a session passes one that remembers
    the texts it counted, the system blocks being the same turn after turn).
    """
    counter = counter or deps.counter
    if message_tokens is None or len(message_tokens) != len(view):
        message_tokens = [counter.count_message(m) for m in view]
    rendered, failure = _cache_plan(
        deps, counter, session_id, built, tools, measurement, message_tokens, previous_tail
    )
    note = "\n".join(t for t in (rendered.tail_text, *notes) if t)
    messages = list(view)
    at = _note_position(view)
    extra = 0
    if note:
        note_msg = note_message(note)
        messages.insert(at, note_msg)
        # The dynamic sections were measured as part of the fixed text; only the notes are new.
        extra = round(counter.count_text("\n".join(notes)) * measurement.calibration)
    budget = measurement.budget.with_usage(conversation=measurement.budget.conversation + extra)
    request = PreparedRequest(
        messages=tuple(messages),
        system=rendered.system,
        tools=tuple(tools),
        max_tokens=budget.reserved_output,
        budget=budget,
        zone=zone,
        tokens=budget.used,
        cache_tools=rendered.cache_plan.cache_tools,
        message_breakpoints=tuple(
            i + 1 if note and i >= at else i
            for i in rendered.cache_plan.message_breakpoints
            if 0 <= i < len(view)
        ),
        prompt_cache_key=rendered.prompt_cache_key,
        note=note,
    )
    return request, failure


def _note_position(view: Sequence[Message]) -> int:
    """Where the note goes: last, but before the system messages that end the view (a host's
    reminders sent inside its messages), so that it joins the user's turn instead of making a
    user, system, user sequence the host never sent."""
    at = len(view)
    while at > 0 and view[at - 1].role == "system":
        at -= 1
    return at if at > 0 else len(view)


def _cache_plan(
    deps: SessionDeps,
    counter: TokenCounter,
    session_id: str,
    built: BuiltPrompt,
    tools: Sequence[ToolSpec],
    measurement: Measurement,
    message_tokens: Sequence[int],
    previous_tail: int | None,
) -> tuple[RenderedPrompt, Exception | None]:
    """The system blocks and cache breakpoints for ``deps.provider``; on a failure the prompt
    unmarked (never lose the prompt over a cache plan) and the error, for the caller to report."""
    same_tools = tuple(tools) == measurement.tools
    try:
        rendered = render_prompt(
            built,
            deps.provider,
            counter=counter,
            tools_tokens=measurement.raw_tools if same_tools else counter.count_tools(tools),
            message_tokens=message_tokens,
            min_cacheable_tokens=deps.model.min_cacheable_tokens,
            previous_tail=previous_tail,
            session_id=session_id,
            dynamic_placement="tail",
        )
    except Exception as exc:  # a cache plan's bug costs the cache, not the request
        return RenderedPrompt((SystemBlock(built.text),) if built.text else (), tail_text=""), exc
    return rendered, None
