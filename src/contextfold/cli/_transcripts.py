"""Reading transcripts for the CLI: files and folders, each transcript labelled for display,
with a progress bar over files on a terminal (``count`` and ``replay`` share it).

What the importers warn about (an incomplete last line, records left out) is printed as
``warning:`` lines; a folder holding no transcript file is an error, as a bad file is."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, TypeAlias

import typer

from contextfold.cli import _render
from contextfold.errors import FormatError, UsageError
from contextfold.transcripts import Transcript, iter_transcripts

__all__ = [
    "MAX_WARNINGS_SHOWN",
    "TRANSCRIPT_SUFFIXES",
    "TranscriptPaths",
    "check_paths_exist",
    "read_transcripts",
]

TRANSCRIPT_SUFFIXES = (".json", ".jsonl")
"""File endings a folder walk reads as transcripts."""

MAX_WARNINGS_SHOWN = 5
"""Warnings printed per transcript; the rest are counted in one more line."""

TranscriptPaths: TypeAlias = Annotated[
    list[Path],
    typer.Argument(
        metavar="FILE|DIR...",
        help="Transcript files, or folders searched for .json / .jsonl transcripts.",
        show_default=False,
    ),
]
"""The ``FILE|DIR...`` argument of the commands that read transcripts."""


def check_paths_exist(paths: Iterable[Path]) -> None:
    """A ``UsageError`` naming the paths that do not exist, before any work: a missing input is
    an error, not an empty result."""
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise UsageError(f"no such file or folder: {', '.join(missing)}")


def read_transcripts(
    paths: Iterable[Path], description: str
) -> Iterator[tuple[Transcript, str] | FormatError]:
    """Each transcript with its display label, or the error of a file that could not be read (or
    of a folder holding no transcript file); a progress bar (``description``) over files on a
    terminal when there are many. The importers' warnings are printed as they come."""
    paths = list(paths)
    with _render.progress(_candidate_files(paths), description) as bar:
        for root in paths:
            last_path: str | None = None
            index = 0
            for item in iter_transcripts(root):
                if item.path != last_path:
                    last_path, index = item.path, 0
                    if bar is not None:
                        bar.advance(bar.task_ids[0])
                if isinstance(item, FormatError):
                    yield item
                    continue
                index += 1  # a file holding several transcripts numbers them
                label = _label(root, item.path)
                label = label if index == 1 else f"{label} #{index}"
                _print_warnings(item, label)
                yield item, label
            if last_path is None and root.is_dir():
                yield FormatError(
                    "no transcript here: no .json or .jsonl file in this folder or its "
                    "subfolders (hidden ones are skipped)",
                    path=str(root),
                )


def _print_warnings(transcript: Transcript, label: str) -> None:
    """The importer's warnings about ``transcript`` and its subagents, a few each."""
    for part in transcript.walk():
        where = label if part is transcript else f"{label}, subagent {_subagent_name(part)}"
        for warning in part.warnings[:MAX_WARNINGS_SHOWN]:
            _render.print_error(f"{where}: {warning}", warning=True)
        hidden = len(part.warnings) - MAX_WARNINGS_SHOWN
        if hidden > 0:
            _render.print_error(f"{where}: {_render.plural(hidden, 'more warning')}", warning=True)


def _subagent_name(transcript: Transcript) -> str:
    return str(transcript.metadata.get("agent_id") or transcript.session_id or transcript.path)


def _label(root: Path, path: str | None) -> str:
    """A file found in a folder is named from that folder, as the user typed it."""
    if path is None:
        return str(root)
    if root.is_dir():
        return str(root / os.path.relpath(path, root))
    return path


def _candidate_files(paths: Iterable[Path]) -> int:
    """How many files the walk may read (for the progress bar's length only)."""
    total = 0
    for path in paths:
        if not path.is_dir():
            total += 1
            continue
        for _, dirs, files in os.walk(path):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            total += sum(name.endswith(TRANSCRIPT_SUFFIXES) for name in files)
    return total
