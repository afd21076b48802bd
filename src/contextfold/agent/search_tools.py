"""The tools that find things in the workspace: ``list_dir``, ``glob`` and ``grep``.

All three are read-only, skip noise folders (version control, caches, virtual environments,
``node_modules``: see :data:`~contextfold.agent.NOISE_DIRS`) unless asked for one by path, cap
what they list, and say how much they left out and how to narrow the search. ``grep`` is pure
Python (the ``regex`` module, with a time limit against runaway patterns): no ripgrep needed.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import regex

from contextfold.agent._outcome import ToolError, ToolOutcome
from contextfold.agent._walk import WalkedFile, compile_glob, walk_files
from contextfold.agent.text import human_size, plural
from contextfold.agent.workspace import BINARY_SNIFF_BYTES, Workspace, is_noise_dir, looks_binary
from contextfold.confined_files import LinkCensus, open_folder_at, open_regular
from contextfold.tool_spec import ToolSpec

__all__ = [
    "GLOB_MAX_RESULTS",
    "GLOB_TOOL",
    "GREP_LINE_CHARS",
    "GREP_MAX_CONTEXT",
    "GREP_MAX_FILE_BYTES",
    "GREP_MAX_MATCHES",
    "GREP_SECONDS",
    "GREP_TOOL",
    "LIST_DIR_DEFAULT_DEPTH",
    "LIST_DIR_MAX_DEPTH",
    "LIST_DIR_MAX_ENTRIES",
    "LIST_DIR_TOOL",
    "SearchTools",
]

LIST_DIR_DEFAULT_DEPTH = 2
"""Folder levels ``list_dir`` shows when no depth is given."""
LIST_DIR_MAX_DEPTH = 8
"""Deepest listing ``list_dir`` accepts."""
LIST_DIR_MAX_ENTRIES = 400
"""Entries one listing shows; the rest is counted."""
GLOB_MAX_RESULTS = 500
"""Paths one ``glob`` call shows; the rest is counted."""
GREP_MAX_MATCHES = 200
"""Matching lines one ``grep`` call shows; the rest is counted."""
GREP_MAX_CONTEXT = 10
"""Most context lines ``grep`` shows around each match."""
GREP_LINE_CHARS = 300
"""A matching line longer than this is shown as a window around the match."""
GREP_MAX_FILE_BYTES = 10 * 1024 * 1024
"""Files larger than this are skipped by ``grep`` (named in a note): memory stays bounded."""
GREP_SECONDS = 20.0
"""Time one ``grep`` call may take; past it the results found so far are returned, marked."""

LIST_DIR_TOOL = ToolSpec(
    name="list_dir",
    description=(
        "List a folder of the workspace as an indented tree, sorted by name; folders end "
        f"with '/'. Shows {LIST_DIR_DEFAULT_DEPTH} levels by default (depth=1 for direct "
        "children only). Version control, caches, virtual environments and node_modules are "
        "marked but not expanded; list one by its path to see inside."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "Folder relative to the workspace root (default: the root).",
            },
            "depth": {
                "type": "integer",
                "minimum": 1,
                "maximum": LIST_DIR_MAX_DEPTH,
                "description": f"Folder levels to show (default {LIST_DIR_DEFAULT_DEPTH}).",
            },
        },
        "additionalProperties": False,
    },
)

GLOB_TOOL = ToolSpec(
    name="glob",
    description=(
        "Find files by name pattern, e.g. '**/*.py', 'src/**/test_*.py', '*.{ts,tsx}'. '*' "
        "stays within one folder and '**' spans folders, so '*.md' only matches at the top of "
        "the search folder. Returns paths relative to the workspace root, sorted, at most "
        f"{GLOB_MAX_RESULTS}; noise folders (.git, node_modules, .venv, caches) are skipped."
    ),
    parameters={
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern, relative to path."},
            "path": {
                "type": "string",
                "description": "Folder to search, relative to the workspace root (default: root).",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
)

GREP_TOOL = ToolSpec(
    name="grep",
    description=(
        "Search file contents with a regular expression (Python syntax). Prints 'path:line:text' "
        "for each matching line (context lines as 'path-line-text'), paths relative to the "
        f"workspace root, at most {GREP_MAX_MATCHES} lines with a count of the rest. Binary "
        "files and noise folders (.git, node_modules, .venv, caches) are skipped. Narrow with "
        "path (a folder or a file) and glob (e.g. '*.py')."
    ),
    parameters={
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression to search for."},
            "path": {
                "type": "string",
                "description": "Folder or file to search, relative to the workspace root.",
            },
            "glob": {
                "type": "string",
                "description": (
                    "Only files matching this glob: a name pattern such as '*.py', or a path "
                    "pattern such as 'src/**/*.ts'."
                ),
            },
            "ignore_case": {"type": "boolean", "description": "Match case-insensitively."},
            "context": {
                "type": "integer",
                "minimum": 0,
                "maximum": GREP_MAX_CONTEXT,
                "description": "Lines of context before and after each match (default 0).",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
)


class SearchTools:
    """Handlers for ``list_dir``, ``glob`` and ``grep`` in one workspace."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    # -- list_dir ----------------------------------------------------------------------------------

    def list_dir(self, args: dict[str, Any]) -> ToolOutcome:
        """An indented, capped tree of a folder."""
        path: str = args.get("path") or "."
        depth: int = args.get("depth", LIST_DIR_DEFAULT_DEPTH)
        target = self._folder(path, "list_dir")
        name = self.workspace.display(target)
        listing = _Listing()
        with self.workspace.open_folder(target, path=path, tool="list_dir") as folder:
            listing.walk(folder, 1, depth)
        if not listing.lines and not listing.hidden:
            return ToolOutcome(f"[{name} is empty]", metadata={"path": name, "entries": 0})
        notes = []
        if listing.hidden:
            notes.append(
                f"[{plural(listing.hidden, 'more entry', 'more entries')} not shown (limit "
                f"{LIST_DIR_MAX_ENTRIES}); list a subfolder by path, or use a smaller depth]"
            )
        if listing.noise:
            notes.append(
                f"[not expanded: {', '.join(sorted(listing.noise))} (version control, caches, "
                "dependencies); give one as path to list it]"
            )
        if listing.unexpanded:
            notes.append(
                f"[folders shown with an entry count are deeper than depth={depth}; list one by "
                "path to see inside]"
            )
        text = "\n".join([*listing.lines, *notes])
        entries = len(listing.lines) + listing.hidden
        return ToolOutcome(text, metadata={"path": name, "entries": entries})

    # -- glob --------------------------------------------------------------------------------------

    def glob(self, args: dict[str, Any]) -> ToolOutcome:
        """Workspace-relative paths of the files matching a pattern, sorted and capped."""
        pattern: str = args["pattern"]
        base = self._folder(args.get("path") or ".", "glob")
        matcher = compile_glob(pattern)
        keep = frozenset(p for p in pattern.replace("\\", "/").split("/") if is_noise_dir(p))
        found = sorted(
            self.workspace.display(walked.path)
            for walked in walk_files(self.workspace, base, tool="glob", keep=keep)
            if matcher.fullmatch(walked.relative)
        )
        where = self.workspace.display(base)
        metadata: dict[str, Any] = {"path": where, "matches": len(found)}
        if not found:
            hint = ""
            if "/" not in pattern:
                hint = f"; '*' does not enter folders, try '**/{pattern}' to search all of them"
            return ToolOutcome(f"No files match {pattern!r} in {where}{hint}", metadata=metadata)
        lines = [f"Found {plural(len(found), 'file')}", *found[:GLOB_MAX_RESULTS]]
        if len(found) > GLOB_MAX_RESULTS:
            lines.append(
                f"[showing the first {GLOB_MAX_RESULTS}; {len(found) - GLOB_MAX_RESULTS} more "
                "not shown: narrow the pattern or the path]"
            )
        return ToolOutcome("\n".join(lines), metadata=metadata)

    # -- grep --------------------------------------------------------------------------------------

    def grep(self, args: dict[str, Any]) -> ToolOutcome:
        """``path:line:text`` for the lines matching a regular expression, capped."""
        pattern: str = args["pattern"]
        flags = regex.MULTILINE | (regex.IGNORECASE if args.get("ignore_case") else 0)
        try:
            compiled = regex.compile(pattern, flags)
        except regex.error as exc:
            raise ToolError(
                f"invalid regular expression {pattern!r}: {exc}. Escape special characters "
                r"such as ( [ { . * + ? with a backslash to search for them literally.",
                kind="invalid_arguments",
            ) from exc
        path: str = args.get("path") or "."
        target = self.workspace.resolve(path)
        if not target.exists():
            raise ToolError(
                f"no file or folder {args.get('path')!r} in the workspace; use list_dir or glob",
                kind="not_found",
            )
        search = _Search(compiled, args.get("context", 0), time.monotonic() + GREP_SECONDS)
        if target.is_dir():
            self._grep_folder(search, target, args.get("glob"))
        else:  # one file: whatever keeps it from being searched is an error the model reads
            with self.workspace.open_file(path, tool="grep") as opened:
                search.file(opened.handle, opened.status, self.workspace.display(target))
        return search.outcome(pattern, self.workspace.display(target))

    def _grep_folder(self, search: _Search, folder: Path, file_glob: str | None) -> None:
        wanted = compile_glob(file_glob) if file_glob else None
        by_path = "/" in (file_glob or "")
        census = self.workspace.link_census()  # walks only if a file with several names shows up
        for walked in walk_files(self.workspace, folder, tool="grep"):
            name = self.workspace.display(walked.path)
            if wanted is not None:
                # A glob with a folder in it may be meant from the search folder or from the
                # workspace root ('tests/*.py' with path='tests'): either matches.
                candidates = (walked.relative, name) if by_path else (walked.name,)
                if not any(wanted.fullmatch(c) for c in candidates):
                    continue
            if not self._grep_one(search, walked, name, census):
                return

    def _grep_one(self, search: _Search, walked: WalkedFile, name: str, census: LinkCensus) -> bool:
        """Search one walked file; False once the time is up. A file that cannot be opened
        safely is passed over, a hard link to a file outside with a note."""
        try:
            if walked.is_link:
                with self.workspace.open_file(name, tool="grep", census=census) as opened:
                    return search.file(opened.handle, opened.status, name)
            fd, status = open_regular(walked.folder, walked.name)
            with os.fdopen(fd, "rb") as handle:
                if status.st_nlink > 1 and census.names_inside(status) < status.st_nlink:
                    search.linked_out.append(name)
                    return True
                return search.file(handle, status, name)
        except ToolError as exc:
            if exc.kind == "hard_link":
                search.linked_out.append(name)
            return True
        except OSError:
            return True  # unreadable, vanished, a pipe, swapped for a link: nothing to report

    def _folder(self, path: str, tool: str) -> Path:
        target = self.workspace.resolve(path)
        if not target.exists():
            raise ToolError(
                f"no folder {path!r} in the workspace; list_dir with no path shows the top",
                kind="not_found",
            )
        if not target.is_dir():
            raise ToolError(
                f"{path!r} is a file, not a folder; read it with read_file (or give {tool} "
                "its folder)",
                kind="not_a_directory",
            )
        return target


