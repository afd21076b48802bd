"""When a failed model call is tried again, and after how long.

:class:`RetryPolicy` is the one place these decisions live; the sync and async loops in
:class:`~contextfold.providers.base.BaseChatModel` only sleep and call again.

- what can succeed when tried again (:class:`ProviderUnavailableError` with a status in
  :data:`RETRIED_STATUSES`, or none: timeouts, connection failures, an error event mid-stream):
  exponential backoff with jitter, ``max_attempts`` calls in all, then
  :class:`ProviderUnavailableError` naming the count.
- HTTP 500: tried again ``max_server_error_retries`` times (once by default). Local servers
  answer 500 for mistakes that repeat identically (llama.cpp: "tools param requires --jinja
  flag", a chat template raising; llama-cpp-python: a ``null`` content it cannot validate;
  Ollama: "no user query found in messages"), so more tries only add waiting; hosted APIs
  document 500 as a rare blip, which one retry covers.
- any other status (501, 505, a 4xx other than 408/409/429) is raised at once: it will not change.
- 429 and "overloaded" (:class:`RateLimitError`): wait what the provider's ``retry-after`` asked
  for (backoff when it said nothing), within the same attempt count. A wait longer than
  ``max_retry_after`` is not slept through: the error goes to the caller at once.
- context overflow (:class:`ContextOverflowError`) that a smaller reply budget would fix
  (``max_tokens_adjustable``): one more call with ``max_tokens`` lowered to what fits, when that
  still leaves ``min_output_tokens``. Any other overflow goes to the caller, whose job it is to
  compact: only the caller can shorten the history, and a retry of the same prompt would overflow
  again.
- everything else is raised at once.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

from contextfold.chat import ChatRequest
from contextfold.errors import (
    ContextOverflowError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
)

__all__ = [
    "DEFAULT_BACKOFF_BASE",
    "DEFAULT_BACKOFF_MAX",
    "DEFAULT_JITTER",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_RETRY_AFTER",
    "DEFAULT_MAX_SERVER_ERROR_RETRIES",
    "DEFAULT_MIN_OUTPUT_TOKENS",
    "DEFAULT_OVERFLOW_MARGIN",
    "RETRIED_STATUSES",
    "Attempts",
    "RetryPolicy",
]

DEFAULT_MAX_ATTEMPTS = 4
"""Calls made in all for a transient failure (the first one plus three retries)."""

DEFAULT_MAX_SERVER_ERROR_RETRIES = 1
"""How many times an HTTP 500 is tried again (see the module docstring for why so few)."""

RETRIED_STATUSES = frozenset({408, 409, 429, 502, 503, 504, 529})
"""HTTP statuses that say "try again later": request timeout, conflict (OpenAI: a lock held by
another request), rate limit, bad gateway, unavailable, gateway timeout, Anthropic overloaded."""

DEFAULT_BACKOFF_BASE = 1.0
"""Seconds before the first retry; each later retry waits twice as long as the one before."""

DEFAULT_BACKOFF_MAX = 30.0
"""Longest wait between two attempts, in seconds."""

DEFAULT_JITTER = 0.5
"""Up to this fraction of each backoff wait is taken off at random, so that many clients
failing together do not retry together."""

DEFAULT_MAX_RETRY_AFTER = 60.0
"""A ``retry-after`` longer than this many seconds is handed to the caller instead of slept."""

DEFAULT_MIN_OUTPUT_TOKENS = 1024
"""The overflow retry lowers ``max_tokens`` only if at least this many remain for the reply;
below that, a cut-short answer is worse than compacting the history."""

DEFAULT_OVERFLOW_MARGIN = 16
"""Tokens kept free when lowering ``max_tokens`` to what the provider said fits."""


@dataclass(frozen=True)
class RetryPolicy:
    """How a model retries. ``sleep``/``asleep`` (and ``rng``, the jitter source returning a
    number in [0, 1)) are injectable so tests never wait."""

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff_base: float = DEFAULT_BACKOFF_BASE
    backoff_max: float = DEFAULT_BACKOFF_MAX
    jitter: float = DEFAULT_JITTER
    max_retry_after: float = DEFAULT_MAX_RETRY_AFTER
    max_server_error_retries: int = DEFAULT_MAX_SERVER_ERROR_RETRIES
    retry_rate_limits: bool = True
    lower_max_tokens_on_overflow: bool = True
    min_output_tokens: int = DEFAULT_MIN_OUTPUT_TOKENS
    overflow_margin: int = DEFAULT_OVERFLOW_MARGIN
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    asleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, repr=False)
    rng: Callable[[], float] = field(default=random.random, repr=False)

    @classmethod
    def never(cls) -> RetryPolicy:
        """A policy that hands every failure straight to the caller (used by the fakes)."""
        return cls(max_attempts=1, retry_rate_limits=False, lower_max_tokens_on_overflow=False)

    def with_sleep(
        self, sleep: Callable[[float], None], asleep: Callable[[float], Awaitable[None]]
    ) -> RetryPolicy:
        """A copy that waits with other functions (tests pass no-op ones)."""
        return replace(self, sleep=sleep, asleep=asleep)

    def backoff(self, retry_number: int) -> float:
        """Seconds to wait before retry ``retry_number`` (1 for the first retry), jitter applied."""
        delay = min(self.backoff_max, self.backoff_base * 2.0 ** (retry_number - 1))
        return delay - delay * self.jitter * self.rng()

    def start(self, request: ChatRequest, *, provider: str = "") -> Attempts:
        """Begin the attempts for one request."""
        return Attempts(self, request, provider)


class Attempts:
    """The state of one request's attempts: which request to send next, and how many were made."""

    def __init__(self, policy: RetryPolicy, request: ChatRequest, provider: str) -> None:
        self.policy = policy
        self.request = request
        self.provider = provider
        self.made = 1
        self.lowered_max_tokens = False

    def after_failure(self, exc: ProviderError) -> float:
        """Seconds to wait before the next attempt; raises when there is to be none."""
        if isinstance(exc, ContextOverflowError):
            lowered = self._fitting_max_tokens(exc)
            if lowered is None:
                raise exc
            self.request = replace(self.request, max_tokens=lowered)
            self.lowered_max_tokens = True
            return 0.0
        if isinstance(exc, RateLimitError):
            if not self.policy.retry_rate_limits or self.made >= self.policy.max_attempts:
                raise exc
            if exc.retry_after is not None and exc.retry_after > self.policy.max_retry_after:
                raise exc
            delay = exc.retry_after if exc.retry_after is not None else self._backoff()
        elif isinstance(exc, ProviderUnavailableError):
            allowed = self._attempts_allowed(exc.status)
            if self.made >= allowed:
                if allowed <= 1:
                    raise exc
                raise ProviderUnavailableError(
                    f"{exc} (gave up after {self.made} attempts)",
                    provider=exc.provider or self.provider,
                    status=exc.status,
                ) from exc
            delay = self._backoff()
        else:
            raise exc
        self.made += 1
        return max(0.0, delay)

    def _attempts_allowed(self, status: int | None) -> int:
        """Calls in all for a failure with this HTTP status (None: no status, e.g. a timeout)."""
        if status is None or status in RETRIED_STATUSES:
            return self.policy.max_attempts
        if status == 500:
            return min(self.policy.max_attempts, 1 + self.policy.max_server_error_retries)
        return 1

    def _backoff(self) -> float:
        return self.policy.backoff(self.made)

    def _fitting_max_tokens(self, exc: ContextOverflowError) -> int | None:
        """The lower ``max_tokens`` that makes the request fit, or None when there is none."""
        policy = self.policy
        if not (policy.lower_max_tokens_on_overflow and exc.max_tokens_adjustable):
            return None
        if self.lowered_max_tokens or exc.prompt_tokens is None or exc.limit is None:
            return None
        room = exc.limit - exc.prompt_tokens - policy.overflow_margin
        current = self.request.max_tokens
        if room < policy.min_output_tokens or (current is not None and room >= current):
            return None
        return room
