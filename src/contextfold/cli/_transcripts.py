"""Reading transcripts for the CLI: files and folders, each transcript labelled for display,
with a progress bar over files on a terminal (``count`` and ``replay`` share it)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, TypeAlias

import typer

from contextfold._exceptions import FormatError
from contextfold.cli import _render
from contextfold.formats import Transcript, iter_transcripts

__all__ = ["TRANSCRIPT_SUFFIXES", "TranscriptPaths", "read_transcripts"]

TRANSCRIPT_SUFFIXES = (".json", ".jsonl")
"""File endings a folder walk reads as transcripts."""

TranscriptPaths: TypeAlias = Annotated[
    list[Path],
    typer.Argument(
        metavar="FILE|DIR...",
        help="Transcript files, or folders searched for .json / .jsonl transcripts.",
        show_default=False,
    ),
]
"""The ``FILE|DIR...`` argument of the commands that read transcripts."""


def read_transcripts(
    paths: Iterable[Path], description: str
) -> Iterator[tuple[Transcript, str] | FormatError]:
    """Each transcript with its display label, or the error of a file that could not be read;
    a progress bar (``description``) over files on a terminal when there are many."""
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
                yield item, label if index == 1 else f"{label} #{index}"


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
