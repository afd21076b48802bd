"""The upstream body as JSON bytes, without escaping the whole history again each request.

Every request the proxy sends upstream holds the conversation so far, and from one request to
the next almost all of its text is the same: the same tool outputs and messages, the very
strings of the session's view. Writing them as JSON (escaping every quote and newline of a
100k-token history) was the largest part of the proxy's own time at that size.
:class:`BodyEncoder` writes the bytes ``json.dumps(body, ensure_ascii=False).encode()`` writes,
but remembers the encoding of each long string, by its text: the body is written with a short
stand-in for each long string, and each stand-in is then replaced by that string's encoding,
remembered from an earlier request or made now. A stand-in holds a secret nonce of this
process (and a NUL character), so no text a client sends is taken for one.
"""

from __future__ import annotations

import json
import secrets
from collections import OrderedDict
from typing import Any

__all__ = ["BodyEncoder"]

LONG_CHARS = 512
"""A shorter string is encoded with the body: looking it up would cost about as much."""

WORTH_TOKENS = 20_000
"""A smaller body is written directly: its long strings are too few for the walk that finds
them to pay (at 10k tokens of short tool outputs it cost 0.25 ms, and escaping their text 0.15
ms; at 100k, 0.35 ms against 2.3 ms)."""

_ENCODER = json.JSONEncoder(ensure_ascii=False)
"""One encoder for every call: ``json.dumps`` with an option makes a new one each time."""


_WALKED = frozenset({str, dict, list})
"""The types :meth:`BodyEncoder._stand_in` looks into (or at)."""


def _dumps(value: Any) -> bytes:
    return _ENCODER.encode(value).encode()


class BodyEncoder:
    """JSON bytes of request bodies, remembering the encoding of long strings (at most
    ``max_bytes`` of encodings; the least recently used go first). For one thread's use (the
    event loop's): it is not locked."""

    def __init__(self, max_bytes: int = 32 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._encoded: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        self._nonce = secrets.token_hex(16)
        # A stand-in is "\x00<nonce>:<index>\x00", which JSON writes as below.
        self._opening = _dumps(f"\x00{self._nonce}:")[:-1]  # without its closing quote
        self._closing = b'\\u0000"'

    def encode(self, body: Any, *, tokens: int) -> bytes:
        """``json.dumps(body, ensure_ascii=False).encode()``. ``tokens``: about how many the
        body holds; below :data:`WORTH_TOKENS` it is written directly."""
        if tokens < WORTH_TOKENS:
            return _dumps(body)
        long: list[bytes] = []
        skeleton = self._stand_in(body, long)
        if not long:
            return _dumps(body)
        pieces = _dumps(skeleton).split(self._opening)
        out = [pieces[0]]
        for piece in pieces[1:]:
            index, _, rest = piece.partition(self._closing)
            out.append(long[int(index)])
            out.append(rest)
        return b"".join(out)

    def _stand_in(self, value: Any, long: list[bytes]) -> Any:
        """``value`` with a stand-in for each long string (whose encoding goes to ``long``).
        Dicts and lists are copied; their leaves are looked at in place (no call per leaf).
        Types are matched exactly, for speed: anything else (a tuple, a subclass) is left for
        ``json`` to write whole, which it writes the same."""
        kind = type(value)
        if kind is str:
            return self._leaf(value, long)
        if kind is dict:
            copied: dict[Any, Any] = {}
            for key, item in value.items():
                kind = type(item)
                if kind is str:
                    copied[key] = self._leaf(item, long) if len(item) >= LONG_CHARS else item
                elif kind is dict or kind is list:
                    copied[key] = self._stand_in(item, long)
                else:
                    copied[key] = item
            return copied
        if kind is list:
            return [self._stand_in(item, long) if type(item) in _WALKED else item for item in value]
        return value

    def _leaf(self, text: str, long: list[bytes]) -> str:
        if len(text) < LONG_CHARS:
            return text
        long.append(self._string(text))
        return f"\x00{self._nonce}:{len(long) - 1}\x00"

    def _string(self, text: str) -> bytes:
        """The JSON encoding of ``text``, remembered."""
        encoded = self._encoded.get(text)
        if encoded is not None:
            self._encoded.move_to_end(text)
            return encoded
        encoded = _dumps(text)
        self._encoded[text] = encoded
        self._bytes += len(encoded)
        while self._bytes > self.max_bytes and self._encoded:
            _, dropped = self._encoded.popitem(last=False)
            self._bytes -= len(dropped)
        return encoded
