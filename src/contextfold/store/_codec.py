"""JSON text for stored rows, with secret redaction applied on the way in.

Rows hold JSON as text (not Postgres ``jsonb``): text keeps the exact serialized form, and tool
output may contain NUL characters, which ``jsonb`` rejects but an escaped ``\\u0000`` inside
JSON text stores fine.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from contextfold.edits import ContextEdit, edit_fields, edit_from_dict
from contextfold.messages import Message
from contextfold.redaction.redactor import (
    might_hold_secret,
    numbers_only,
    redact_json,
    redact_text,
)

__all__ = [
    "EncodedMessages",
    "EncodedStates",
    "WrittenState",
    "decode_blob",
    "decode_edit",
    "decode_message",
    "decode_view",
    "dumps",
    "encode_blob",
    "encode_json",
    "redact_line",
    "state_text",
]

# A lone surrogate (tool output decoded with errors="surrogateescape") cannot be encoded as
# UTF-8 for the database driver; escaped as \udcxx in ASCII JSON it round-trips exactly.
_SURROGATE = re.compile("[\ud800-\udfff]")


# What ``json.dumps(value, ensure_ascii=..., separators=(",", ":"))`` makes, without a new
# encoder for each call (an encoder keeps nothing between calls: one is shared by all threads).
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_COMPACT_ASCII = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"))


def dumps(value: Any) -> str:
    """Compact JSON text of ``value`` that any UTF-8 database column accepts."""
    text = _COMPACT.encode(value)
    if _SURROGATE.search(text):
        text = _COMPACT_ASCII.encode(value)
    return text


def redact_line(line: str) -> str:
    """One line of JSON text with every secret in its strings redacted (parsed only when a
    secret may be there)."""
    if not might_hold_secret(line):
        return line
    return dumps(redact_json(json.loads(line)))


def encode_json(value: Any, *, redact: bool) -> str:
    """JSON text of a JSON value, secrets redacted when ``redact`` is true."""
    return _encode(value, redact)[0]


PREFILTERED_CHARS = 2_000
"""JSON texts up to this long are checked whole for anything a secret rule could match before
their strings are walked. A longer one (an edit, a summary, a tool output) nearly always holds
some trigger word (``key``, ``token``), and its long strings were mostly redacted before (on
their way in, or in the edit a snapshot repeats) and are remembered by the redactor: the walk
alone costs less than a scan of the whole text followed by the walk."""


def _encode(value: Any, redact: bool) -> tuple[str, bool]:
    """JSON text of ``value``, and whether redaction changed it."""
    text = dumps(value)
    if redact and not numbers_only(value):  # an event of token counts holds no text
        redacted = redact_json(value, text if len(text) <= PREFILTERED_CHARS else None)
        if redacted is not value:
            cleaned = dumps(redacted)
            return cleaned, cleaned != text
    return text, False


class EncodedStates:
    """The stored JSON of each session's engine state, part by part (its top-level keys), and
    what this store wrote last of it.

    The engine saves its state after every turn, and most of it (the ledger, the system text)
    is what it saved the turn before. Each part's redacted JSON is kept with the plain JSON it
    came from: a part whose plain JSON is unchanged is not redacted again, which is where the
    time of a save went (redaction walks every string of the part). The plain JSON is compared
    rather than the value, so a value changed in place by its owner is never mistaken for the
    one saved before; only a tuple given again as the very object encoded last time, or a
    string or integer equal to the one encoded last time, is not encoded again
    (``_UNCHANGEABLE``: the 40 KB of facts, the ledger and the system text are most of a state,
    and encoding them to find them unchanged was most of a save).
    A list part that did change (the facts the loss reports probed, reordered
    and grown at each compaction) mostly holds items it held before: the items that redaction
    left unchanged are remembered by content, and only the others are redacted again.

    What a save committed (:meth:`wrote`) is remembered apart from what was encoded: the store
    writes only the parts that differ from it, and only while the session still holds the
    token of that save (see ``SQLStore.save_engine_state``). ``max_sessions`` bounds the
    sessions remembered (least recent go first).
    """

    def __init__(self, *, redact: bool, max_sessions: int = 256) -> None:
        self.redact = redact
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, _StateMemory] = OrderedDict()
        self._lock = threading.Lock()

    def encode(self, session_id: str, state: Mapping[str, Any]) -> dict[str, str]:
        """The stored JSON of each part of ``state`` (a JSON object), in its order, secrets
        redacted as configured."""
        with self._lock:
            memory = self._sessions.get(session_id)
        saved = memory.parts if memory is not None else {}
        parts: dict[str, _EncodedPart] = {}
        for key, value in state.items():
            hit = saved.get(key)
            if hit is not None and _unchanged(value, hit.value):
                parts[key] = hit  # the value encoded last time: no need to encode it
                continue
            plain = dumps(value)
            if hit is not None and hit.plain == plain:
                parts[key] = hit
                continue
            stored, clean = plain, frozenset[Hashable]()
            # A part of numbers (the usage figures, the turn) is what redaction leaves alone.
            if self.redact and not numbers_only(value):
                # Redacted with its key, as the whole object would be (a key naming a
                # credential makes its value one).
                stored, clean = _redacted_part(
                    key, value, plain, hit.clean if hit is not None else frozenset()
                )
            kept = value if type(value) in _UNCHANGEABLE else _NOT_KEPT
            parts[key] = _EncodedPart(plain, stored, clean, kept)
        with self._lock:
            kept = self._sessions.get(session_id)
            written = kept.written if kept is not None else None
            self._sessions[session_id] = _StateMemory(parts, written)
            self._sessions.move_to_end(session_id)
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        return {key: part.stored for key, part in parts.items()}

    def written(self, session_id: str) -> WrittenState | None:
        """What this store's last committed save of ``session_id`` wrote (None: unknown)."""
        with self._lock:
            memory = self._sessions.get(session_id)
            return memory.written if memory is not None else None

    def wrote(self, session_id: str, written: WrittenState | None) -> None:
        """Remember ``written`` as what the session now holds (None: not known any more)."""
        with self._lock:
            memory = self._sessions.get(session_id)
            if memory is not None:
                memory.written = written

    def forget(self, session_id: str) -> None:
        """Drop what is remembered of ``session_id`` (it was deleted)."""
        with self._lock:
            self._sessions.pop(session_id, None)


