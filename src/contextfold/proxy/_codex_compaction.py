"""Codex's compaction requests: ``POST /v1/responses/compact``, and a ``/v1/responses`` request
whose input ends with a ``compaction_trigger`` item.

In front of OpenAI itself they are passed through (see ``app.py``): the ``compaction`` item
OpenAI answers with is encrypted with OpenAI's keys, and only OpenAI reads it back. In front of
any other upstream nobody upstream could answer them, so the proxy does, with its own
compaction: the extractive summary of the conversation (the same eight sections the engine
writes when it compacts, no model call), sealed into a ``compaction`` item whose
``encrypted_content`` only this proxy can open (Fernet, with a key derived from the proxy's
tenant salt, so every worker sharing the salt reads it and a restart keeps it readable; the
tenant is sealed in too). When Codex sends the item back, :func:`open_compactions` puts the
summary, readable, where the item was; a proxy with another salt cannot open it and says so.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from contextfold.compaction.summary import (
    ExtractiveSummarizer,
    StructuredSummary,
    summary_message,
)
from contextfold.messages import Message
from contextfold.proxy._wire import ClientError
from contextfold.wire.responses import ResponsesRequest
from contextfold.wire.responses_items import OPAQUE_FLAG, PROVIDER_KEY, new_id

__all__ = ["SEALED_PREFIX", "CompactionSeal", "compacted_output", "open_compactions"]

SEALED_PREFIX = "contextfold.v1."
"""How the ``encrypted_content`` of a compaction item this proxy made begins."""

_KEY_CONTEXT = b"contextfold proxy compaction items\0"


class CompactionSeal:
    """Seals a summary into a compaction item's ``encrypted_content``, and opens it again."""

    def __init__(self, salt: bytes) -> None:
        key = hashlib.sha256(_KEY_CONTEXT + salt).digest()
        self._fernet = Fernet(base64.urlsafe_b64encode(key))

    def seal(self, tenant: str, summary: StructuredSummary) -> str:
        payload = {"tenant": tenant, "sections": summary.sections_for_part()}
        token = self._fernet.encrypt(json.dumps(payload, separators=(",", ":")).encode())
        return SEALED_PREFIX + token.decode("ascii")

    def open(self, tenant: str, content: str) -> StructuredSummary:
        """The summary sealed in ``content``; :class:`ClientError` when this proxy cannot read
        it (sealed by a proxy with another salt, or for another tenant)."""
        try:
            payload = json.loads(self._fernet.decrypt(content[len(SEALED_PREFIX) :].encode()))
        except (InvalidToken, ValueError, UnicodeError):
            payload = None
        if not isinstance(payload, dict) or payload.get("tenant") != tenant:
            raise ClientError(
                "a compaction item of the input was made by another contextfold proxy (or for "
                "another API key): this one cannot read it. Start the conversation again, or "
                "run the proxy with the tenant salt that made it (CONTEXTFOLD_PROXY_SALT)",
                param="input",
            )
        sections = payload.get("sections")
        return StructuredSummary.from_sections(sections if isinstance(sections, dict) else {})


def _sealed_item(message: Message) -> Mapping[str, Any] | None:
    """The compaction item ``message`` stands for, when this proxy made it."""
    if OPAQUE_FLAG not in message.meta.flags:
        return None
    details = message.meta.provider.get(PROVIDER_KEY)
    item = details.get("item") if isinstance(details, Mapping) else None
    content = item.get("encrypted_content") if isinstance(item, Mapping) else None
    if isinstance(content, str) and content.startswith(SEALED_PREFIX):
        return item
    return None


def open_compactions(
    parsed: ResponsesRequest, seal: CompactionSeal, tenant: str
) -> ResponsesRequest:
    """``parsed`` with each compaction item this proxy made replaced by the summary it holds,
    as the summary message the engine itself writes (unchanged when it holds none)."""
    messages = list(parsed.messages)
    changed = False
    for index, message in enumerate(messages):
        item = _sealed_item(message)
        if item is not None:
            summary = seal.open(tenant, str(item["encrypted_content"]))
            messages[index] = summary_message(summary, None, source="contextfold-proxy")
            changed = True
    return replace(parsed, messages=tuple(messages)) if changed else parsed


def compacted_output(
    parsed: ResponsesRequest,
    conversation: Sequence[Message],
    seal: CompactionSeal,
    tenant: str,
    *,
    keep_user_items: bool,
) -> list[dict[str, Any]]:
    """The output of the proxy's own compaction of ``conversation``: one ``compaction`` item
    (a ``compaction_trigger`` request), after the client's own user messages when
    ``keep_user_items`` (``/responses/compact``, whose output replaces Codex's history, as
    OpenAI's does)."""
    summary = ExtractiveSummarizer().summarize(conversation, None, None)
    item = {
        "type": "compaction",
        "id": new_id("cmp"),
        "encrypted_content": seal.seal(tenant, summary),
    }
    kept: list[dict[str, Any]] = []
    if keep_user_items:
        raw = parsed.body.get("input")
        for entry in raw if isinstance(raw, list) else []:
            if (
                isinstance(entry, Mapping)
                and entry.get("type", "message") == "message"
                and entry.get("role") == "user"
            ):
                kept.append(dict(entry))
    return [*kept, item]
