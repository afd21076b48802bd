"""The ``shell`` tool: run a bash command in the workspace, as the user would see it.

- The command runs with ``bash -c`` in the workspace root, in a new session (its own process
  group, no controlling terminal), with stdin closed: a command that waits for input or a
  password fails at once instead of hanging.
- stdout and stderr share one pipe, so their lines arrive interleaved as in a terminal.
- On timeout the whole process group is stopped (SIGTERM, then SIGKILL after a grace period),
  children included. Processes that start their own session escape this, as they would escape
  a terminal's Ctrl-C.
- The environment is scrubbed of API keys, tokens, passwords and other credentials
  (:func:`scrubbed_environment`, by the patterns of :data:`CREDENTIAL_ENV_PATTERNS`): the output
  goes to a model provider and into the store, and ``env`` or a debug print must not send keys
  along. The ``tools.env_allow`` setting names variables to pass anyway.
- The output ends with ``exit code: N`` on a line of its own (the masking placeholders and the
  extractive summarizer read it). A non-zero exit is not marked ``is_error``: ``grep`` finding
  nothing or a failing test run is information, and the summarizer judges exit codes itself.
  Timeouts and commands that cannot start are errors.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import IO, Any

from contextfold.agent._environment import CREDENTIAL_ENV_PATTERNS, without_credentials
from contextfold.agent._outcome import ToolError, ToolOutcome
from contextfold.agent.approval import ApprovalPolicy
from contextfold.agent.text import human_size
from contextfold.agent.workspace import Workspace
from contextfold.errors import ConfigError
from contextfold.tool_spec import ToolSpec

__all__ = [
    "CREDENTIAL_ENV_PATTERNS",
    "DEFAULT_SHELL_TIMEOUT",
    "SHELL_DRAIN_SECONDS",
    "SHELL_ENV_DEFAULTS",
    "SHELL_KILL_GRACE_SECONDS",
    "SHELL_MAX_OUTPUT_BYTES",
    "SHELL_MAX_TIMEOUT",
    "TIMEOUT_EXIT_CODE",
    "CommandResult",
    "ShellTool",
    "run_command",
    "scrubbed_environment",
]

DEFAULT_SHELL_TIMEOUT = 120.0
"""Seconds a command may run when neither the ``shell.timeout`` setting nor the call says."""
SHELL_MAX_TIMEOUT = 600.0
"""Longest timeout a call may ask for."""
SHELL_KILL_GRACE_SECONDS = 1.0
"""Between SIGTERM and SIGKILL when a command times out: time to clean up, not to linger."""
SHELL_DRAIN_SECONDS = 0.5
"""How long to wait, once bash has exited, for background processes to release the output."""
SHELL_MAX_OUTPUT_BYTES = 10 * 1024 * 1024
"""Output kept in memory (half from the start, half from the end); the engine cuts it further."""
TIMEOUT_EXIT_CODE = 124
"""Exit code reported for a command stopped by its timeout (what GNU ``timeout`` reports)."""

SHELL_ENV_DEFAULTS: Mapping[str, str] = {
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "PYTHONUNBUFFERED": "1",
    "NO_COLOR": "1",
}
"""Set for every command: no pager or credential prompt waiting for a terminal that is not
there, Python output unbuffered so it interleaves with stderr as in a terminal, no colours."""

_READ_CHUNK = 64 * 1024


def scrubbed_environment(
    environ: Mapping[str, str] | None = None, *, allow: Collection[str] = ()
) -> dict[str, str]:
    """``environ`` (default: this process's) without credentials (see
    :data:`CREDENTIAL_ENV_PATTERNS`), plus :data:`SHELL_ENV_DEFAULTS`. Names in ``allow`` pass
    through even when they look like credentials."""
    env = without_credentials(environ, allow=allow)
    env.update(SHELL_ENV_DEFAULTS)
    return env


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What a finished command printed and how it ended."""

    output: str
    returncode: int
    """As :mod:`subprocess` reports it: negative when a signal ended the shell."""
    timed_out: bool = False
    omitted_bytes: int = 0
    """Output bytes dropped from the middle to protect memory."""
    detached: bool = False
    """Background processes still held the output open when the command returned."""

    @property
    def exit_code(self) -> int:
        """The code a shell user would see: ``128 + signal`` for a signal, 124 for a timeout."""
        if self.timed_out:
            return TIMEOUT_EXIT_CODE
        return 128 - self.returncode if self.returncode < 0 else self.returncode


