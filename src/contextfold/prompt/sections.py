"""The system prompt as ordered sections, with prompt-cache breakpoints.

Providers cache a request by its *prefix*: Anthropic at explicit ``cache_control`` breakpoints,
OpenAI and Ollama (and vLLM, llama.cpp) automatically, on the longest prefix they have seen
before. Either way one changed byte early in the request makes everything after it a miss. So
:class:`PromptBuilder` puts the sections that rarely change first and the ones that change every
turn last, in a fixed order that does not depend on the order they were added in:

====  ===================  =========  =============================================
rank  name                 cacheable  changes when
====  ===================  =========  =============================================
0     ``base``             yes        never (the agent's own instructions)
1     ``instructions``     yes        an AGENTS.md file is edited
2     ``memories``         yes        a session starts
3     ``skills``           yes        a skill is activated or deactivated
4     any other name       yes        unknown, so after every known stable section
5     ``scratchpad``       no         potentially every turn
6     any other name       no         unknown, so before the context status
7     ``context_status``   no         every turn
====  ===================  =========  =============================================

All cacheable sections come before all dynamic ones whatever their name; sections of the same
rank are ordered by name. Empty sections are skipped and sections are joined by
:data:`SECTION_SEPARATOR`, so the same inputs always give the same bytes: nothing here reads a
clock, and no dict or set order leaks into the output.

:meth:`PromptBuilder.build` marks cache breakpoint *candidates*: after the last cacheable section,
and after the last long-lived one (base, instructions, memories) when a shorter-lived cacheable
section (skills, unknown names) follows it, so activating a skill mid-session still leaves the
long-lived part of the prompt cached. :func:`plan_cache_breakpoints` then chooses, for a whole
Anthropic request, at most :data:`MAX_CACHE_BREAKPOINTS` breakpoints among the system
candidates, the tools and the conversation tail; :func:`render_prompt` does both for one provider.

Dynamic sections rendered inside the system prompt sit *before* the conversation, so they change
the prefix of the whole conversation every turn and no provider can reuse the cached conversation.
``render_prompt(..., dynamic_placement="tail")`` moves them out of the system prompt into
:attr:`RenderedPrompt.tail_text`, for the caller to send after the conversation instead.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Literal, Protocol, TypeAlias

from contextfold.chat import SystemBlock
from contextfold.errors import UsageError
from contextfold.model_registry import Provider
from contextfold.wire.anthropic_request import MAX_CACHE_BREAKPOINTS

__all__ = [
    "MAX_CACHE_BREAKPOINTS",
    "SECTION_SEPARATOR",
    "BuiltPrompt",
    "CachePlan",
    "DynamicPlacement",
    "PromptBuilder",
    "PromptSection",
    "RenderedPrompt",
    "SectionName",
    "TextCounter",
    "plain_prompt",
    "plan_cache_breakpoints",
    "prompt_cache_key",
    "render_prompt",
]

SECTION_SEPARATOR = "\n\n"
"""What joins two sections in the full text (and in the plain fallback)."""

PROMPT_CACHE_KEY_PREFIX = "contextfold-"
"""Start of every OpenAI ``prompt_cache_key`` made here, so the keys are recognisable."""

_CACHE_KEY_HEX_DIGITS = 24
"""Hex digits of SHA-256 kept in a cache key: 96 bits, collision-free in practice, and short."""

DynamicPlacement: TypeAlias = Literal["system", "tail"]
"""Where dynamic sections go: at the end of the system prompt, or after the conversation."""


class SectionName(StrEnum):
    """The known section names, which have a fixed place in the prompt."""

    BASE = "base"
    INSTRUCTIONS = "instructions"
    MEMORIES = "memories"
    SKILLS = "skills"
    SCRATCHPAD = "scratchpad"
    CONTEXT_STATUS = "context_status"


@dataclass(frozen=True, slots=True)
class _Slot:
    rank: int
    cacheable: bool
    long_lived: bool


_SLOTS: Mapping[str, _Slot] = {
    SectionName.BASE: _Slot(0, cacheable=True, long_lived=True),
    SectionName.INSTRUCTIONS: _Slot(1, cacheable=True, long_lived=True),
    SectionName.MEMORIES: _Slot(2, cacheable=True, long_lived=True),
    SectionName.SKILLS: _Slot(3, cacheable=True, long_lived=False),
    SectionName.SCRATCHPAD: _Slot(5, cacheable=False, long_lived=False),
    SectionName.CONTEXT_STATUS: _Slot(7, cacheable=False, long_lived=False),
}
_UNKNOWN_CACHEABLE_RANK = 4
_UNKNOWN_DYNAMIC_RANK = 6

# Leading blank lines would make two otherwise equal prompts differ in bytes only.
_LEADING_BLANK_LINES = re.compile(r"\A(?:[ \t]*\r?\n)+")


@dataclass(frozen=True, slots=True)
class PromptSection:
    """One named piece of the system prompt; ``cacheable`` if it rarely changes."""

    name: str
    content: str
    cacheable: bool

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise UsageError(f"a prompt section needs a non-empty name, got {self.name!r}")
        if not isinstance(self.content, str):
            raise UsageError(
                f"prompt section {self.name!r}: content must be str, "
                f"got {type(self.content).__name__}"
            )

    @classmethod
    def known(cls, name: SectionName | str, content: str) -> PromptSection:
        """A section whose ``cacheable`` flag is the default for its known name."""
        slot = _SLOTS.get(str(name))
        if slot is None:
            known = ", ".join(_SLOTS)
            raise UsageError(f"{name!r} is not a known section name (known: {known})")
        return cls(str(name), content, slot.cacheable)


def _sort_key(section: PromptSection) -> tuple[bool, int, str]:
    slot = _SLOTS.get(section.name)
    if slot is not None:
        rank = slot.rank
    else:
        rank = _UNKNOWN_CACHEABLE_RANK if section.cacheable else _UNKNOWN_DYNAMIC_RANK
    # ``not cacheable`` first: every stable section precedes every dynamic one.
    return (not section.cacheable, rank, section.name)


def _is_long_lived(section: PromptSection) -> bool:
    slot = _SLOTS.get(section.name)
    return slot is not None and slot.long_lived and section.cacheable


def _trimmed(content: str) -> str:
    return _LEADING_BLANK_LINES.sub("", content).rstrip()


class TextCounter(Protocol):
    """Anything that counts the tokens of a text (``contextfold.tokens.counters.TokenCounter``
    does)."""

    def count_text(self, text: str) -> int: ...


@dataclass(frozen=True, slots=True)
class BuiltPrompt:
    """The ordered, non-empty sections of a system prompt and where a cache may end.

    ``sections`` are trimmed and in final order; the first ``stable_count`` are the cacheable
    ones. ``breakpoints`` are ascending indexes into ``sections``: the last one ends the whole
    stable prefix, an earlier one ends its long-lived part.
    """

    sections: tuple[PromptSection, ...]
    breakpoints: tuple[int, ...]
    stable_count: int

    @property
    def text(self) -> str:
        """The whole system prompt as one string."""
        return SECTION_SEPARATOR.join(s.content for s in self.sections)

    @property
    def stable_text(self) -> str:
        """The cacheable sections only: the part that must not change from turn to turn."""
        return SECTION_SEPARATOR.join(s.content for s in self.sections[: self.stable_count])

    @property
    def dynamic_text(self) -> str:
        """The dynamic sections only (scratchpad, context status, ...)."""
        return SECTION_SEPARATOR.join(s.content for s in self.sections[self.stable_count :])

    @property
    def stable_digest(self) -> str:
        """SHA-256 (hex) of the stable text: equal digests, equal cacheable prefix."""
        return hashlib.sha256(self.stable_text.encode("utf-8")).hexdigest()

    def system_blocks(self, *, include_dynamic: bool = True) -> tuple[SystemBlock, ...]:
        """One block per section, ``cache=True`` on every breakpoint candidate."""
        marked = set(self.breakpoints)
        end = len(self.sections) if include_dynamic else self.stable_count
        return tuple(
            SystemBlock(s.content, cache=i in marked) for i, s in enumerate(self.sections[:end])
        )


class PromptBuilder:
    """Collects prompt sections by name and builds them in their stable → dynamic order.

    Adding a section under a name already present replaces it, so an engine can keep one
    builder and update the scratchpad or context status each turn.
    """

    def __init__(self, sections: Iterable[PromptSection] = ()) -> None:
        self._sections: dict[str, PromptSection] = {}
        for section in sections:
            self.add(section)

    def add(self, section: PromptSection) -> PromptBuilder:
        """This builder, with ``section`` added (replacing one of the same name)."""
        if not isinstance(section, PromptSection):
            raise UsageError(f"expected a PromptSection, got {type(section).__name__}")
        self._sections[section.name] = section
        return self

    def set(
        self, name: SectionName | str, content: str, *, cacheable: bool | None = None
    ) -> PromptBuilder:
        """This builder, with section ``name`` set; ``cacheable`` defaults by the known name.

        An unknown name needs an explicit ``cacheable``.
        """
        if cacheable is None:
            return self.add(PromptSection.known(name, content))
        return self.add(PromptSection(str(name), content, cacheable))

    def remove(self, name: SectionName | str) -> PromptBuilder:
        """This builder without section ``name`` (no error when it is absent)."""
        self._sections.pop(str(name), None)
        return self

    @property
    def sections(self) -> tuple[PromptSection, ...]:
        """The sections as added, in their final order (empty ones included)."""
        return tuple(sorted(self._sections.values(), key=_sort_key))

    def build(self) -> BuiltPrompt:
        """The sections in order, empty ones dropped, with their breakpoint candidates."""
        kept: list[PromptSection] = []
        for section in self.sections:
            content = _trimmed(section.content)
            if content:
                kept.append(replace(section, content=content))
        stable_count = sum(1 for s in kept if s.cacheable)
        breakpoints: list[int] = []
        if stable_count:
            last_long_lived = max(
                (i for i in range(stable_count) if _is_long_lived(kept[i])), default=None
            )
            if last_long_lived is not None and last_long_lived < stable_count - 1:
                breakpoints.append(last_long_lived)
            breakpoints.append(stable_count - 1)
        return BuiltPrompt(tuple(kept), tuple(breakpoints), stable_count)


def plain_prompt(sections: Iterable[PromptSection | str | None]) -> str:
    """The sections' contents joined in the order given: the fallback when building fails.

    No sorting, no validation, no breakpoints: it only has to produce a usable prompt from
    whatever the engine had, so it accepts plain strings and ``None`` too.
    """
    texts: list[str] = []
    for section in sections:
        content = section.content if isinstance(section, PromptSection) else section
        text = str(content).strip() if content is not None else ""
        if text:
            texts.append(text)
    return SECTION_SEPARATOR.join(texts)


# --------------------------------------------------------------------------------------------------
# cache planning
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CachePlan:
    """Where one Anthropic request gets ``cache_control``.

    ``system_breakpoints`` index the system blocks, ``message_breakpoints`` the request's
    messages; ``cache_tools`` marks the last tool. Both index tuples are ascending.
    """

    system_breakpoints: tuple[int, ...] = ()
    cache_tools: bool = False
    message_breakpoints: tuple[int, ...] = ()

    @property
    def count(self) -> int:
        """How many breakpoints the request will carry."""
        return len(self.system_breakpoints) + len(self.message_breakpoints) + self.cache_tools

    def apply(self, system: Sequence[SystemBlock]) -> tuple[SystemBlock, ...]:
        """``system`` with ``cache=True`` exactly on this plan's system breakpoints."""
        marked = set(self.system_breakpoints)
        return tuple(replace(b, cache=i in marked) for i, b in enumerate(system))


