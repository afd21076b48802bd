"""A session built from its dependencies alone, without an engine, with a fake store; and the
zone decision as the pure function it is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import pytest

from contextfold import ContextPolicy, Message, Session, Usage, model_for_window
from contextfold.budget import ContextBudget, Thresholds, Zone
from contextfold.compaction import Compactor, ExtractiveSummarizer
from contextfold.edits import ContextEdit
from contextfold.engine._deps import SessionDeps
from contextfold.engine._measure import Measurement
from contextfold.engine._state import TurnState
from contextfold.engine._zones import ZoneAction, decide
from contextfold.engine.learned_window import SessionWindow
from contextfold.errors import UsageError
from contextfold.events import EventBus, MemorySink, TokenUsage
from contextfold.outputs.blobs import BlobInfo, blob_info
from contextfold.store import SessionInfo, SessionStore
from contextfold.tokens.counters import HeuristicCounter
from contextfold.tokens.estimator import ContextSizeEstimator
from contextfold.tools.deferral import ToolDeferral
from contextfold.usage import UsageTracker


@dataclass
class FakeStore:
    """The store methods a session writes through, recording what it was given."""

    messages: list[Message] = field(default_factory=list)
    edits: list[ContextEdit] = field(default_factory=list)
    blobs: dict[str, str] = field(default_factory=dict)
    states: list[dict[str, Any]] = field(default_factory=list)

    def append_messages(self, session_id: str, messages: Sequence[Message], **guard: Any) -> int:
        self.messages.extend(messages)
        return len(self.messages)

    def append_edit(self, session_id: str, edit: ContextEdit, **guard: Any) -> int:
        self.edits.append(edit)
        return len(self.edits)

    def save_snapshot(self, *args: Any, **kwargs: Any) -> None:
        return None

    def save_engine_state(self, session_id: str, state: Mapping[str, Any]) -> None:
        self.states.append(dict(state))

    def load_engine_state(self, session_id: str) -> dict[str, Any] | None:
        return self.states[-1] if self.states else None

    def put_blob(self, session_id: str, content: str, *, tool_name: str | None = None) -> BlobInfo:
        info = blob_info(content, tool_name)
        self.blobs[info.ref] = content
        return info

    def get_blob(self, session_id: str, ref: str) -> str:
        return self.blobs[ref]


def _deps(store: FakeStore, sink: MemorySink) -> SessionDeps:
    model = model_for_window(8_000, max_output_tokens=1_000)
    policy = ContextPolicy(background=False)
    return SessionDeps(
        model=model,
        policy=policy,
        counter=HeuristicCounter(),
        compactor=Compactor.preset("mask-first"),
        summarizer=ExtractiveSummarizer(),
        store=cast(SessionStore, store),
        events=EventBus(sink),
        provider="openai",
    )


def test_a_session_runs_a_turn_from_its_dependencies_alone() -> None:
    store, sink = FakeStore(), MemorySink()
    session = Session(_deps(store, sink), SessionInfo("s1", title="no engine"))

    session.add_user("List the files.")
    request = session.prepare(system="You are terse.", tools=())
    session.add_assistant(Message.assistant("Done."), Usage(request.tokens, 3))

    assert [m.role for m in request.messages] == ["user"]
    assert {t.name for t in request.tools} == {"read_result", "compact_context"}
    assert [m.text for m in store.messages] == ["List the files.", "Done."]
    assert store.states and store.states[-1]["usage"]["calls"] == 1  # the state was saved
    assert next(e for e in sink.events if isinstance(e, TokenUsage)).session_id == "s1"
    with pytest.raises(UsageError, match="without an engine"):
        _ = session.engine


def test_a_long_output_is_offloaded_to_the_fake_store_and_read_back() -> None:
    store, sink = FakeStore(), MemorySink()
    session = Session(_deps(store, sink), SessionInfo("s1"))
    session.add_user("Count.")
    output = "\n".join(str(i) for i in range(20_000))

    message = session.add_tool_result("c1", output, name="shell")

    ref = message.tool_results[0].ref
    assert ref is not None and store.blobs[ref] == output
    assert session.read_result(ref, pattern="^19999$").content.count("19999") >= 1


TARGET = Thresholds().compact_target


def _state() -> TurnState:
    model = model_for_window(8_000)
    counter = HeuristicCounter()
    return TurnState(
        estimator=ContextSizeEstimator(counter),
        usage=UsageTracker(model),
        deferral=ToolDeferral(0.1),
        window=SessionWindow(model),
    )


def _measurement(zone: Zone, tokens: int = 5_000) -> Measurement:
    """A request of ``tokens`` in a 7,000-token effective window, said to be in ``zone``."""
    budget = ContextBudget.for_model(
        model_for_window(8_000, max_output_tokens=1_000), conversation=tokens
    )
    assert budget.effective_window == 7_000
    return Measurement(tokens, 0, 0, 1.0, budget, zone)


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        (Zone.OK, ZoneAction("none")),
        (Zone.MASK, ZoneAction("mask")),
        (Zone.BLOCK, ZoneAction("compact", trigger="block", target=TARGET, hard=True)),
        (Zone.OVERFLOW, ZoneAction("compact", trigger="block", target=TARGET, hard=True)),
    ],
)
def test_decide_maps_each_zone_to_its_action(zone: Zone, expected: ZoneAction) -> None:
    policy = ContextPolicy(background=False)

    action = decide(_measurement(zone), _state(), policy, can_restart=False)

    assert action == expected


def test_decide_waits_after_a_short_compaction_unless_the_context_grew() -> None:
    policy = ContextPolicy(background=False)
    state = replace(_state(), compact_retry_at=6_000)

    below = decide(_measurement(Zone.COMPACT, tokens=5_000), state, policy, can_restart=False)
    above = decide(_measurement(Zone.COMPACT, tokens=6_500), state, policy, can_restart=False)

    assert below.kind == above.kind == "compact" and below.take_background
    assert below.wait and not above.wait
    assert state.compact_retry_at == 6_000  # the decision changed nothing


def test_decide_winds_down_once_then_restarts() -> None:
    policy = ContextPolicy(background=False)
    state = _state()

    first = decide(_measurement(Zone.COMPACT), state, policy, can_restart=True)
    state = replace(state, wind_down_sent=first.wind_down_sent)
    second = decide(_measurement(Zone.COMPACT), state, policy, can_restart=True)
    no_room = decide(_measurement(Zone.BLOCK), _state(), policy, can_restart=True)
    cannot = decide(_measurement(Zone.COMPACT), state, policy, can_restart=False)

    assert (first.kind, first.wind_down_sent) == ("wind_down", True)
    assert second.kind == no_room.kind == "restart"
    assert cannot.kind == "compact" and not cannot.wind_down_sent  # no promise it cannot keep


def test_decide_starts_the_background_compaction_past_its_mark() -> None:
    policy = ContextPolicy(background=True, background_at=0.5)

    early = decide(_measurement(Zone.OK, tokens=3_000), _state(), policy, can_restart=False)
    late = decide(_measurement(Zone.MASK, tokens=4_000), _state(), policy, can_restart=False)

    assert not early.start_background
    assert late.kind == "mask" and late.start_background
