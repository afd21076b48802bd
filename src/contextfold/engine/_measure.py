"""How big the next request is, by component, and which zone that puts it in.

Token figures come in two units. The *estimate* is calibrated on the provider's own reports
(:class:`~contextfold.tokens.estimator.ContextSizeEstimator`) and decides the zone. Compaction
counts
*raw* counter tokens (cached per message), so the targets it gets are converted: a target share
of the window becomes ``share × window / calibration − the raw fixed part`` (system + tools).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from contextfold.budget import ContextBudget, Thresholds, Zone
from contextfold.engine._sizes import ViewSizes
from contextfold.engine.learned_window import SessionWindow
from contextfold.messages import Message
from contextfold.prompt.sections import BuiltPrompt
from contextfold.tokens.estimator import Calibration, ContextSizeEstimator
from contextfold.tool_spec import ToolSpec

__all__ = ["Measurement", "awareness_note", "measure"]


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


def measure(
    thresholds: Thresholds,
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
    zone = budget.zone(thresholds)
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
