"""Where full tool outputs go when only a preview or a cut version stays in the window.

:class:`BlobStore` is the two-method protocol every store implements (the SQLite and PostgreSQL
session stores too). A blob is addressed by the sha256 of its content, so identical outputs share
one copy, and by session: a ref names a blob only within the session that stored it.

- :class:`InMemoryBlobStore` — a dict, for tests and short scripts;
- :class:`FileBlobStore` — one file per blob under ``<root>/<session>/``, written atomically
  (temporary file, ``fsync``, rename), created with mode 0600 in folders created 0700, and
  redacted like everything else contextfold persists (:mod:`contextfold.redaction.redactor`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import threading
from pathlib import Path
from typing import Protocol, runtime_checkable

from contextfold.errors import RefNotFoundError, StoreError
from contextfold.outputs.blobs import REF_HEX_DIGITS, REF_PREFIX, BlobInfo, blob_info
from contextfold.redaction.redactor import redact_text

__all__ = ["BlobStore", "FileBlobStore", "InMemoryBlobStore", "is_ref"]

_REF_EXACT = re.compile(rf"{REF_PREFIX}[0-9a-f]{{{REF_HEX_DIGITS}}}")
_PLAIN_NAME = re.compile(r"(?!h_)[a-z0-9][a-z0-9_.-]{0,127}")
"""Session ids used as their own folder name: lower case (two ids never differ only by case,
which a case-insensitive file system would merge), and never the hashed names' ``h_``."""
_HASHED_PREFIX = "h_"


def is_ref(value: object) -> bool:
    """True when ``value`` has the shape of a ref (``ref_`` and 12 lowercase hex digits)."""
    return isinstance(value, str) and _REF_EXACT.fullmatch(value) is not None


@runtime_checkable
class BlobStore(Protocol):
    """Keeps full tool outputs out of the window, addressed by content within a session."""

    def put_blob(self, session_id: str, content: str, *, tool_name: str | None = None) -> BlobInfo:
        """Store ``content`` for ``session_id`` (a no-op when already stored); its ref and size."""
        ...

    def get_blob(self, session_id: str, ref: str) -> str:
        """The full content behind ``ref``; :class:`RefNotFoundError` when this session has none."""
        ...


class _Collision(StoreError):
    def __init__(self, ref: str) -> None:
        super().__init__(
            f"two different outputs share the ref {ref!r} in one session (a 48-bit collision); "
            "the second one was not stored"
        )


class InMemoryBlobStore:
    """Blobs in a dict: nothing survives the process. Thread-safe."""

    def __init__(self) -> None:
        self._blobs: dict[tuple[str, str], tuple[str, str]] = {}
        self._lock = threading.Lock()

    def put_blob(self, session_id: str, content: str, *, tool_name: str | None = None) -> BlobInfo:
        """Store ``content`` for ``session_id``; identical content is stored once."""
        info = blob_info(content, tool_name)
        with self._lock:
            existing = self._blobs.setdefault((session_id, info.ref), (info.sha256, content))
        if existing[0] != info.sha256:
            raise _Collision(info.ref)
        return info

    def get_blob(self, session_id: str, ref: str) -> str:
        """The content stored under ``ref`` in ``session_id``."""
        found = self._blobs.get((session_id, ref))
        if found is None:
            raise RefNotFoundError(ref, session_id)
        return found[1]

    def __len__(self) -> int:
        return len(self._blobs)


class FileBlobStore:
    """Blobs as files: ``<root>/<session>/<ref>``, each written atomically, readable only by you.

    A plain lower-case session id (``ses_0193ab…``, as the stores make them) names its own
    folder; every other id (upper case, slashes, dots, very long, or starting with ``h_``) gets
    ``h_`` and the sha256 of the id. No two ids share a folder, so no session reads another's
    blobs, and no id reaches outside ``root``. What is stored is redacted unless ``redact`` is
    false; the ref and size are those of the content as given.
    """

    def __init__(self, root: str | os.PathLike[str], *, redact: bool = True) -> None:
        self.root = Path(root)
        self.redact = redact

    def _session_dir(self, session_id: str) -> Path:
        if _PLAIN_NAME.fullmatch(session_id) and session_id not in (".", ".."):
            return self.root / session_id
        digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
        return self.root / (_HASHED_PREFIX + digest)

    def put_blob(self, session_id: str, content: str, *, tool_name: str | None = None) -> BlobInfo:
        """Write ``content`` (redacted) unless an identical blob is already there."""
        info = blob_info(content, tool_name)
        folder = self._session_dir(session_id)
        path = folder / info.ref
        data = (redact_text(content) if self.redact else content).encode("utf-8", "surrogatepass")
        if path.exists():
            if path.read_bytes() != data:
                raise _Collision(info.ref)
            return info
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        # mkstemp creates the file with mode 0600 (os.open with O_EXCL): never readable by others.
        fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".part")
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            # Same content under the same name: a concurrent writer's rename is harmless.
            tmp.replace(path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        return info

    def get_blob(self, session_id: str, ref: str) -> str:
        """The content stored under ``ref`` for ``session_id``."""
        if not is_ref(ref):
            raise RefNotFoundError(ref, session_id)
        try:
            data = (self._session_dir(session_id) / ref).read_bytes()
        except FileNotFoundError:
            raise RefNotFoundError(ref, session_id) from None
        return data.decode("utf-8", "surrogatepass")
