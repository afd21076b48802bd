"""Files opened beneath a folder through descriptors, so that no symlink leads out of it.

A path checked by name (symlinks followed, ``..`` collapsed, the result inside the folder) can
change before it is opened: a process that swaps a component for a symlink between the check and
the open reaches whatever the link names. :class:`ConfinedRoot` opens a checked path (one that
holds no symlink and no ``..``) by walking from a descriptor of the folder, one component at a
time, each opened relative to the one before with ``O_NOFOLLOW`` (and ``O_DIRECTORY`` for
folders). A symlink met on the walk is a swap: the walk stops there with
:class:`LinkInPathError` instead of following it. The cost is an ``openat`` and a ``close`` per
component, and an ``lstat`` and an ``fstat`` for the file.

Writes (:meth:`ConfinedRoot.replace`) go to a temporary file beside the target, created through
the folder's descriptor with ``O_EXCL | O_NOFOLLOW``, then renamed over the target through the
same descriptor: a reader sees the old file or the new one, never half of one, and a symlink
planted at the target is replaced, never written through. A file with several names (hard links)
is not replaced at all (:class:`HardLinkedFileError`): its other names may lie anywhere.

A hard link is invisible to a walk: a name inside the folder may share its inode with
``~/.aws/credentials``. :class:`LinkCensus` counts the names each file has beneath the folder (one
``readdir`` walk: inode numbers come with the entries), so a caller can read a file with several
names only when all of them are inside.

Not guarded: a folder moved out of the tree while a walk is inside it. Only a process that can
write on both sides can do that, and it can read what lies there itself.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections import Counter
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import closing, contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "HARD_LINK_SCAN_ENTRIES",
    "WALK_MAX_DEPTH",
    "ConfinedRoot",
    "HardLinkedFileError",
    "LinkCensus",
    "LinkInPathError",
    "NotRegularFileError",
    "open_folder_at",
    "open_regular",
    "walk_folders",
]

HARD_LINK_SCAN_ENTRIES = 200_000
"""Entries :class:`LinkCensus` looks at before it gives up: past it, a file with several names
cannot be proven to have all of them inside, and is treated as having one outside."""
WALK_MAX_DEPTH = 200
"""Deepest folder level :func:`walk_folders` enters (a hostile tree may nest without end)."""

_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a pipe swapped in after the lstat must not block the open (the fstat refuses it).
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# What open(O_NOFOLLOW) says about a symlink: ELOOP on Linux and macOS, EMLINK on FreeBSD.
_NOFOLLOW_ERRNOS = frozenset({errno.ELOOP, errno.EMLINK})
_TEMPORARY_STEM_BYTES = 180  # file names are limited to 255 bytes; the suffix needs the rest


class LinkInPathError(OSError):
    """A symlink stands where the checked path had a file or a folder: the path changed after
    it was checked, and the walk did not follow the link."""

    def __init__(self, name: str) -> None:
        super().__init__(errno.ELOOP, "a symlink appeared in the path", name)


class NotRegularFileError(OSError):
    """The name is a folder, a pipe, a device or a socket where a regular file was wanted."""

    def __init__(self, name: str, status: os.stat_result) -> None:
        self.status = status
        code = errno.EISDIR if stat.S_ISDIR(status.st_mode) else errno.EINVAL
        super().__init__(code, "not a regular file", name)


class HardLinkedFileError(OSError):
    """The file has several names (hard links); replacing it would split them."""

    def __init__(self, name: str, status: os.stat_result) -> None:
        self.status = status
        super().__init__(errno.EMLINK, f"the file has {status.st_nlink} names", name)


class ConfinedRoot:
    """A folder, and files and folders beneath it opened by descriptor (see the module doc).

    Paths are given as their components below the root (``("src", "app.py")``), as found by a
    check by name that resolved every symlink: none of them may be ``..`` or a symlink.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"ConfinedRoot({str(self.root)!r})"

    def parts(self, path: Path) -> tuple[str, ...]:
        """The components of ``path`` (absolute, inside the root) below the root."""
        return path.relative_to(self.root).parts

    @contextmanager
    def folder(self, parts: Sequence[str], *, create: bool = False) -> Iterator[int]:
        """A descriptor of the folder ``parts`` names (the root for none), walked without
        following a symlink; missing folders are made on the way when ``create``."""
        fd = os.open(self.root, _FOLDER_FLAGS)
        try:
            for part in parts:
                child = _open_child(fd, part, create=create)
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)

    @contextmanager
    def open_file(self, parts: Sequence[str]) -> Iterator[tuple[BinaryIO, os.stat_result]]:
        """The regular file ``parts`` names, open for reading, and its status."""
        if not parts:
            raise IsADirectoryError(errno.EISDIR, "the root is a folder", str(self.root))
        with self.folder(parts[:-1]) as folder:
            fd, status = open_regular(folder, parts[-1])
        with os.fdopen(fd, "rb") as handle:
            yield handle, status

    def status(self, parts: Sequence[str]) -> os.stat_result | None:
        """The status of what ``parts`` names (a symlink's own), ``None`` when it is missing."""
        if not parts:
            return self.root.stat()
        try:
            with self.folder(parts[:-1]) as folder:
                return os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def replace(self, parts: Sequence[str], data: bytes) -> os.stat_result | None:
        """Write ``data`` as the file ``parts`` names, atomically, making missing folders; the
        status of the file it replaced (``None`` for a new file). An existing file keeps its
        permission bits; a symlink, a folder or a special file there raises, as does a file with
        several names (:class:`HardLinkedFileError`) or one the user may not write."""
        if not parts:
            raise IsADirectoryError(errno.EISDIR, "the root is a folder", str(self.root))
        with self.folder(parts[:-1], create=True) as folder:
            return _replace_in(folder, parts[-1], data)


