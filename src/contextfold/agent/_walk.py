"""Walking the workspace for ``glob`` and ``grep``: glob patterns and a pruned, sorted walk.

Glob patterns follow the usual rules of file-finding tools: ``*`` and ``?`` stay within one path
segment, ``**`` spans any number of folders (``**/*.py`` also matches ``a.py`` at the top),
``[abc]`` / ``[!abc]`` are character classes and ``{ts,tsx}`` lists alternatives. ``*`` matches
names starting with a dot too: a model looking for ``*.env`` wants ``.env`` files found.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from contextfold.agent._outcome import ToolError
from contextfold.agent.workspace import Workspace, is_noise_dir
from contextfold.confined_files import walk_folders

__all__ = ["WalkedFile", "compile_glob", "walk_files"]

_MAX_BRACE_EXPANSIONS = 64
"""Most patterns a ``{a,b}`` expansion may produce (a pathological pattern must stay cheap)."""


def compile_glob(pattern: str) -> re.Pattern[str]:
    """A regular expression matching the ``/``-separated relative paths ``pattern`` names."""
    pattern = pattern.strip()
    if not pattern:
        raise ToolError("the glob pattern is empty; try '**/*.py'", kind="invalid_arguments")
    if pattern.startswith(("/", "~")):
        raise ToolError(
            f"glob pattern {pattern!r} is absolute; patterns are relative to the search folder "
            "(give that folder as path)",
            kind="invalid_arguments",
        )
    if ".." in pattern.split("/"):
        raise ToolError(
            f"glob pattern {pattern!r} goes up with '..'; give the folder to search as path",
            kind="invalid_arguments",
        )
    alternatives = _expand_braces(pattern.replace("\\", "/"))
    return re.compile("|".join(f"(?:{_translate(p)})" for p in alternatives), re.DOTALL)


def _expand_braces(pattern: str) -> list[str]:
    results = [pattern]
    expanded: list[str] = []
    while results:
        current = results.pop()
        match = re.search(r"\{([^{}]*,[^{}]*)\}", current)
        if match is None:
            expanded.append(current)
        else:
            for choice in match.group(1).split(","):
                results.append(current[: match.start()] + choice + current[match.end() :])
        if len(results) + len(expanded) > _MAX_BRACE_EXPANSIONS:
            raise ToolError(
                "the glob pattern has too many {a,b} alternatives; split it into several calls",
                kind="invalid_arguments",
            )
    return sorted(set(expanded))


def _translate(pattern: str) -> str:
    segments = [s for s in pattern.split("/") if s not in ("", ".")]
    out: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        out.append(_translate_segment(segment) + ("" if last else "/"))
    return "".join(out) if out else ".*"


def _translate_segment(segment: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            while i + 1 < len(segment) and segment[i + 1] == "*":
                i += 1  # "a**b" inside a segment means the same as "a*b"
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = segment.find("]", i + 2)
            if end < 0:
                out.append(re.escape(char))
            else:
                body = segment[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body.replace(chr(92), chr(92) * 2)}]")
                i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class WalkedFile:
    """One file met by :func:`walk_files`."""

    path: Path
    """Absolute, for naming it (a symlink's own path, not its target's)."""
    relative: str
    """Relative to the walk's base folder, with ``/``."""
    folder: int
    """A descriptor of its folder: valid until the walk moves on."""
    name: str
    is_link: bool
    """A symlink to a file inside the workspace: open it by :attr:`path`, through the fence."""


def walk_files(
    workspace: Workspace, base: Path, *, tool: str, keep: frozenset[str] = frozenset()
) -> Iterator[WalkedFile]:
    """Every file under ``base`` (a folder of the workspace), in sorted order, folder by folder,
    skipping noise folders (unless named in ``keep``) and symlinks that lead out of the
    workspace. The walk goes through descriptors and enters no symlinked folder (no cycles, no
    escapes, not even through a folder swapped for a link while it walks)."""
    with workspace.open_folder(base, path=workspace.display(base), tool=tool) as top:
        for prefix, folder, entries in walk_folders(
            top, lambda name: name in keep or not is_noise_dir(name)
        ):
            here = base / prefix
            for entry in entries:
                walked = _walked(workspace, entry, here, prefix, folder)
                if walked is not None:
                    yield walked


def _walked(
    workspace: Workspace, entry: os.DirEntry[str], here: Path, prefix: str, folder: int
) -> WalkedFile | None:
    path = here / entry.name
    if entry.is_symlink():
        # A link to a folder is not entered; a link to a file counts when it stays inside.
        if entry.is_dir() or not workspace.contains(path):
            return None
        return WalkedFile(path, prefix + entry.name, folder, entry.name, True)
    if entry.is_dir(follow_symlinks=False):
        return None
    return WalkedFile(path, prefix + entry.name, folder, entry.name, False)
