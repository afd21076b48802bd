"""Checking a client's request body against typed models, shared by every protocol's reader.

Each protocol declares pydantic models of what it reads (strict: ``"5"`` is not an integer, 1 is
not a boolean; unknown fields allowed and kept, because the APIs grow new ones faster than any
reader). :func:`check` validates one value and turns pydantic's first error into a
:class:`RequestBodyError` naming the field the way the protocol's own API does
(``input[3].call_id`` for OpenAI, ``messages.0.content.1.text`` for Anthropic).
:func:`check_unicode` refuses text no encoder can write (a lone UTF-16 surrogate), which would
otherwise fail later, in a digest or the store, as an internal error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal, TypeAlias, TypeVar

from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as _PydanticError

from contextfold.errors import FormatError

__all__ = [
    "ModelT",
    "PathStyle",
    "RequestBodyError",
    "WireModel",
    "check",
    "check_unicode",
    "field_path",
    "unknown_positions",
]

PathStyle: TypeAlias = Literal["brackets", "dots"]
"""How a protocol names a nested field: ``messages[0].content`` (OpenAI) or
``messages.0.content`` (Anthropic)."""


class RequestBodyError(FormatError):
    """A client's request body that is not one: ``param`` names the field (``input[3].call_id``),
    ``detail`` says what is wrong with it. Each protocol answers it with its own 400 body."""

    def __init__(self, param: str | None, message: str) -> None:
        self.param = param
        self.detail = message
        super().__init__(f"{param}: {message}" if param else message, path="request body")

    def __str__(self) -> str:
        # FormatError prefixes a file name, which a client's body does not have.
        return f"{self.param}: {self.detail}" if self.param else self.detail


class WireModel(BaseModel):
    """The base of every model of a client's body (see the module docstring)."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)


ModelT = TypeVar("ModelT", bound=WireModel)

_MESSAGES = {
    "string_type": "expected a string",
    "int_type": "expected an integer",
    "bool_type": "expected a boolean",
    "float_type": "expected a number",
    "list_type": "expected an array",
    "dict_type": "expected an object",
    "model_type": "expected an object",
    "missing": "Field required",
    "greater_than_equal": "expected a positive integer",
    "string_too_short": "expected a non-empty string",
    "too_short": "expected a non-empty array",
    "finite_number": "expected a finite number",
}

# pydantic names the branch of a union it tried in the error's location ("str", "list[...]").
_TAG = re.compile(r"^(str|int|bool|float|none|list\[.*\]|dict\[.*\]|[a-z]+-.*|literal\[.*\])$")
_NOUNS = {
    "str": "a string",
    "int": "an integer",
    "bool": "a boolean",
    "float": "a number",
    "list": "an array",
    "dict": "an object",
}


def field_path(prefix: str, loc: Sequence[int | str], style: PathStyle = "brackets") -> str:
    """``prefix`` followed by the steps of ``loc``, in the protocol's style."""
    out = prefix
    for step in loc:
        if isinstance(step, str):
            # A key is the client's text: one that cannot be encoded must not break the answer.
            step = step.encode("utf-8", "replace").decode("utf-8")
        if isinstance(step, int) and style == "brackets":
            out += f"[{step}]"
        elif out:
            out += f".{step}"
        else:
            out = str(step)
    return out


def _is_tag(step: int | str) -> bool:
    return isinstance(step, str) and bool(_TAG.match(step))


def check(
    model: type[ModelT],
    value: Any,
    where: str,
    *,
    error: type[RequestBodyError] = RequestBodyError,
    style: PathStyle = "brackets",
) -> ModelT:
    """``value`` validated by ``model``; an ``error`` naming the first bad field otherwise. A
    field that may be one of several types (``content``: a string or an array) says so, rather
    than what the first of them wanted."""
    if not isinstance(value, Mapping):
        raise error(where or None, "expected an object")
    try:
        return model.model_validate(value)
    except _PydanticError as exc:
        param, message = _first_problem(exc, where, style)
        raise error(param or None, message) from None


def _first_problem(exc: _PydanticError, where: str, style: PathStyle) -> tuple[str, str]:
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = list(first["loc"])
    tag = next((i for i, step in enumerate(loc) if _is_tag(step)), None)
    if tag is None:
        message = _MESSAGES.get(first["type"]) or first["msg"]
        if first["type"] == "literal_error":
            message = f"{first['msg'].lower()}, got {_shown(first.get('input'))}"
        return field_path(where, loc, style), message
    head = loc[:tag]
    deeper = [e for e in errors if list(e["loc"][:tag]) == head and len(e["loc"]) > tag + 1]
    if deeper:
        # The value had the right type for one branch and failed inside it: say where.
        inner = [step for step in deeper[0]["loc"] if not _is_tag(step)]
        message = _MESSAGES.get(deeper[0]["type"]) or deeper[0]["msg"]
        return field_path(where, inner, style), message
    tags = [str(e["loc"][tag]) for e in errors if list(e["loc"][:tag]) == head]
    nouns = [_NOUNS[t.split("[")[0]] for t in tags if t.split("[")[0] in _NOUNS]
    message = "expected " + " or ".join(dict.fromkeys(nouns)) if nouns else first["msg"]
    return field_path(where, head, style), message


_SHOWN_CHARS = 40


def _shown(value: Any) -> str:
    """A client's value in an error message: its type for anything but a short string (an error
    is echoed into logs, and a client's value may be anything)."""
    if isinstance(value, str):
        return repr(value[:_SHOWN_CHARS] + ("..." if len(value) > _SHOWN_CHARS else ""))
    return f"a value of type {type(value).__name__}"


def check_unicode(
    value: Any,
    *,
    error: type[RequestBodyError] = RequestBodyError,
    style: PathStyle = "brackets",
    known: Collection[int] = (),
    skip: Collection[str] = (),
) -> None:
    """Refuse text that cannot be encoded (a lone UTF-16 surrogate such as ``"a\\ud800b"``),
    naming where it is. The fast path encodes the whole body once; only a body that fails is
    walked, to name the field. ``known``: positions in the body's ``messages`` already checked
    in an earlier request (the same text), not encoded again; ``skip``: top-level fields
    likewise (checked before: the same value)."""
    if skip and isinstance(value, Mapping):
        value = {k: v for k, v in value.items() if k not in skip}
    if known and isinstance(value, Mapping) and isinstance(value.get("messages"), list):
        messages = value["messages"]
        masked: list[Any] = [None] * len(messages)
        for index in unknown_positions(len(messages), known):
            masked[index] = messages[index]
        value = {**value, "messages": masked}
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        where = _find_bad_text(value, "", style)
        raise error(where or None, "text is not valid Unicode (a lone surrogate)") from None
    except (TypeError, ValueError, RecursionError):
        raise error(None, "the request body is not a JSON document") from None


def unknown_positions(count: int, known: Collection[int]) -> list[int]:
    """The positions ``0..count-1`` not in ``known``, in order: the messages of a body that
    were not checked before (a resent history is known but for its last few: found with set
    operations, not a visit of every position)."""
    if not known:
        return list(range(count))
    return sorted(set(range(count)).difference(known))


def _find_bad_text(value: Any, where: str, style: PathStyle) -> str:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where or "(body)"
        return ""
    if isinstance(value, Mapping):
        for key, child in value.items():
            path = field_path(where, [str(key)], style)
            found = _find_bad_text(key, path, style) or _find_bad_text(child, path, style)
            if found:
                return found
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found = _find_bad_text(child, field_path(where, [index], style), style)
            if found:
                return found
    return ""
