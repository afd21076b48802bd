"""Typed events: what the context engine did and why, for logs, the store and user interfaces.

Every event is a frozen dataclass with a ``type`` tag, a ``session_id`` and a timestamp ``at``.
``to_dict`` / :func:`event_from_dict` round-trip through JSON. Sinks receive events:
:class:`JsonlSink` appends one JSON object a line to a file, :class:`CallbackSink` calls a
function, :class:`StoreSink` writes to anything with ``append_event(session_id, type, data)``
(every :class:`~contextfold.store.SessionStore`), and :class:`MemorySink` keeps them in a list.
A sink that fails never stops the engine: :class:`EventBus` reports the failure once on stderr.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, TypeAlias, TypeVar

from contextfold.private_files import make_private_dir, open_private
from contextfold.redaction.redactor import redact_json

__all__ = [
    "CallbackSink",
    "CompactionFailed",
    "CompactionFinished",
    "CompactionSettled",
    "CompactionStarted",
    "ComponentDegraded",
    "Event",
    "EventBus",
    "EventSink",
    "JsonlSink",
    "LossReported",
    "MemorySink",
    "ObservationsMasked",
    "OutputOffloaded",
    "OutputTruncated",
    "OverflowRecovered",
    "PinAdded",
    "SessionRestarted",
    "StoreSink",
    "SummarizerFellBack",
    "TokenUsage",
    "ToolsDeferred",
    "Trigger",
    "event_from_dict",
]

Trigger: TypeAlias = Literal[
    "threshold", "block", "manual", "agent", "overflow", "background", "mask", "cost"
]
"""What started a compaction: the view crossed the compact threshold (``threshold``) or nearly
filled the window (``block``); the user (``manual``) or the agent's own tool (``agent``) asked;
the provider refused the request as too long (``overflow``); a result prepared in the engine's
worker thread was used (``background``); the mask zone masked old outputs (``mask``, which
ends with a finished event only when it changed something); or, below the compact threshold,
compacting now was expected to cost less than waiting (``cost``: the cache-aware schedule)."""

_EVENT_TYPES: dict[str, type[Event]] = {}
_E = TypeVar("_E", bound="Event")


def _register(cls: type[_E]) -> type[_E]:
    _EVENT_TYPES[cls.type] = cls
    return cls


@dataclass(frozen=True, kw_only=True)
class Event:
    """Base of all events. Subclasses set the class-level ``type`` tag."""

    type: ClassVar[str] = "event"
    session_id: str | None = None
    at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"type": ..., "session_id": ..., "at": ..., <fields>}``."""
        out: dict[str, Any] = {"type": self.type}
        for name in _field_names(type(self)):
            value = getattr(self, name)
            out[name] = value if type(value) in _PLAIN else _jsonable(value)
        return out

    def data(self) -> dict[str, Any]:
        """The event's own fields (without type, session id and time), as JSON values."""
        out = self.to_dict()
        for key in ("type", "session_id", "at"):
            out.pop(key, None)
        return out


_FIELD_NAMES: dict[type[Event], tuple[str, ...]] = {}
"""Each event class's field names, in order (every usage report makes an event)."""


def _field_names(cls: type[Event]) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


_PLAIN = frozenset((str, int, float, bool, type(None)))
"""Field types :func:`_jsonable` gives back as they are (exact types: checked first)."""


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


@_register
@dataclass(frozen=True, kw_only=True)
class TokenUsage(Event):
    """Tokens of one model call, and how full the window is after it."""

    type: ClassVar[str] = "token_usage"
    turn: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    context_tokens: int = 0
    window: int = 0

    @property
    def fraction(self) -> float:
        """Share of the window in use after the call."""
        return self.context_tokens / self.window if self.window else 0.0


@_register
@dataclass(frozen=True, kw_only=True)
class CompactionStarted(Event):
    """A compaction began, for the reason its :data:`Trigger` names."""

    type: ClassVar[str] = "compaction_started"
    trigger: Trigger
    zone: str
    before_tokens: int
    target_tokens: int


@_register
@dataclass(frozen=True, kw_only=True)
class CompactionFinished(Event):
    """A compaction ended and its edits entered the transcript.

    ``note`` is set when it fell short: it stayed above its target having freed less than the
    minimum progress (the compactor's reason). Its edits stand all the same; the engine waits
    for the context to grow before compacting automatically again.
    """

    type: ClassVar[str] = "compaction_finished"
    trigger: Trigger
    before_tokens: int
    after_tokens: int
    before_messages: int
    after_messages: int
    strategies_run: tuple[str, ...] = ()
    edit_ids: tuple[str, ...] = ()
    cpu_seconds: float = 0.0
    note: str = ""
    expected_saving_usd: float | None = None
    """What the edit was expected to save in input cost over the turns the session is
    expected to have left, prompt-cache prices applied (negative: an edit the window forced
    although it costs more); ``None`` in events recorded before the cost schedule. A model
    with no known price is priced nominally (:class:`CompactionSettled` says so).
    :class:`CompactionSettled` later says what it came to."""
    horizon_requests: int = 0
    """How many requests that expectation looked ahead."""

    @property
    def freed_tokens(self) -> int:
        """Tokens the compaction took out of the view."""
        return self.before_tokens - self.after_tokens


