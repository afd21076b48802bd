"""The public API is exactly what ``contextfold.__all__`` lists."""

from __future__ import annotations
import __future__

import importlib
import inspect

import pytest

import contextfold


def test_all_is_sorted_and_unique() -> None:
    names = list(contextfold.__all__)
    assert names == sorted(names)  # plain code-point order, as ruff's RUF022 keeps it
    assert len(names) == len(set(names))


def test_every_public_name_is_importable() -> None:
    for name in contextfold.__all__:
        assert getattr(contextfold, name) is not None, name


def test_no_public_name_is_missing_from_all() -> None:
    public = {
        name
        for name, value in vars(contextfold).items()
        if not name.startswith("_")
        and not inspect.ismodule(value)
        and not isinstance(value, __future__._Feature)
    }
    assert public - set(contextfold.__all__) == set()


SUBPACKAGE_NAMES: dict[str, tuple[str, ...]] = {
    "contextfold.budget": ("BudgetMarks", "ContextBudget", "Zone"),
    "contextfold.compaction": (
        "BackgroundCompactor",
        "ClearToolResults",
        "CompactionContext",
        "DropOldest",
        "MaskObservations",
        "RecentWindow",
        "Summarize",
        "ToolResultDigest",
        "TruncateToolResults",
    ),
    "contextfold.config": ("Settings", "load_settings"),
    "contextfold.edits": (
        "ArchiveEdit",
        "ContextEdit",
        "DropEdit",
        "MaskEdit",
        "ReplacedResult",
        "SummarizeEdit",
        "apply_edits",
    ),
    "contextfold.tokens.estimator": ("ContextSizeEstimator",),
    "contextfold.events": ("EventBus", "JsonlSink", "MemorySink"),
    "contextfold.transcripts": (
        "RecordedCompaction",
        "Transcript",
        "detect_format",
        "iter_transcripts",
        "load_transcript",
        "load_transcripts",
    ),
    "contextfold.prompt.instructions": ("LoadedInstructions",),
    "contextfold.history.repair": ("RepairReport",),
    "contextfold.outputs.intake": (
        "BlobStore",
        "FileBlobStore",
        "InMemoryBlobStore",
        "OutputPolicy",
        "placeholder_for",
        "prepare_tool_output",
        "truncate_head_tail",
    ),
    "contextfold.prompt.sections": ("PromptBuilder", "PromptSection"),
    "contextfold.providers": ("ReplayModel", "SystemBlock"),
    "contextfold.tokens.counters": ("HeuristicCounter", "TiktokenCounter"),
    "contextfold.tools.deferral": ("ToolDeferral", "ToolSelection"),
}
"""Names the top level gave up (it listed 116), each public in the subpackage it belongs to."""


def test_the_top_level_is_small_enough_to_hold_in_mind() -> None:
    assert 60 <= len(contextfold.__all__) <= 70


@pytest.mark.parametrize("module", sorted(SUBPACKAGE_NAMES))
def test_names_left_out_of_the_top_level_are_public_in_their_subpackage(module: str) -> None:
    package = importlib.import_module(module)
    for name in SUBPACKAGE_NAMES[module]:
        assert name in package.__all__, f"{module}.{name}"
        assert getattr(package, name) is not None
        assert name not in contextfold.__all__


def test_compaction_never_raises_a_compaction_error() -> None:
    # A compaction short of its target is a CompactResult with ``failed`` set (and an overflow a
    # ContextOverflowError): the error class that said otherwise is gone.
    assert not hasattr(contextfold, "CompactionError")
    assert "CompactionError" not in contextfold.errors.__all__