class WrittenState(NamedTuple):
    """A committed save of a state: the token it left on the session row, and the stored JSON
    of each of its parts, in order."""

    token: int
    parts: dict[str, str]


def state_text(parts: Iterable[tuple[str, str]]) -> str:
    """The JSON object made of stored ``(part, JSON)`` pairs, in order."""
    return "{" + ",".join(f"{dumps(key)}:{value}" for key, value in parts) + "}"


class _EncodedPart(NamedTuple):
    """One part of a saved state: its plain JSON, its stored (redacted) JSON, and (for a list)
    the items redaction left unchanged, by content (:func:`_item_key`)."""

    plain: str
    stored: str
    clean: frozenset[Hashable]
    value: Any
    """The value encoded, when it is one its producer never changes (see ``_UNCHANGEABLE``;
    ``_NOT_KEPT`` otherwise)."""


_EQUAL_MEANS_SAME_JSON = frozenset((str, int, bool, type(None)))
"""Types whose equal values have the same JSON (unlike floats: ``0.0 == -0.0``)."""

_UNCHANGEABLE = frozenset((tuple, *_EQUAL_MEANS_SAME_JSON))
"""The types of a part that is taken as never changed in place: a string, a number that is
not a float, ``None``, or a tuple whose items its producer never changes either (the engine
keeps its ledger and facts that way). Such a part given again (see :func:`_unchanged`) is not
encoded again; any other part is, and compared by its JSON, so a value changed in place by its
owner is never mistaken for the one saved before."""


_NOT_KEPT = object()
"""What a part's memory holds instead of a value that may change in place (no value matches
it)."""


def _unchanged(value: Any, kept: Any) -> bool:
    """Whether ``value`` has the JSON of ``kept``, a part's value encoded before (or
    ``_NOT_KEPT``), known without encoding it: an equal string or integer (the turn number,
    the system text), or the very tuple encoded before."""
    kind = type(value)
    if kind is not type(kept):
        return False
    if kind in _EQUAL_MEANS_SAME_JSON:
        return bool(value == kept)
    return kind is tuple and value is kept


