"""The invariants of every upstream request (issue 26, "Invariants of every upstream request").

:func:`check` compares one request as the client sent it with the request the upstream received
for it (after the proxy made its view) and returns what is wrong, as :class:`Violation` values.
It is a pure function of the two bodies, so it can be unit-tested on hand-made pairs and applied
to every request of every real-client test alike. The rules, each named by ``Violation.rule``:

- ``newest_result``: every tool result the client sent after its last assistant message is in
  the upstream request, whole (same text), unless it could not fit: cut with a ``ref`` to the
  whole, and the whole larger than the room the request left (``room``);
- ``call_of_result``: ... and so is the call it answers (same id, name and input);
- ``latest_user``: the user's latest own words (Claude Code's ``<system-reminder>`` blocks taken
  out) are in the upstream request, whole;
- ``task``: the user's task (given by the test) is in view verbatim, when the client sent it;
- ``empty_input``: no call whose input the client sent non-empty reaches the upstream as ``{}``;
- ``small_field``: ... and every small field of an old call's input keeps its value (only large
  values may be cut, with a marker and a ref); a field equal to its schema default is exempt
  (the client adds it when it resends the call, as Claude Code does with Edit's
  ``replace_all: false``: the model never wrote it);
- ``thinking``: the thinking blocks of the client's latest assistant turn reach the upstream
  untouched, signature included;
- ``sandwich``: no user → system → user sequence the client did not send;
- ``repeated_reminder``: a system message repeated across turns appears once (unless the
  request went up exactly as the client sent it);
- ``tools_added``: a request the client sent without tools goes up without tools (engine tools
  only go into requests that carry tools: opencode's title request must not grow).

A model misled by a view that breaks one of these would do the wrong next step; the scripted
upstreams refuse in the worst cases, and this checker names the rest.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.clients.wire import (
    Msg,
    Part,
    Protocol,
    canonical_input,
    latest_turn_results,
    read,
    strip_reminders,
)

__all__ = ["SMALL_FIELD_CHARS", "Violation", "check", "summarize"]

SMALL_FIELD_CHARS = 200
"""An input field whose JSON is at most this long is small: it must survive unchanged."""


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant: the rule's name and what was seen."""

    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.detail}"


def check(
    client_protocol: Protocol,
    client_body: Mapping[str, Any],
    upstream_protocol: Protocol,
    upstream_body: Mapping[str, Any],
    *,
    task: str | None = None,
    room: int | None = None,
    count: Callable[[str], int] | None = None,
) -> list[Violation]:
    """What is wrong with ``upstream_body`` as the upstream's view of ``client_body``.

    ``room``: the tokens the upstream request left free in the window (past a reply's least
    need), and ``count`` a text's tokens: with both, a newest result cut with a ``ref`` to the
    whole is no break when the whole would not have fit in that room."""
    _, sent = read(client_protocol, client_body)
    _, seen = read(upstream_protocol, upstream_body)
    found: list[Violation] = []
    defaults = _schema_defaults(client_body)
    found += _newest_results(sent, seen, defaults, _fits(room, count))
    found += _latest_user(sent, seen)
    if task is not None:
        found += _task(task, sent, seen)
    found += _inputs(sent, seen, defaults)
    found += _thinking(sent, seen)
    found += _sandwiches(sent, seen)
    found += _repeated_reminders(sent, seen, unchanged=_same(sent, seen))
    if not client_body.get("tools") and upstream_body.get("tools"):
        names = sorted(_tool_names(upstream_body))
        found.append(Violation("tools_added", f"tools {names} added to a request without tools"))
    return found


def _tool_names(body: Mapping[str, Any]) -> set[str]:
    names: set[str] = set()
    for tool in body.get("tools") or []:
        if isinstance(tool, Mapping):
            function = tool.get("function")
            named = function if isinstance(function, Mapping) else tool
            names.add(str(named.get("name") or named.get("type")))
    return names


def summarize(violations: Sequence[Violation]) -> dict[str, int]:
    """How many violations of each rule."""
    return dict(Counter(v.rule for v in violations))


