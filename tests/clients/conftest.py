"""Fixtures shared by the real-client tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def show(capsys: pytest.CaptureFixture[str]) -> Callable[[str], None]:
    """Print a line to the terminal, past pytest's output capture (so it shows without -s)."""

    def write(line: str) -> None:
        with capsys.disabled():
            print(line, flush=True)

    return write


def installed(command: str, install_hint: str, *version_args: str) -> str:
    """The path of ``command``; the test skips, saying how to install it, when it is absent or
    does not run."""
    path = shutil.which(command)
    if path is None:
        pytest.skip(f"{command} is not installed ({install_hint})")
    try:
        done = subprocess.run(
            [path, *(version_args or ("--version",))],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"`{command} --version` failed: {exc}")
    if done.returncode != 0:
        pytest.skip(f"`{command} --version` failed: {done.stderr.strip()[:300]}")
    return path


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """A client's own HOME and its work directory."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    return home, work


def client_venv(name: str, package: str) -> Path:
    """The Python of the client venv ``name``; the test skips when it is absent."""
    root = Path(os.environ.get("CONTEXTFOLD_CLIENT_VENVS", "/var/cache/contextfold-clients"))
    python = root / name / "bin" / "python"
    if not python.exists():
        pytest.skip(
            f"{package} is not installed in its own venv at {root / name} "
            f"(python3 -m venv {root / name} && {root / name}/bin/pip install {package}; "
            ".ci/run does this)"
        )
    return python


def write_codex_config(codex_home: Path, base_url: str, model: str = "scripted") -> None:
    """Codex's ``config.toml``: a provider at ``base_url`` speaking the Responses API over HTTP
    (``supports_websockets = false``), no retries, no web search, no updates, and a model
    window so large that Codex never compacts itself (managing the window is the proxy's job)."""
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        f"""model = "{model}"
model_provider = "cfscripted"
approval_policy = "never"
sandbox_mode = "danger-full-access"
web_search = "disabled"
model_context_window = 1000000
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.cfscripted]
name = "scripted"
base_url = "{base_url}/v1"
wire_api = "responses"
env_key = "CF_SCRIPTED_KEY"
request_max_retries = 0
stream_max_retries = 0
supports_websockets = false
"""
    )


# A real client is a separate program with its own timing: Claude Code refuses an Edit of a file
# whose modification time moved since its Read, and in full suites Claude Code left its
# step-18 Edit unlanded in about one run of eight (at 32k once, at 64k once; the same tests
# passed alone on the same code). Two retries keep CI from failing on such a race; a defect of
# the proxy fails every try. Retries are printed in pytest's summary ("rerun"), so a flaky
# client stays visible.
CLIENT_RETRIES = 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here) and item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.flaky(reruns=CLIENT_RETRIES))