@_register
@dataclass(frozen=True, kw_only=True)
class CompactionSettled(Event):
    """What an edit's expected saving came to: the requests actually sent after it, priced
    against the same requests without it (the old view plus what was added since), once the
    requests it looked ahead were sent or the next edit came. ``edit_ids`` names the
    :class:`CompactionFinished` it settles."""

    type: ClassVar[str] = "compaction_settled"
    trigger: Trigger
    edit_ids: tuple[str, ...]
    expected_saving_usd: float
    realized_saving_usd: float
    requests: int
    """Requests the realized figure covers (the first after the edit included)."""
    nominal: bool = False
    """The model has no known price: the dollars are relative figures."""


@_register
@dataclass(frozen=True, kw_only=True)
class CompactionFailed(Event):
    """An announced compaction ended without changing the view: nothing to remove, or a result
    that was not used (it is reported, never retried in a loop)."""

    type: ClassVar[str] = "compaction_failed"
    trigger: Trigger
    before_tokens: int
    after_tokens: int
    reason: str


@_register
@dataclass(frozen=True, kw_only=True)
class ObservationsMasked(Event):
    """A batch of old tool results was replaced by placeholders."""

    type: ClassVar[str] = "observations_masked"
    count: int
    freed_tokens: int
    edit_id: str = ""


@_register
@dataclass(frozen=True, kw_only=True)
class OutputTruncated(Event):
    """A tool output was cut to head and tail before it entered the transcript."""

    type: ClassVar[str] = "output_truncated"
    tool_name: str
    call_id: str
    original_bytes: int
    kept_bytes: int
    ref: str | None = None


@_register
@dataclass(frozen=True, kw_only=True)
class OutputOffloaded(Event):
    """A large tool output went to the store; the transcript holds a preview and its ref."""

    type: ClassVar[str] = "output_offloaded"
    tool_name: str
    call_id: str
    size_bytes: int
    ref: str


@_register
@dataclass(frozen=True, kw_only=True)
class ToolsDeferred(Event):
    """Tool descriptions were held back to stay under the tool-description budget."""

    type: ClassVar[str] = "tools_deferred"
    count: int
    names: tuple[str, ...] = ()
    description_tokens: int = 0
    budget_tokens: int = 0


@_register
@dataclass(frozen=True, kw_only=True)
class SessionRestarted(Event):
    """The session continued in a child session seeded with a summary and recent turns."""

    type: ClassVar[str] = "session_restarted"
    parent_id: str
    child_id: str
    restart_number: int
    carried_messages: int
    reason: str = "context_full"


@_register
@dataclass(frozen=True, kw_only=True)
class OverflowRecovered(Event):
    """A provider refused a request as too long; the session compacted hard for the retry.

    ``before_tokens`` is the refused request (the provider's count when it gave one),
    ``after_tokens`` the estimate of the retry. ``limit`` is the provider's stated limit, and
    ``window`` the window the session plans against from now on (``learned_window``: the
    limit made it smaller).
    """

    type: ClassVar[str] = "overflow_recovered"
    before_tokens: int
    after_tokens: int
    provider_message: str = ""
    limit: int | None = None
    window: int = 0
    learned_window: bool = False


@_register
@dataclass(frozen=True, kw_only=True)
class SummarizerFellBack(Event):
    """The LLM summarizer failed; the extractive summary was used instead."""

    type: ClassVar[str] = "summarizer_fell_back"
    error: str


@_register
@dataclass(frozen=True, kw_only=True)
class ComponentDegraded(Event):
    """A part of the engine failed and a simpler fallback took over: the agent keeps working,
    with less (a cut output without a ref, all tools sent, a plain prompt), and this says so."""

    type: ClassVar[str] = "component_degraded"
    component: str
    fallback: str
    error: str


@_register
@dataclass(frozen=True, kw_only=True)
class PinAdded(Event):
    """A standing constraint was pinned: found in a user message (``source="extracted"``) or set
    by the agent or the user (``"explicit"``). Every later request carries ``text`` verbatim."""

    type: ClassVar[str] = "pin_added"
    text: str
    source: str
    pins: int = 0
    """Pins the session holds with this one."""


def event_from_dict(data: Mapping[str, Any]) -> Event:
    """Rebuild an event from :meth:`Event.to_dict` output; unknown types raise ``ValueError``."""
    kind = data.get("type")
    cls = _EVENT_TYPES.get(str(kind))
    if cls is None:
        raise ValueError(f"unknown event type {kind!r}; known: {sorted(_EVENT_TYPES)}")
    names = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key in names:
            kwargs[key] = tuple(value) if isinstance(value, list) else value
    return cls(**kwargs)


