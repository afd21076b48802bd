"""One-line placeholders that stand in for masked tool outputs.

Observation masking keeps the call (what the agent did) and replaces the old output by a line
saying what it was — enough for the model to know whether to look again — and the ``ref`` that
brings it back. What the line says depends on the kind of tool:

- file reads: path, line count, first line;
- shell commands: command, exit code, line count, last line;
- searches (grep, glob, find): pattern and number of hits;
- edits and writes: path and the tool's first line;
- anything else: size, line count and first line.

Tool names from common agents are recognised (Claude Code, Codex, OpenHands/SWE-agent,
mini-swe-agent, MCP servers); unknown tools get the generic line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal, TypeAlias

from contextfold.messages import ToolCallPart, ToolResultPart
from contextfold.outputs.error_lines import error_lines
from contextfold.outputs.graphemes import floor_boundary
from contextfold.redaction.redactor import redact_text

__all__ = [
    "PATH_KEYS",
    "PLACEHOLDER_MAX_CHARS",
    "SNIPPET_CHARS",
    "ToolKind",
    "exit_code",
    "placeholder_for",
    "superseded_placeholder",
    "tool_kind",
]

PLACEHOLDER_MAX_CHARS = 240
"""Longest placeholder line, ref included: a masked output must cost a few dozen tokens at most."""
PLACEHOLDER_MAX_ERRORS = 3
"""Distinct error lines a failed output's placeholder keeps (the last ones)."""
PLACEHOLDER_ERROR_CHARS = 400
"""Characters of error lines a placeholder keeps beyond its first (the last is always kept)."""
SNIPPET_CHARS = 72
"""Longest quoted excerpt (command, first or last line, pattern) inside a placeholder."""

ToolKind: TypeAlias = Literal["read", "shell", "search", "list", "edit", "other"]

_KINDS: Mapping[str, ToolKind] = {
    **dict.fromkeys(
        (
            "read",
            "readfile",
            "read_file",
            "file_read",
            "view",
            "view_file",
            "open_file",
            "cat",
            "read_many_files",
            "notebookread",
            "read_notebook",
            "fetch_file",
        ),
        "read",
    ),
    **dict.fromkeys(
        (
            "bash",
            "shell",
            "shell_exec",
            "sh",
            "zsh",
            "terminal",
            "exec",
            "exec_command",
            "execute",
            "execute_command",
            "execute_bash",
            "run",
            "run_command",
            "run_shell_command",
            "run_terminal_cmd",
            "local_shell",
            "cmd",
            "powershell",
            "bashoutput",
            "container_exec",
            "python",
            "ipython",
        ),
        "shell",
    ),
    **dict.fromkeys(
        (
            "grep",
            "rg",
            "ripgrep",
            "glob",
            "search",
            "find",
            "find_files",
            "search_files",
            "file_search",
            "grep_search",
            "codebase_search",
            "search_code",
            "code_search",
            "toolsearch",
            "websearch",
            "web_search",
            "search_file",
            "search_dir",
        ),
        "search",
    ),
    **dict.fromkeys(("ls", "list", "list_dir", "list_directory", "list_files", "tree"), "list"),
    **dict.fromkeys(
        (
            "edit",
            "multiedit",
            "write",
            "write_file",
            "edit_file",
            "create_file",
            "file_write",
            "file_edit",
            "apply_patch",
            "str_replace",
            "insert",
            "notebookedit",
            "replace",
            "patch",
            "write_to_file",
            "replace_in_file",
        ),
        "edit",
    ),
}
_EDITOR_TOOLS = frozenset(
    {"str_replace_editor", "str_replace_based_edit_tool", "text_editor", "editor", "file_editor"}
)

PATH_KEYS = (
    "file_path",
    "path",
    "filepath",
    "filename",
    "file",
    "target_file",
    "absolute_path",
    "notebook_path",
    "relative_path",
    "uri",
)
"""Argument names that hold the file a tool call works on, across agents' tools."""
_COMMAND_KEYS = ("command", "cmd", "script", "code", "input", "commands")
_PATTERN_KEYS = ("pattern", "query", "regex", "glob", "search", "q", "search_term", "name")