# -- the rules -------------------------------------------------------------------------------------


def _calls_by_id(messages: Sequence[Msg]) -> dict[str, Part]:
    return {p.call_id: p for m in messages for p in m.calls()}


def _results_by_id(messages: Sequence[Msg]) -> dict[str, list[Part]]:
    found: dict[str, list[Part]] = {}
    for message in messages:
        for part in message.results():
            found.setdefault(part.call_id, []).append(part)
    return found


def _without_defaults(call: Part, defaults: Mapping[str, Mapping[str, str]]) -> str:
    """A call's input as canonical JSON, fields equal to their schema default left out."""
    if not isinstance(call.input, Mapping):
        return canonical_input(call.input)
    own = defaults.get(call.name, {})
    return canonical_input(
        {k: v for k, v in call.input.items() if own.get(k) != canonical_input(v)}
    )


def _fits(
    room: int | None, count: Callable[[str], int] | None
) -> Callable[[str, Sequence[str]], bool]:
    """Whether a result sent as ``whole`` and received as ``cut`` would have fit whole."""

    def fits(whole: str, cut: Sequence[str]) -> bool:
        if room is None or count is None or not any(REF_MARK.search(c) for c in cut):
            return True
        return count(whole) - max(count(c) for c in cut) <= room

    return fits


REF_MARK = re.compile(r"\bref_[0-9a-f]{12}\b")
"""A ref to a stored output (``read_result`` reads it back): the mark of a fair cut."""


def _newest_results(
    sent: Sequence[Msg],
    seen: Sequence[Msg],
    defaults: Mapping[str, Mapping[str, str]],
    fits: Callable[[str, Sequence[str]], bool],
) -> list[Violation]:
    found: list[Violation] = []
    sent_calls, seen_calls = _calls_by_id(sent), _calls_by_id(seen)
    seen_results = _results_by_id(seen)
    for result in latest_turn_results(sent):
        there = seen_results.get(result.call_id)
        if not there:
            found.append(Violation("newest_result", f"result of {result.call_id} is missing"))
        elif not any(r.text.strip() == result.text.strip() for r in there) and fits(
            result.text, [r.text for r in there]
        ):
            sizes = ", ".join(f"{len(r.text):,}" for r in there)
            found.append(
                Violation(
                    "newest_result",
                    f"result of {result.call_id} changed: {len(result.text):,} chars sent, "
                    f"{sizes} received",
                )
            )
        call = sent_calls.get(result.call_id)
        if call is None:
            continue  # the client sent a result without its call: nothing to compare
        upstream_call = seen_calls.get(result.call_id)
        if upstream_call is None:
            found.append(
                Violation("call_of_result", f"call {result.call_id} ({call.name}) is missing")
            )
        elif upstream_call.name != call.name or _without_defaults(
            upstream_call, defaults
        ) != _without_defaults(call, defaults):
            found.append(
                Violation(
                    "call_of_result",
                    f"call {result.call_id} ({call.name}) changed: "
                    f"{_short(call.input)} -> {_short(upstream_call.input)}",
                )
            )
    return found


def _user_words(message: Msg) -> list[str]:
    return [w for w in (strip_reminders(t) for t in message.texts()) if w]


def _user_texts(messages: Sequence[Msg]) -> list[str]:
    return [t for m in messages if m.role == "user" for t in m.texts()]


def _latest_user(sent: Sequence[Msg], seen: Sequence[Msg]) -> list[Violation]:
    latest = next((m for m in reversed(sent) if m.role == "user" and _user_words(m)), None)
    if latest is None:
        return []
    texts = _user_texts(seen)
    return [
        Violation("latest_user", f"the user's latest words are not in view whole: {_short(w)}")
        for w in _user_words(latest)
        if not any(w in t for t in texts)
    ]


def _task(task: str, sent: Sequence[Msg], seen: Sequence[Msg]) -> list[Violation]:
    if not any(task in t for t in _user_texts(sent)):
        return []  # the client itself no longer sends it (aider summarizes its own history)
    if any(task in t for t in _user_texts(seen)):
        return []
    return [Violation("task", f"the user's task is not in view verbatim: {_short(task)}")]


