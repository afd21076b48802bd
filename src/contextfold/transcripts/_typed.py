"""Whether a value built from a file holds the types its dataclass declares.

``Message.from_dict`` trusts its input (it reads back what the store wrote), so a message read
from an export file, which may hold anything, is checked here before anything counts or shows
it: a name that is a number, a flag that is a list, a count too large for the store.
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Mapping
from functools import cache
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

__all__ = ["type_problem"]

LARGEST_INT = 2**63 - 1
"""Integers must fit in 64 bits, as the store keeps them."""


def type_problem(value: Any) -> str | None:
    """What in the dataclass instance ``value`` does not match its declared field types, e.g.
    ``"parts[0].text: expected str, got int"``; ``None`` when everything matches. Floats must be
    finite and integers fit in 64 bits."""
    return _problem(value, type(value), "")


@cache
def _field_types(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _problem(value: Any, hint: Any, where: str) -> str | None:
    origin = get_origin(hint)
    if hint is Any:
        return None
    if origin is Literal:
        allowed = get_args(hint)
        return None if value in allowed else f"{where}: expected one of {allowed!r}"
    if origin in (Union, types.UnionType):
        options = get_args(hint)
        if any(_problem(value, option, where) is None for option in options):
            return None
        return f"{where}: unexpected {type(value).__name__}"
    if origin is tuple:
        return _tuple_problem(value, get_args(hint), where)
    if origin in (Mapping, dict):
        if not isinstance(value, Mapping):
            return f"{where}: expected an object, got {type(value).__name__}"
        key_hint, value_hint = get_args(hint)
        for key, item in value.items():
            found = _problem(key, key_hint, f"{where} key") or _problem(
                item, value_hint, f"{where}[{key!r}]"
            )
            if found:
                return found
        return None
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, hint):
            return f"{where}: expected {hint.__name__}, got {type(value).__name__}"
        for name, field_hint in _field_types(hint).items():
            found = _problem(getattr(value, name), field_hint, f"{where}.{name}".lstrip("."))
            if found:
                return found
        return None
    return _scalar_problem(value, hint, where)


def _tuple_problem(value: Any, items: tuple[Any, ...], where: str) -> str | None:
    if not isinstance(value, tuple):
        return f"{where}: expected a list, got {type(value).__name__}"
    if len(items) == 2 and items[1] is Ellipsis:
        items = (items[0],) * len(value)
    elif len(items) != len(value):
        return f"{where}: expected {len(items)} items, got {len(value)}"
    for index, (item, item_hint) in enumerate(zip(value, items, strict=True)):
        found = _problem(item, item_hint, f"{where}[{index}]")
        if found:
            return found
    return None


def _scalar_problem(value: Any, hint: Any, where: str) -> str | None:
    if hint is type(None):
        ok = value is None
    elif hint is float:
        ok = _is_int(value) or (isinstance(value, float) and math.isfinite(value))
    elif hint is int:
        ok = _is_int(value)
    else:
        ok = isinstance(value, hint)
    name = getattr(hint, "__name__", str(hint))
    return None if ok else f"{where}: expected {name}, got {type(value).__name__}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= LARGEST_INT
