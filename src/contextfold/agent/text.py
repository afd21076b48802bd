"""Small text helpers shared by the coding tools: numbered lines, sizes, plurals, file reads."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path

from contextfold.agent._outcome import ToolError
from contextfold.agent.workspace import BINARY_SNIFF_BYTES, Workspace, looks_binary

__all__ = [
    "LINE_NUMBER_WIDTH",
    "human_size",
    "line_count",
    "numbered",
    "plural",
    "require_text_file",
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


def require_text_file(workspace: Workspace, path: str, target: Path, tool: str) -> None:
    """Raise a :class:`ToolError` for the model unless ``target`` is an existing text file."""
    if target.is_dir():
        raise ToolError(
            f"{path!r} is a directory, not a file; use list_dir to see what it holds",
            kind="is_directory",
        )
    if not target.exists():
        raise ToolError(_missing(workspace, path, target), kind="not_found")
    if not target.is_file():  # a FIFO or a device: opening it could block the agent forever
        raise ToolError(f"{path!r} is not a regular file; {tool} reads files only", kind="special")
    with target.open("rb") as handle:
        head = handle.read(BINARY_SNIFF_BYTES)
    if looks_binary(head):
        size = human_size(target.stat().st_size)
        raise ToolError(
            f"{path!r} looks like a binary file ({size}, it contains NUL bytes); {tool} works "
            f"on text only. Inspect it with shell instead (e.g. `file {path}` or "
            f"`xxd {path} | head`).",
            kind="binary_file",
        )


def _missing(workspace: Workspace, path: str, target: Path) -> str:
    parent = target.parent
    if not parent.is_dir():
        return (
            f"no file {path!r}: the folder {workspace.display(parent)!r} does not exist either; "
            "use glob (e.g. pattern '**/name*') or list_dir to find the file"
        )
    names = [entry.name for entry in parent.iterdir()]
    close = difflib.get_close_matches(target.name, names, n=3, cutoff=0.6)
    hint = ""
    if close:
        shown = ", ".join(repr(workspace.display(parent / name)) for name in close)
        hint = f" Similar names: {shown}."
    return f"no file {path!r} in the workspace.{hint} Use glob or list_dir to find files."