# -- list_dir --------------------------------------------------------------------------------------


@dataclass
class _Listing:
    lines: list[str] = field(default_factory=list)
    hidden: int = 0
    noise: set[str] = field(default_factory=set)
    unexpanded: bool = False

    def add(self, line: str) -> None:
        if len(self.lines) < LIST_DIR_MAX_ENTRIES:
            self.lines.append(line)
        else:
            self.hidden += 1

    def walk(self, folder: int, level: int, depth: int) -> None:
        """List the folder open as ``folder`` (a descriptor: no link is followed on the way)."""
        indent = "  " * (level - 1)
        try:
            entries = _sorted_entries(folder)
        except OSError as exc:
            self.add(f"{indent}[cannot list: {exc.strerror or exc}]")
            return
        for entry in entries:
            if entry.is_symlink():
                self.add(f"{indent}{entry.name}@ -> {_link_target(folder, entry.name)}")
            elif entry.is_dir(follow_symlinks=False):
                self._folder(folder, entry.name, indent, level, depth)
            else:
                self.add(f"{indent}{entry.name}")

    def _folder(self, parent: int, name: str, indent: str, level: int, depth: int) -> None:
        if is_noise_dir(name):
            self.noise.add(name + "/")
            self.add(f"{indent}{name}/ (not expanded)")
            return
        try:
            child = open_folder_at(parent, name)
        except OSError:
            self.add(f"{indent}{name}/ (unreadable)")
            return
        try:
            if level >= depth:
                self.unexpanded = True
                self.add(f"{indent}{name}/ ({_entry_count(child)})")
            elif len(self.lines) >= LIST_DIR_MAX_ENTRIES:
                self.hidden += 1 + _tree_size(child, depth - level)
            else:
                self.add(f"{indent}{name}/")
                self.walk(child, level + 1, depth)
        finally:
            os.close(child)


