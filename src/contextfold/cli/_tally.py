"""Token counts of one transcript by role and by kind, for ``contextfold count``.

Only what the model would read is counted: messages hidden from the agent are left out (and
reported), and the tool definitions the transcript recorded are added. The by-role and by-kind
figures both add up to the total: template tokens a counter charges around the content (role
markers, one per message and per tool call) go to a ``framing`` kind, so nothing is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from contextfold.messages import (
    ImagePart,
    Message,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from contextfold.model_registry import ModelInfo, ModelRegistry
from contextfold.tokens.counters import (
    IMAGE_TOKENS,
    IMAGE_TOKENS_LOW_DETAIL,
    ChatTemplate,
    TiktokenCounter,
    TokenCounter,
    counter_for,
)
from contextfold.transcripts.transcript import Transcript

__all__ = [
    "DEFAULT_MODEL",
    "KINDS",
    "ROLES",
    "ModelChoice",
    "Recorded",
    "TranscriptCount",
    "choose_model",
    "count_transcript",
    "counter_label",
]

DEFAULT_MODEL = "gpt-4o"
"""The model counts are made for when neither ``--model``, the transcript, nor the ``model``
setting names one the registry knows: its o200k tokenizer counts exactly, and its 128K window is
the size most agent models share."""

ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")
KINDS: tuple[str, ...] = (
    "system",
    "user text",
    "assistant text",
    "thinking",
    "tool calls",
    "tool results",
    "summaries",
    "images",
    "tool definitions",
    "framing",
)
"""Every kind reported, in display order. ``framing`` holds a counter's template tokens."""


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """The model a transcript is measured against, and why that one."""

    info: ModelInfo
    source: str
    """``"--model"``, ``"transcript"``, ``"setting model (<where>)"`` or ``"default"``, with
    ``", --window"`` appended when the window was overridden."""


@dataclass(frozen=True, slots=True)
class Recorded:
    """The last prompt size the transcript's provider reported, and our count of that prompt."""

    prompt_tokens: int
    message_index: int
    """Index in the transcript of the assistant message whose call reported it."""
    our_tokens: int


@dataclass
class TranscriptCount:
    """What ``contextfold count`` reports for one transcript (and its subagents)."""

    label: str
    transcript: Transcript
    model: ModelChoice
    counter: str
    exact: bool
    by_role: dict[str, int]
    by_kind: dict[str, int]
    hidden_messages: int
    recorded: Recorded | None
    subagents: list[TranscriptCount] = field(default_factory=list)

    @property
    def total(self) -> int:
        """Tokens of the visible messages plus the tool definitions."""
        return sum(self.by_kind.values())

    @property
    def window_share(self) -> float:
        """``total`` as a fraction of the model's context window."""
        return self.total / self.model.info.context_window

    def to_json(self) -> dict[str, Any]:
        """The JSON form ``count --json`` prints."""
        t = self.transcript
        recorded = self.recorded
        return {
            "label": self.label,
            "path": t.path,
            "format": t.format,
            "session_id": t.session_id,
            "title": t.title,
            "messages": len(t.messages),
            "hidden_messages": self.hidden_messages,
            "recorded_compactions": len(t.compactions),
            "model": {
                "name": self.model.info.name,
                "provider": self.model.info.provider,
                "source": self.model.source,
                "context_window": self.model.info.context_window,
            },
            "counter": {"name": self.counter, "exact": self.exact},
            "tokens": {"total": self.total, "by_role": self.by_role, "by_kind": self.by_kind},
            "window_share": round(self.window_share, 6),
            "recorded_usage": None
            if recorded is None
            else {
                "last_prompt_tokens": recorded.prompt_tokens,
                "message_index": recorded.message_index,
                "our_count_of_that_prompt": recorded.our_tokens,
            },
            "subagents": [s.to_json() for s in self.subagents],
        }


