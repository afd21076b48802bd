"""Secret redaction for everything contextfold writes: the store, the events log, exports, the
chat history, blob files and tool-output previews.

Agents paste API keys into prompts, tools print ``env`` and ``cat ~/.aws/credentials``; none of
that should outlive the session in a file. :func:`redact_text` replaces every recognised secret
by a ``[REDACTED:<kind>]`` marker; :func:`redact_json` applies it to every string (and key) of a
JSON value, and redacts a string value whose key announces a credential (``{"DB_PASSWORD":
"…"}``). Markers hold no quote, backslash or whitespace, and no replaced span holds a quote or
splits an escape, so a JSON document *inside* a string (tool-call arguments, a printed
service-account file) stays valid JSON. Redacting twice gives what redacting once gave.

What it recognises (the rules are in :mod:`contextfold.redaction.rules`):

- tokens with a shape of their own: OpenAI, Anthropic, OpenRouter and DeepSeek ``sk-`` keys,
  Stripe, GitHub (every prefix), GitLab, Hugging Face, npm, PyPI, SendGrid, Twilio, Slack (and
  webhooks), Google (API keys, OAuth secrets and tokens), Azure storage keys and SAS signatures,
  AWS access key ids (and the secret beside one in a CSV row), Vault, age, Groq, xAI, and more;
  JWTs; PEM private keys (also cut before their END line, or with their BEGIN line cut off, or
  base64-encoded in a kubeconfig), PuTTY keys;
- passwords in URLs (``postgresql://user:secret@…``, any scheme), ``curl -u``, ``mysql -p…``
  and ``~/.netrc``;
- values whose name announces a credential: ``.env`` lines and assignments (``*_PASSWORD=``,
  ``*_SECRET=``, ``*_TOKEN=``, ``*_KEY=``, ``aws_secret_access_key = …``), JSON and YAML keys,
  ``--password`` flags, ``Authorization`` and ``Bearer`` headers. A token's or key's value must
  look random (:data:`~contextfold.redaction.rules.RANDOM_VALUE_MIN` characters, two kinds of
  character); placeholders (``${VAR}``, ``<token>``, ``changeme``, ``****``) and code
  (``password = request.form["password"]``) are left alone.

Why hand-written rules and not ``detect-secrets``: ``benchmarks/redaction.py`` runs both on the
same generated corpus (113 formats, 1,180 secrets) and 50 ordinary texts. These rules redact
100 % of the secrets and change none of the ordinary texts; detect-secrets 1.5.0 (every plugin,
default filters) redacts 40.7 % (47.6 % when each text is also scanned as ``.env``, YAML,
Python, JSON and Go), flags 54-61 %, and fires on 13-15 of the 50 ordinary texts. It is a
scanner, not a redactor: it reports lines, several plugins report only part of a secret (the
``ghp`` of a GitHub token), its private-key plugin flags the BEGIN line and never the body, its
keyword plugin needs quotes outside code files and has no ``token``, and its entropy plugins
flag git SHAs and lockfile hashes. It also costs about a hundred times more per megabyte (5-6 s
against 50-100 ms) and would add ``pyyaml`` and ``requests`` to the dependencies. Every one of
its plugins' shapes that fits an agent's text is covered here; it stays in the dev extra, for
the comparison (``benchmarks/RESULTS.md``). On the 30 MB of real agent transcripts in
``../shared/data`` these rules change nothing.

Speed: the store redacts every message it appends. One regular expression finds, in a single
pass, the rare literals that announce a shaped token (each rule's pattern runs only when its
literal is there), and a handful of ``str.find`` calls on the lower-cased text find the words
(``pass``, ``secret``, ``token``, ``key``, ``auth``…) around which assignments are matched.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from functools import lru_cache
from itertools import islice
from typing import Any

from contextfold.lru import LRU
from contextfold.redaction.rules import (
    MARKER_PREFIX,
    TOKEN_RULES,
    WORD_RULES,
    Span,
    name_kind,
    value_is_secret,
)

__all__ = ["MARKER_PREFIX", "might_hold_secret", "numbers_only", "redact_json", "redact_text"]


def _trigger_scan() -> tuple[re.Pattern[str], dict[str, tuple[int, ...]]]:
    """One pattern matching every rule's triggers, grouped by anchor so that the scan skips, in
    C, every character that anchors nothing; and, for each named group, the rules it wakes."""
    by_trigger: dict[tuple[str, str], list[int]] = defaultdict(list)
    for index, rule in enumerate(TOKEN_RULES):
        for trigger in rule.triggers:
            by_trigger[trigger].append(index)
    by_anchor: dict[str, list[str]] = defaultdict(list)
    groups: dict[str, tuple[int, ...]] = {}
    for number, ((anchor, rest), rules) in enumerate(by_trigger.items()):
        name = f"t{number}"
        groups[name] = tuple(rules)
        by_anchor[anchor].append(f"{rest}(?P<{name}>)")
    pattern = "|".join(f"{anchor}(?:{'|'.join(rests)})" for anchor, rests in by_anchor.items())
    return re.compile(pattern), groups


_TRIGGERS, _TRIGGER_RULES = _trigger_scan()
_WORD_FINDERS: tuple[tuple[str, tuple[Callable[[str, int], Span | None], ...]], ...] = tuple(
    (word, tuple(rule.find for rule in WORD_RULES if rule.word == word))
    for word in dict.fromkeys(rule.word for rule in WORD_RULES)
)


_WORDS = re.compile("|".join(re.escape(word) for word, _ in _WORD_FINDERS))
"""Any of the words, in one search (what ``any(word in text ...)`` says, in half the time)."""


def marker(kind: str) -> str:
    """The text that replaces a secret of ``kind``."""
    return f"{MARKER_PREFIX}{kind}]"


def _lower(text: str) -> str:
    """``text`` lower-cased with every index kept (``str.lower`` lengthens a few characters)."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c.lower() if c.isascii() else c for c in text)


