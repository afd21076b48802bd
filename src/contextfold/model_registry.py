"""What contextfold knows about each model: window, output limit, prices, caching, tokenizer.

:func:`default_registry` holds the built-in table; :class:`ModelRegistry` looks names up the way
people write them (``openai/gpt-4o``, ``gpt-4o``, ``claude-sonnet-4-5-20250929``, an Ollama tag
such as ``llama3.1:70b``) and takes user overrides, one model at a time or from the
``[models."name"]`` tables of ``contextfold.toml``. :func:`model_for_window` makes an entry from a
bare window size (the CLI's ``--window N``).

Prices are USD per million tokens; ``None`` means unknown or free (a local model). Figures change:
each entry says where it came from and when; override any of them in ``contextfold.toml``.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, get_args

from contextfold.errors import ConfigError, UnknownModelError
from contextfold.messages import Usage

__all__ = [
    "LONG_CONTEXT_WINDOW",
    "OPENAI_MIN_CACHEABLE_TOKENS",
    "PROVIDERS",
    "ModelInfo",
    "ModelRegistry",
    "Provider",
    "default_registry",
    "model_for_window",
]

Provider: TypeAlias = Literal[
    "anthropic",
    "openai",
    "openai-compatible",
    "ollama",
    "vllm",
    "llamacpp",
    "openrouter",
    "google",
    "deepseek",
    "meta",
    "qwen",
    "scripted",
    "custom",
]
"""Who serves or makes a model: an API contextfold talks to (``anthropic``, ``openai``, a local
server), a maker whose models the registry lists (``google``, ``meta``...), ``scripted`` for the
offline test model, or ``custom`` for anything else. It decides how prompts are cached and which
history rules a request must pass (:func:`contextfold.history.repair.history_rules_for`)."""

PROVIDERS: frozenset[Provider] = frozenset(get_args(Provider))


def provider_named(text: str) -> Provider:
    """The provider a ``provider/name`` prefix spells (any case), ``custom`` when unknown."""
    name = text.strip().lower()
    for provider in PROVIDERS:
        if provider == name:
            return provider
    return "custom"


OPENAI_MIN_CACHEABLE_TOKENS = 1_024
"""OpenAI caches prompt prefixes automatically from 1,024 tokens on."""


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """Facts about one model that context management depends on."""

    name: str
    context_window: int
    """Tokens the model accepts in one request, prompt and reply together."""
    provider: Provider = "custom"
    max_output_tokens: int = 4_096
    """Most tokens one reply may have (what a request may ask for with ``max_tokens``)."""
    input_price: float | None = None
    output_price: float | None = None
    cache_write_price: float | None = None
    cache_read_price: float | None = None
    min_cacheable_tokens: int = 0
    """Shortest prompt prefix the provider caches (0: no prompt cache, or unknown)."""
    tokenizer: str = "heuristic"
    """A name :func:`contextfold.tokens.counters.counter_for` understands."""
    aliases: tuple[str, ...] = ()
    given_name: str | None = None
    """The name a user or client gave for this model (``qwen3:8b``), when the entry was found
    under a normalised one (``qwen3``): the store records it (see :attr:`stored_name`)."""

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise ConfigError(
                f"models.{self.name}.provider",
                f"unknown provider {self.provider!r}; expected one of {sorted(PROVIDERS)}",
            )
        for setting in ("context_window", "max_output_tokens"):
            value = getattr(self, setting)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(
                    f"models.{self.name}.{setting}", f"must be a positive integer, got {value!r}"
                )
        if self.min_cacheable_tokens < 0:
            raise ConfigError(f"models.{self.name}.min_cacheable_tokens", "must not be negative")
        for setting in ("input_price", "output_price", "cache_write_price", "cache_read_price"):
            price = getattr(self, setting)
            if price is not None and (isinstance(price, bool) or price < 0):
                raise ConfigError(f"models.{self.name}.{setting}", f"must be >= 0, got {price!r}")
        if not isinstance(self.aliases, tuple):
            object.__setattr__(self, "aliases", tuple(self.aliases))

    @property
    def key(self) -> str:
        """``provider/name``."""
        return f"{self.provider}/{self.name}"

    @property
    def stored_name(self) -> str:
        """The model a session records: the name given, else ``provider/name``."""
        return self.given_name or self.key

    def cost(self, usage: Usage) -> float | None:
        """USD for one call's usage; None when the model has no known input/output price."""
        if self.input_price is None or self.output_price is None:
            return None
        cache_read = (
            self.cache_read_price if self.cache_read_price is not None else self.input_price
        )
        cache_write = (
            self.cache_write_price if self.cache_write_price is not None else self.input_price
        )
        fresh = max(0, usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens)
        dollars = (
            fresh * self.input_price
            + usage.cache_read_tokens * cache_read
            + usage.cache_write_tokens * cache_write
            + usage.output_tokens * self.output_price
        )
        return dollars / 1_000_000


