"""The peer proxies' harness: offline tokenizer cache, sealed environment, start and failure."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import httpx
import pytest

from benchmarks.peers import proxies
from benchmarks.peers.proxies import Launch, PeerProxy, PeerUnavailable, run_peer
from benchmarks.proxy_peers import peers_named
from contextfold.tokens.tokenizers import ENCODINGS


def test_the_tiktoken_cache_holds_the_bytes_tiktoken_expects(tmp_path: Path) -> None:
    folder = proxies._seed_tiktoken_cache(tmp_path / "cache")
    files = sorted(folder.iterdir())
    assert len(files) == len(ENCODINGS)
    digests = {hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
    assert digests == {expected for _, _, expected in ENCODINGS.values()}


def test_tiktoken_reads_the_seeded_cache_without_the_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load = pytest.importorskip("tiktoken.load")
    folder = proxies._seed_tiktoken_cache(tmp_path / "cache")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(folder))

    def no_network(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("tiktoken went to the network")

    monkeypatch.setattr(load, "read_file", no_network)
    name = "cl100k_base"
    url = proxies._TIKTOKEN_BLOBS.format(name=name)
    data = load.read_file_cached(url, ENCODINGS[name][2])
    assert hashlib.sha256(data).hexdigest() == ENCODINGS[name][2]


def test_a_peer_runs_sealed_off_from_the_network(tmp_path: Path) -> None:
    script = (
        "import json, os, sys\n"
        "from http.server import BaseHTTPRequestHandler, HTTPServer\n"
        "class H(BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        keys = ('HTTPS_PROXY', 'NO_PROXY', 'HOME', 'TIKTOKEN_CACHE_DIR', 'EXTRA')\n"
        "        body = json.dumps({k: os.environ.get(k) for k in keys}).encode()\n"
        "        self.send_response(200); self.end_headers(); self.wfile.write(body)\n"
        "    def log_message(self, *a): pass\n"
        "HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n"
    )

    def launch(venv: Path, upstream: str, port: int, workdir: Path) -> Launch:
        return Launch(
            [sys.executable, "-c", script, str(port)], {"EXTRA": upstream}, {}, {"k": "v"}
        )

    peer = PeerProxy("fake", "fake==1", "fake", launch, "/health", "a test server")
    with run_peer(peer, tmp_path, "http://127.0.0.1:1", tmp_path / "work") as (url, headers):
        seen = httpx.get(url + "/env", trust_env=False).json()
    assert headers == {"k": "v"}
    assert seen["HTTPS_PROXY"] == proxies.DEAD_PROXY
    assert "127.0.0.1" in seen["NO_PROXY"]
    assert seen["HOME"].startswith(str(tmp_path))
    assert seen["TIKTOKEN_CACHE_DIR"].startswith(str(tmp_path))
    assert seen["EXTRA"] == "http://127.0.0.1:1"


def test_a_peer_that_dies_at_start_says_why(tmp_path: Path) -> None:
    def launch(venv: Path, upstream: str, port: int, workdir: Path) -> Launch:
        code = "import sys; print('no licence for this machine'); sys.exit(3)"
        return Launch([sys.executable, "-c", code], {}, {})

    peer = PeerProxy("dying", "dying==1", "dying", launch, "/health", "exits at once")
    with (
        pytest.raises(PeerUnavailable, match="status 3: no licence for this machine"),
        run_peer(peer, tmp_path, "http://127.0.0.1:1", tmp_path / "work"),
    ):
        pass


def test_a_missing_peer_is_not_installed_unless_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTEXTFOLD_PEER_VENVS", str(tmp_path))
    [litellm] = peers_named("litellm")
    with pytest.raises(PeerUnavailable, match="not installed"):
        proxies.ensure_installed(litellm, install=False)


def test_unknown_peer_names_are_refused() -> None:
    with pytest.raises(SystemExit, match="unknown peer"):
        peers_named("headroom,nginx")
