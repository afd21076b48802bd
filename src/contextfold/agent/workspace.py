"""The folder the coding agent works in, and the fence that keeps every tool inside it.

Every path a model (or a user) hands to a coding tool goes through :meth:`Workspace.resolve`.
Relative paths are taken from the workspace root; absolute paths are accepted only when they
point inside it. Symbolic links are followed before the check, so a link inside the workspace
that points elsewhere is refused like the path it points to.

A check by name can be outrun: a process that swaps a file for a symlink between the check and
the open would lead the tool outside. So the tools never open the path by name: they open what
the check resolved through descriptors, walking from the root without following any link
(:mod:`contextfold.confined_files`); a link that appeared after the check stops the call.

Hard links are the other way out: a name in the workspace can be a second name of a file
outside it. A file with several names is never written, and read only when all its names are
found inside the workspace (:class:`~contextfold.confined_files.LinkCensus`).
"""

from __future__ import annotations

import difflib
import errno
import os
import stat
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from contextfold.agent._outcome import ToolError
from contextfold.confined_files import (
    HARD_LINK_SCAN_ENTRIES,
    ConfinedRoot,
    HardLinkedFileError,
    LinkCensus,
    LinkInPathError,
    NotRegularFileError,
)

__all__ = [
    "BINARY_SNIFF_BYTES",
    "NOISE_DIRS",
    "OpenedFile",
    "PathOutsideWorkspaceError",
    "Workspace",
    "is_noise_dir",
    "looks_binary",
]

NOISE_DIRS: frozenset[str] = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        "node_modules",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".eggs",
        ".idea",
        ".next",
        ".gradle",
    }
)
"""Folders that listing and searching tools skip when walking: version control, caches,
virtual environments and installed dependencies. Naming one explicitly still lists it."""

BINARY_SNIFF_BYTES = 8192
"""Bytes looked at to decide whether a file is binary (git's heuristic: a NUL byte there)."""

_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
# What following links by name meets when a link is swapped for a file under it (readlink of
# a name that stopped being a link, or vanished).
_RACED_ERRNOS = frozenset({errno.EINVAL, errno.ENOENT})


def is_noise_dir(name: str) -> bool:
    """True for a folder name the walking tools skip (see :data:`NOISE_DIRS`)."""
    return name in NOISE_DIRS or name.endswith(".egg-info")


def looks_binary(head: bytes) -> bool:
    """True when ``head`` (the start of a file) holds a NUL byte outside a UTF-16 text file."""
    return b"\x00" in head and not head.startswith(_UTF16_BOMS)


class PathOutsideWorkspaceError(ToolError):
    """A path points outside the workspace (through ``..``, an absolute path or a symlink)."""

    def __init__(self, path: str, root: Path) -> None:
        self.path = path
        self.root = root
        super().__init__(
            f"path {path!r} is outside the workspace {root}; use a path relative to it "
            "(for example 'src/main.py'), or '.' for the workspace itself",
            kind="outside_workspace",
        )


@dataclass(frozen=True, slots=True)
class OpenedFile:
    """A workspace file open for reading (see :meth:`Workspace.open_file`)."""

    path: Path
    """Absolute, with symlinks resolved."""
    handle: BinaryIO
    status: os.stat_result
    """The status of the open file (``fstat``): what was opened, whatever the name holds now."""


