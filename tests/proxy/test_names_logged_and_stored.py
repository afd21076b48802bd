"""What the proxy writes down: enums in its access log as words, models as they were named."""

from __future__ import annotations

import enum
import json
import logging

import pytest

from contextfold.budget import Zone
from contextfold.proxy._exchange import write_access_log


class _Side(enum.StrEnum):
    CHAT = "chat"


def test_every_enum_is_logged_as_its_word_value(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("contextfold.proxy.access")
    logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger="contextfold.proxy.access"):
            write_access_log({"zone": Zone.COMPACT, "side": _Side.CHAT, "status": 200}, {"n": 1})
    finally:
        logger.removeHandler(caplog.handler)
    line = json.loads(caplog.records[-1].getMessage())
    assert line == {"zone": "compact", "side": "chat", "status": 200, "n": 1}


@pytest.mark.parametrize("window", [None, 8_192])
def test_the_store_records_the_model_as_it_was_named(window: int | None) -> None:
    """``--model qwen3:8b`` is found as the registry's qwen3, but stored as qwen3:8b."""
    from contextfold.proxy._engines import Engines
    from contextfold.proxy.config import ProxyConfig
    from contextfold.store import open_store

    config = ProxyConfig(
        upstream="http://127.0.0.1:11434/v1", model="qwen3:8b", window=window, store=":memory:"
    )
    store = open_store(":memory:")
    engines = Engines(config, store)  # type: ignore[arg-type]
    try:
        engine = engines.for_model("gpt-4o", "openai-compatible").engine
        assert engine.model.name == "qwen3"  # the registry's entry still plans the requests
        session = engine.new_session()
        assert store.get_session(session.id).model == "qwen3:8b"
    finally:
        engines.close()
        store.close()


def test_an_unknown_client_model_is_stored_as_named() -> None:
    from contextfold.proxy._engines import Engines
    from contextfold.proxy.config import ProxyConfig
    from contextfold.store import open_store

    config = ProxyConfig(upstream="http://127.0.0.1:11434/v1", window=8_192, store=":memory:")
    store = open_store(":memory:")
    engines = Engines(config, store)  # type: ignore[arg-type]
    try:
        session = engines.for_model("my-local:7b", "openai-compatible").engine.new_session()
        assert store.get_session(session.id).model == "my-local:7b"
    finally:
        engines.close()
        store.close()