def might_hold_secret(text: str) -> bool:
    """False when no rule can match anywhere in ``text`` (nor in any string of a JSON document
    whose text this is: no trigger or word holds a character JSON escapes)."""
    # The words first: where either is found, it is nearly always a word (``key``, ``token`` in
    # code and logs; 42 of the 43 message rows that held either, in the engine benchmark's
    # corpus), and their search costs about half the triggers' one.
    if _WORDS.search(_lower(text)) is not None:
        return True
    return _TRIGGERS.search(text) is not None


def _secret_spans(text: str) -> list[Span]:
    spans: list[Span] = []
    woken = {index for m in _TRIGGERS.finditer(text) for index in _TRIGGER_RULES[str(m.lastgroup)]}
    for index in sorted(woken):
        spans.extend(TOKEN_RULES[index].spans(text))
    lowered = _lower(text)
    for word, finders in _WORD_FINDERS:
        at = lowered.find(word)
        while at >= 0:
            for find in finders:
                span = find(text, at)
                if span is not None:
                    spans.append(span)
            at = lowered.find(word, at + len(word))
    return spans


def _replace(text: str, spans: list[Span]) -> str:
    """``text`` with each span replaced by its marker; overlapping spans become one."""
    spans.sort()
    pieces: list[str] = []
    done = 0
    start, end, kind = spans[0]
    for next_start, next_end, next_kind in spans[1:]:
        if next_start < end:
            end = max(end, next_end)
            continue
        pieces += (text[done:start], marker(kind))
        done, (start, end, kind) = end, (next_start, next_end, next_kind)
    pieces += (text[done:start], marker(kind), text[end:])
    return "".join(pieces)


SHORTEST_SECRET_TEXT = 8
"""The shortest text a rule recognises (``pwd=abcd``, ``://:abc@``): shorter ones are skipped
without a scan (JSON values are mostly short strings)."""


CACHED_TEXT_CHARS = 1_000
"""Texts up to this long are redacted once and remembered (:data:`CACHED_TEXTS` of them): the
same short strings (a session's ledger items, pins, titles) pass the redactor every time its
state is saved."""
CACHED_TEXTS = 4_096


REMEMBERED_LONG_CHARS = 4_000_000
"""Most characters of longer texts remembered with their redaction (the least recently used go
first; a text over an eighth of this is never kept). A tool output is redacted on its way in,
again when the store appends it, when a placeholder stands in for it and when a compaction
stashes it; a summary is redacted in its edit and again in the snapshot. Messages are
immutable and redaction is a function of the text alone: each time after the first is a lookup
(a string keeps its hash, so looking up the same object again costs nothing more)."""


_LONG_TEXTS: LRU[str, str] = LRU(
    max_weight=REMEMBERED_LONG_CHARS, weigh=lambda text, _redacted: len(text)
)


def _redact_long(text: str) -> str:
    redacted = _LONG_TEXTS.get(text)
    if redacted is None:
        redacted = _redact(text)
        _LONG_TEXTS.put(text, redacted)
    return redacted


def redact_text(text: str) -> str:
    """``text`` with every recognised secret replaced by a ``[REDACTED:<kind>]`` marker."""
    if len(text) < SHORTEST_SECRET_TEXT:
        return text
    if len(text) <= CACHED_TEXT_CHARS:
        return _redact_short(text)
    return _redact_long(text)


def _redact(text: str) -> str:
    spans = _secret_spans(text)
    return _replace(text, spans) if spans else text


@lru_cache(maxsize=CACHED_TEXTS)
def _redact_short(text: str) -> str:
    # Most short texts are ids, paths and placeholders in which no rule can start: the check
    # for that is a third of a scan, and a scan of such a text finds nothing (no trigger wakes a
    # rule, no word calls a finder). Long texts nearly always hold a word: scanned directly.
    if not might_hold_secret(text):
        return text
    return _redact(text)