class Workspace:
    """A root folder and the confinement of every tool path to it."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        resolved = Path(root).expanduser().resolve()
        if not resolved.is_dir():
            raise NotADirectoryError(f"workspace root {resolved} is not a directory")
        self.root: Path = resolved
        """The workspace folder, absolute and with symlinks resolved."""
        self._confined = ConfinedRoot(resolved)

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    def resolve(self, path: str | os.PathLike[str] | None = None) -> Path:
        """The absolute, symlink-free path ``path`` names inside the workspace.

        ``None`` or ``""`` is the root. Raises :class:`PathOutsideWorkspaceError` when the path
        (after following symlinks and ``..``) leaves the workspace, and :class:`ToolError` for a
        path the filesystem cannot hold (a NUL character). The path need not exist.
        """
        text = os.fspath(path) if path is not None else ""
        if "\x00" in text:
            raise ToolError(f"path {text!r} contains a NUL character", kind="invalid_path")
        candidate = Path(text)
        if text.startswith("~"):
            try:
                candidate = candidate.expanduser()
            except RuntimeError:  # "~name" of an unknown user: a plain relative name then
                pass
        if not candidate.is_absolute():
            candidate = self.root / candidate
        try:
            resolved = candidate.resolve()
        except OSError as exc:
            if exc.errno in _RACED_ERRNOS:
                raise ToolError(
                    f"path {text!r} changed while it was being checked (a symlink in it was "
                    "replaced meanwhile); nothing was read or written. Try again; if this keeps "
                    "happening, something else is changing the workspace.",
                    kind="path_changed",
                ) from exc
            raise ToolError(
                f"path {text!r} cannot be resolved: {exc}", kind="invalid_path"
            ) from exc
        except RuntimeError as exc:  # a symlink loop, on Python 3.11
            raise ToolError(
                f"path {text!r} cannot be resolved: {exc}", kind="invalid_path"
            ) from exc
        if not resolved.is_relative_to(self.root):
            raise PathOutsideWorkspaceError(text, self.root)
        return resolved

    def contains(self, path: str | os.PathLike[str]) -> bool:
        """True when ``path`` (absolute, or relative to the root) resolves inside the workspace."""
        try:
            self.resolve(path)
        except ToolError:
            return False
        return True

    def display(self, path: Path) -> str:
        """How tools name ``path`` to the model: relative to the root with ``/``, ``.`` for it."""
        try:
            relative = path.relative_to(self.root)
        except ValueError:
            return str(path)
        return relative.as_posix() or "."

    # -- opening, through descriptors --------------------------------------------------------------

    @contextmanager
    def open_file(
        self, path: str, *, tool: str, census: LinkCensus | None = None
    ) -> Iterator[OpenedFile]:
        """The regular file ``path`` names, open for reading, reached without following a link
        out of the workspace.

        Raises :class:`ToolError` for the model when the path is outside, missing, a folder or a
        special file, when a symlink appeared in it after the check, and when the file has
        several names (hard links) that are not all inside the workspace. ``census`` counts
        those names; a tool that opens many files shares one between them.
        """
        target = self.resolve(path)
        with ExitStack() as stack:
            try:
                opening = self._confined.open_file(self._confined.parts(target))
                handle, status = stack.enter_context(opening)
            except OSError as exc:
                raise self._open_error(exc, path, target, tool) from exc
            if status.st_nlink > 1:
                self._require_names_inside(path, status, tool, census or self.link_census())
            yield OpenedFile(target, handle, status)

    def writable_target(self, path: str, *, tool: str) -> tuple[Path, os.stat_result | None]:
        """Where ``path`` leads and the status of the file there (``None``: it would be created),
        once it is known that ``tool`` may write it: not a folder, a special file, or a file
        with several names (hard links)."""
        target = self.resolve(path)
        try:
            status = self._confined.status(self._confined.parts(target))
        except OSError as exc:
            raise self._open_error(exc, path, target, tool) from exc
        if status is not None:
            _require_writable(path, status, tool)
        return target, status

    def replace_file(self, target: Path, data: bytes, *, path: str, tool: str) -> bool:
        """Write ``data`` to ``target`` (from :meth:`writable_target`) atomically: a temporary
        file beside it renamed over it, through descriptors. Missing folders are made. Returns
        whether a file was replaced."""
        try:
            replaced = self._confined.replace(self._confined.parts(target), data)
        except HardLinkedFileError as exc:
            raise _hard_link_write_error(path, exc.status, tool) from exc
        except OSError as exc:
            raise self._open_error(exc, path, target, tool) from exc
        return replaced is not None

    @contextmanager
    def open_folder(self, target: Path, *, path: str, tool: str) -> Iterator[int]:
        """A descriptor of the workspace folder ``target`` (resolved from ``path``)."""
        with ExitStack() as stack:
            try:
                fd = stack.enter_context(self._confined.folder(self._confined.parts(target)))
            except OSError as exc:
                raise self._open_error(exc, path, target, tool) from exc
            yield fd

    def link_census(self) -> LinkCensus:
        """A fresh count of the names files have inside the workspace (made on first use)."""
        return LinkCensus(self._confined)

    def _require_names_inside(
        self, path: str, status: os.stat_result, tool: str, census: LinkCensus
    ) -> None:
        names = status.st_nlink
        found = census.names_inside(status)
        if found >= names:
            return
        if census.complete:
            outside = names - found
            where = f"{outside} of them {'is' if outside == 1 else 'are'} outside the workspace"
        else:
            where = (
                "not all of them could be found in the workspace (it has more than "
                f"{HARD_LINK_SCAN_ENTRIES:,} entries to look through)"
            )
        raise ToolError(
            f"{path!r} is a hard link: the file has {names} names, and {where}. {tool} does not "
            "read such a file, so that a link cannot bring a file from outside into the "
            "workspace; nothing was read. If you need its content, ask the user to copy the "
            "file into the workspace.",
            kind="hard_link",
        )

    def _open_error(self, exc: OSError, path: str, target: Path, tool: str) -> Exception:
        """The :class:`ToolError` the model reads for ``exc``, or ``exc`` itself."""
        if isinstance(exc, LinkInPathError):
            return _changed_error(path, tool)
        if isinstance(exc, NotRegularFileError):
            return _kind_error(path, exc.status, tool)
        if isinstance(exc, IsADirectoryError):
            return _kind_error(path, self.root.stat(), tool)
        if isinstance(exc, (FileNotFoundError, NotADirectoryError)):
            return ToolError(_missing(self, path, target), kind="not_found")
        return exc


def _changed_error(path: str, tool: str) -> ToolError:
    return ToolError(
        f"{path!r} changed while {tool} was opening it: a symlink now stands in its path where "
        f"there was none when the path was checked, and {tool} does not follow it. Nothing was "
        "read or written. Try again; if this keeps happening, something else is changing the "
        "workspace.",
        kind="path_changed",
    )


def _kind_error(path: str, status: os.stat_result, tool: str) -> ToolError:
    """The error for a folder or a special file where ``tool`` wants a regular file."""
    if stat.S_ISDIR(status.st_mode):
        if tool == "write_file":
            return ToolError(
                f"{path!r} is a directory; give the path of a file inside it", kind="is_directory"
            )
        return ToolError(
            f"{path!r} is a directory, not a file; use list_dir to see what it holds",
            kind="is_directory",
        )
    # Opening a pipe or a device could block the agent forever.
    return ToolError(f"{path!r} is not a regular file; {tool} works on files only", kind="special")


def _require_writable(path: str, status: os.stat_result, tool: str) -> None:
    if stat.S_ISLNK(status.st_mode):  # the check resolved every link: this one is new
        raise _changed_error(path, tool)
    if not stat.S_ISREG(status.st_mode):
        raise _kind_error(path, status, tool)
    if status.st_nlink > 1:
        raise _hard_link_write_error(path, status, tool)


def _hard_link_write_error(path: str, status: os.stat_result, tool: str) -> ToolError:
    return ToolError(
        f"{path!r} is a hard link: the file has {status.st_nlink} names, some possibly outside "
        "the workspace. Changing it in place would change it under every name, and replacing "
        f"it would split the link, so {tool} leaves it alone; nothing was written. Write the "
        "new content under another path, or ask the user to replace the link with a plain copy "
        "of the file.",
        kind="hard_link",
    )


def _missing(workspace: Workspace, path: str, target: Path) -> str:
    """Why ``path`` cannot be opened when nothing is there, with the names it may have meant."""
    parent = target.parent
    if not parent.is_dir():
        return (
            f"no file {path!r}: the folder {workspace.display(parent)!r} does not exist either; "
            "use glob (e.g. pattern '**/name*') or list_dir to find the file"
        )
    try:
        names = [entry.name for entry in parent.iterdir()]
    except OSError:
        names = []
    close = difflib.get_close_matches(target.name, names, n=3, cutoff=0.6)
    hint = ""
    if close:
        shown = ", ".join(repr(workspace.display(parent / name)) for name in close)
        hint = f" Similar names: {shown}."
    return f"no file {path!r} in the workspace.{hint} Use glob or list_dir to find files."
