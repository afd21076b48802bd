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

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

from contextfold.sequences import same_objects
from contextfold.tool_spec import ToolSpec

__all__ = ["LatestObjects", "ToolSpecs", "schema_fields"]

T = TypeVar("T")
V = TypeVar("V")


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


class ToolSpecs(Generic[T]):
    """The :class:`~contextfold.tool_spec.ToolSpec` of each of a framework's tools, call after
    call, each converted once while what it is made from stays the same.

    A framework hands its tools on every model call: the same tool objects, or new ones built
    from the same name, description and schema (pydantic-ai's ``ToolDefinition``). A new spec
    each call costs its conversion, and the engine, whose memories of a tool's schema and token
    count go by the spec object, encodes each schema again. ``fields(tool)`` is what the spec
    is made from, as objects (:func:`schema_fields`), or None for a tool converted every time
    (one that may change in place unseen); ``convert`` makes the spec. Thread-safe.
    """

    def __init__(
        self,
        fields: Callable[[T], tuple[object, ...] | None],
        convert: Callable[[T], ToolSpec],
    ) -> None:
        self._fields = fields
        self._convert = convert
        self._specs: LatestObjects[ToolSpec] = LatestObjects()
        self._lock = threading.Lock()

    def specs(self, tools: Iterable[T]) -> list[ToolSpec]:
        """``convert(tool)`` of each tool, in order."""
        with self._lock:
            out = []
            for tool in tools:
                fields = self._fields(tool)
                if fields is None:
                    out.append(self._convert(tool))
                    continue
                spec = self._specs.get(fields)
                if spec is None:
                    spec = self._convert(tool)
                    self._specs.keep(fields, spec)
                out.append(spec)
            self._specs.rotate()
            return out


def schema_fields(name: str, description: Any, schema: Mapping[str, Any]) -> tuple[object, ...]:
    """What a spec made of ``name``, ``description`` and a copy of the JSON ``schema`` depends
    on, as objects: those three, and the schema's keys and values (a schema changed in place at
    its top level gives other objects; below it, the spec's copy shares the framework's objects,
    and the engine compares those with what it encoded)."""
    return (name, description, schema, *schema.keys(), *schema.values())