_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_EXIT_JSON = re.compile(r'"(?:exit_code|exitCode|returncode|return_code)"\s*:\s*(-?\d+)')
_EXIT_TEXT = re.compile(
    r"\b(?:exit(?:ed)?(?: with)?[ _-]?(?:code|status)|return(?:ed)? code)\b\s*[:=]?\s*(-?\d+)",
    re.IGNORECASE,
)
_WRAPPER_LINE = re.compile(r"^\s*</?(?:output|returncode|stdout|stderr)\b[^>]*>.*$")
_LINE_NUMBER = re.compile(r"^\s*\d+(?:\t|→|\|\s|:\s)")
_FOUND = re.compile(r"^Found (\d+) (?:files?|matches?|lines?|results?)\b", re.IGNORECASE)
_NO_HITS = re.compile(r"^(?:no (?:files|matches|results)(?: found)?|0 (?:files|matches))\b", re.I)
_SPACES = re.compile(r"\s+")
_JSON_ENVELOPE_MAX = 1_000_000


def _normal_name(name: str) -> str:
    # MCP tools arrive as "mcp__server__tool"; namespaced tools as "server.tool" or "server/tool".
    tail = re.split(r"__|[./:]", name)[-1] if name else ""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", tail).lower().replace("-", "_")


def tool_kind(name: str, args: Mapping[str, Any] | None = None) -> ToolKind:
    """What kind of tool ``name`` is, judged by common names across agents (and, for editor
    tools that both view and edit, by their ``command`` argument)."""
    normal = _normal_name(name)
    if normal in _EDITOR_TOOLS:
        command = str((args or {}).get("command", ""))
        return "read" if command == "view" else "edit"
    kind = _KINDS.get(normal) or _KINDS.get(normal.replace("_", ""))
    return kind or "other"


def _snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    flat = _SPACES.sub(" ", text).strip()
    if len(flat) <= limit:
        return flat
    return flat[: floor_boundary(flat, limit - 1)] + "…"


