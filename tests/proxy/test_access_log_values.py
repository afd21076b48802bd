"""The proxy's access log writes every value as a reader of JSON expects it."""

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
