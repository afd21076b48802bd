"""The value types of the engine's public API: its policy and a prepared request."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from contextfold._exceptions import ConfigError
from contextfold._truncate import MIN_TOKENS as MIN_OUTPUT_TOKENS
from contextfold.budget import ContextBudget, Thresholds, Zone
from contextfold.compaction import CompactResult, RecentWindow
from contextfold.config import Settings
from contextfold.events import Event
from contextfold.formats.anthropic import to_anthropic, tools_to_anthropic
from contextfold.formats.openai import to_openai, tools_to_openai
from contextfold.messages import Message
from contextfold.normalize import RepairReport
from contextfold.outputs import OutputLimits, OutputPolicy
from contextfold.providers.base import ChatRequest, SystemBlock
from contextfold.tools import DEFAULT_TOOL_BUDGET_SHARE, ToolSpec

__all__ = ["DEFAULT_OUTPUT_MAX_SHARE", "ContextPolicy", "PreparedRequest"]

DEFAULT_OUTPUT_MAX_SHARE = 0.05
"""Most of the effective window one tool output may take inline (the rest goes behind a ref)."""


@dataclass(frozen=True)
class ContextPolicy:
    """How the engine manages the window. Every default is DESIGN §4's, each one overridable.

    ``background_at`` is the share of the window where a compaction starts being prepared in a
    worker thread (default: halfway between ``mask_at`` and ``compact_at``); ``reserved_output``
    overrides the reply reserve (default: the model's max output, capped to a quarter of the
    window); ``awareness_note`` adds ``[Context: N% used …]`` past ``thresholds.awareness_at``.
    ``output_max_share`` caps one tool output's inline tokens to a share of the effective window,
    so that the 2,500-token default does not let a few outputs fill a small local model's window.
    """

    thresholds: Thresholds = field(default_factory=Thresholds)
    output_limits: OutputLimits = field(default_factory=OutputLimits)
    output_policy: OutputPolicy = field(default_factory=OutputPolicy)
    recent: RecentWindow = field(default_factory=RecentWindow)
    tool_budget_share: float = DEFAULT_TOOL_BUDGET_SHARE
    background: bool = True
    background_at: float | None = None
    awareness_note: bool = True
    reserved_output: int | None = None
    repair: bool = True
    output_max_share: float = DEFAULT_OUTPUT_MAX_SHARE

    def __post_init__(self) -> None:
        if not 0 < self.tool_budget_share <= 1:
            raise ConfigError(
                "tools.description_budget", f"must be in (0, 1], got {self.tool_budget_share}"
            )
        if self.recent.turns < 0:
            raise ConfigError("recent.turns", f"must be >= 0, got {self.recent.turns}")
        if not 0 < self.recent.max_share <= 1:
            raise ConfigError("recent.max_share", f"must be in (0, 1], got {self.recent.max_share}")
        if not 0 < self.output_max_share <= 1:
            raise ConfigError("output_max_share", f"must be in (0, 1], got {self.output_max_share}")
        if self.reserved_output is not None and self.reserved_output < 1:
            raise ConfigError(
                "max_output_tokens",
                f"must be a positive number of tokens, got {self.reserved_output}",
            )
        mark = self.background_at
        if mark is not None and not 0 < mark < self.thresholds.compact_at:
            raise ConfigError(
                "background_at",
                f"must be between 0 and compact_at ({self.thresholds.compact_at}), got {mark}",
            )

    def output_limits_for(self, effective_window: int) -> OutputLimits:
        """The output limits for a window: the token limit shrinks for small windows."""
        cap = max(MIN_OUTPUT_TOKENS, int(effective_window * self.output_max_share))
        if cap >= self.output_limits.max_tokens:
            return self.output_limits
        return replace(self.output_limits, max_tokens=cap)

    @property
    def background_mark(self) -> float:
        """Share of the window where background compaction starts."""
        if self.background_at is not None:
            return self.background_at
        t = self.thresholds
        return (t.mask_at + t.compact_at) / 2

    @classmethod
    def from_settings(cls, settings: Settings) -> ContextPolicy:
        """The policy a :class:`~contextfold.config.Settings` describes (unset keys: defaults)."""
        thresholds = Thresholds.from_mapping(settings.section("thresholds"))
        outputs = settings.section("outputs")
        known = {f.name for f in fields(OutputLimits)}
        limits = OutputLimits(**{k: v for k, v in outputs.items() if k in known})
        recent = RecentWindow(**settings.section("recent"))
        kwargs: dict[str, Any] = {}
        budget = settings.get("tools.description_budget")
        if budget is not None:
            kwargs["tool_budget_share"] = budget
        background = settings.get("background_compaction")
        if background is not None:
            kwargs["background"] = background
        reserved = settings.get("max_output_tokens")
        if reserved is not None:
            kwargs["reserved_output"] = reserved
        return cls(thresholds=thresholds, output_limits=limits, recent=recent, **kwargs)


@dataclass(frozen=True)
class PreparedRequest:
    """One request, ready for any provider, and what the engine did to make it fit.

    ``messages`` is the repaired view followed, when there is one, by a note for the model
    (context usage, deferred tools, wind-down) that is never stored. ``system`` holds the prompt
    blocks (``cache=True`` on Anthropic breakpoints); ``message_breakpoints`` index ``messages``.
    ``zone`` is where the context stood before the engine acted, ``budget`` where it stands now.
    """

    messages: tuple[Message, ...]
    system: tuple[SystemBlock, ...]
    tools: tuple[ToolSpec, ...]
    max_tokens: int
    budget: ContextBudget
    zone: Zone
    tokens: int
    cache_tools: bool = False
    message_breakpoints: tuple[int, ...] = ()
    prompt_cache_key: str | None = None
    deferred_tools: tuple[str, ...] = ()
    compaction: CompactResult | None = None
    repairs: RepairReport = field(default_factory=RepairReport)
    events: tuple[Event, ...] = ()
    note: str = ""

    @property
    def system_text(self) -> str:
        """The system prompt as one string."""
        return "\n\n".join(b.text for b in self.system)

    def to_chat_request(self, **overrides: Any) -> ChatRequest:
        """The provider-neutral request for a :class:`~contextfold.providers.ChatModel`."""
        request = ChatRequest(
            messages=self.messages,
            system=self.system,
            tools=self.tools,
            max_tokens=self.max_tokens,
            cache_tools=self.cache_tools,
            message_breakpoints=self.message_breakpoints,
            prompt_cache_key=self.prompt_cache_key,
        )
        return replace(request, **overrides) if overrides else request

    def to_openai(self, *, model: str | None = None) -> dict[str, Any]:
        """Keyword arguments for the official SDK's ``client.chat.completions.create``.

        With ``model`` they are complete: ``client.chat.completions.create(**request.to_openai(
        model="gpt-4.1"))``; give the reply to ``session.add_assistant`` as it comes back.
        Without it, they are the request's wire form alone (messages, tools, reply budget), to
        inspect or measure. The reply budget goes in ``max_completion_tokens``, which OpenAI's
        newer models require.
        """
        out: dict[str, Any] = {} if model is None else {"model": model}
        out["messages"] = to_openai(self.messages, system=self.system_text)
        if self.tools:
            out["tools"] = tools_to_openai(self.tools)
        if self.prompt_cache_key:
            out["prompt_cache_key"] = self.prompt_cache_key
        out["max_completion_tokens"] = self.max_tokens
        return out

    def to_anthropic(self, *, model: str | None = None) -> dict[str, Any]:
        """Keyword arguments for the official SDK's ``client.messages.create``, cache
        breakpoints included.

        With ``model`` they are complete: ``client.messages.create(**request.to_anthropic(
        model="claude-sonnet-4-5"))``; give the reply to ``session.add_assistant`` as it comes
        back. Without it, they are the request's wire form alone, to inspect or measure.
        """
        request = to_anthropic(
            self.messages,
            system=[b.text for b in self.system],
            system_breakpoints=[i for i, b in enumerate(self.system) if b.cache],
            message_breakpoints=self.message_breakpoints,
        )
        out: dict[str, Any] = {} if model is None else {"model": model}
        out.update(request.kwargs())
        if self.tools:
            out["tools"] = tools_to_anthropic(self.tools, cache_last=self.cache_tools)
        out["max_tokens"] = self.max_tokens
        return out
