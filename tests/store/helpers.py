"""Message builders, a child-process runner and file-system setups shared by the store tests."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from contextfold.messages import Message, TextPart, ToolCallPart, ToolResultPart


def tool_turn(n: int, output: str = "", prefix: str = "") -> list[Message]:
    """A user question, an assistant call and its result, with ids derived from ``n``."""
    call = ToolCallPart(f"call_{prefix}{n}", "shell", f'{{"cmd":"echo {n}"}}')
    return [
        Message("user", (TextPart(f"question {n}"),), id=f"{prefix}u{n}"),
        Message("assistant", (TextPart(f"running {n}"), call), id=f"{prefix}a{n}"),
        Message.tool(
            ToolResultPart(f"call_{prefix}{n}", "shell", output or f"output {n}"),
            id=f"{prefix}t{n}",
        ),
    ]


@dataclass
class Child:
    """A forked child process that reports lines through a pipe."""

    pid: int
    fd: int

    def lines(self) -> list[str]:
        """Everything the child wrote, once it has exited (or been killed)."""
        chunks = []
        while chunk := os.read(self.fd, 65536):
            chunks.append(chunk)
        os.close(self.fd)
        return b"".join(chunks).decode().splitlines()

    def readline(self) -> str:
        """One line as soon as the child writes it (byte by byte: the pipe is unbuffered)."""
        out = bytearray()
        while (byte := os.read(self.fd, 1)) and byte != b"\n":
            out += byte
        return out.decode()

    def kill(self) -> None:
        """SIGKILL: no cleanup, no flush, no atexit, like a crash or an OOM kill."""
        os.kill(self.pid, signal.SIGKILL)

    def wait(self) -> int:
        """The exit status (negative signal number when killed)."""
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status)


def fork(body: Callable[[Callable[[str], None]], None]) -> Child:
    """Run ``body(report)`` in a forked child; ``report(line)`` reaches the parent at once.

    Forking (rather than starting a new interpreter) keeps 50 crash cycles fast; the child opens
    its own store, as a separate process would.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)

        def report(line: str) -> None:
            os.write(write_fd, (line + "\n").encode())

        code = 0
        try:
            body(report)
        except BaseException:
            report("error " + traceback.format_exc().replace("\n", " | "))
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    return Child(pid, read_fd)


@contextmanager
def read_only_view(folder: Path, where: Path) -> Iterator[Path]:
    """``folder`` seen through a read-only bind mount at ``where`` (read-only media, for tests).

    Needs root and ``mount``; the test is skipped, with the reason, when either is missing.
    """
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a read-only mount needs root and the mount command")
    where.mkdir(parents=True, exist_ok=True)
    for command in (
        ["mount", "--bind", str(folder), str(where)],
        ["mount", "-o", "remount,bind,ro", str(where)],
    ):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            subprocess.run(["umount", str(where)], capture_output=True, check=False)
            pytest.skip(f"cannot make a read-only mount here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], capture_output=True, check=True)


UNPRIVILEGED_UID = 65534
"""The uid (``nobody``) a root test drops to, so that permission bits apply to it."""


def as_unprivileged(body: Callable[[], str]) -> str:
    """``body()``'s result, computed where file permissions apply: in a child process that
    dropped root (when running as root), else here."""
    if os.geteuid() != 0:
        return body()

    def child(report: Callable[[str], None]) -> None:
        os.setgid(UNPRIVILEGED_UID)
        os.setuid(UNPRIVILEGED_UID)
        report(body())

    runner = fork(child)
    lines = runner.lines()
    assert runner.wait() == 0, lines
    return "\n".join(lines)