def redact_json(value: Any, serialized: str | None = None) -> Any:
    """A copy of the JSON ``value`` with every string redacted (structure kept), or ``value``
    itself when redaction changes nothing in it.

    Keys are redacted too, and a string whose key names a credential (``"api_key"``,
    ``"DB_PASSWORD"``) is replaced whole when it looks like one. ``serialized`` is the value's
    JSON text when the caller has it already: when it holds nothing a rule could match,
    ``value`` itself is returned without walking it. A caller that has the JSON text of
    ``value`` can keep it when ``value`` itself comes back (most values hold no secret), rather
    than encode the copy again.
    """
    if serialized is not None and not might_hold_secret(serialized):
        return value
    return _walk(value, None)


_SCALARS = frozenset((int, float, bool, type(None)))
"""The JSON types redaction never changes, passed over without a check of what else they are."""


def numbers_only(value: Any) -> bool:
    """True when ``value`` holds no text but object keys that redaction leaves as they are: a
    number, a boolean, ``None``, or lists, tuples and dicts (exact types, string keys) of them
    (a state's usage figures, a token report). :func:`redact_json` returns such a value itself
    (it changes only strings), and this check reads no text but the keys, through the memo the
    walk uses: far less than the scan of the value's JSON and the walk that follow a trigger
    word such as ``token`` in a key. False says nothing: redaction may still change nothing."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or len(key) > CACHED_TEXT_CHARS or _key(key)[0] is not None:
                return False
            if type(item) not in _SCALARS and not numbers_only(item):
                return False
        return True
    if kind is list or kind is tuple:
        return all(type(item) in _SCALARS or numbers_only(item) for item in value)
    return False


def _walk(value: Any, key_kind: str | None) -> Any:
    """``value`` redacted; ``value`` itself when nothing in it changed (a container is copied
    only when one of its members changed)."""
    # Exact types first: a state, an edit or a message is thousands of small lists, strings and
    # numbers, and an ``isinstance`` check against ``Mapping`` (an ABC) costs more than the rest
    # of the visit.
    kind = type(value)
    if kind is str:
        return _walk_text(value, key_kind)
    if kind is dict:
        return _walk_mapping(value, False)
    if kind is list or kind is tuple:
        return _walk_items(value)
    if kind in _SCALARS:
        return value
    if isinstance(value, str):
        return _walk_text(value, key_kind)
    if isinstance(value, list | tuple):
        return _walk_items(value)
    if isinstance(value, Mapping):
        return _walk_mapping(value, True)  # not a dict: the copy is one
    return value


def _walk_text(value: str, key_kind: str | None) -> str:
    if key_kind is not None:
        if value_is_secret(value, key_kind, quoted=True, env_style=False):
            return marker(key_kind)
    elif len(value) < SHORTEST_SECRET_TEXT:
        return value  # what redact_text gives it, without the call
    # The string itself when nothing changed: the short-text cache returns the equal string it
    # was first given, another object, and a container's copy is made only when a member is
    # not the one it held.
    redacted = redact_text(value)
    return value if redacted == value else redacted


def _walk_items(value: list[Any] | tuple[Any, ...]) -> Any:
    items = [
        item
        if (kind := type(item)) in _SCALARS
        else _walk_text(item, None)
        if kind is str
        else _walk(item, None)
        for item in value
    ]
    # A tuple that comes back unchanged is the tuple itself, as a list is: the state's facts
    # are tuples, and a copy for each would look to the store like a redacted item, to be
    # redacted again at every save (both are the same JSON list).
    for new, old in zip(items, value, strict=True):
        if new is not old:
            return items
    return value


def _walk_mapping(value: Mapping[Any, Any], copy: bool) -> Any:
    """``value`` redacted; ``value`` itself when nothing in it changed, unless ``copy`` (a
    mapping that is not a dict comes back as a dict)."""
    # The copy is made only from the first member that changed (most mappings hold no secret):
    # the members before it are taken as they are, in their order.
    out: dict[Any, Any] | None = None
    for index, (key, item) in enumerate(value.items()):
        if type(key) is str or isinstance(key, str):
            redacted_key, key_kind = (
                _key(key) if len(key) <= CACHED_TEXT_CHARS else _key.__wrapped__(key)
            )
            new_key = key if redacted_key is None else redacted_key
            new_item = item if type(item) in _SCALARS else _walk(item, key_kind)
        else:
            new_key, new_item = key, _walk(item, None)
        if out is None:
            if new_key is key and new_item is item:
                continue
            out = dict(islice(value.items(), index))
        out[new_key] = new_item
    if out is None:
        return dict(value.items()) if copy else value
    return out


@lru_cache(maxsize=CACHED_TEXTS)
def _key(key: str) -> tuple[str | None, str | None]:
    """An object key redacted (None when redaction leaves it as it is), and the kind of
    credential it names (see :func:`~contextfold.redaction.rules.name_kind`): the same few keys
    recur in every message, state and event."""
    redacted = redact_text(key)
    return (None if redacted == key else redacted), name_kind(key)
