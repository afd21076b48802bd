"""Prefix-cache reuse between consecutive requests, and what the input costs at cache prices.

Providers cache prompt *prefixes*: a request pays the cheap cache-read price for the part that is
byte-identical to the start of an earlier request, and the full (or cache-write) price for the
rest. :class:`PrefixMeter` measures, request after request, the share of each request that is an
unchanged prefix of the previous one. It compares the request as it goes on the wire (tools,
then system prompt, then each message, rendered to the provider's JSON and compared segment by
segment), ignoring Anthropic's ``cache_control`` markers, which move every turn without changing
what is cached.

:func:`input_cost` prices one request from that split. One formula covers both price lists: the
reused prefix at the cache-read price, the rest at the cache-write price (Anthropic charges a
surcharge to write the cache; OpenAI's write price equals its input price, caching being
automatic), and everything at the plain input price when the request is shorter than the model's
minimum cacheable prefix. For Anthropic this counts every new token as written, which is what the
engine's moving tail breakpoint does (the per-request note after it is a few tokens); and it
counts a read wherever the prefix matches, an upper bound since Anthropic looks up the cache at
breakpoints (the engine keeps one at the end of the previous request's view).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contextfold.engine import PreparedRequest
from contextfold.engine.policy import DEFAULT_CACHE_TTL_SECONDS
from contextfold.model_registry import ModelInfo, Provider, default_registry
from contextfold.tokens.counters import TokenCounter

__all__ = [
    "ANTHROPIC_PRICE_MODEL",
    "OPENAI_PRICE_MODEL",
    "PrefixMeter",
    "PrefixReuse",
    "input_cost",
    "price_models",
    "request_segments",
]

ANTHROPIC_PRICE_MODEL = "claude-sonnet-4-5"
"""Model whose prices stand for Anthropic's ($3 input, $3.75 cache write, $0.30 cache read per
MTok): the model most coding agents run on."""
OPENAI_PRICE_MODEL = "gpt-5"
"""Model whose prices stand for OpenAI's ($1.25 input, $0.125 cache read per MTok, no write
surcharge): OpenAI's current flagship."""


@dataclass(frozen=True, slots=True)
class PrefixReuse:
    """How much of one request repeats the start of the previous one."""

    total_tokens: int
    """The request's size (the engine's estimate)."""
    reused_tokens: int
    """Tokens of the unchanged prefix, on the same scale as ``total_tokens``."""

    @property
    def share(self) -> float:
        """``reused_tokens / total_tokens`` (0.0 for an empty request)."""
        return self.reused_tokens / self.total_tokens if self.total_tokens else 0.0


def request_segments(request: PreparedRequest, provider: Provider) -> list[str]:
    """The request as a provider receives it, cut where a cache prefix can end.

    Tools first (both providers put them ahead of everything in the cached prefix), then the
    system prompt, then one JSON text per wire message. ``cache_control`` markers are left out.
    """
    if provider == "anthropic":
        wire = request.to_anthropic()
        head = [_dumps(wire.get("tools", [])), _dumps(wire.get("system", []))]
    else:
        wire = request.to_openai()
        head = [_dumps(wire.get("tools", []))]
    return head + [_dumps(m) for m in wire["messages"]]


def _dumps(value: Any) -> str:
    return json.dumps(_without_cache_control(value), ensure_ascii=False, sort_keys=True)


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


class PrefixMeter:
    """Measures each request's unchanged prefix against the request before it.

    Segment sizes are counted with ``counter`` on the wire JSON (memoised: most segments repeat
    every turn); the reused share of those counts is then applied to the request's own token
    estimate, so reused and total tokens are on the engine's scale. A request made more than
    ``ttl_seconds`` after the one before it (by the transcript's own clock, when its messages
    carry times) reuses nothing: the provider's cache has expired.
    """

    def __init__(
        self,
        counter: TokenCounter,
        provider: Provider,
        ttl_seconds: float = DEFAULT_CACHE_TTL_SECONDS,
    ) -> None:
        self.counter = counter
        self.provider = provider
        self.ttl_seconds = ttl_seconds
        self._previous: list[str] = []
        self._previous_at: float | None = None
        self._sizes: dict[str, int] = {}

    def measure(self, request: PreparedRequest, at: float | None = None) -> PrefixReuse:
        """The reuse of ``request`` (made at time ``at``, when known); it becomes the previous
        request for the next call."""
        segments = request_segments(request, self.provider)
        return self.measure_segments(segments, request.tokens, at)

    def measure_segments(
        self, segments: Sequence[str], total_tokens: int, at: float | None = None
    ) -> PrefixReuse:
        """The reuse of a request given as wire segments (see :func:`request_segments`)."""
        previous = self._previous
        last, self._previous_at = self._previous_at, at if at is not None else self._previous_at
        if at is not None and last is not None and at - last > self.ttl_seconds:
            previous = []  # the cache expired since the last request
        same = 0
        for old, new in zip(previous, segments, strict=False):
            if old != new:
                break
            same += 1
        sizes = [self._size(s) for s in segments]
        whole = sum(sizes)
        share = sum(sizes[:same]) / whole if whole else 0.0
        self._previous = list(segments)
        # Forget sizes of segments that left the request, so memory follows the view, not the
        # whole session.
        if len(self._sizes) > 4 * len(segments) + 64:
            keep = set(segments)
            self._sizes = {k: v for k, v in self._sizes.items() if k in keep}
        return PrefixReuse(total_tokens, round(share * total_tokens))

    def reset(self) -> None:
        """Forget the previous request (the next one reuses nothing)."""
        self._previous = []

    def _size(self, segment: str) -> int:
        size = self._sizes.get(segment)
        if size is None:
            size = self.counter.count_text(segment)
            self._sizes[segment] = size
        return size


def input_cost(model: ModelInfo, reuse: PrefixReuse) -> float:
    """USD for one request's input at ``model``'s prices, given its reused prefix.

    The reused prefix costs the cache-read price when it reaches the model's minimum cacheable
    prefix; the rest costs the cache-write price (the input price when none is listed) when the
    request is long enough to be cached, the input price otherwise. 0.0 for a model without
    prices.
    """
    if model.input_price is None:
        return 0.0
    total, reused = reuse.total_tokens, reuse.reused_tokens
    minimum = model.min_cacheable_tokens
    read_price = model.cache_read_price
    write_price = (
        model.cache_write_price if model.cache_write_price is not None else model.input_price
    )
    if read_price is None or reused < max(1, minimum):
        reused = 0
    fresh = total - reused
    fresh_price = write_price if total >= minimum and read_price is not None else model.input_price
    dollars = reused * (read_price or 0.0) + fresh * fresh_price
    return dollars / 1_000_000


def price_models() -> tuple[ModelInfo, ModelInfo]:
    """The registry entries of :data:`ANTHROPIC_PRICE_MODEL` and :data:`OPENAI_PRICE_MODEL`."""
    registry = default_registry()
    return registry.get(ANTHROPIC_PRICE_MODEL), registry.get(OPENAI_PRICE_MODEL)