# --------------------------------------------------------------------------------------------------
# Sinks
# --------------------------------------------------------------------------------------------------


class EventSink(Protocol):
    """Anything that receives events."""

    def emit(self, event: Event) -> None:
        """Take one event. May raise; the bus reports and carries on."""


class MemorySink:
    """Keeps every event in :attr:`events` (tests, the CLI's notices)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)

    def of_type(self, cls: type[_E]) -> list[_E]:
        """The events of one class, in order."""
        return [e for e in self.events if isinstance(e, cls)]


class CallbackSink:
    """Calls ``callback(event)`` for every event."""

    def __init__(self, callback: Callable[[Event], None]) -> None:
        self._callback = callback

    def emit(self, event: Event) -> None:
        self._callback(event)


class JsonlSink:
    """Appends each event as one JSON line to ``path``, secrets redacted (unless ``redact`` is
    false); the file is created readable only by you (0600), its missing folder 0700."""

    def __init__(self, path: str | Path, *, redact: bool = True) -> None:
        self.path = Path(path)
        self.redact = redact
        make_private_dir(self.path.parent)
        self._lock = threading.Lock()

    def emit(self, event: Event) -> None:
        data = event.to_dict()
        line = _json_line(data)
        if self.redact:
            redacted = redact_json(data, line)
            if redacted is not data:
                line = _json_line(redacted)
        with self._lock, open_private(self.path, append=True) as fh:
            fh.write(line + "\n")


def _json_line(data: Mapping[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


class _EventWriter(Protocol):
    def append_event(self, session_id: str, event_type: str, data: Mapping[str, Any]) -> None: ...


class StoreSink:
    """Writes events with a session id into a session store's ``events`` table."""

    def __init__(self, store: _EventWriter) -> None:
        self._store = store

    def emit(self, event: Event) -> None:
        if event.session_id is not None:
            payload = event.data()
            payload["at"] = event.at
            self._store.append_event(event.session_id, event.type, payload)


class EventBus:
    """Fans events out to sinks; a failing sink is reported once and then skipped quietly."""

    def __init__(self, *sinks: EventSink) -> None:
        self.sinks: list[EventSink] = list(sinks)
        self._failed: set[int] = set()

    def add(self, sink: EventSink) -> None:
        """Send future events to ``sink`` too."""
        self.sinks.append(sink)

    def emit(self, event: Event) -> None:
        """Deliver ``event`` to every sink."""
        for sink in self.sinks:
            try:
                sink.emit(event)
            except Exception as exc:  # a log sink must never take the agent down
                if id(sink) not in self._failed:
                    self._failed.add(id(sink))
                    print(
                        f"contextfold: event sink {type(sink).__name__} failed: {exc}",
                        file=sys.stderr,
                    )


# --------------------------------------------------------------------------------------------------
# Loss reports (registered here, after the sinks, like any other event)
# --------------------------------------------------------------------------------------------------


@_register
@dataclass(frozen=True, kw_only=True)
class LossReported(Event):
    """What a compaction or mask batch took out of the view, and where it can still be read.

    It follows the compaction's :class:`CompactionFinished`. The counts cover every fact whose
    place the compaction changed (:mod:`contextfold.retention.loss`, with the facts of
    :mod:`contextfold.retention.probes`); ``items`` lists some of them (the lost ones first),
    each as ``{"kind", "text", "where", "ref"}`` with ``where`` one of ``"summary"``,
    ``"pinned"``, ``"ledger"``, ``"recoverable"`` (``read_result <ref>`` reads it back) or
    ``"lost"`` (older stored reports say ``"ref"`` for ``"recoverable"``). The ``messages_*``
    counts account for every message the compaction took out of the view or whose outputs it
    replaced; ``messages`` lists some (``{"id", "role", "where", "refs"}``).
    """

    type: ClassVar[str] = "loss_reported"
    trigger: Trigger
    out_of_view: int = 0
    in_summary: int = 0
    pinned: int = 0
    in_ledger: int = 0
    behind_ref: int = 0
    lost: int = 0
    items: tuple[Mapping[str, Any], ...] = ()
    ledger_items: int = 0
    """Items the session's ledger holds after the compaction."""
    messages_in_summary: int = 0
    messages_recoverable: int = 0
    """Messages whose every output a ref the model can read leads back to."""
    messages_facts_kept: int = 0
    """Messages without outputs whose facts, if any, are still readable."""
    messages_lost: int = 0
    messages: tuple[Mapping[str, Any], ...] = ()

    def message_counts(self) -> dict[str, int]:
        """The messages that left the view, by what stands for them now."""
        return {
            "summary": self.messages_in_summary,
            "recoverable": self.messages_recoverable,
            "facts_kept": self.messages_facts_kept,
            "lost": self.messages_lost,
        }
