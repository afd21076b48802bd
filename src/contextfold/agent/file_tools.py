"""The file tools of the coding agent: ``read_file``, ``write_file`` and ``edit_file``.

Every path goes through the :class:`~contextfold.agent.Workspace`; writes go through the
:class:`~contextfold.agent.ApprovalPolicy` once they are known to be possible. Text is UTF-8:
reading replaces undecodable bytes, editing keeps them as they were (``surrogateescape``), so an
edit never damages the parts of a file it does not touch.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import IO, Any

from contextfold.agent._edit import EditPlan, describe_ranges, plan_edit
from contextfold.agent._outcome import ToolError, ToolOutcome
from contextfold.agent.approval import ApprovalPolicy
from contextfold.agent.text import (
    LINE_NUMBER_WIDTH,
    human_size,
    line_count,
    numbered,
    plural,
    require_text,
)
from contextfold.agent.workspace import BINARY_SNIFF_BYTES, Workspace, looks_binary
from contextfold.tool_spec import ToolSpec

__all__ = [
    "EDIT_FILE_MAX_BYTES",
    "EDIT_FILE_TOOL",
    "READ_FILE_DEFAULT_LINES",
    "READ_FILE_LINE_CHARS",
    "READ_FILE_MAX_LINES",
    "READ_FILE_PAGE_BYTES",
    "READ_FILE_TOOL",
    "WRITE_FILE_TOOL",
    "FileTools",
]

READ_FILE_DEFAULT_LINES = 200
"""Lines ``read_file`` returns when no ``end_line`` is given: below the engine's 256-line inline
limit, so a default read reaches the model uncut."""
READ_FILE_PAGE_BYTES = 8 * 1024
"""Bytes of numbered text a read without ``end_line`` stops at (below the 10 KiB inline limit)."""
READ_FILE_MAX_LINES = 2_000
"""Most lines one read returns, even when ``end_line`` asks for more."""
READ_FILE_LINE_CHARS = 2_000
"""Characters shown of one line; minified files would otherwise fill a page with one line."""
EDIT_FILE_MAX_BYTES = 10 * 1024 * 1024
"""Largest file ``edit_file`` and ``write_file`` previews load into memory."""
PREVIEW_DIFF_MAX_CHARS = 1024 * 1024
"""Largest file text diffed for an overwrite approval prompt (a full diff is quadratic at worst);
past it the prompt shows the whole new text instead."""
EDIT_CONTEXT_LINES = 3
"""Unchanged lines shown around an edit in the result, so the model can check it."""
EDIT_SNIPPET_LINES = 40
"""Most lines of the edited region shown in the result."""

_READ_LINE_BYTES = 64 * 1024  # bytes read of one line before the rest of it is skipped
_COUNT_CHUNK = 1024 * 1024
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_UTF8_BOM = "\ufeff"

READ_FILE_TOOL = ToolSpec(
    name="read_file",
    description=(
        "Read a text file of the workspace. Lines come numbered like `cat -n` (number, tab, "
        f"text). Without end_line it returns up to {READ_FILE_DEFAULT_LINES} lines from "
        "start_line (default 1) and says where to continue; give start_line/end_line to read "
        f"a range (at most {READ_FILE_MAX_LINES} lines). The numbers are not part of the file: "
        "leave them out of edit_file's old_string. Binary files are refused."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "File path relative to the workspace root, e.g. 'src/app.py'.",
            },
            "start_line": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
            "end_line": {"type": "integer", "minimum": 1, "description": "Last line, inclusive."},
        },
        "required": ["path"],
        "additionalProperties": False,
    },
)

WRITE_FILE_TOOL = ToolSpec(
    name="write_file",
    description=(
        "Create a file, or replace a file's whole content, in the workspace. Missing parent "
        "folders are created. Prefer edit_file to change part of an existing file. May need "
        "the user's approval."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "File path relative to the workspace root.",
            },
            "content": {"type": "string", "description": "The complete new content of the file."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    },
)

EDIT_FILE_TOOL = ToolSpec(
    name="edit_file",
    description=(
        "Replace exact text in a file of the workspace. old_string must match the file exactly "
        "(whitespace and indentation included, without read_file's line numbers) and occur "
        "once; include a few surrounding lines to make it unique, or set replace_all to "
        "change every occurrence. The result shows the changed lines. May need the user's "
        "approval."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path relative to the workspace root."},
            "old_string": {"type": "string", "description": "The exact text to replace."},
            "new_string": {"type": "string", "description": "The text to put in its place."},
            "replace_all": {
                "type": "boolean",
                "description": "Replace every occurrence instead of exactly one (default false).",
            },
        },
        "required": ["path", "old_string", "new_string"],
        "additionalProperties": False,
    },
)


class FileTools:
    """Handlers for ``read_file``, ``write_file`` and ``edit_file`` in one workspace."""

    def __init__(self, workspace: Workspace, approval: ApprovalPolicy) -> None:
        self.workspace = workspace
        self.approval = approval

    # -- read_file ---------------------------------------------------------------------------------

    def read_file(self, args: dict[str, Any]) -> ToolOutcome:
        """Numbered lines of a text file, a page at a time."""
        path: str = args["path"]
        start: int = args.get("start_line", 1)
        end: int | None = args.get("end_line")
        if end is not None and end < start:
            raise ToolError(
                f"end_line ({end}) is before start_line ({start}); give end_line >= start_line",
                kind="invalid_arguments",
            )
        if end is None:
            max_lines, max_bytes = READ_FILE_DEFAULT_LINES, READ_FILE_PAGE_BYTES
        else:
            max_lines, max_bytes = min(end - start + 1, READ_FILE_MAX_LINES), None
        with self.workspace.open_file(path, tool="read_file") as opened:
            require_text(opened, path, "read_file")
            shown, total = _read_page(opened.handle, start, max_lines, max_bytes)
        name = self.workspace.display(opened.path)
        metadata: dict[str, Any] = {"path": name, "total_lines": total}
        if total == 0:
            return ToolOutcome(f"[{name} is empty]", metadata=metadata)
        if start > total:
            raise ToolError(
                f"start_line {start} is past the end of {name}, which has {plural(total, 'line')}",
                kind="out_of_range",
            )
        last = start + len(shown) - 1
        text = numbered(shown, start)
        wanted_last = total if end is None else min(end, total)
        if last < wanted_last:
            text += f"\n[lines {start}-{last} of {total}; continue with start_line={last + 1}]"
        elif start > 1 or last < total:
            end_note = " (end of file)" if last == total else ""
            text += f"\n[lines {start}-{last} of {total}{end_note}]"
        return ToolOutcome(text, metadata={**metadata, "start_line": start, "end_line": last})

    # -- write_file --------------------------------------------------------------------------------

    def write_file(self, args: dict[str, Any]) -> ToolOutcome:
        """Create or overwrite a file, after approval."""
        path: str = args["path"]
        content: str = args["content"]
        target, existing = self.workspace.writable_target(path, tool="write_file")
        self.approval.require_writable("write_file")
        name = self.workspace.display(target)
        data = content.encode("utf-8", "surrogateescape")
        lines = line_count(content)

        def summary() -> str:
            # All of the change: the user approves what they are shown, nothing past it.
            size = f"{plural(lines, 'line')} ({human_size(len(data))})"
            if existing is None:
                return f"create {name}: {size}\n{_numbered_preview(content)}"
            old = self._read_for_preview(path)
            if old is None or max(len(old), len(content)) > PREVIEW_DIFF_MAX_CHARS:
                note = "not diffed (the old file is binary or large); all of the new text"
                return f"overwrite {name} with {size}; {note}:\n{_numbered_preview(content)}"
            return f"overwrite {name} with {size}\n{_diff_preview(old, content, name)}"

        self.approval.require("write_file", summary)
        existed = self.workspace.replace_file(target, data, path=path, tool="write_file")
        verb = "Overwrote" if existed else "Created"
        return ToolOutcome(
            f"{verb} {name}: wrote {len(data)} bytes ({plural(lines, 'line')}).",
            metadata={"path": name, "bytes": len(data), "lines": lines, "created": not existed},
        )

    def _read_for_preview(self, path: str) -> str | None:
        """The current text of a file about to be overwritten, when it is small text."""
        try:
            with self.workspace.open_file(path, tool="write_file") as opened:
                if opened.status.st_size > EDIT_FILE_MAX_BYTES:
                    return None
                data = opened.handle.read()
        except (ToolError, OSError):
            return None
        if looks_binary(data[:BINARY_SNIFF_BYTES]):
            return None
        return data.decode("utf-8", "replace")

    # -- edit_file ---------------------------------------------------------------------------------

    def edit_file(self, args: dict[str, Any]) -> ToolOutcome:
        """Replace exact text in a file, after approval; the result shows the new lines."""
        path: str = args["path"]
        target, existing = self.workspace.writable_target(path, tool="edit_file")
        if existing is None:
            raise ToolError(
                f"no file {path!r} in the workspace; create it with write_file, or use glob to "
                "find the file you mean",
                kind="not_found",
            )
        with self.workspace.open_file(path, tool="edit_file") as opened:
            require_text(opened, path, "edit_file")
            self.approval.require_writable("edit_file")
            size = opened.status.st_size
            if size > EDIT_FILE_MAX_BYTES:
                raise ToolError(
                    f"{path!r} is {human_size(size)}, larger than edit_file handles "
                    f"({human_size(EDIT_FILE_MAX_BYTES)}); change it with a shell command instead",
                    kind="too_large",
                )
            text = opened.handle.read().decode("utf-8", "surrogateescape")
        name = self.workspace.display(target)
        plan = plan_edit(
            text,
            args["old_string"],
            args["new_string"],
            replace_all=bool(args.get("replace_all", False)),
            path=name,
        )

        def summary() -> str:
            where = describe_ranges(plan.old_ranges)
            head = f"edit {name}: replace {where} ({plural(plan.replacements, 'occurrence')})"
            return f"{head}\n{_edit_preview(text, plan)}"

        self.approval.require("edit_file", summary)
        new_data = plan.new_text.encode("utf-8", "surrogateescape")
        self.workspace.replace_file(target, new_data, path=path, tool="edit_file")
        return ToolOutcome(
            _edit_report(name, plan),
            metadata={
                "path": name,
                "replacements": plan.replacements,
                "old_ranges": [list(r) for r in plan.old_ranges],
                "new_ranges": [list(r) for r in plan.new_ranges],
            },
        )


# -- reading ---------------------------------------------------------------------------------------


def _read_page(
    handle: IO[bytes], start: int, max_lines: int, max_bytes: int | None
) -> tuple[list[str], int]:
    """Lines ``start..`` of the file open as ``handle`` (at most ``max_lines``, and
    ``max_bytes`` of numbered text when given, but always one line), and the file's line count.
    Memory stays bounded."""
    shown: list[str] = []
    size = 0
    number = 0
    utf16 = handle.read(2) in _UTF16_BOMS
    handle.seek(0)
    lines = _utf16_lines(handle) if utf16 else _raw_lines(handle)
    for raw, cut in lines:
        number += 1
        if number < start:
            continue
        line = _display_line(raw, cut, first=number == 1)
        size += len(line.encode("utf-8")) + LINE_NUMBER_WIDTH + 1
        if shown and max_bytes is not None and size > max_bytes:
            return shown, number + _count_rest(handle, lines, utf16)
        shown.append(line)
        if len(shown) >= max_lines:
            return shown, number + _count_rest(handle, lines, utf16)
    return shown, number


def _raw_lines(handle: IO[bytes]) -> Iterator[tuple[bytes, bool]]:
    """Each line's bytes (its first :data:`_READ_LINE_BYTES` only) and whether it was cut."""
    while True:
        chunk = handle.readline(_READ_LINE_BYTES)
        if not chunk:
            return
        if chunk.endswith(b"\n") or len(chunk) < _READ_LINE_BYTES:
            yield chunk, False
            continue
        while True:  # a very long line: skip its rest without holding it
            more = handle.readline(_READ_LINE_BYTES)
            if not more or more.endswith(b"\n"):
                break
        yield chunk, True