_FIELDS = {f.name for f in dataclasses.fields(ModelInfo)} - {"given_name"}


def model_for_window(
    context_window: int, *, name: str = "custom", max_output_tokens: int | None = None
) -> ModelInfo:
    """An entry for a model known only by its window (``--window N``); heuristic token counts.

    Without ``max_output_tokens``, a quarter of the window (at most 4,096) is assumed.
    """
    if max_output_tokens is None:
        max_output_tokens = max(1, min(4_096, context_window // 4))
    return ModelInfo(name, context_window, max_output_tokens=max_output_tokens)


# --------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------

# Suffixes people and providers add to a model name: a release date (-20250929, -2024-08-06,
# @20250929), -latest, a Bedrock version (-v2:0), an OpenRouter variant (:thinking), an Ollama
# size tag (:70b).
_SUFFIX = re.compile(
    r"(?:[-@](?:\d{8}|\d{4}-\d{2}-\d{2}|\d{4}|latest)|-v\d+(?::\d+)?|:[\w.\-]+)$", re.IGNORECASE
)


class ModelRegistry:
    """Model entries by name, alias and ``provider/name``; later registrations win."""

    def __init__(self, models: Iterable[ModelInfo] = ()) -> None:
        self._models: dict[str, ModelInfo] = {}  # key: provider/name
        self._index: dict[str, str] = {}  # lower-case name, alias or key -> key
        self._lock = threading.Lock()
        for info in models:
            self.register(info)

    def register(self, info: ModelInfo) -> None:
        """Add ``info``, replacing any entry with the same ``provider/name``."""
        with self._lock:
            self._models[info.key] = info
            for label in (info.key, info.name, *info.aliases):
                self._index[label.lower()] = info.key

    def find(self, model: str) -> ModelInfo | None:
        """The entry for ``model``, or None. See :meth:`get` for the forms accepted."""
        with self._lock:
            for candidate in _candidates(model):
                key = self._index.get(candidate)
                if key is not None:
                    return self._models[key]
        return None

    def get(self, model: str) -> ModelInfo:
        """The entry for ``model``: ``provider/name``, bare name, alias, or any of these with a
        date or version suffix. Raises :class:`UnknownModelError` with close names otherwise."""
        info = self.find(model)
        if info is None:
            raise UnknownModelError(model, self.suggest(model))
        return info

    def suggest(self, model: str, limit: int = 3) -> list[str]:
        """Registered names closest to ``model`` (for "did you mean")."""
        with self._lock:
            names = sorted({self._models[k].name for k in self._index.values()})
        bare = model.rsplit("/", 1)[-1].lower()
        return difflib.get_close_matches(bare, names, n=limit, cutoff=0.6)

    def update_from_mapping(self, data: Mapping[str, Any]) -> None:
        """Apply overrides such as a parsed ``contextfold.toml``: ``{"models": {name: {...}}}``
        or the inner mapping alone. A known model keeps the fields not given; a new one needs
        at least ``context_window``. A bad value raises :class:`ConfigError` naming it."""
        tables = data.get("models", data) if isinstance(data, Mapping) else data
        if not isinstance(tables, Mapping):
            raise ConfigError("models", "must be a table of model names")
        for name, table in tables.items():
            if not isinstance(table, Mapping):
                raise ConfigError(f"models.{name}", "must be a table of settings")
            self.register(self._merged(str(name), table))

    def _merged(self, name: str, table: Mapping[str, Any]) -> ModelInfo:
        settings = {str(k): v for k, v in table.items()}
        for key in settings:
            if key not in _FIELDS:
                raise ConfigError(
                    f"models.{name}.{key}", f"unknown setting; expected one of {sorted(_FIELDS)}"
                )
        if "aliases" in settings:
            settings["aliases"] = tuple(settings["aliases"])
        existing = self.find(name)
        if existing is not None:
            return dataclasses.replace(existing, **settings)
        if "context_window" not in settings:
            raise ConfigError(
                f"models.{name}.context_window", "required for a model the registry does not know"
            )
        prefix, _, bare = name.rpartition("/")
        settings.setdefault("name", bare)
        if prefix:
            provider = provider_named(prefix.partition("/")[0])
            settings.setdefault("provider", provider)
            if provider != prefix:  # "local/qwen" (a custom one): found by the name it was given
                settings["aliases"] = (*settings.get("aliases", ()), name)
        return ModelInfo(**settings)

    def copy(self) -> ModelRegistry:
        """An independent registry with the same entries (to override without side effects)."""
        with self._lock:
            return ModelRegistry(self._models.values())

    def __contains__(self, model: object) -> bool:
        return isinstance(model, str) and self.find(model) is not None

    def __iter__(self) -> Iterator[ModelInfo]:
        with self._lock:
            return iter(list(self._models.values()))

    def __len__(self) -> int:
        return len(self._models)


def _candidates(model: str) -> Iterator[str]:
    """``model`` then ever shorter forms of it: without a routing prefix, without suffixes."""
    name = model.strip().lower()
    seen: set[str] = set()
    forms = [name]
    if "/" in name:  # "openrouter/anthropic/claude-x" -> "anthropic/claude-x" -> "claude-x"
        parts = name.split("/")
        forms += ["/".join(parts[i:]) for i in range(1, len(parts))]
    for form in forms:
        while form and form not in seen:
            seen.add(form)
            yield form
            shorter = _SUFFIX.sub("", form)
            if shorter == form:
                break
            form = shorter


_default: ModelRegistry | None = None
_default_lock = threading.Lock()


def default_registry() -> ModelRegistry:
    """The process-wide registry, holding the built-in models (and whatever was registered)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ModelRegistry(BUILTIN_MODELS)
        return _default


# --------------------------------------------------------------------------------------------------
# Built-in table
# --------------------------------------------------------------------------------------------------


def _m(
    provider: Provider,
    name: str,
    window: int,
    max_output: int,
    prices: tuple[float | None, float | None, float | None, float | None],
    min_cacheable: int,
    tokenizer: str,
    *aliases: str,
) -> ModelInfo:
    """One row: prices are (input, output, cache write, cache read) in USD per million tokens."""
    return ModelInfo(
        name,
        window,
        provider=provider,
        max_output_tokens=max_output,
        input_price=prices[0],
        output_price=prices[1],
        cache_write_price=prices[2],
        cache_read_price=prices[3],
        min_cacheable_tokens=min_cacheable,
        tokenizer=tokenizer,
        aliases=aliases,
    )


LONG_CONTEXT_WINDOW = 1_000_000
"""The window of a model's long-context variant (Anthropic's 1M-token beta)."""


def _with_long_context(info: ModelInfo) -> tuple[ModelInfo, ModelInfo]:
    """``info``, and its long-context variant: :data:`LONG_CONTEXT_WINDOW` tokens, named
    ``<name>[1m]`` as Claude Code writes it, with ``<name>-1m`` and each alias's two forms as
    aliases. Prices stay the standard ones (Anthropic charges more for a prompt above 200K)."""
    names = (info.name, *info.aliases)
    return info, dataclasses.replace(
        info,
        name=f"{info.name}[1m]",
        context_window=LONG_CONTEXT_WINDOW,
        aliases=(
            *(f"{n}-1m" for n in names),
            *(f"{n}[1m]" for n in info.aliases),
        ),
    )


_NO_PRICE = (None, None, None, None)
_OAI = OPENAI_MIN_CACHEABLE_TOKENS

BUILTIN_MODELS: tuple[ModelInfo, ...] = (
    # OpenAI. Prices as of 2026-03 per developers.openai.com/api/docs/pricing as quoted by
    # chatgptpricing-akr.pages.dev/api-pricing and deploybase.ai/articles/openai-api-pricing-2026;
    # windows per the same pages and typingmind.com model cards (GPT-4.1: 1,047,576 / 32,768).
    # Caching is automatic: no write surcharge (write price = input price).
    _m("openai", "gpt-4o", 128_000, 16_384, (2.50, 10.00, 2.50, 1.25), _OAI, "o200k_base"),
    _m("openai", "gpt-4o-mini", 128_000, 16_384, (0.15, 0.60, 0.15, 0.075), _OAI, "o200k_base"),
    _m("openai", "gpt-4.1", 1_047_576, 32_768, (2.00, 8.00, 2.00, 0.50), _OAI, "o200k_base"),
    _m("openai", "gpt-4.1-mini", 1_047_576, 32_768, (0.40, 1.60, 0.40, 0.10), _OAI, "o200k_base"),
    _m("openai", "gpt-4.1-nano", 1_047_576, 32_768, (0.10, 0.40, 0.10, 0.025), _OAI, "o200k_base"),
    _m("openai", "o3", 200_000, 100_000, (2.00, 8.00, 2.00, 0.50), _OAI, "o200k_base"),
    _m("openai", "o4-mini", 200_000, 100_000, (1.10, 4.40, 1.10, 0.275), _OAI, "o200k_base"),
    # GPT-5: 400K window = 272K input + 128K output (paper-digest.app summary of the launch).
    _m("openai", "gpt-5", 400_000, 128_000, (1.25, 10.00, 1.25, 0.125), _OAI, "o200k_base"),
    _m("openai", "gpt-5-mini", 400_000, 128_000, (0.25, 2.00, 0.25, 0.025), _OAI, "o200k_base"),
    _m("openai", "gpt-5-nano", 400_000, 128_000, (0.05, 0.40, 0.05, 0.005), _OAI, "o200k_base"),
    # Older chat models still served; they use cl100k_base.
    _m("openai", "gpt-4-turbo", 128_000, 4_096, (10.00, 30.00, None, None), 0, "cl100k_base"),
    _m("openai", "gpt-3.5-turbo", 16_385, 4_096, (0.50, 1.50, None, None), 0, "cl100k_base"),
    # Anthropic. Windows, outputs and prices as of 2026-02 per
    # platform.claude.com/docs/en/models/<model>/overview (Opus 4.6: 200K window, 1M in beta,
    # 128K output, $5/$25, 5-minute cache write $6.25, read $0.50); minimum cacheable prefix per
    # the prompt caching page as quoted in anthropics/anthropic-sdk-python#1194 and docs.orq.ai
    # (4,096 for Opus 4.5/4.6 and Haiku 4.5; 2,048 for Haiku 3.5; 1,024 for the others).
    # Cache writes are 1.25x input (5-minute TTL), reads 0.1x input. The 1M window of Opus 4.6,
    # Sonnet 4.5 and Sonnet 4 is a beta an agent asks for (Claude Code's `opus[1m]`); their
    # recorded sessions name the model alone and compact below 200K, so the bare name is the
    # standard window and `<name>[1m]` the long one (see _with_long_context).
    *_with_long_context(
        _m(
            "anthropic",
            "claude-opus-4-6",
            200_000,
            128_000,
            (5.0, 25.0, 6.25, 0.50),
            4_096,
            "anthropic",
            "claude-opus-4.6",
        )
    ),
    _m(
        "anthropic",
        "claude-opus-4-5",
        200_000,
        64_000,
        (5.0, 25.0, 6.25, 0.50),
        4_096,
        "anthropic",
        "claude-opus-4.5",
    ),
    _m(
        "anthropic",
        "claude-opus-4-1",
        200_000,
        32_000,
        (15.0, 75.0, 18.75, 1.50),
        1_024,
        "anthropic",
        "claude-opus-4.1",
    ),
    _m(
        "anthropic",
        "claude-opus-4",
        200_000,
        32_000,
        (15.0, 75.0, 18.75, 1.50),
        1_024,
        "anthropic",
        "claude-opus-4-0",
    ),
    *_with_long_context(
        _m(
            "anthropic",
            "claude-sonnet-4-5",
            200_000,
            64_000,
            (3.0, 15.0, 3.75, 0.30),
            1_024,
            "anthropic",
            "claude-sonnet-4.5",
        )
    ),
    *_with_long_context(
        _m(
            "anthropic",
            "claude-sonnet-4",
            200_000,
            64_000,
            (3.0, 15.0, 3.75, 0.30),
            1_024,
            "anthropic",
            "claude-sonnet-4-0",
        )
    ),
    _m(
        "anthropic",
        "claude-haiku-4-5",
        200_000,
        64_000,
        (1.0, 5.0, 1.25, 0.10),
        4_096,
        "anthropic",
        "claude-haiku-4.5",
    ),
    _m(
        "anthropic",
        "claude-3-7-sonnet",
        200_000,
        64_000,
        (3.0, 15.0, 3.75, 0.30),
        1_024,
        "anthropic",
        "claude-3.7-sonnet",
    ),
    _m(
        "anthropic",
        "claude-3-5-sonnet",
        200_000,
        8_192,
        (3.0, 15.0, 3.75, 0.30),
        1_024,
        "anthropic",
        "claude-3.5-sonnet",
    ),
    _m(
        "anthropic",
        "claude-3-5-haiku",
        200_000,
        8_192,
        (0.80, 4.0, 1.0, 0.08),
        2_048,
        "anthropic",
        "claude-3.5-haiku",
    ),
    # Google. Prices as of 2026-03 per ai.google.dev/pricing as quoted by morphllm.com and
    # deploybase.ai (prompts up to 200K tokens; 2.5 Pro and 3 Pro cost more above that);
    # windows 1,048,576 in / 65,536 out per the Gemini model cards. Cache reads are 10 % of
    # input; implicit caching starts at 1,024 tokens (Flash) and 4,096 (Pro) -- a storage fee
    # per hour, not a write price, applies to explicit caches.
    _m("google", "gemini-2.5-pro", 1_048_576, 65_536, (1.25, 10.0, None, 0.125), 4_096, "gemini"),
    _m("google", "gemini-2.5-flash", 1_048_576, 65_536, (0.30, 2.50, None, 0.03), 1_024, "gemini"),
    _m(
        "google",
        "gemini-3-pro",
        1_048_576,
        65_536,
        (2.0, 12.0, None, 0.20),
        4_096,
        "gemini",
        "gemini-3-pro-preview",
    ),
    # DeepSeek. As of 2025-12-09 per api-docs.deepseek.com (V3.2 prices, quoted with that date
    # in RooCodeInc/Roo-Code packages/types/src/providers/deepseek.ts): 128K window, $0.28 in
    # (cache miss), $0.028 cache hit, $0.42 out; max output 8K (chat) and 64K (reasoner).
    # Caching is automatic, in 64-token units.
    _m(
        "deepseek",
        "deepseek-chat",
        128_000,
        8_192,
        (0.28, 0.42, 0.28, 0.028),
        64,
        "deepseek",
        "deepseek-v3",
        "deepseek-v3.1",
        "deepseek-v3.2",
    ),
    _m(
        "deepseek",
        "deepseek-reasoner",
        128_000,
        65_536,
        (0.28, 0.42, 0.28, 0.028),
        64,
        "deepseek",
        "deepseek-r1",
    ),
    # Open-weight models usually run locally (Ollama, vLLM, llama.cpp): no price, and the real
    # window is what the server was started with (Ollama's default is far smaller: set it, and
    # override context_window to match). Windows per the model cards: Qwen2.5 and Qwen3 32,768
    # native (131,072 with YaRN), Qwen3-Coder 262,144; Llama 3.1/3.3 131,072; Llama 4 Scout
    # 10M and Maverick 1M.
    _m(
        "qwen",
        "qwen2.5",
        32_768,
        8_192,
        _NO_PRICE,
        0,
        "qwen",
        "qwen2.5-coder",
        "qwen2.5-72b-instruct",
    ),
    _m("qwen", "qwen3", 32_768, 8_192, _NO_PRICE, 0, "qwen", "qwen3-32b", "qwen3-235b-a22b"),
    _m(
        "qwen",
        "qwen3-coder",
        262_144,
        65_536,
        _NO_PRICE,
        0,
        "qwen",
        "qwen3-coder-480b-a35b-instruct",
        "qwen3-coder-30b-a3b-instruct",
    ),
    _m(
        "meta",
        "llama-3.1",
        131_072,
        8_192,
        _NO_PRICE,
        0,
        "llama",
        "llama3.1",
        "llama-3.1-8b-instruct",
        "llama-3.1-70b-instruct",
        "llama-3.1-405b-instruct",
    ),
    _m(
        "meta",
        "llama-3.3",
        131_072,
        8_192,
        _NO_PRICE,
        0,
        "llama",
        "llama3.3",
        "llama-3.3-70b-instruct",
    ),
    _m(
        "meta",
        "llama-4-scout",
        10_485_760,
        16_384,
        _NO_PRICE,
        0,
        "llama",
        "llama4",
        "llama-4-scout-17b-16e-instruct",
    ),
    _m(
        "meta",
        "llama-4-maverick",
        1_048_576,
        16_384,
        _NO_PRICE,
        0,
        "llama",
        "llama-4-maverick-17b-128e-instruct",
    ),
)
