"""Conversions remembered by object identity, for the objects a framework hands over again.

A framework gives its model the whole history on every call, and an integration converts it to
contextfold messages and maps the engine's view back. Converting everything on every call makes
a call cost in proportion to the whole history; but the history is mostly the same objects call
after call (a LangGraph state's messages, pydantic-ai's message list), and the engine's view is
mostly the same :class:`~contextfold.messages.Message` objects too (it keeps its view between
calls). :class:`LatestObjects` remembers what was computed from each object (or run of objects)
of the latest call, so a call converts only what is new.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import is_
from typing import Generic, TypeVar

__all__ = ["LatestObjects", "same_objects"]

V = TypeVar("V")


def same_objects(a: Sequence[object], b: Sequence[object]) -> bool:
    """Whether ``a`` and ``b`` hold the very same objects, in order."""
    return len(a) == len(b) and all(map(is_, a, b))


class LatestObjects(Generic[V]):
    """Values computed from runs of objects, remembered for the runs used since the last
    :meth:`rotate` and the one before it.

    Keyed by identity: a run's objects are held with the value, so their ids cannot go to other
    objects while the value is remembered. Only what a call used is kept (a long run does not
    grow the memo); what the caller converts must not change in place, or must be part of the
    run (a snapshot of its fields, say) so that a change misses.
    """

    def __init__(self) -> None:
        self._known: dict[object, tuple[tuple[object, ...], V]] = {}
        self._used: dict[object, tuple[tuple[object, ...], V]] = {}

    def get(self, run: tuple[object, ...]) -> V | None:
        """The value remembered for ``run`` (None when there is none), kept for the next call."""
        key = _key(run)
        hit = self._used.get(key) or self._known.get(key)
        if hit is None:
            return None
        held = hit[0]
        if not (held[0] is run[0] if len(run) == 1 == len(held) else same_objects(held, run)):
            return None
        self._used[key] = hit
        return hit[1]

    def keep(self, run: tuple[object, ...], value: V) -> None:
        """Remember ``value`` for ``run``."""
        self._used[_key(run)] = (run, value)

    def rotate(self) -> None:
        """A call is over: from now on only what it used is remembered."""
        self._known, self._used = self._used, {}


def _key(run: tuple[object, ...]) -> object:
    # Most runs are one object: its id alone (an int never equals a tuple of them).
    return id(run[0]) if len(run) == 1 else tuple(map(id, run))