def plan_cache_breakpoints(
    system: Sequence[SystemBlock],
    *,
    system_tokens: Sequence[int],
    tools_tokens: int = 0,
    message_tokens: Sequence[int] = (),
    min_cacheable_tokens: int = 0,
    previous_tail: int | None = None,
    max_breakpoints: int = MAX_CACHE_BREAKPOINTS,
) -> CachePlan:
    """The breakpoints worth paying for in one request, at most ``max_breakpoints``.

    Anthropic reads a request as tools, then system, then messages; each breakpoint caches the
    whole prefix up to it, and one shorter than ``min_cacheable_tokens`` is not cached at all,
    so such breakpoints are skipped. The candidates, in order of priority:

    1. the last message: the conversation is most of the prompt and grows every turn;
    2. the last system block marked ``cache`` (or, when none is, the tools): the end of the
       stable prefix, which survives compaction of the conversation;
    3. ``previous_tail``, the index of the message that carried the tail breakpoint in the
       previous request: Anthropic looks for an earlier cache entry only about 20 blocks back,
       and a turn with many tool calls adds more, so this guarantees the next request still hits
       (pass ``None`` once the view was compacted, since the old entry is gone);
    4. earlier system blocks marked ``cache``, last first (the long-lived part of the prompt,
       which stays cached when a skill is activated);
    5. the tools (``tools_tokens`` > 0) when a system block is marked: then they only help when
       the system prompt changes but the tools do not, since the system breakpoint covers them.

    This is the order ``providers.anthropic`` keeps breakpoints in when it must drop some, so a
    plan passes through it unchanged.

    ``system_tokens`` and ``message_tokens`` are the token sizes of each system block and each
    message, in request order; the plan's indexes index those same two lists.
    """
    if len(system_tokens) != len(system):
        raise UsageError(
            f"system_tokens has {len(system_tokens)} sizes for {len(system)} system blocks"
        )
    if max_breakpoints < 0:
        raise UsageError(f"max_breakpoints must be >= 0, got {max_breakpoints}")
    tools = max(tools_tokens, 0)
    system_ends: list[int] = []
    total = tools
    for size in system_tokens:
        total += size
        system_ends.append(total)
    conversation_start = total
    sizes = message_tokens

    def message_end(index: int) -> int:
        # Only the last message and the previous tail are ever asked for: two built-in sums
        # instead of a Python loop over every message, which grew with the view each turn.
        return conversation_start + sum(sizes[: index + 1])

    candidates = [index for index, block in enumerate(system) if block.cache]
    system_primary = candidates[-1:]
    system_secondary = list(reversed(candidates[:-1]))
    last_message = len(sizes) - 1
    ordered: list[tuple[str, int]] = []
    if last_message >= 0:
        ordered.append(("message", last_message))
    ordered += [("system", i) for i in system_primary]
    if tools and not system_primary:
        ordered.append(("tools", 0))  # with no stable system block, the tools end the prefix
    if previous_tail is not None and 0 <= previous_tail < last_message:
        ordered.append(("message", previous_tail))
    ordered += [("system", i) for i in system_secondary]
    if tools and system_primary:
        ordered.append(("tools", 0))

    chosen_system: list[int] = []
    chosen_messages: list[int] = []
    cache_tools = False
    for kind, index in ordered:
        if len(chosen_system) + len(chosen_messages) + cache_tools >= max_breakpoints:
            break
        if kind == "message":
            prefix = message_end(index)
        elif kind == "system":
            prefix = system_ends[index]
        else:
            prefix = tools
        if prefix < min_cacheable_tokens or prefix <= 0:
            continue
        if kind == "message":
            chosen_messages.append(index)
        elif kind == "system":
            chosen_system.append(index)
        else:
            cache_tools = True
    return CachePlan(tuple(sorted(chosen_system)), cache_tools, tuple(sorted(chosen_messages)))