def _open_child(fd: int, name: str, *, create: bool) -> int:
    try:
        return open_folder_at(fd, name)
    except FileNotFoundError:
        if not create:
            raise
    with suppress(FileExistsError):  # made meanwhile by someone else: opened below all the same
        os.mkdir(name, dir_fd=fd)
    return open_folder_at(fd, name)


def open_folder_at(fd: int, name: str) -> int:
    """A descriptor of the folder ``name`` in the folder descriptor ``fd``; a symlink there
    raises :class:`LinkInPathError`."""
    try:
        return os.open(name, _FOLDER_FLAGS, dir_fd=fd)
    except OSError as exc:
        if exc.errno in _NOFOLLOW_ERRNOS or (exc.errno == errno.ENOTDIR and _is_link(fd, name)):
            raise LinkInPathError(name) from None
        raise


def _exists(fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _is_link(fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _require_regular(name: str, status: os.stat_result) -> None:
    if stat.S_ISLNK(status.st_mode):
        raise LinkInPathError(name)
    if not stat.S_ISREG(status.st_mode):
        raise NotRegularFileError(name, status)


def open_regular(folder: int, name: str) -> tuple[int, os.stat_result]:
    """A read descriptor of the regular file ``name`` in the folder descriptor ``folder``, and
    its status; a symlink there raises :class:`LinkInPathError`, anything else that is not a
    regular file :class:`NotRegularFileError` (a pipe or a device is never opened)."""
    _require_regular(name, os.stat(name, dir_fd=folder, follow_symlinks=False))
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=folder)
    except OSError as exc:
        if exc.errno in _NOFOLLOW_ERRNOS:
            raise LinkInPathError(name) from None
        raise
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):  # swapped for a pipe after the lstat
        os.close(fd)
        raise NotRegularFileError(name, status)
    return fd, status


def _replace_in(folder: int, name: str, data: bytes) -> os.stat_result | None:
    try:
        old: os.stat_result | None = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old is not None:
        _require_regular(name, old)
        if old.st_nlink > 1:
            raise HardLinkedFileError(name, old)
        # A rename would replace a read-only file the user could not write in place. (access()
        # also says no for a file that vanished meanwhile: that one is simply created.)
        if not os.access(name, os.W_OK, dir_fd=folder) and _exists(folder, name):
            raise PermissionError(errno.EACCES, "Permission denied", name)
    stem = os.fsencode(name)[:_TEMPORARY_STEM_BYTES].decode(errors="ignore")
    temporary = f".{stem}.{secrets.token_hex(6)}.contextfold-tmp"
    fd = os.open(temporary, _CREATE_FLAGS, 0o666, dir_fd=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            if old is not None:
                os.fchmod(handle.fileno(), stat.S_IMODE(old.st_mode))
            handle.write(data)
        os.rename(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary, dir_fd=folder)
        raise
    return old


def walk_folders(
    folder: int, enter: Callable[[str], bool] = lambda name: True
) -> Generator[tuple[str, int, list[os.DirEntry[str]]], None, None]:
    """``(path relative to the folder with a trailing "/" or "", descriptor, entries sorted by
    name)`` for the folder and the folders below it, top down; a subfolder is entered only when
    ``enter(name)`` says so, a symlink never. A descriptor is valid until the next item.
    Unreadable folders, and folders swapped for something else, are left out."""
    yield from _walk(folder, "", enter, 0)


def _walk(
    fd: int, relative: str, enter: Callable[[str], bool], depth: int
) -> Iterator[tuple[str, int, list[os.DirEntry[str]]]]:
    try:
        with os.scandir(fd) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError:
        return
    yield relative, fd, entries
    if depth >= WALK_MAX_DEPTH:
        return
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False) or not enter(entry.name):
            continue
        try:
            child = open_folder_at(fd, entry.name)
        except OSError:
            continue  # vanished, swapped for a link, or unreadable
        try:
            yield from _walk(child, f"{relative}{entry.name}/", enter, depth + 1)
        finally:
            os.close(child)


class LinkCensus:
    """How many names each file has beneath a root, counted on first use (one walk of every
    folder, noise included, through descriptors; at most ``budget`` entries)."""

    def __init__(self, root: ConfinedRoot, budget: int = HARD_LINK_SCAN_ENTRIES) -> None:
        self.root = root
        self.budget = budget
        self.complete = True
        """False when the walk stopped at the budget: counts may then be short."""
        self._counts: Counter[tuple[int, int]] | None = None

    def names_inside(self, status: os.stat_result) -> int:
        """Names beneath the root of the file whose status is ``status``."""
        if self._counts is None:
            self._counts = self._count()
        return self._counts[(status.st_dev, status.st_ino)]

    def _count(self) -> Counter[tuple[int, int]]:
        counts: Counter[tuple[int, int]] = Counter()
        seen = 0
        with self.root.folder(()) as top, closing(walk_folders(top)) as folders:
            for _relative, fd, entries in folders:
                device = os.fstat(fd).st_dev
                for entry in entries:
                    if entry.is_file(follow_symlinks=False):
                        counts[(device, entry.inode())] += 1
                seen += len(entries)
                if seen > self.budget:
                    self.complete = False
                    break
        return counts
