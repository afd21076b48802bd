"""The measuring and rendering steps of a turn (used by :class:`~contextfold.engine.Session`).

Token figures come in two units. The *estimate* is calibrated on the provider's own reports
(:class:`~contextfold.tokens.ContextSizeEstimator`) and decides the zone. Compaction counts
*raw* counter tokens (cached per message), so the targets it gets are converted: a target share
of the window becomes ``share × window / calibration − the raw fixed part`` (system + tools).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from contextfold._engine_sizes import ViewSizes
from contextfold._engine_window import SessionWindow
from contextfold.budget import ContextBudget, Zone
from contextfold.instructions import InstructionsLoader
from contextfold.messages import Message, Meta, TextPart
from contextfold.prompt import (
    BuiltPrompt,
    PromptBuilder,
    PromptSection,
    RenderedPrompt,
    plain_prompt,
    render_prompt,
)
from contextfold.providers.base import SystemBlock
from contextfold.tokens import Calibration, ContextSizeEstimator
from contextfold.tools import ToolSpec

if TYPE_CHECKING:
    from contextfold._engine_session import Session, SystemPrompt
    from contextfold._engine_types import PreparedRequest
    from contextfold.engine import ContextEngine

__all__ = ["NOTE_ID", "Measurement", "awareness_note", "build_prompt", "measure", "render"]

NOTE_ID = "context-note"
"""Id of the per-request note message; it is rebuilt every turn and never stored."""


@dataclass(frozen=True, slots=True)
class Measurement:
    """How big the next request is, by component, and what that calls for."""

    tokens: int
    """Calibrated estimate of the whole request."""
    fixed_tokens: int
    """Calibrated estimate of the system prompt and tool definitions."""
    raw_fixed: int
    """The same in raw counter tokens (what compaction targets are offset by)."""
    calibration: float
    budget: ContextBudget
    zone: Zone
    raw_conversation: int = 0
    """The view in raw counter tokens."""
    offset: int = 0
    """How far the (provider-anchored) estimate sits above the counted size, in tokens."""
    fixed_text: str = ""
    """The system text the request was measured with."""
    tools: tuple[ToolSpec, ...] = ()
    """The tools the request was measured with."""
    raw_tools: int = 0
    """Raw counter tokens of those tools' definitions."""
    messages: int = 0
    """Messages in the view."""
    fit: Calibration = field(default_factory=Calibration)
    """How the provider's counts relate to the counter's (``calibration`` is its scale)."""

    @property
    def effective_window(self) -> int:
        """Tokens a request may take."""
        return self.budget.effective_window

    @property
    def fraction(self) -> float:
        """Share of the effective window in use."""
        return self.tokens / self.effective_window if self.effective_window else 1.0

    @property
    def remaining(self) -> int:
        """Tokens left in the effective window."""
        return max(0, self.effective_window - self.tokens)

    @property
    def raw_window(self) -> int:
        """The effective window in raw counter tokens."""
        return max(1, int(self.effective_window / self.calibration))

    def conversation_target(self, share: float) -> int:
        """Raw conversation tokens that make the whole request ``share`` of the window.

        The offset between the anchored estimate and the counted size is taken out first, so a
        provider that counts more than our counter does still gets a request that fits.
        """
        budget = share * self.effective_window - max(0, self.offset)
        return max(0, int(budget / self.calibration) - self.raw_fixed)

    def after_compaction(self, raw_conversation: int, messages: int) -> int:
        """The estimate once compaction left a view of ``messages`` messages and
        ``raw_conversation`` counter tokens.

        What was freed is priced with the calibration (content and per-message framing apart),
        then scaled down by how much less the provider counted this conversation than the
        calibration does: a server that leaves tool calls out of its template, say, frees less
        when they go than we counted for them. Never scaled up: over-pricing what was freed is
        what would make the next request overflow.
        """
        fit = self.fit
        modelled = fit.messages_tokens(self.raw_conversation, self.messages)
        freed = modelled - fit.messages_tokens(raw_conversation, messages)
        if modelled > 0:
            freed = round(freed * min(1.0, self.budget.conversation / modelled))
        return max(0, self.tokens - freed)


