"""The README's offline quick start with a real model: ``contextfold serve-local`` in one
terminal, the README's ``run`` line in another. Both commands are read from the README."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.interrupts import sigint_by_default

README = Path(__file__).resolve().parents[2] / "README.md"
STARTUP_SECONDS = 120


def readme_commands() -> list[str]:
    """The lines of the block after ``<!-- local-model-commands -->``, comments dropped."""
    text = README.read_text(encoding="utf-8").split("<!-- local-model-commands -->", 1)[1]
    block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def command_line(line: str) -> tuple[dict[str, str], list[str]]:
    """``VAR=value contextfold ARGS`` -> the variables and the argv, with this venv's script."""
    words = shlex.split(line)
    variables = {}
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        variables[name] = value
    assert words[0] == "contextfold"
    return variables, [str(Path(sys.executable).with_name("contextfold")), *words[1:]]


def test_the_readme_local_model_quick_start_works(tmp_path: Path) -> None:
    serve_line, run_line = readme_commands()
    assert serve_line == "contextfold serve-local"
    port = free_port()  # not 8080, which something else on this machine may hold
    env = {**os.environ, "CONTEXTFOLD_HOME": str(tmp_path / "home")}
    env.pop("CONTEXTFOLD_RAISE", None)
    _, serve = command_line(serve_line)
    server = subprocess.Popen(
        [*serve, "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=sigint_by_default,  # so that the Ctrl-C below stops it
    )
    try:
        assert server.stdout is not None
        deadline = time.monotonic() + STARTUP_SECONDS
        banner = ""
        while "Ctrl-C stops it" not in banner and time.monotonic() < deadline:
            banner += server.stdout.readline()
        assert f"Serving gemma-3-270m at http://127.0.0.1:{port}/v1" in banner, banner
        # The model file went under the temporary home, not ~/.cache.
        assert list((tmp_path / "home" / "data" / "models").glob("*.gguf"))

        variables, run = command_line(run_line)
        result = subprocess.run(
            [*run[:2], "--base-url", f"http://127.0.0.1:{port}/v1", *run[2:]],
            env={**env, **variables},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        # 0: the model answered; 2: --max-steps stopped it (a base model may call tools).
        assert result.returncode in (0, 2), result.stderr
        assert "model calls" in result.stdout + result.stderr
        assert "Traceback" not in result.stderr
    finally:
        server.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            status = server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()  # not left running (with its model loaded) after the test
            server.wait()
            raise
    assert status == 130
