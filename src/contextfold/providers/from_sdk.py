"""The official SDKs' own response objects as a :class:`ChatResponse`, for ``add_assistant``.

Someone calling ``client.chat.completions.create(**request.to_openai(model=...))`` or
``client.messages.create(**request.to_anthropic(model=...))`` gets the SDK's object back; the
session takes it as it is. The SDK is known by the package its class comes from, and its adapter
module (which imports that SDK) is only imported then, so neither SDK is ever needed by code
that does not use it.
"""

from __future__ import annotations

from typing import Any, cast

from contextfold.chat import ChatResponse

__all__ = ["chat_response_from_sdk"]


def chat_response_from_sdk(reply: object) -> ChatResponse:
    """The :class:`ChatResponse` of an OpenAI ``ChatCompletion`` or an Anthropic ``Message``
    (see :func:`contextfold.providers.openai.response_from_completion` and
    :func:`contextfold.providers.anthropic.response_from_message`); a ``TypeError`` naming what
    is accepted for anything else."""
    package = type(reply).__module__.partition(".")[0]
    # The SDKs' response models have their wire form (to_dict); each converter then checks that
    # it is a whole reply, not a stream chunk.
    if hasattr(reply, "to_dict"):
        if package == "openai":
            from contextfold.providers.openai import response_from_completion

            return response_from_completion(cast(Any, reply))
        if package == "anthropic":
            from contextfold.providers.anthropic import response_from_message

            return response_from_message(cast(Any, reply))
    raise TypeError(
        "add_assistant takes a contextfold Message or ChatResponse, an OpenAI ChatCompletion or "
        f"an Anthropic Message; got {type(reply).__module__}.{type(reply).__qualname__}"
    )