# --------------------------------------------------------------------------------------------------
# per-provider rendering
# --------------------------------------------------------------------------------------------------


def prompt_cache_key(built: BuiltPrompt, session_id: str | None = None) -> str:
    """A stable OpenAI ``prompt_cache_key``: from the session id, else from the stable prefix.

    OpenAI routes requests with the same key to the same cache, and its hits come from the
    longest shared prefix. Within a session that prefix is the whole conversation, which is
    unique to the session, so the session id is the better key: every turn lands where the
    previous one was cached, and one key per session keeps each key's request rate low (OpenAI
    spreads a key that gets many requests per minute over several caches). Without a session
    the digest of the stable prefix still gives a key that never changes from turn to turn and
    that identical setups share. Either way it is hashed, so no identifier is sent as is.
    """
    source = f"session:{session_id}" if session_id else f"prefix:{built.stable_digest}"
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    return PROMPT_CACHE_KEY_PREFIX + digest[:_CACHE_KEY_HEX_DIGITS]


@dataclass(frozen=True, slots=True)
class RenderedPrompt:
    """The system prompt and cache settings for one request to one provider.

    Put ``system``, ``cache_plan.cache_tools``, ``cache_plan.message_breakpoints`` and
    ``prompt_cache_key`` on the request. ``tail_text`` is non-empty only with
    ``dynamic_placement="tail"``: the dynamic sections, to be sent after the conversation (after
    the message that carries the last breakpoint, never inside it).
    """

    system: tuple[SystemBlock, ...]
    cache_plan: CachePlan = field(default_factory=CachePlan)
    prompt_cache_key: str | None = None
    tail_text: str = ""