def _utf16_lines(handle: IO[bytes]) -> Iterator[tuple[bytes, bool]]:
    """The lines of a UTF-16 file (rare: Windows tools write them), re-encoded as UTF-8."""
    text = handle.read(EDIT_FILE_MAX_BYTES).decode("utf-16", "replace")
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()
    for part in parts:
        yield part.encode("utf-8", "replace"), False


def _count_rest(handle: IO[bytes], lines: Iterator[tuple[bytes, bool]], utf16: bool) -> int:
    """Lines after the current one, counted without decoding them."""
    if utf16:
        return sum(1 for _ in lines)
    count = 0
    last = b"\n"
    while chunk := handle.read(_COUNT_CHUNK):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (last != b"\n")


def _display_line(raw: bytes, cut: bool, *, first: bool) -> str:
    line = raw.decode("utf-8", "replace").rstrip("\r\n")
    if first and line.startswith(_UTF8_BOM):
        line = line[1:]
    if cut or len(line) > READ_FILE_LINE_CHARS:
        line = line[:READ_FILE_LINE_CHARS] + f" [… line cut at {READ_FILE_LINE_CHARS} characters]"
    return line


# -- previews and reports --------------------------------------------------------------------------


def _preview_lines(text: str) -> list[str]:
    """``text``'s lines as a preview shows them: split at newlines only (a carriage return or
    form feed inside a line stays there, for the prompt to show), line endings dropped."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _numbered_preview(content: str) -> str:
    return numbered(_preview_lines(content), 1)


def _diff_preview(old: str, new: str, name: str) -> str:
    diff = difflib.unified_diff(
        _preview_lines(old), _preview_lines(new), f"a/{name}", f"b/{name}", n=2, lineterm=""
    )
    return "\n".join(diff) or "(the new text is the same as the old)"


def _edit_preview(text: str, plan: EditPlan) -> str:
    """The replaced lines and their replacements, hunk by hunk, as ``-``/``+`` lines."""
    old_lines = text.split("\n")
    new_lines = plan.new_text.split("\n")
    out: list[str] = []
    for (old_first, old_last), (new_first, new_last) in zip(
        plan.old_ranges, plan.new_ranges, strict=True
    ):
        out.append(f"@@ line {old_first} @@")
        out.extend("-" + line.removesuffix("\r") for line in old_lines[old_first - 1 : old_last])
        out.extend("+" + line.removesuffix("\r") for line in new_lines[new_first - 1 : new_last])
    return "\n".join(out)


def _edit_report(name: str, plan: EditPlan) -> str:
    if plan.replacements > 1:
        return (
            f"Edited {name}: replaced {plural(plan.replacements, 'occurrence')}; the new text is "
            f"at {describe_ranges(plan.new_ranges)}."
        )
    new_first, new_last = plan.new_ranges[0]
    head = (
        f"Edited {name}: {describe_ranges(plan.old_ranges)} replaced; the new text is "
        f"{describe_ranges(plan.new_ranges)}."
    )
    lines = plan.new_text.split("\n")
    first = max(new_first - EDIT_CONTEXT_LINES, 1)
    last = min(new_last + EDIT_CONTEXT_LINES, len(lines), first + EDIT_SNIPPET_LINES - 1)
    snippet = numbered((line.rstrip("\r") for line in lines[first - 1 : last]), first)
    return f"{head} Lines {first}-{last} now read:\n{snippet}"
