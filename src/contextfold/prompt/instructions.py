"""Project instructions from the AGENTS.md hierarchy, merged into one capped text.

Files are read in this order, from the most general to the most specific:

1. the global file in the user config folder (``<config dir>/AGENTS.md``);
2. the project root: the nearest folder, walking up from the working directory, that holds one
   of :data:`PROJECT_ROOT_MARKERS` (``.git``, ``.hg``, ``pyproject.toml``, ``package.json``,
   ``go.mod``);
3. every folder below the root, down to the working directory itself (root → leaf).

Outside any project only the global file and the working directory's own file are read.

A file is read only when it resolves inside the project (for the working directory's own file
outside any project: inside that directory), or inside the user config folder for the global
file, and it is opened there through descriptors, never following a link that appears meanwhile
(:mod:`contextfold.confined_files`). A cloned repository can carry an ``AGENTS.md`` that is a
symlink to ``~/.aws/credentials``: that file is not read, and
:attr:`LoadedInstructions.refused` says so, for the CLI to warn the user. A file with several
hard links is read only when all its names are inside too.

In each folder at most one file is used: the first readable regular file in the preference list,
by default :data:`DEFAULT_FILE_NAMES` = ``AGENTS.override.md``, ``AGENTS.md``, ``CLAUDE.md``. So
an override replaces the regular file of its folder (for a local change you do not commit), and a
``CLAUDE.md`` is read only where no AGENTS.md exists. Later pieces are more specific and, where
they disagree, meant to win; each piece is headed by its source path.

The merged text is capped at :data:`DEFAULT_MAX_BYTES` (UTF-8) including headers and marker:
pieces are kept in order until the cap, the piece that crosses it is cut, the rest is left out,
and a marker names what was cut and how many bytes. Files that cannot be read (permissions,
symlink loops, a folder or a pipe under the name) are skipped with a note in
:attr:`LoadedInstructions.notes`, never raised. Text is decoded as UTF-8, invalid bytes replaced.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeAlias

from contextfold import paths as _paths
from contextfold.confined_files import ConfinedRoot, LinkCensus, LinkInPathError
from contextfold.errors import ConfigError

__all__ = [
    "DEFAULT_FILE_NAMES",
    "DEFAULT_MAX_BYTES",
    "PROJECT_ROOT_MARKERS",
    "InstructionSource",
    "InstructionsLoader",
    "LoadedInstructions",
    "find_project_root",
]

DEFAULT_MAX_BYTES = 32 * 1024
"""Cap on the merged instructions in UTF-8 bytes: large enough for real rule files, small enough
that instructions never crowd out the conversation (about 8k tokens)."""

DEFAULT_FILE_NAMES: tuple[str, ...] = ("AGENTS.override.md", "AGENTS.md", "CLAUDE.md")
"""Instruction file names in order of preference; the first readable one in a folder is used."""

PROJECT_ROOT_MARKERS: tuple[str, ...] = (".git", ".hg", "pyproject.toml", "package.json", "go.mod")
"""A folder holding any of these is a project root."""

_PIECE_SEPARATOR = "\n\n"
_MARKER_MAX_FILES = 5
"""Files the truncation marker names one by one before it summarises the rest as a count."""

SourceScope: TypeAlias = Literal["global", "project", "directory"]
"""``global``: the user config folder; ``project``: the project root; ``directory``: a folder
below the root (or the working directory when there is no project)."""

# A file's identity for change detection: its path, and (mtime_ns, size, inode) or None if absent.
_Fingerprint: TypeAlias = tuple[tuple[str, tuple[int, int, int] | None], ...]


@dataclass(frozen=True, slots=True)
class InstructionSource:
    """One instruction file that was found, and how much of it made it into the text."""

    path: Path
    scope: SourceScope
    size: int
    """Bytes on disk."""
    included_bytes: int
    """Bytes of its (decoded) content in the merged text; less than ``size`` when cut."""
    truncated: bool
    """The file was cut or left out by the size cap."""


@dataclass(frozen=True, slots=True)
class LoadedInstructions:
    """The merged instructions text and where every piece of it came from."""

    text: str
    sources: tuple[InstructionSource, ...]
    truncated: bool
    notes: tuple[str, ...]
    """Why files were skipped (unreadable, symlink loop, not a regular file, duplicate)."""
    project_root: Path | None
    max_bytes: int
    refused: tuple[str, ...] = ()
    """Files not read because they lead outside the project (or outside the config folder, for
    the global file), each with where it leads: a user should see these (the CLI warns)."""

    @property
    def size(self) -> int:
        """Bytes of the merged text (UTF-8), never more than ``max_bytes``."""
        return len(self.text.encode("utf-8"))


def find_project_root(
    start: str | os.PathLike[str], markers: Sequence[str] = PROJECT_ROOT_MARKERS
) -> Path | None:
    """The nearest folder at or above ``start`` that holds one of ``markers``, else ``None``."""
    current = _resolve(Path(start))
    for folder in (current, *current.parents):
        for marker in markers:
            try:
                if (folder / marker).exists():
                    return folder
            except OSError:
                continue  # an unreadable folder cannot tell us it is a root; keep walking
    return None


def _resolve(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        # A symlink loop in the working directory's own path: use it as written.
        return path.absolute()


@dataclass(frozen=True, slots=True)
class _Piece:
    path: Path
    scope: SourceScope
    size: int
    header: str
    body: str


class InstructionsLoader:
    """Loads and merges the AGENTS.md hierarchy for one working directory.

    ``global_dir`` defaults to the user config folder, read at every load (so
    ``CONTEXTFOLD_HOME`` applies); ``include_global=False`` leaves the global file out.
    """

    def __init__(
        self,
        cwd: str | os.PathLike[str] | None = None,
        *,
        global_dir: str | os.PathLike[str] | None = None,
        include_global: bool = True,
        file_names: Sequence[str] = DEFAULT_FILE_NAMES,
        root_markers: Sequence[str] = PROJECT_ROOT_MARKERS,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        if max_bytes <= 0:
            raise ConfigError("instructions.max_bytes", f"must be positive, got {max_bytes}")
        if not file_names or any(not n or "/" in n or "\\" in n for n in file_names):
            raise ConfigError(
                "instructions.file_names", f"need plain file names, got {list(file_names)!r}"
            )
        self.cwd = Path(cwd).absolute() if cwd is not None else Path.cwd()
        self.global_dir = Path(global_dir) if global_dir is not None else None
        self.include_global = include_global
        self.file_names = tuple(file_names)
        self.root_markers = tuple(root_markers)
        self.max_bytes = max_bytes
        self._current: LoadedInstructions | None = None
        self._fingerprint: _Fingerprint | None = None

    @property
    def current(self) -> LoadedInstructions | None:
        """The instructions of the last load, or ``None`` before the first one."""
        return self._current

    def folders(self) -> list[tuple[Path, SourceScope]]:
        """The folders searched, in reading order, each with its scope."""
        folders: list[tuple[Path, SourceScope]] = []
        if self.include_global:
            folders.append((self.global_dir or _paths.config_dir(), "global"))
        cwd = _resolve(self.cwd)
        root = find_project_root(cwd, self.root_markers)
        if root is None:
            folders.append((cwd, "directory"))
            return folders
        folders.append((root, "project"))
        current = root
        for part in cwd.relative_to(root).parts:
            current = current / part
            folders.append((current, "directory"))
        return folders

    def load(self) -> LoadedInstructions:
        """Reads every instruction file now and returns the merged, capped text."""
        folders = self.folders()
        # Fingerprint first: a file edited while we read shows up as a change at the next check.
        fingerprint = self._take_fingerprint(folders)
        root = next((f for f, scope in folders if scope == "project"), None)
        pieces, skips = self._read_pieces(folders)
        loaded = _merge(pieces, skips, root, self.max_bytes)
        self._current, self._fingerprint = loaded, fingerprint
        return loaded

    def reload_if_changed(self) -> bool:
        """Reloads when a file changed; returns whether the merged text is now different.

        Only ``stat`` is called unless a candidate file's mtime, size or inode changed, or a
        file appeared or disappeared (an added override counts). A file rewritten with the same
        text, or only touched, is re-read but reports ``False``, so the prompt's cache
        breakpoint does not move. The first call loads and reports ``True``.
        """
        previous = self._current
        if previous is not None and self._take_fingerprint(self.folders()) == self._fingerprint:
            return False
        return self.load().text != (previous.text if previous is not None else None)

    # -- reading -----------------------------------------------------------------------------------

    def _take_fingerprint(self, folders: list[tuple[Path, SourceScope]]) -> _Fingerprint:
        entries: list[tuple[str, tuple[int, int, int] | None]] = []
        for folder, _scope in folders:
            for name in self.file_names:
                path = folder / name
                try:
                    st = path.stat()
                    entries.append((str(path), (st.st_mtime_ns, st.st_size, st.st_ino)))
                except OSError:
                    entries.append((str(path), None))
        return tuple(entries)

    def _read_pieces(self, folders: list[tuple[Path, SourceScope]]) -> tuple[list[_Piece], _Skips]:
        pieces: list[_Piece] = []
        skips = _Skips()
        seen: dict[Path, Path] = {}
        fences = _Fences(folders)
        for folder, scope in folders:
            fence = fences.of(scope)
            for name in self.file_names:
                path = folder / name
                read = _read_file(path, fence, self.max_bytes, skips)
                if read is None:
                    continue
                size, text = read
                real = _resolve(path)
                if real in seen:
                    # A symlink to a file already read: its text is in the prompt once.
                    skips.note(f"{path}: skipped, same file as {seen[real]}")
                    break
                seen[real] = path
                body = text.rstrip()
                if body:
                    label = "global instructions" if scope == "global" else "instructions"
                    pieces.append(_Piece(path, scope, size, f"[{label} from {path}]", body))
                else:
                    pieces.append(_Piece(path, scope, size, "", ""))
                break
        return pieces, skips


@dataclass
class _Fence:
    """The folder an instruction file must resolve inside, opened through descriptors."""

    folder: Path
    """Resolved."""
    label: str
    root: ConfinedRoot
    census: LinkCensus | None = None

    @classmethod
    def around(cls, folder: Path, label: str) -> _Fence:
        resolved = _resolve(folder)
        return cls(resolved, label, ConfinedRoot(resolved))

    def names_inside(self, status: os.stat_result) -> bool:
        """Whether every hard link of the file whose status is ``status`` is inside."""
        if self.census is None:
            self.census = LinkCensus(self.root)
        return self.census.names_inside(status) >= status.st_nlink


class _Fences:
    """The fence of each scope: the config folder for the global file, the project root (or,
    outside any project, the working directory) for the others."""

    def __init__(self, folders: list[tuple[Path, SourceScope]]) -> None:
        self._global: _Fence | None = None
        self._local: _Fence | None = None
        for folder, scope in folders:
            if scope == "global":
                self._global = _Fence.around(folder, "the config folder")
            elif self._local is None:  # the first local folder is the root (or the cwd)
                label = "the project" if scope == "project" else "the working directory"
                self._local = _Fence.around(folder, label)

    def of(self, scope: SourceScope) -> _Fence:
        fence = self._global if scope == "global" else self._local
        assert fence is not None, "every scope read has a folder, so a fence"
        return fence


@dataclass
class _Skips:
    """Why files were not read: every reason (``notes``), and the refusals a user should see."""

    notes: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def refuse(self, text: str) -> None:
        self.notes.append(text)
        self.refused.append(text)


def _read_file(path: Path, fence: _Fence, limit: int, skips: _Skips) -> tuple[int, str] | None:
    """``(size on disk, text)`` of a readable regular file inside ``fence``, else ``None`` (with
    a note if odd, and a refusal when the file leads outside the fence)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            skips.note(f"{path}: skipped, broken symlink")
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            skips.note(f"{path}: skipped, symlink loop")
        elif exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            skips.note(f"{path}: skipped, {exc.strerror or exc}")
        return None
    if not stat.S_ISREG(st.st_mode):
        # Opening a FIFO would block forever; a folder cannot be read as text.
        skips.note(f"{path}: skipped, not a regular file")
        return None
    real = _resolve(path)
    if not real.is_relative_to(fence.folder):
        skips.refuse(
            f"{path}: not read, it leads to {real}, outside {fence.label} ({fence.folder}); "
            "instructions are read only from inside it. Replace the link with a copy of the "
            "file if you trust it."
        )
        return None
    try:
        with fence.root.open_file(fence.root.parts(real)) as (handle, status):
            if status.st_nlink > 1 and not fence.names_inside(status):
                skips.refuse(
                    f"{path}: not read, it is a hard link to a file with a name outside "
                    f"{fence.label} ({fence.folder}). Replace it with a copy if you trust it."
                )
                return None
            # Bytes past the cap can never reach the prompt, so a huge file is not read whole.
            data = handle.read(limit)
    except LinkInPathError:
        skips.note(f"{path}: skipped, it changed while being read (a symlink appeared in it)")
        return None
    except OSError as exc:
        skips.note(f"{path}: skipped, {exc.strerror or exc}")
        return None
    return status.st_size, data.decode("utf-8-sig", errors="replace")