def build_prompt(
    system: SystemPrompt, instructions: InstructionsLoader | None
) -> tuple[BuiltPrompt, str, Exception | None]:
    """The built system prompt, its stable text, and the error when the builder failed.

    On a failure the prompt is the plain concatenation of what was given (graceful degradation,
    reference/000 §8): no ordering, no breakpoints, but the agent keeps its instructions.
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
        built = builder.build()
        return built, built.stable_text, None
    except Exception as exc:
        if not sections and isinstance(system, str):
            sections = [system]
        text = plain_prompt(sections)
        fallback = (PromptSection("base", text, True),) if text else ()
        return BuiltPrompt(fallback, (), len(fallback)), text, exc


def _builder(system: SystemPrompt) -> PromptBuilder:
    if system is None:
        return PromptBuilder()
    if isinstance(system, str):
        return PromptBuilder().set("base", system)
    if isinstance(system, PromptBuilder):
        return PromptBuilder(system.sections)  # a copy: the caller's builder stays as it was
    return PromptBuilder(system)


def measure(
    engine: ContextEngine,
    window: SessionWindow,
    estimator: ContextSizeEstimator,
    view: Sequence[Message],
    fixed_text: str,
    tools: Iterable[ToolSpec],
    built: BuiltPrompt,
    sizes: ViewSizes,
) -> Measurement:
    """Measure the request ``fixed_text + tools + view`` by component and find its zone.

    ``view`` is a session view (only agent-visible messages); ``sizes`` holds the raw counts of
    its messages (see :class:`ViewSizes`); ``window`` is the session's (a provider's stated
    limit may have made it smaller than the model's).
    """
    tools = list(tools)
    estimate = estimator.estimate(view, system=fixed_text, tools=tools, all_visible=True)
    factor = estimate.calibration
    raw_fixed, raw_tools = sizes.fixed(fixed_text, tools)
    raw_instructions = sizes.text(
        "\n\n".join(s.content for s in built.sections if s.name == "instructions")
    )
    fixed = round(raw_fixed * factor)
    tools_tokens = round(raw_tools * factor)
    instructions_tokens = round(raw_instructions * factor)
    budget = ContextBudget.for_model(
        window.model_for_budget,
        reserved_output=window.reserved_output,
        system=max(0, fixed - tools_tokens - instructions_tokens),
        instructions=instructions_tokens,
        tools=tools_tokens,
        conversation=max(0, estimate.tokens - fixed),
    )
    zone = budget.zone(engine.policy.thresholds)
    raw_conversation = sizes.total
    offset = budget.used - round((raw_fixed + raw_conversation) * factor)
    return Measurement(
        budget.used,
        fixed,
        raw_fixed,
        factor,
        budget,
        zone,
        raw_conversation,
        offset,
        fixed_text,
        tuple(tools),
        raw_tools,
        len(view),
        estimate.fit,
    )


def awareness_note(m: Measurement) -> str:
    """The context-awareness line for the model past the awareness threshold."""
    return (
        f"[Context: {m.fraction:.0%} used ({m.tokens:,} of {m.effective_window:,} tokens). "
        "Call compact_context to free space before large reads or long outputs.]"
    )


def note_message(text: str) -> Message:
    """The per-request note for the model: usage, deferred tools, wind-down. Never stored."""
    return Message(
        "user", (TextPart(text),), id=NOTE_ID, meta=Meta(kind="context_note", user_visible=False)
    )


def render(
    engine: ContextEngine,
    session: Session,
    *,
    built: BuiltPrompt,
    view: Sequence[Message],
    tools: Sequence[ToolSpec],
    notes: Sequence[str],
    measurement: Measurement,
    zone: Zone,
    previous_tail: int | None,
    message_tokens: Sequence[int] | None = None,
) -> PreparedRequest:
    """The request for ``engine.provider``: system blocks, cache plan, view plus the note.

    ``message_tokens`` are the raw sizes of ``view``'s messages when the caller has them.
    """
    from contextfold._engine_types import PreparedRequest

    counter = engine.counter
    if message_tokens is None or len(message_tokens) != len(view):
        message_tokens = [counter.count_message(m) for m in view]
    same_tools = tuple(tools) == measurement.tools
    try:
        rendered = render_prompt(
            built,
            engine.provider,
            counter=counter,
            tools_tokens=measurement.raw_tools if same_tools else counter.count_tools(tools),
            message_tokens=message_tokens,
            min_cacheable_tokens=engine.model.min_cacheable_tokens,
            previous_tail=previous_tail,
            session_id=session.id,
            dynamic_placement="tail",
        )
    except Exception:  # never lose the prompt over a cache plan: send it unmarked
        rendered = RenderedPrompt((SystemBlock(built.text),) if built.text else (), tail_text="")
    note = "\n".join(t for t in (rendered.tail_text, *notes) if t)
    messages = list(view)
    extra = 0
    if note:
        note_msg = note_message(note)
        messages.append(note_msg)
        # The dynamic sections were measured as part of the fixed text; only the notes are new.
        extra = round(counter.count_text("\n".join(notes)) * measurement.calibration)
    budget = measurement.budget.with_usage(conversation=measurement.budget.conversation + extra)
    return PreparedRequest(
        messages=tuple(messages),
        system=rendered.system,
        tools=tuple(tools),
        max_tokens=budget.reserved_output,
        budget=budget,
        zone=zone,
        tokens=budget.used,
        cache_tools=rendered.cache_plan.cache_tools,
        message_breakpoints=tuple(
            i for i in rendered.cache_plan.message_breakpoints if 0 <= i < len(view)
        ),
        prompt_cache_key=rendered.prompt_cache_key,
        note=note,
    )
