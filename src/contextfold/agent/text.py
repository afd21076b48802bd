"""Small text helpers shared by the coding tools: numbered lines, sizes, plurals, file reads."""

from __future__ import annotations

from collections.abc import Iterable

from contextfold.agent._outcome import ToolError
from contextfold.agent.workspace import BINARY_SNIFF_BYTES, OpenedFile, looks_binary

__all__ = [
    "LINE_NUMBER_WIDTH",
    "human_size",
    "line_count",
    "numbered",
    "plural",
    "require_text",
]

LINE_NUMBER_WIDTH = 6
"""Width of the right-aligned line numbers (``cat -n`` style: number, tab, text)."""


def numbered(lines: Iterable[str], first: int) -> str:
    """``lines`` as ``cat -n`` shows them, numbered from ``first``."""
    return "\n".join(f"{n:>{LINE_NUMBER_WIDTH}}\t{line}" for n, line in enumerate(lines, first))


def line_count(text: str) -> int:
    """Lines in ``text``; a last line without a newline counts, an empty text has none."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def plural(count: int, word: str, many: str | None = None) -> str:
    """``"1 line"``, ``"3 lines"``; ``many`` is the plural when it is not ``word + "s"``."""
    return f"{count} {word}" if count == 1 else f"{count} {many or word + 's'}"


def human_size(size: int) -> str:
    """Bytes as ``"512 B"``, ``"3.4 KiB"``, ``"1.2 MiB"``."""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


def require_text(opened: OpenedFile, path: str, tool: str) -> None:
    """Raise a :class:`ToolError` for the model when ``opened`` looks binary; the handle is left
    at the start of the file."""
    head = opened.handle.read(BINARY_SNIFF_BYTES)
    opened.handle.seek(0)
    if looks_binary(head):
        size = human_size(opened.status.st_size)
        raise ToolError(
            f"{path!r} looks like a binary file ({size}, it contains NUL bytes); {tool} works "
            f"on text only. Inspect it with shell instead (e.g. `file {path}` or "
            f"`xxd {path} | head`).",
            kind="binary_file",
        )