class _StateMemory:
    """One session's parts as encoded last, and what its last committed save wrote."""

    __slots__ = ("parts", "written")

    def __init__(self, parts: dict[str, _EncodedPart], written: WrittenState | None) -> None:
        self.parts = parts
        self.written = written


def _item_key(item: Any) -> Hashable:
    """``item`` by content, hashable: a list or an object of scalars, or a scalar; ``None``
    for any other item (redacted every time). Strings are compared exactly; ``1`` and ``True``
    may share a key, which is harmless: redaction changes only strings. The type is part of the
    key, so a list and an object never share one."""
    kind = type(item)
    key: Hashable
    if kind is list or kind is tuple:  # both are a JSON list
        key = (list, *item)
    elif kind is dict:
        key = (dict, *item.items())
    else:
        key = (kind, item)
    try:
        hash(key)
    except TypeError:
        return None  # it holds a list or an object
    return key


def _redacted_part(
    key: str, value: Any, plain: str, known_clean: frozenset[Hashable]
) -> tuple[str, frozenset[Hashable]]:
    """The redacted JSON of the part ``key`` (``plain``: its JSON unredacted), and the items of
    a list ``value`` that redaction leaves unchanged (those in ``known_clean`` are not redacted
    again: redaction is a function of an item's content, and a list's items are redacted one by
    one, whatever its key)."""
    if type(value) not in (list, tuple) or redact_text(key) != key:
        pair = {key: value}
        member = f"{dumps(key)}:{plain}"  # what a secret rule is looked for in
        redacted = redact_json(pair, member if len(member) <= PREFILTERED_CHARS else None)
        return (plain if redacted is pair else dumps(redacted[key])), frozenset()
    keys = [_item_key(item) for item in value]
    if known_clean.issuperset(keys):  # the common case: items reordered, or dropped
        return plain, frozenset(keys)
    items: list[Any] = []
    clean: set[Hashable] = set()
    changed = False
    for item, item_key in zip(value, keys, strict=True):
        if item_key is not None and item_key in known_clean:
            clean.add(item_key)
            items.append(item)
            continue
        redacted = redact_json(item)
        if redacted is item:
            if item_key is not None:
                clean.add(item_key)
        else:
            changed = True
        items.append(redacted)
    return (dumps(items) if changed else plain), frozenset(clean)