def _sorted_entries(folder: int) -> list[os.DirEntry[str]]:
    with os.scandir(folder) as listing:
        return sorted(listing, key=lambda entry: entry.name)


def _link_target(folder: int, name: str) -> str:
    try:
        return os.readlink(name, dir_fd=folder)
    except OSError:
        return "?"


def _entry_count(folder: int) -> str:
    try:
        with os.scandir(folder) as entries:
            return plural(sum(1 for _ in entries), "entry", "entries")
    except OSError:
        return "unreadable"


def _tree_size(folder: int, levels: int) -> int:
    """Entries under ``folder`` down to ``levels`` more levels, noise folders not entered."""
    try:
        entries = _sorted_entries(folder)
    except OSError:
        return 0
    total = len(entries)
    if levels > 0:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False) and not is_noise_dir(entry.name):
                try:
                    child = open_folder_at(folder, entry.name)
                except OSError:
                    continue
                try:
                    total += _tree_size(child, levels - 1)
                finally:
                    os.close(child)
    return total


# -- grep ------------------------------------------------------------------------------------------


@dataclass
class _Search:
    compiled: Any
    context: int
    deadline: float
    lines: list[str] = field(default_factory=list)
    matches: int = 0
    shown: int = 0
    files_matched: int = 0
    files_searched: int = 0
    binary: int = 0
    large: list[str] = field(default_factory=list)
    linked_out: list[str] = field(default_factory=list)
    """Hard links not searched: the file has a name outside the workspace (or not all found)."""
    timed_out: bool = False

    def file(self, handle: BinaryIO, status: os.stat_result, name: str) -> bool:
        """Search one open file; False once the time is up."""
        size = status.st_size
        if size > GREP_MAX_FILE_BYTES:
            self.large.append(f"{name} ({human_size(size)})")
            return True
        try:
            if looks_binary(handle.read(BINARY_SNIFF_BYTES)):
                self.binary += 1
                return True
            handle.seek(0)
            text = handle.read().decode("utf-8", "replace")
        except OSError:
            return True  # unreadable: nothing to report from it
        self.files_searched += 1
        try:
            starts = self._matching_lines(text)
        except TimeoutError:
            self.timed_out = True
            return False
        if starts:
            self.files_matched += 1
            self.matches += len(starts)
            self._show(text, name, starts)
        return time.monotonic() < self.deadline or self._stop()

    def _stop(self) -> bool:
        self.timed_out = True
        return False

    def _matching_lines(self, text: str) -> list[tuple[int, int]]:
        """(line number, column) of the first match on every matching line."""
        found: list[tuple[int, int]] = []
        line, scanned, position = 1, 0, 0
        while position < len(text):
            remaining = max(self.deadline - time.monotonic(), 0.001)
            match = self.compiled.search(text, position, timeout=remaining)
            if match is None:
                break
            line += text.count("\n", scanned, match.start())
            scanned = match.start()
            begin = text.rfind("\n", 0, match.start()) + 1
            found.append((line, match.start() - begin))
            end = text.find("\n", match.start())
            if end < 0:
                break
            position = end + 1  # one entry per line: go on from the next line
        return found

    def _show(self, text: str, name: str, starts: list[tuple[int, int]]) -> None:
        room = GREP_MAX_MATCHES - self.shown
        if room <= 0:
            return
        lines = text.split("\n")
        wanted = dict(starts[:room])
        self.shown += len(wanted)
        if self.context == 0:
            self.lines.extend(f"{name}:{n}:{_window(lines[n - 1], wanted[n])}" for n in wanted)
            return
        shown_until = 0
        for number in wanted:
            first = max(number - self.context, shown_until + 1, 1)
            last = min(number + self.context, len(lines))
            if shown_until and first > shown_until + 1:
                self.lines.append("--")
            for n in range(first, last + 1):
                if n in wanted:
                    self.lines.append(f"{name}:{n}:{_window(lines[n - 1], wanted[n])}")
                else:
                    self.lines.append(f"{name}-{n}-{_window(lines[n - 1], 0)}")
            shown_until = max(shown_until, last)
        self.lines.append("--")

    def outcome(self, pattern: str, where: str) -> ToolOutcome:
        metadata: dict[str, Any] = {
            "path": where,
            "matches": self.matches,
            "files": self.files_matched,
        }
        notes = []
        if self.large:
            notes.append(
                f"[skipped {plural(len(self.large), 'file')} larger than "
                f"{human_size(GREP_MAX_FILE_BYTES)}: {', '.join(self.large[:5])}; search them "
                "with shell]"
            )
        if self.linked_out:
            notes.append(
                f"[not searched: {plural(len(self.linked_out), 'hard link')} to a file with a "
                f"name outside the workspace: {', '.join(self.linked_out[:5])}; grep does not "
                "read files that links bring in from outside]"
            )
        if self.timed_out:
            notes.append(
                f"[search stopped after {GREP_SECONDS:g} s; results are partial: narrow the "
                "path or glob, or simplify the pattern]"
            )
        if not self.matches:
            searched = f"{plural(self.files_searched, 'file')} searched"
            if self.binary:
                searched += f", {plural(self.binary, 'binary file')} skipped"
            text = f"No matches for /{pattern}/ in {where} ({searched})"
            return ToolOutcome("\n".join([text, *notes]), metadata=metadata)
        while self.lines and self.lines[-1] == "--":
            self.lines.pop()
        shown = self.shown
        header = (
            f"Found {plural(self.matches, 'match', 'matches')} in "
            f"{plural(self.files_matched, 'file')}"
        )
        if shown < self.matches:
            notes.append(
                f"[showing the first {shown} matching lines; {self.matches - shown} more not "
                "shown: narrow the pattern, path or glob]"
            )
        return ToolOutcome("\n".join([header, *self.lines, *notes]), metadata=metadata)


def _window(line: str, column: int) -> str:
    line = line.rstrip("\r")
    if len(line) <= GREP_LINE_CHARS:
        return line
    start = max(0, min(column - GREP_LINE_CHARS // 4, len(line) - GREP_LINE_CHARS))
    head = "…" if start else ""
    tail = "…" if start + GREP_LINE_CHARS < len(line) else ""
    return f"{head}{line[start : start + GREP_LINE_CHARS]}{tail}"
