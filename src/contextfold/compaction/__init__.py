"""Compaction: shrink the view to a target by appending context edits, losing nothing.

Strategies look at a view and return :mod:`~contextfold.edits` (mask, summarize, drop); they
never mutate messages and never delete: every tool output they hide or shorten is first put in
the blob store and its ``ref`` travels with what replaces it, so ``read_result`` brings it back.
The :class:`Compactor` runs strategies in order until the view fits its target. Context hygiene
(:mod:`.hygiene`: superseded reads, big old call arguments, old thinking, files restored after a
summary) rides on the same edits, so it costs no cache break of its own.

How the engine uses it
----------------------

Build one context per decision (token figures count the **conversation only**: the engine
subtracts system prompt and tool descriptions first)::

    ctx = CompactionContext(view=view, counter=counter, target_tokens=target,
                            window_tokens=effective_window, blobs=store,
                            session_id=session.id, summarizer=summarizer)
    compactor = Compactor.preset("mask-first")          # or settings' ``preset``

- **MASK zone** (``mask_at`` ≤ usage < ``compact_at``): ``compactor.mask(ctx)`` with
  ``target_tokens`` = the mask mark: one batch that frees at least 5 % of the window.
- **COMPACT zone**: a ready background result (``background.take(view)``), else
  ``compactor.compact(ctx)`` with ``target_tokens`` = the compact target (50 %).
- **BLOCK zone**: ``compactor.compact(ctx, hard=True)`` (or ``take(view, wait=True)`` then hard
  if still over): the recent window shrinks to the last unit, truncation tightens, and
  ``ShrinkToFit`` rewrites the biggest messages until the view fits.
- **Overflow** (``ContextOverflowError``): one ``compact(ctx, hard=True)``, then retry once.
- **Background**: ``BackgroundCompactor(compactor).maybe_start(ctx)`` once usage passes a soft
  mark; ``take(current_view)`` never blocks unless ``wait=True``.
- **Restart preset**: ``compactor.restart`` holds the :class:`RestartPolicy`; at the compact
  zone put :func:`wind_down_message` in the request, then seed a child session with
  :func:`plan_restart` (marker, task, summary, last complete turns) and emit
  ``SessionRestarted``; past ``max_restarts`` compact in place.

Every call returns a :class:`CompactResult`: append ``result.edits`` to the transcript, publish
``result.events`` and ``CompactionFinished`` (its ``note`` says when ``result.failed``: less than
``min_progress`` of the window freed, reported and never retried in a loop; ``CompactionFailed``
when nothing changed), and snapshot ``result.view``. A result without edits (``result.changed`` is
false) changed nothing and is never reported as a compaction; ``result.describe()`` says what
happened in one line for a person (``compacted 14 of 48 messages (summarized 12, dropped 2):
6,120 → 5,602 tokens of conversation``, or ``nothing compacted:`` and why), and
``result.message_changes()`` gives each changed message's fate by id.
"""

from __future__ import annotations

from contextfold.compaction._context import CompactionContext
from contextfold.compaction._llm import LLMSummarizer
from contextfold.compaction._shrink import ShrinkToFit
from contextfold.compaction.background import BackgroundCompactor
from contextfold.compaction.hygiene import (
    ClearOldThinking,
    RestoreFiles,
    SupersededReads,
    TrimOldArguments,
)
from contextfold.compaction.pipeline import (
    DEFAULT_MIN_PROGRESS,
    NOTHING_TO_REMOVE,
    PRESETS,
    Compactor,
    CompactResult,
    Preset,
    PresetName,
    preset_named,
)
from contextfold.compaction.restart import (
    RestartPolicy,
    plan_restart,
    restart_marker,
    wind_down_message,
)
from contextfold.compaction.strategies import (
    ClearToolResults,
    DropOldest,
    MaskObservations,
    Strategy,
    Summarize,
    ToolResultDigest,
    TruncateToolResults,
)
from contextfold.compaction.summary import (
    SECTION_NAMES,
    ExtractiveSummarizer,
    SectionName,
    StructuredSummary,
    Summarizer,
    SummaryCaps,
    SummaryItem,
)
from contextfold.events import Trigger
from contextfold.history.facts import Fact, SessionFacts, ToolAction, extract_facts
from contextfold.history.turns import RecentWindow, atomic_units, recent_window_start
from contextfold.outputs.blob_store import BlobStore
from contextfold.tokens.counter import TokenCounter

__all__ = [
    "DEFAULT_MIN_PROGRESS",
    "NOTHING_TO_REMOVE",
    "PRESETS",
    "SECTION_NAMES",
    "BackgroundCompactor",
    "BlobStore",
    "ClearOldThinking",
    "ClearToolResults",
    "CompactResult",
    "CompactionContext",
    "Compactor",
    "DropOldest",
    "ExtractiveSummarizer",
    "Fact",
    "LLMSummarizer",
    "MaskObservations",
    "Preset",
    "PresetName",
    "RecentWindow",
    "RestartPolicy",
    "RestoreFiles",
    "SectionName",
    "SessionFacts",
    "ShrinkToFit",
    "Strategy",
    "StructuredSummary",
    "Summarize",
    "Summarizer",
    "SummaryCaps",
    "SummaryItem",
    "SupersededReads",
    "TokenCounter",
    "ToolAction",
    "ToolResultDigest",
    "Trigger",
    "TrimOldArguments",
    "TruncateToolResults",
    "atomic_units",
    "extract_facts",
    "plan_restart",
    "preset_named",
    "recent_window_start",
    "restart_marker",
    "wind_down_message",
]