def render_prompt(
    built: BuiltPrompt,
    provider: Provider,
    *,
    counter: TextCounter,
    tools_tokens: int = 0,
    message_tokens: Sequence[int] = (),
    min_cacheable_tokens: int = 0,
    previous_tail: int | None = None,
    session_id: str | None = None,
    dynamic_placement: DynamicPlacement = "system",
) -> RenderedPrompt:
    """The system blocks, cache plan and cache key ``provider`` should get for ``built``.

    - ``"anthropic"``: one block per section, ``cache=True`` where :func:`plan_cache_breakpoints`
      put a breakpoint (sizes measured with ``counter``), plus the tools and message breakpoints.
    - ``"openai"``: one unmarked block holding the text (prefix caching is automatic), and a
      :func:`prompt_cache_key`.
    - anything else (``"ollama"``, vLLM, llama.cpp, ...): one unmarked block, no key, since these
      servers cache prefixes by themselves and may reject parameters they do not know.
    """
    include_dynamic = dynamic_placement == "system"
    tail_text = "" if include_dynamic else built.dynamic_text
    if provider != "anthropic":
        text = built.text if include_dynamic else built.stable_text
        system = (SystemBlock(text),) if text else ()
        key = prompt_cache_key(built, session_id) if provider == "openai" else None
        return RenderedPrompt(system, CachePlan(), key, tail_text)
    blocks = built.system_blocks(include_dynamic=include_dynamic)
    plan = plan_cache_breakpoints(
        blocks,
        system_tokens=[counter.count_text(b.text) for b in blocks],
        tools_tokens=tools_tokens,
        message_tokens=message_tokens,
        min_cacheable_tokens=min_cacheable_tokens,
        previous_tail=previous_tail,
    )
    return RenderedPrompt(plan.apply(blocks), plan, None, tail_text)
