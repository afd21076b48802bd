"""What a session keeps of a request a provider refused as too long, so that it is never sent
again as it was (used by :meth:`~contextfold.engine.Session.recover` and ``prepare``)."""

from __future__ import annotations

from dataclasses import dataclass

from contextfold.engine.request import PreparedRequest
from contextfold.errors import ContextOverflowError
from contextfold.tokens.chat_template import message_key

__all__ = ["ENGINE_PROVIDER", "OVERFLOW_RETRY_SHARE", "RefusedRequest"]

ENGINE_PROVIDER = "contextfold"
"""The ``provider`` of a :class:`ContextOverflowError` the engine raises itself (nothing was
sent); :meth:`Session.recover` answers only a provider's own refusal."""

OVERFLOW_RETRY_SHARE = 0.5
"""The retry after a refusal aims at most at this share of the refused request's size: when the
provider refused a request that fits by our count, our count is off by an amount we cannot
know, and only a clearly smaller retry can succeed."""


@dataclass(frozen=True, slots=True)
class RefusedRequest:
    """A request a provider refused, and the error it gave."""

    signature: tuple[object, ...] | None
    """``None`` when the refused request is not known (nothing was prepared before)."""
    error: ContextOverflowError

    @classmethod
    def of(cls, request: PreparedRequest | None, error: ContextOverflowError) -> RefusedRequest:
        """Remember ``request``, refused with ``error``."""
        return cls(_signature(request) if request is not None else None, error)

    def check(self, request: PreparedRequest) -> None:
        """Raise when ``request`` is the one that was refused: the compaction after the refusal
        could remove nothing more, and sending it again would only be refused again."""
        if self.signature is None or _signature(request) != self.signature:
            return
        error = self.error
        sent = f"{error.prompt_tokens:,} tokens" if error.prompt_tokens else "the request"
        limit = f" (its limit: {error.limit:,})" if error.limit else ""
        raise ContextOverflowError(
            f"{error.provider or 'the provider'} refused {sent}{limit}, and a hard compaction "
            f"could remove nothing more: the retry would be the same request. Use a model with "
            f"a larger context, or start a new session.",
            provider=error.provider,
            status=error.status,
            prompt_tokens=error.prompt_tokens,
            limit=error.limit,
        ) from error


def _signature(request: PreparedRequest) -> tuple[object, ...]:
    """What makes two requests the same on the wire."""
    return (
        tuple(message_key(m) for m in request.messages),
        request.system_text,
        tuple(t.name for t in request.tools),
        request.max_tokens,
    )
