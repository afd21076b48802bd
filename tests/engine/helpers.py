"""Helpers shared by the engine tests: a small-window engine, a scripted coding agent, a driver.

The driver runs the loop an agent runs (prepare, call the model, add the reply and the tool
outputs) so a test can go "until the request is in the COMPACT zone" and then look at what the
model received, what the store holds and which events were emitted.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from contextfold import (
    ContextEngine,
    ContextPolicy,
    Message,
    ModelInfo,
    PreparedRequest,
    ScriptedModel,
    Session,
    ToolCallPart,
    model_for_window,
)
from contextfold.budget import Zone
from contextfold.events import Event, MemorySink
from contextfold.providers import ChatRequest
from contextfold.tools.deferral import ToolSpec

SYSTEM = "You are a careful coding agent. Work in small steps and run the tests often."
TASK = "The parser in src/parser.py crashes on empty input. Fix it without changing the API."
WINDOW = 8_000
MAX_OUTPUT = 1_000


def listing(turn: int, lines: int = 40) -> str:
    """A realistic mid-sized tool output (a file listing), different every turn."""
    return "\n".join(
        f"src/mod{turn}.py:{i}: def f{i}(x): return x * {i} + {turn}" for i in range(lines)
    )


def event_names(events: Iterable[Event]) -> list[str]:
    """The class names of ``events``, in order."""
    return [type(e).__name__ for e in events]


THRESHOLD_POLICY = ContextPolicy(background=False, cost_schedule=False)
"""The thresholds alone decide (the cost schedule off): what most engine tests pin down is the
threshold machinery, which the cost schedule only moves earlier (tests/engine/test_schedule.py
covers the schedule)."""


class EngineFactory:
    """Makes engines with a :class:`MemorySink` and closes them all at the end of the test."""

    def __init__(self) -> None:
        self._engines: list[ContextEngine] = []

    def __call__(
        self,
        model: ModelInfo | str | None = None,
        *,
        window: int = WINDOW,
        max_output: int = MAX_OUTPUT,
        store: Any = ":memory:",
        policy: ContextPolicy | None = None,
        **kwargs: Any,
    ) -> tuple[ContextEngine, MemorySink]:
        sink = MemorySink()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # this machine's SQLite warns about the WAL bug
            engine = ContextEngine(
                model or model_for_window(window, max_output_tokens=max_output),
                store=store,
                sinks=[sink, *kwargs.pop("sinks", ())],
                policy=policy or THRESHOLD_POLICY,
                **kwargs,
            )
        self._engines.append(engine)
        return engine, sink

    def close_all(self) -> None:
        for engine in self._engines:
            engine.close()


def coding_model() -> ScriptedModel:
    """A model that runs one shell command per reply; usage is estimated from each request."""

    def respond(request: ChatRequest) -> Message:
        turn = len(model.requests)
        call = ToolCallPart.from_args(f"call_{turn}", "bash", {"command": f"cat src/mod{turn}.py"})
        return Message.assistant(f"Step {turn}: reading module {turn}.", [call])

    model = ScriptedModel(default=respond)
    return model


@dataclass
class Driver:
    """Runs agent turns on a session and keeps every request it prepared."""

    session: Session
    model: ScriptedModel = field(default_factory=coding_model)
    system: Any = SYSTEM
    tools: tuple[ToolSpec, ...] = ()
    output: Callable[[int], str] = listing
    requests: list[PreparedRequest] = field(default_factory=list)

    def prepare(self) -> PreparedRequest:
        """One prepared request (recorded), without calling the model."""
        request = self.session.prepare(system=self.system, tools=self.tools)
        self.requests.append(request)
        return request

    def turn(self) -> PreparedRequest:
        """Prepare, call the model, add its reply and the output of each of its tool calls."""
        request = self.prepare()
        response = self.model.complete(request.to_chat_request())
        self.session.add_assistant(response)
        for call in response.tool_calls:
            self.session.add_tool_result(call.call_id, self.output(len(self.requests)))
        return request

    def until(self, done: Callable[[PreparedRequest], bool], limit: int = 400) -> PreparedRequest:
        """Run turns until a prepared request satisfies ``done``; that request is returned."""
        for _ in range(limit):
            request = self.turn()
            if done(request):
                return request
        raise AssertionError(f"no request satisfied the condition in {limit} turns")

    def until_zone(self, zone: Zone, limit: int = 400) -> PreparedRequest:
        """Run turns until a request was prepared in ``zone`` (the zone before the engine acted)."""
        return self.until(lambda r: r.zone is zone, limit)


def start(engine: ContextEngine, task: str = TASK, **driver: Any) -> Driver:
    """A new session with the task as its first user message, and its driver."""
    session = engine.new_session(title="test")
    session.add_user(task)
    return Driver(session, **driver)