def choose_model(
    registry: ModelRegistry,
    *,
    option: str | None,
    recorded: str | None,
    setting: str | None,
    setting_source: str,
    window: int | None,
) -> ModelChoice:
    """The model to measure against: ``--model``, else the transcript's own model when the
    registry knows it, else the ``model`` setting, else :data:`DEFAULT_MODEL`; ``window``
    (``--window``) replaces its context window. An unknown ``--model`` raises
    :class:`~contextfold.UnknownModelError`; an unknown recorded model is passed over."""
    choice: ModelChoice | None = None
    if option:
        choice = ModelChoice(registry.get(option), "--model")
    elif recorded and (found := registry.find(recorded)) is not None:
        choice = ModelChoice(found, "transcript")
    elif setting and (found := registry.find(setting)) is not None:
        choice = ModelChoice(found, f"setting model ({setting_source})")
    else:
        choice = ModelChoice(registry.get(DEFAULT_MODEL), "default")
    if window is not None:
        # The reply reserve cannot exceed the window it belongs to.
        info = replace(
            choice.info,
            context_window=window,
            max_output_tokens=min(choice.info.max_output_tokens, window),
        )
        choice = ModelChoice(info, choice.source + ", --window")
    return choice


def counter_label(counter: TokenCounter) -> tuple[str, bool]:
    """``(label, exact)`` for the counter: ``"o200k_base"`` is exact, a scaled encoding or the
    heuristic is an estimate."""
    exact = isinstance(counter, TiktokenCounter) and counter.scale == 1.0
    return counter.name, exact


def count_transcript(
    transcript: Transcript, model: ModelChoice, label: str, subagents: Sequence[TranscriptCount]
) -> TranscriptCount:
    """Count ``transcript`` with the counter of ``model``'s tokenizer."""
    counter = counter_for(model.info)
    by_role = dict.fromkeys(ROLES, 0)
    by_kind = dict.fromkeys(KINDS, 0)
    hidden = 0
    for message in transcript.messages:
        if not message.meta.agent_visible:
            hidden += 1
            continue
        tokens = counter.count_message(message)
        by_role[message.role] += tokens
        content = _add_parts(message, counter, by_kind)
        by_kind["framing"] += tokens - content
    by_kind["tool definitions"] = counter.count_tools(transcript.tools)
    name, exact = counter_label(counter)
    return TranscriptCount(
        label=label,
        transcript=transcript,
        model=model,
        counter=name,
        exact=exact,
        by_role=by_role,
        by_kind=by_kind,
        hidden_messages=hidden,
        recorded=_recorded(transcript, counter),
        subagents=list(subagents),
    )


def _add_parts(message: Message, counter: TokenCounter, by_kind: dict[str, int]) -> int:
    """Add each part's content tokens to its kind; the sum added."""
    template = getattr(counter, "template", None) or ChatTemplate()
    text_kind = {"system": "system", "tool": "tool results"}.get(message.role, "")
    text_kind = text_kind or f"{message.role} text"
    added = 0

    def add(kind: str, tokens: int) -> None:
        nonlocal added
        by_kind[kind] += tokens
        added += tokens

    for part in message.parts:
        if isinstance(part, SummaryPart):
            add("summaries", counter.count_text(part.text))
        elif isinstance(part, TextPart):
            add(text_kind, counter.count_text(part.text))
        elif isinstance(part, ToolCallPart):
            # The per-call template tokens are the call's own markup, so they count with it.
            calls = counter.count_text(part.name) + counter.count_text(part.arguments)
            add("tool calls", calls + template.per_tool_call)
        elif isinstance(part, ToolResultPart):
            add("tool results", counter.count_text(part.content))
            for image in part.images:
                add("images", _image_tokens(image))
        elif isinstance(part, ImagePart):
            add("images", _image_tokens(part))
        elif isinstance(part, ThinkingPart):
            add("thinking", counter.count_text(part.text or part.redacted_data or ""))
    return added


def _image_tokens(part: ImagePart) -> int:
    # The flat figures every counter charges (contextfold.tokens.counters).
    return IMAGE_TOKENS_LOW_DETAIL if part.detail == "low" else IMAGE_TOKENS


def _recorded(transcript: Transcript, counter: TokenCounter) -> Recorded | None:
    """The last reported prompt size, next to our count of the same prompt: the messages
    before that call, from the last recorded compaction on (the agent's context restarted
    there)."""
    reports = [(i, u) for i, u in transcript.usages() if u.input_tokens > 0]
    if not reports:
        return None
    index, usage = reports[-1]
    start = max((c.index for c in transcript.compactions if c.index < index), default=0)
    prompt = transcript.messages[start:index]
    ours = counter.count_request(prompt, tools=transcript.tools)
    return Recorded(usage.input_tokens, index, ours)