def _first_arg(args: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    """The first of ``keys`` that ``args`` holds, secrets redacted (it is quoted cut short)."""
    for key in keys:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return redact_text(value)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return redact_text(" ".join(value))
    return ""


def _unwrap(content: str) -> str:
    """The text inside a JSON envelope such as Codex's ``{"output": ..., "metadata": ...}``."""
    if not content.lstrip().startswith("{") or len(content) > _JSON_ENVELOPE_MAX:
        return content
    try:
        value = json.loads(content)
    except ValueError:
        return content
    if isinstance(value, dict):
        for key in ("output", "stdout", "content", "result"):
            inner = value.get(key)
            if isinstance(inner, str):
                return inner
    return content


def _content_lines(content: str) -> list[str]:
    # A wrapper line holds a "<": the others need no match (an output has thousands of lines).
    return [
        line
        for line in _unwrap(content).splitlines()
        if "<" not in line or not _WRAPPER_LINE.match(line)
    ]


def _first_line(lines: list[str], strip_numbers: bool = False) -> str:
    for line in lines:
        text = _LINE_NUMBER.sub("", line, count=1) if strip_numbers else line
        if text.strip():
            return text
    return ""


def _last_line(lines: list[str]) -> str:
    for line in reversed(lines):
        if line.strip():
            return line
    return ""


def exit_code(content: str) -> int | None:
    """The exit code a shell output reports (``<returncode>N</returncode>``, ``"exit_code": N``,
    ``Exit code N``, ``exited with code N``...), or None."""
    for pattern in (_RETURNCODE, _EXIT_JSON, _EXIT_TEXT):
        found = pattern.search(content)
        if found:
            return int(found.group(1))
    return None


def _size(content: str) -> str:
    size = len(content.encode("utf-8", "surrogatepass"))
    if size < 1024:
        return f"{size} B"
    return f"{size / 1024:.1f} KiB" if size < 1024 * 1024 else f"{size / 1048576:.1f} MiB"


def _hits(lines: list[str]) -> int:
    first = _first_line(lines)
    found = _FOUND.match(first.strip())
    if found:
        return int(found.group(1))
    if _NO_HITS.match(first.strip()):
        return 0
    return sum(1 for line in lines if line.strip())


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _describe(result: ToolResultPart, call: ToolCallPart | None) -> str:
    name = _snippet((call.name if call is not None else "") or result.name) or "tool"
    args = call.args() if call is not None else {}
    kind = tool_kind(name, args)
    lines = _content_lines(result.content)
    count = _plural(len(lines), "line")
    failed = " (error)" if result.is_error else ""
    if kind == "read":
        path = _snippet(_first_arg(args, PATH_KEYS) or "?", SNIPPET_CHARS)
        first = _snippet(_first_line(lines, strip_numbers=True))
        return f'{name} {path}{failed}: {count}, first: "{first}"'
    if kind == "shell":
        command = _snippet(_first_arg(args, _COMMAND_KEYS) or "?", SNIPPET_CHARS)
        code = exit_code(result.content)
        status = f"exit {code}" if code is not None else ("failed" if result.is_error else "ran")
        last = _snippet(_last_line(lines))
        return f'{name} `{command}`: {status}, {count}, last: "{last}"'
    if kind == "search":
        pattern = _snippet(_first_arg(args, _PATTERN_KEYS) or "?", SNIPPET_CHARS)
        return f'{name} "{pattern}"{failed}: {_plural(_hits(lines), "hit")}'
    if kind == "list":
        path = _snippet(_first_arg(args, PATH_KEYS) or ".", SNIPPET_CHARS)
        entries = _hits(lines)
        return f"{name} {path}{failed}: {entries} {'entry' if entries == 1 else 'entries'}"
    if kind == "edit":
        path = _snippet(_first_arg(args, PATH_KEYS) or "?", SNIPPET_CHARS)
        return f'{name} {path}{failed}: "{_snippet(_first_line(lines))}"'
    first = _snippet(_first_line(lines))
    return f'{name}{failed}: {_size(result.content)}, {count}, first: "{first}"'


def placeholder_for(result: ToolResultPart, call: ToolCallPart | None, ref: str) -> str:
    """A one-line stand-in for ``result`` that ends with the ``ref`` that recovers it.

    ``call`` (the matching tool call, when known) supplies the path, command or pattern. The line
    never exceeds :data:`PLACEHOLDER_MAX_CHARS` characters, plus its last distinct error lines
    verbatim (:data:`PLACEHOLDER_MAX_ERRORS`, within :data:`PLACEHOLDER_ERROR_CHARS` after the
    last one): for a failed call, what says why it failed; for one that succeeded, the last line
    of each Python traceback it printed (a test run that reports a failure can still exit 0).
    Everything it quotes has its secrets redacted.
    """
    tail = f" → read_result {ref}"
    # Lines are quoted cut short, and a piece of a secret is no longer recognised as one (nor is
    # the last line of `head -5 id_rsa`): quote from the output with its secrets redacted.
    result = replace(result, content=redact_text(result.content))
    summary = _describe(result, call)
    room = PLACEHOLDER_MAX_CHARS - len(tail) - len("[masked] ")
    if len(summary) > room:
        summary = summary[: floor_boundary(summary, max(0, room - 1))] + "…"
    errors = [e for e in _error_lines(result) if e not in summary]
    if errors:
        # Errors are kept verbatim: the exact wording stops the agent retrying blindly.
        label = "error" if len(errors) == 1 else "errors"
        summary += f"; {label}: " + " | ".join(f'"{e}"' for e in errors)
    return f"[masked] {summary}{tail}"


def _error_lines(result: ToolResultPart) -> list[str]:
    """The distinct error lines of an output, latest first kept, within
    :data:`PLACEHOLDER_ERROR_CHARS` (for a call that did not fail, only traceback endings)."""
    code = exit_code(result.content)
    failed = result.is_error or (code is not None and code != 0)
    kept: list[str] = []
    room = PLACEHOLDER_ERROR_CHARS
    for line in reversed(error_lines(result.content, failed=failed, exit_code=code)):
        if len(kept) == PLACEHOLDER_MAX_ERRORS or (kept and len(line) > room):
            break
        kept.append(line)
        room -= len(line)
    return kept[::-1]


def superseded_placeholder(call: ToolCallPart, path: str, newer_call_id: str, ref: str) -> str:
    """The line that stands for a read of ``path`` the agent made again later (call
    ``newer_call_id``): the newer output shows the file as it is now, ``ref`` the old one."""
    tail = f" → read_result {ref}"
    name = _snippet(call.name) or "read"
    summary = f"{name} {_snippet(redact_text(path))}: read again later (call {newer_call_id})"
    room = PLACEHOLDER_MAX_CHARS - len(tail) - len("[superseded] ")
    if len(summary) > room:
        summary = summary[: floor_boundary(summary, max(0, room - 1))] + "…"
    return f"[superseded] {summary}{tail}"
