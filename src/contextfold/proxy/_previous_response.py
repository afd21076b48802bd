"""``previous_response_id``: a Responses request continuing a response this proxy answered.

The conversations of the last :data:`ANSWERED_KEPT` responses are kept in the process (by
tenant and response id); a request naming one of them is read as that conversation followed by
its own input. Any other id goes upstream as it came: the history lives where that response was
made. (Codex never sends the field over HTTP: every request carries its whole history.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from contextfold.messages import Message
from contextfold.proxy import responses_side
from contextfold.proxy._exchange import ANSWERED_KEPT, ClientWriter
from contextfold.proxy._wire import ClientRequest

__all__ = ["Answered", "continued", "remember"]

logger = logging.getLogger("contextfold.proxy")

Answered = dict[tuple[str, str], list[Message]]
"""Conversations by tenant and response id (``ProxyState.answered``)."""


def continued(answered: Answered, tenant: str, client: ClientRequest) -> tuple[ClientRequest, bool]:
    """A Responses request with ``previous_response_id``: its conversation continued when this
    proxy answered that response; else the request as sent, and True: it goes upstream as it
    is (the history lives where that response was made)."""
    previous = client.parsed.previous_response_id if client.parsed is not None else None
    if not previous:
        return client, False
    earlier = answered.get((tenant, previous))
    if earlier is None:
        logger.info("previous_response_id %s is not this proxy's: passed through", previous)
        return client, True
    return responses_side.with_history(client, earlier), False


def remember(
    answered: Answered, tenant: str, client: ClientRequest
) -> Callable[[ClientWriter], None]:
    """What records a Responses reply for a later ``previous_response_id``."""

    def remember(writer: ClientWriter) -> None:
        if not isinstance(writer, responses_side.Writer):
            return
        history = [m for group in client.read() for m in group]
        answered[(tenant, writer.response_id)] = [*history, *writer.reply_messages()]
        while len(answered) > ANSWERED_KEPT:
            del answered[next(iter(answered))]

    return remember
