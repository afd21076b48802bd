"""The system prompt: ordered sections with prompt-cache breakpoints, and project instructions
from the AGENTS.md hierarchy.

- :mod:`~contextfold.prompt.sections` — :class:`PromptBuilder`, cache breakpoints;
- :mod:`~contextfold.prompt.instructions` — :class:`InstructionsLoader`.
"""

from __future__ import annotations

from contextfold.prompt.instructions import (
    InstructionsLoader,
    InstructionSource,
    LoadedInstructions,
    find_project_root,
)
from contextfold.prompt.sections import (
    MAX_CACHE_BREAKPOINTS,
    SECTION_SEPARATOR,
    BuiltPrompt,
    CachePlan,
    DynamicPlacement,
    PromptBuilder,
    PromptSection,
    RenderedPrompt,
    SectionName,
    TextCounter,
    plain_prompt,
    plan_cache_breakpoints,
    prompt_cache_key,
    render_prompt,
)

__all__ = [
    "MAX_CACHE_BREAKPOINTS",
    "SECTION_SEPARATOR",
    "BuiltPrompt",
    "CachePlan",
    "DynamicPlacement",
    "InstructionSource",
    "InstructionsLoader",
    "LoadedInstructions",
    "PromptBuilder",
    "PromptSection",
    "RenderedPrompt",
    "SectionName",
    "TextCounter",
    "find_project_root",
    "plain_prompt",
    "plan_cache_breakpoints",
    "prompt_cache_key",
    "render_prompt",
]