class _Capture:
    """Reads a pipe to its end, keeping its head and its tail within a memory budget."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        self._stream = stream
        self._half = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.omitted = 0
        # The reader may still run when the output is taken (background processes hold the pipe).
        self._lock = threading.Lock()

    def run(self) -> None:
        fd = self._stream.fileno()
        try:
            while chunk := os.read(fd, _READ_CHUNK):
                with self._lock:
                    room = self._half - len(self.head)
                    if room > 0:
                        self.head += chunk[:room]
                        chunk = chunk[room:]
                    self.tail += chunk
                    if len(self.tail) > 2 * self._half:  # trim in batches: cheap amortized
                        excess = len(self.tail) - self._half
                        del self.tail[:excess]
                        self.omitted += excess
        except OSError:
            pass  # the pipe was closed under us: keep what was read
        finally:
            self._stream.close()

    def text(self) -> tuple[str, int]:
        """The output read so far (decoded, with a marker where bytes were dropped)."""
        with self._lock:
            excess = max(len(self.tail) - self._half, 0)
            head, tail = bytes(self.head), bytes(self.tail[excess:])
            omitted = self.omitted + excess
        if not omitted:  # one decode: a character split between head and tail stays whole
            return (head + tail).decode("utf-8", "replace"), 0
        marker = f"\n[… {human_size(omitted)} of output omitted here to protect memory …]\n"
        return head.decode("utf-8", "replace") + marker + tail.decode("utf-8", "replace"), omitted


def run_command(
    command: str, *, cwd: str | os.PathLike[str], timeout: float, env: Mapping[str, str]
) -> CommandResult:
    """Run ``command`` with bash in ``cwd`` and wait for it, stopping its process group when it
    outlives ``timeout`` (also when the caller is interrupted, e.g. by Ctrl-C)."""
    bash = shutil.which("bash", path=env.get("PATH")) or shutil.which("bash") or "/bin/bash"
    process = subprocess.Popen(
        [bash, "-c", command],
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert process.stdout is not None  # stdout=PIPE above
    capture = _Capture(process.stdout, SHELL_MAX_OUTPUT_BYTES)
    reader = threading.Thread(target=capture.run, name="contextfold-shell-output", daemon=True)
    reader.start()
    timed_out = False
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _stop_group(process)
    except BaseException:
        _stop_group(process)
        raise
    # Background children may still hold the pipe: give them a moment, then return without them.
    reader.join(SHELL_DRAIN_SECONDS)
    output, omitted = capture.text()
    return CommandResult(output, process.returncode, timed_out, omitted, reader.is_alive())


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the command's process group, then SIGKILL whatever is left after a grace."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(SHELL_KILL_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)  # children that ignored SIGTERM
    except ProcessLookupError:
        pass
    process.wait()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class ShellTool:
    """The ``shell`` tool of one workspace: its spec (which states the default timeout) and the
    handler, which asks for approval before running anything."""

    def __init__(
        self,
        workspace: Workspace,
        approval: ApprovalPolicy,
        *,
        timeout: float = DEFAULT_SHELL_TIMEOUT,
        env_allow: Collection[str] = (),
    ) -> None:
        if timeout <= 0:
            raise ConfigError(
                "shell.timeout", f"must be a positive number of seconds, not {timeout}"
            )
        self.workspace = workspace
        self.approval = approval
        self.timeout = timeout
        self.env_allow = frozenset(env_allow)

    @property
    def spec(self) -> ToolSpec:
        """The ``shell`` tool as the model sees it."""
        return ToolSpec(
            name="shell",
            description=(
                "Run a bash command in the workspace root and return its output (stdout and "
                "stderr interleaved) followed by a last line 'exit code: N'. stdin is closed, "
                "so interactive programs fail: pass flags such as --yes or -y instead. "
                f"Commands are stopped after {self.timeout:g} s unless timeout says otherwise "
                f"(at most {SHELL_MAX_TIMEOUT:g} s). Use it to run tests, builds, git and other "
                "programs; prefer read_file, grep and edit_file for reading and changing "
                "files. May need the user's approval."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The bash command to run."},
                    "timeout": {
                        "type": "number",
                        "minimum": 1,
                        "maximum": SHELL_MAX_TIMEOUT,
                        "description": f"Seconds before it is stopped (default {self.timeout:g}).",
                    },
                },
                "required": ["command"],
                "additionalProperties": False,
            },
        )

    def __call__(self, args: dict[str, Any]) -> ToolOutcome:
        """Run the call's command after approval; the output ends with its exit code."""
        command: str = args["command"]
        if not command.strip():
            raise ToolError(
                "command is empty; give a bash command to run", kind="invalid_arguments"
            )
        timeout = float(args.get("timeout", self.timeout))
        self.approval.require_writable("shell")
        self.approval.require(
            "shell", f"$ {command}\n(in {self.workspace.root}, timeout {timeout:g} s)"
        )
        env = scrubbed_environment(allow=self.env_allow)
        try:
            result = run_command(command, cwd=self.workspace.root, timeout=timeout, env=env)
        except OSError as exc:
            raise ToolError(f"the command could not be started: {exc}", kind="not_started") from exc
        return _outcome(result, timeout)


def _outcome(result: CommandResult, timeout: float) -> ToolOutcome:
    lines = [result.output.rstrip("\n") if result.output.strip() else "(no output)"]
    if result.timed_out:
        lines.append(
            f"[timed out after {timeout:g} s: the command and its child processes were stopped; "
            "give a larger timeout, or run long jobs in the background with output to a file]"
        )
    if result.detached:
        lines.append(
            "[background processes still hold the output open; what they print from now on is "
            "not captured: redirect it to a file (cmd > log 2>&1 &) to read it later]"
        )
    code = result.exit_code
    if result.timed_out:
        lines.append(f"exit code: {code} (timed out)")
    elif result.returncode < 0:
        lines.append(f"exit code: {code} (killed by {_signal_name(-result.returncode)})")
    else:
        lines.append(f"exit code: {code}")
    metadata = {
        "exit_code": code,
        "timed_out": result.timed_out,
        "omitted_bytes": result.omitted_bytes,
    }
    return ToolOutcome("\n".join(lines), is_error=result.timed_out, metadata=metadata)