def _schema_defaults(body: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Per tool name, the canonical default of each input property that declares one (any
    protocol's tool shape: Anthropic's ``input_schema``, Chat's ``function.parameters``,
    Responses' ``parameters``)."""
    found: dict[str, dict[str, str]] = {}
    for tool in body.get("tools") or []:
        if not isinstance(tool, Mapping):
            continue
        function = tool.get("function")
        named = function if isinstance(function, Mapping) else tool
        schema = named.get("input_schema") or named.get("parameters") or {}
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        if not isinstance(properties, Mapping):
            continue
        found[str(named.get("name"))] = {
            key: canonical_input(prop["default"])
            for key, prop in properties.items()
            if isinstance(prop, Mapping) and "default" in prop
        }
    return found


def _inputs(
    sent: Sequence[Msg], seen: Sequence[Msg], defaults: Mapping[str, Mapping[str, str]]
) -> list[Violation]:
    found: list[Violation] = []
    sent_calls = _calls_by_id(sent)
    for message in seen:
        for call in message.calls():
            original = sent_calls.get(call.call_id)
            if original is None or not isinstance(original.input, Mapping) or not original.input:
                continue  # an engine tool's call, or nothing to lose
            if not call.input:
                found.append(
                    Violation("empty_input", f"{call.name} call {call.call_id} input became {{}}")
                )
                continue
            if not isinstance(call.input, Mapping):
                continue
            for key, value in original.input.items():
                if len(canonical_input(value)) > SMALL_FIELD_CHARS:
                    continue
                if key not in call.input and defaults.get(call.name, {}).get(key) == (
                    canonical_input(value)
                ):
                    continue  # the schema's default, added by the client on resend
                if key not in call.input or canonical_input(call.input[key]) != canonical_input(
                    value
                ):
                    found.append(
                        Violation(
                            "small_field",
                            f"{call.name} call {call.call_id} field {key!r} "
                            f"{_short(value)} -> {_short(call.input.get(key, '<absent>'))}",
                        )
                    )
    return found


def _thinking(sent: Sequence[Msg], seen: Sequence[Msg]) -> list[Violation]:
    latest = next((m for m in reversed(sent) if m.role == "assistant"), None)
    if latest is None:
        return []
    signed = [p for p in latest.thinking() if p.signature]
    if not signed:
        return []
    there = {(p.text, p.signature) for m in seen for p in m.thinking()}
    return [
        Violation(
            "thinking",
            f"a signed thinking block of the latest assistant turn is missing or changed: "
            f"{_short(p.text)}",
        )
        for p in signed
        if (p.text, p.signature) not in there
    ]


def _user_side(message: Msg) -> bool:
    return message.role in ("user", "tool")


def _system_text(message: Msg) -> str:
    return "\n".join(message.texts())


def _sandwich_middles(messages: Sequence[Msg]) -> list[str]:
    return [
        _system_text(messages[i])
        for i in range(1, len(messages) - 1)
        if messages[i].role == "system"
        and _user_side(messages[i - 1])
        and _user_side(messages[i + 1])
    ]


def _sandwiches(sent: Sequence[Msg], seen: Sequence[Msg]) -> list[Violation]:
    allowed = Counter(_sandwich_middles(sent))
    made = Counter(_sandwich_middles(seen))
    return [
        Violation("sandwich", f"user -> system -> user the client did not send: {_short(text)}")
        for text, count in made.items()
        if count > allowed.get(text, 0)
    ]


def _repeated_reminders(
    sent: Sequence[Msg], seen: Sequence[Msg], *, unchanged: bool
) -> list[Violation]:
    if unchanged:
        return []  # the client's own request, passed through as it was
    counts = Counter(_system_text(m) for m in seen if m.role == "system")
    return [
        Violation("repeated_reminder", f"{count} copies of one system message: {_short(text)}")
        for text, count in counts.items()
        if count > 1
    ]


def _same(sent: Sequence[Msg], seen: Sequence[Msg]) -> bool:
    return list(sent) == list(seen)


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else canonical_input(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
