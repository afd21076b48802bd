"""The wire protocols, one module each, both directions: requests, responses, stream events and
errors, to and from contextfold's :class:`~contextfold.messages.Message`.

- :mod:`~contextfold.wire.anthropic` and :mod:`~contextfold.wire.anthropic_request` — the
  Anthropic Messages API;
- :mod:`~contextfold.wire.chat_completions` and
  :mod:`~contextfold.wire.chat_completions_request` — OpenAI Chat Completions;
- :mod:`~contextfold.wire.sse` — server-sent events, however their bytes are split.
"""

from __future__ import annotations

from contextfold.wire.anthropic import (
    AnthropicRequest,
    from_anthropic,
    to_anthropic,
)
from contextfold.wire.chat_completions import (
    from_openai,
    to_openai,
)

__all__ = [
    "AnthropicRequest",
    "from_anthropic",
    "from_openai",
    "to_anthropic",
    "to_openai",
]
