"""The chat's prompt history file: what you typed, secrets redacted, readable only by you."""

from __future__ import annotations

import contextlib
import datetime
import os
import tempfile
from pathlib import Path

from prompt_toolkit.history import FileHistory

from contextfold.private_files import PRIVATE_FILE_MODE, make_private_dir, open_private
from contextfold.redaction.redactor import redact_text

__all__ = ["PrivateFileHistory"]


class PrivateFileHistory(FileHistory):
    """prompt_toolkit's :class:`FileHistory` (same file format), with each entry redacted
    before it is written and the file created 0600.

    A history file an older version wrote (entries in clear, mode 0644) is rewritten redacted
    and 0600 when the chat opens it. Up-arrow recall within the running chat still offers what
    was typed: only the file is redacted.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        make_private_dir(self.path.parent)
        super().__init__(str(self.path))
        self._scrub_existing()

    def store_string(self, string: str) -> None:
        with open_private(self.path, append=True, errors="replace") as fh:
            fh.write(f"\n# {datetime.datetime.now()}\n")
            for line in redact_text(string).split("\n"):
                fh.write(f"+{line}\n")

    def _scrub_existing(self) -> None:
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
            mode = self.path.stat().st_mode & 0o777
        except FileNotFoundError:
            return
        redacted = redact_text(text)
        if redacted == text and mode == PRIVATE_FILE_MODE:
            return
        # A new 0600 file replaces the old one whole: its clear text is never rewritten in
        # place where a reader could catch half of it.
        fd, tmp_name = tempfile.mkstemp(dir=self.path.parent, prefix=".history-", suffix=".part")
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(redacted)
            tmp.replace(self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
