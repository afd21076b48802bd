"""Shared fixtures: the shared transcript corpus, and isolation from the user's home."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# ../shared/data beside the checkout; a worktree elsewhere names it in CONTEXTFOLD_TEST_SHARED_DATA.
SHARED_DATA = Path(
    os.environ.get("CONTEXTFOLD_TEST_SHARED_DATA")
    or Path(__file__).resolve().parents[1].parent / "shared" / "data"
)
TRAJECTORIES = SHARED_DATA / "trajectories"


def shared_path(*parts: str) -> Path:
    """A path under ../shared/data; the calling test is skipped when the corpus is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared transcripts not available ({path} is absent)")
    return path


@pytest.fixture(autouse=True)
def _isolated_user_dirs(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """No test reads or writes the real user config/data directories."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("CONTEXTFOLD_HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.delenv("CONTEXTFOLD_DATABASE_URL", raising=False)
    yield


_real_connect = socket.socket.connect
_real_getaddrinfo = socket.getaddrinfo


def _is_local(host: str) -> bool:
    if host in ("localhost", "") or host.startswith("/"):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_local(str(address[0])):
        raise RuntimeError(
            f"test tried to reach {address[0]}: tests must never use the network "
            "(start a local server, or use respx / a fake)"
        )
    return _real_connect(self, address)


def _guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if isinstance(host, bytes):
        host = host.decode()
    if host is not None and not _is_local(str(host)):
        raise RuntimeError(f"test tried to resolve {host!r}: tests must never use the network")
    return _real_getaddrinfo(host, *args, **kwargs)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any test that tries to reach a real endpoint (loopback stays allowed)."""
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket, "getaddrinfo", _guarded_getaddrinfo)
