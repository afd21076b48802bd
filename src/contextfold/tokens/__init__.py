"""Token counts: one :class:`TokenCounter` protocol, the counters behind it, the
tokenizers and chat templates they use, and the size estimate anchored on provider usage.

- :mod:`~contextfold.tokens.counter` — the :class:`TokenCounter` protocol;
- :mod:`~contextfold.tokens.counters` — :class:`HeuristicCounter`, :class:`TiktokenCounter`,
  :func:`counter_for`;
- :mod:`~contextfold.tokens.tokenizers` — the BPE ranks loaded from local files;
- :mod:`~contextfold.tokens.chat_template` — how a provider frames each message;
- :mod:`~contextfold.tokens.estimator` — :class:`ContextSizeEstimator`.
"""

from __future__ import annotations

from contextfold.tokens.counter import (
    TokenCounter,
)
from contextfold.tokens.counters import (
    DEFAULT_CACHE_SIZE,
    IMAGE_TOKENS,
    IMAGE_TOKENS_LOW_DETAIL,
    ChatTemplate,
    HeuristicCounter,
    TiktokenCounter,
    counter_for,
)
from contextfold.tokens.estimator import (
    Calibration,
    ContextEstimate,
    ContextSizeEstimator,
)

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "IMAGE_TOKENS",
    "IMAGE_TOKENS_LOW_DETAIL",
    "Calibration",
    "ChatTemplate",
    "ContextEstimate",
    "ContextSizeEstimator",
    "HeuristicCounter",
    "TiktokenCounter",
    "TokenCounter",
    "counter_for",
]
