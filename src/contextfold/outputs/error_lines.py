"""The error lines a tool output holds, verbatim: what summaries, digests and masking
placeholders keep of a failed call (exact wording matters to an agent that must not retry it)."""

from __future__ import annotations

import re

__all__ = ["MAX_ERROR_CHARS", "error_lines"]

MAX_ERROR_CHARS = 300
"""Longest error line kept verbatim; longer ones are cut (exact wording matters, length less)."""

_WRAPPER_LINE = re.compile(r"^\s*</?(?:returncode|output|warning|tool_use_error)>.*$|^\s*$")
_EXCEPTION = re.compile(r"^(?:E\s+)?(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)\b(?::|$)")
_ERROR_PREFIX = re.compile(r"^(?:error|fatal|Error|ERROR|FATAL)(?:\[[\w-]+\])?:\s*\S")
_LOCATED_ERROR = re.compile(r":\d+(?::\d+)?:\s*(?:error|fatal error):\s")
_SHELL_ERROR = re.compile(
    r"command not found|No such file or directory|Permission denied|cannot access|"
    r"[Ss]yntax error|No replacement was performed|String to replace not found"
)


def error_lines(output: str, *, failed: bool, exit_code: int | None = None) -> list[str]:
    """The error lines a tool printed, verbatim (stripped), each once, in order.

    Always: the last line of every Python traceback. When the call failed, also exception lines,
    ``error:`` / ``fatal:`` lines, compiler ``file:line: error:`` lines and common shell errors;
    if none of those is there, the line that best says what went wrong (the last output line for
    a command with an exit code, else the first).
    """
    lines = output.splitlines()
    found: list[str] = []

    def add(line: str) -> None:
        line = _clip(line.strip(), MAX_ERROR_CHARS)
        if line and line not in found:
            found.append(line)

    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            for later in lines[i + 1 :]:
                if (
                    later
                    and not later[0].isspace()
                    and not later.startswith(
                        ("Traceback", "During handling", "The above exception")
                    )
                ):
                    add(later)
                    break
        elif failed and (
            _EXCEPTION.match(line.strip())
            or _ERROR_PREFIX.match(line.strip())
            or _LOCATED_ERROR.search(line)
            or _SHELL_ERROR.search(line)
        ):
            add(line)
    if failed and not found:
        meaningful = [ln for ln in lines if not _WRAPPER_LINE.match(ln)]
        if meaningful:
            add(meaningful[-1] if exit_code is not None else meaningful[0])
    return found


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