# -- merging ---------------------------------------------------------------------------------------


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _cut_utf8(text: str, limit: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 form fits ``limit`` bytes."""
    if limit <= 0:
        return ""
    return text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")


def _merge(
    pieces: list[_Piece], skips: _Skips, root: Path | None, max_bytes: int
) -> LoadedInstructions:
    notes, refused = tuple(skips.notes), tuple(skips.refused)
    shown = [p for p in pieces if p.body]
    full = [f"{p.header}\n{p.body}" for p in shown]
    text = _PIECE_SEPARATOR.join(full)
    if _utf8_len(text) <= max_bytes:
        sources = tuple(
            InstructionSource(p.path, p.scope, p.size, _utf8_len(p.body), False) for p in pieces
        )
        return LoadedInstructions(text, sources, False, notes, root, max_bytes, refused)

    # The marker's length depends on what it reports, which depends on the room it leaves:
    # grow the reserve until the marker fits in it (a few rounds: only digits change).
    reserve = 0
    kept: list[str] = []
    included: dict[Path, int] = {}
    marker = ""
    for _ in range(8):
        kept, included = _fill(shown, full, max_bytes - reserve)
        marker = _marker(shown, included, max_bytes)
        needed = _utf8_len(marker) + (len(_PIECE_SEPARATOR) if kept else 0)
        if needed <= reserve:
            break
        reserve = needed
    merged = _PIECE_SEPARATOR.join([*kept, marker]) if kept else marker
    merged = _cut_utf8(merged, max_bytes)  # only bites when the cap is smaller than the marker
    sources = tuple(
        InstructionSource(
            p.path,
            p.scope,
            p.size,
            included.get(p.path, 0),
            bool(p.body) and included.get(p.path, 0) < _utf8_len(p.body),
        )
        for p in pieces
    )
    return LoadedInstructions(merged, sources, True, notes, root, max_bytes, refused)


def _fill(shown: list[_Piece], full: list[str], budget: int) -> tuple[list[str], dict[Path, int]]:
    """The pieces that fit ``budget`` bytes, the last one cut; body bytes kept per file."""
    kept: list[str] = []
    included: dict[Path, int] = {}
    used = 0
    for piece, whole in zip(shown, full, strict=True):
        separator = len(_PIECE_SEPARATOR) if kept else 0
        room = budget - used - separator
        size = _utf8_len(whole)
        if size <= room:
            kept.append(whole)
            included[piece.path] = _utf8_len(piece.body)
            used += separator + size
            continue
        header = piece.header + "\n"
        body_room = room - _utf8_len(header)
        if body_room > 0:
            cut = _cut_utf8(piece.body, body_room).rstrip()
            if cut:
                kept.append(header + cut)
                included[piece.path] = _utf8_len(cut)
        break
    return kept, included


def _marker(shown: list[_Piece], included: dict[Path, int], max_bytes: int) -> str:
    cut: list[str] = []
    for piece in shown:
        body = _utf8_len(piece.body)
        kept = included.get(piece.path, 0)
        if kept >= body:
            continue
        # The file's size on disk: what a user sees with ls, and the body may be a read prefix.
        if kept:
            cut.append(f"{piece.path} cut after {kept} of {piece.size} bytes")
        else:
            cut.append(f"{piece.path} left out ({piece.size} bytes)")
    listed = cut[:_MARKER_MAX_FILES]
    if len(cut) > len(listed):
        listed.append(f"{len(cut) - len(listed)} more files left out")
    return f"[instructions truncated to {max_bytes} bytes: {'; '.join(listed)}]"