class EncodedMessages:
    """The stored JSON of each session's messages, remembered by object until its next snapshot.

    A snapshot holds the whole view, and the view repeats the same (immutable) message objects
    turn after turn: only the messages compaction replaced since the last snapshot need encoding
    and redacting again. After each snapshot a session keeps just the entries of the view it
    saved, so the memory follows the view, not the transcript. A session that never compacts is
    capped at ``max_chars_per_session`` (its oldest entries go first), and all sessions together
    at ``max_chars`` (the least recently used sessions go first). Holding each message keeps its
    ``id()`` from being reused while its entry lives. ``redact`` is the store's setting.
    """

    def __init__(
        self,
        *,
        redact: bool,
        max_chars_per_session: int = 8 * 1024 * 1024,
        max_chars: int = 32 * 1024 * 1024,
    ) -> None:
        self.redact = redact
        self.max_chars_per_session = max_chars_per_session
        self.max_chars = max_chars
        self._sessions: OrderedDict[str, _SessionEntries] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def encode(self, session_id: str, message: Message) -> tuple[str, bool]:
        """The stored JSON of ``message``, and whether redaction changed it."""
        key = id(message)
        with self._lock:
            entries = self._sessions.get(session_id)
            hit = entries.items.get(key) if entries is not None else None
            if hit is not None and hit[0] is message:
                self._sessions.move_to_end(session_id)
                return hit[1], hit[2]
        text, redacted = _encode(message.to_dict(), self.redact)
        with self._lock:
            entries = self._session(session_id)
            old = entries.items.pop(key, None)
            self._resize(entries, len(text) - (len(old[1]) if old is not None else 0))
            entries.items[key] = (message, text, redacted)
            while entries.chars > self.max_chars_per_session and len(entries.items) > 1:
                _, (_, dropped, _) = entries.items.popitem(last=False)
                self._resize(entries, -len(dropped))
            while self._chars > self.max_chars and len(self._sessions) > 1:
                _, idle = self._sessions.popitem(last=False)  # never this one: it is the newest
                self._chars -= idle.chars
        return text, redacted

    def encode_edit(self, session_id: str, edit: ContextEdit) -> str:
        """The stored JSON of ``edit`` (:func:`~contextfold.edits.edit_to_dict`'s data, redacted
        when the store redacts). A summary edit's messages are encoded through :meth:`encode`:
        the snapshot that follows the edit holds the same message objects in its view, and
        finds them encoded and redacted already."""
        fields, messages = edit_fields(edit)
        text = encode_json(fields, redact=self.redact)
        if not messages:
            return text
        summary, *follow = (self.encode(session_id, m)[0] for m in messages)
        # The edit's keys are the edits module's own (never a credential's name), so each
        # message is redacted as it would be inside the whole edit: from its root.
        text = f'{text[:-1]},"summary":{summary}'
        if follow:
            text += f',"follow":[{",".join(follow)}]'
        return text + "}"

    def encode_view(self, session_id: str, view: Sequence[Message]) -> tuple[str, bool]:
        """The stored JSON of a snapshot's view (a list of messages), and whether redaction
        changed any message."""
        # Mostly messages encoded before: all looked up under the lock at once, the others
        # encoded one by one.
        with self._lock:
            entries = self._sessions.get(session_id)
            items = entries.items if entries is not None else {}
            found = [items.get(id(m)) for m in view]
            if entries is not None:
                self._sessions.move_to_end(session_id)
        texts: list[str] = []
        redacted = False
        for message, hit in zip(view, found, strict=True):
            text, changed = (
                (hit[1], hit[2])
                if hit is not None and hit[0] is message
                else self.encode(session_id, message)
            )
            texts.append(text)
            redacted = redacted or changed
        return "[" + ",".join(texts) + "]", redacted

    def keep_only(self, session_id: str, view: Sequence[Message]) -> None:
        """Forget the session's entries for messages not in ``view`` (after its snapshot)."""
        with self._lock:
            entries = self._sessions.get(session_id)
            if entries is None:
                return
            kept: OrderedDict[int, tuple[Message, str, bool]] = OrderedDict()
            for message in view:
                hit = entries.items.get(id(message))
                if hit is not None and hit[0] is message:
                    kept[id(message)] = hit
            entries.items = kept
            self._resize(entries, sum(len(text) for _, text, _ in kept.values()) - entries.chars)

    def forget(self, session_id: str) -> None:
        """Drop a session's entries (it was deleted)."""
        with self._lock:
            gone = self._sessions.pop(session_id, None)
            if gone is not None:
                self._chars -= gone.chars

    def _session(self, session_id: str) -> _SessionEntries:
        entries = self._sessions.get(session_id)
        if entries is None:
            entries = self._sessions[session_id] = _SessionEntries()
        else:
            self._sessions.move_to_end(session_id)
        return entries

    def _resize(self, entries: _SessionEntries, change: int) -> None:
        entries.chars += change
        self._chars += change


class _SessionEntries:
    __slots__ = ("chars", "items")

    def __init__(self) -> None:
        self.items: OrderedDict[int, tuple[Message, str, bool]] = OrderedDict()
        self.chars = 0


def decode_message(data: str) -> Message:
    """Inverse of :meth:`EncodedMessages.encode`."""
    return Message.from_dict(json.loads(data))


def decode_edit(data: str) -> ContextEdit:
    """Inverse of :meth:`EncodedMessages.encode_edit`."""
    return edit_from_dict(json.loads(data))


def decode_view(data: str) -> tuple[Message, ...]:
    """Inverse of :meth:`EncodedMessages.encode_view`."""
    return tuple(Message.from_dict(item) for item in json.loads(data))


def decode_mapping(data: str) -> dict[str, Any]:
    """A stored JSON object (session metadata, event data)."""
    value = json.loads(data)
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a JSON object, found {type(value).__name__}")
    return dict(value)


def encode_blob(content: str, *, redact: bool) -> bytes:
    """The stored bytes of a tool output (bytes, because text columns refuse NUL characters)."""
    if redact:
        content = redact_text(content)
    return content.encode("utf-8", errors="surrogatepass")


def decode_blob(data: bytes | memoryview) -> str:
    """Inverse of :func:`encode_blob`."""
    return bytes(data).decode("utf-8", errors="surrogatepass")
