"""Pins: standing constraints the model must keep seeing, whatever compaction removes.

A user who says "never touch the migrations" or "always run the tests with -x" means it for the
whole session, but a summary of earlier turns may paraphrase it or drop it. :func:`extract_pins`
finds such sentences in what the user wrote, deterministically (a sentence that *starts* with
always / never / don't / do not / must, after filler like "please" or "you"); :class:`PinSet`
keeps them, with the pins the agent or the user set explicitly, bounded in number and length.
The engine renders :meth:`PinSet.render` as a system prompt section of its own, so every request
carries every pin verbatim.

This module sits with text and tokens: it knows nothing of sessions, the store or the prompt.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias

__all__ = [
    "MAX_PINS",
    "MAX_PIN_CHARS",
    "PINS_HEADER",
    "Pin",
    "PinSet",
    "PinSource",
    "extract_pins",
]

MAX_PINS = 20
"""Pins a session keeps; past it the oldest extracted pin is dropped (explicit ones stay)."""

MAX_PIN_CHARS = 300
"""Characters one pin keeps: a constraint is a sentence, not a document."""

PINS_HEADER = "Standing constraints from the user (pinned; they hold for the whole session):"
"""The first line of the rendered pins section."""

PinSource: TypeAlias = Literal["extracted", "explicit"]
"""Where a pin came from: found in a user message, or set with ``pin()`` / ``/pin``."""

_FENCED_CODE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
# A sentence ends at a line break or at . ! ? followed by a space (not inside "src/a.py").
_SENTENCE_END = re.compile(r"\n+|(?<=[.!?])\s+")
_LIST_MARKER = re.compile(r"^\s*(?:[-*•>]+|\d+[.)])\s+")
_FILLER_WORDS = "please|also|and|but|so|oh|ok|okay|important|note|remember|rule|reminder"
_FILLER = rf"(?:(?:{_FILLER_WORDS})\b[\s,:;-]*)"
_SUBJECT = r"(?:(?:you|we|the agent)\s+(?:should\s+|will\s+|must\s+)?)"
_CONSTRAINT = re.compile(
    rf"^{_FILLER}*(?:(?:make sure|be sure)\s+(?:to\s+|that\s+|you\s+)*)?{_SUBJECT}?"
    r"(?:always|never|don['’]?t|do\s+not|must|mustn['’]?t|shall\s+not)\b",
    re.IGNORECASE,
)
# Imperative-looking openings that are small talk, not rules.
_NOT_A_RULE = re.compile(
    r"^(?:don['’]?t|do\s+not)\s+(?:worry|bother|mind|know|care|forget\s+that\s+it)\b"
    r"|^never\s*mind\b",
    re.IGNORECASE,
)
_SPACES = re.compile(r"\s+")


def _clean(text: str) -> str:
    text = _SPACES.sub(" ", text).strip()
    if len(text) > MAX_PIN_CHARS:
        text = text[: MAX_PIN_CHARS - 1].rstrip() + "…"
    return text


def extract_pins(text: str) -> tuple[str, ...]:
    """The sentences of ``text`` that state a standing constraint, in order, each cleaned
    (whitespace collapsed, at most :data:`MAX_PIN_CHARS`).

    A question ("can you never…?") is a request, not a rule, and code the user pasted is not
    the user speaking, so both are skipped. The same text always gives the same pins.
    """
    prose = _FENCED_CODE.sub("\n", text)
    found: list[str] = []
    for raw in _SENTENCE_END.split(prose):
        sentence = _LIST_MARKER.sub("", raw).strip()
        if not sentence or sentence.endswith("?"):
            continue
        opening = sentence.lstrip("\"'*_ ")
        if _CONSTRAINT.match(opening) and not _NOT_A_RULE.match(opening):
            pin = _clean(sentence)
            if pin not in found:
                found.append(pin)
    return tuple(found)


@dataclass(frozen=True, slots=True)
class Pin:
    """One pinned constraint: its text (sent verbatim) and where it came from."""

    text: str
    source: PinSource

    def state(self) -> dict[str, str]:
        """The stored form."""
        return {"text": self.text, "source": self.source}


def _key(text: str) -> str:
    return text.casefold()


class PinSet:
    """A session's pins, oldest first, at most :data:`MAX_PINS`.

    When a new pin would exceed the bound, the oldest *extracted* pin makes room: an explicit pin
    was asked for by name, so only :meth:`remove` takes it away. With :data:`MAX_PINS` explicit
    pins, an extracted one is not added and an explicit one is refused with ``ValueError``.
    """

    def __init__(self, pins: Iterable[Pin] = ()) -> None:
        self._pins: list[Pin] = []
        for pin in pins:
            self.add(pin.text, pin.source)

    @property
    def pins(self) -> tuple[Pin, ...]:
        """The pins, oldest first."""
        return tuple(self._pins)

    def __len__(self) -> int:
        return len(self._pins)

    def add(self, text: str, source: PinSource) -> Pin | None:
        """Pin ``text``; the new pin, or ``None`` when it was already pinned or found no room.

        Pinning explicitly a text that was extracted makes it explicit (it is kept from then on).
        """
        cleaned = _clean(text)
        if not cleaned:
            raise ValueError("a pin needs some text")
        for i, pin in enumerate(self._pins):
            if _key(pin.text) == _key(cleaned):
                if source == "explicit" and pin.source == "extracted":
                    self._pins[i] = Pin(pin.text, "explicit")
                return None
        if len(self._pins) >= MAX_PINS:
            oldest = next((p for p in self._pins if p.source == "extracted"), None)
            if oldest is None:
                if source == "explicit":
                    raise ValueError(
                        f"{MAX_PINS} pins are set already; unpin one before pinning another"
                    )
                return None
            self._pins.remove(oldest)
        pin = Pin(cleaned, source)
        self._pins.append(pin)
        return pin

    def remove(self, pin: Pin | str | int) -> Pin | None:
        """Unpin a pin given as itself, its text, or its 1-based position; the pin removed, or
        ``None`` when there was no such pin."""
        if isinstance(pin, int):
            if 1 <= pin <= len(self._pins):
                return self._pins.pop(pin - 1)
            return None
        wanted = _key(pin.text if isinstance(pin, Pin) else _clean(pin))
        for i, kept in enumerate(self._pins):
            if _key(kept.text) == wanted:
                return self._pins.pop(i)
        return None

    def render(self) -> str:
        """The pins as a prompt section: the header, then one pin a line (empty if none)."""
        if not self._pins:
            return ""
        return "\n".join([PINS_HEADER, *(f"- {pin.text}" for pin in self._pins)])

    def state(self) -> list[dict[str, str]]:
        """The stored form, a JSON list."""
        return [pin.state() for pin in self._pins]

    @classmethod
    def from_state(cls, saved: object) -> PinSet:
        """The pins of a stored form; anything unreadable in it is skipped, so a state saved
        before pins existed (no pins at all) gives an empty set."""
        pins: list[Pin] = []
        if isinstance(saved, list):
            for item in saved:
                if isinstance(item, Mapping) and isinstance(item.get("text"), str):
                    source: PinSource = (
                        "explicit" if item.get("source") == "explicit" else "extracted"
                    )
                    pins.append(Pin(str(item["text"]), source))
        kept = cls()
        for pin in pins:
            try:
                kept.add(pin.text, pin.source)
            except ValueError:  # an empty or surplus stored pin is not worth failing a resume
                continue
        return kept
