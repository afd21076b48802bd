"""The agent loop: one function that runs a model with tools on a session until it answers.

:func:`run_agent` is the per-turn flow of :mod:`contextfold.engine` with the details filled in::

    prepare → call the model (streamed when a hook wants text live) → add the reply
      → run its tool calls (the engine's own tools in the session, the others in the Toolbox)
      → add the results → repeat, until the model answers without tools or the step limit.

What it promises:

- a tool that fails, refuses (approval) or is unknown gives the model an error result; the loop
  goes on;
- a provider's context overflow is answered by ``session.recover`` (one hard compaction) and the
  call is retried once; a second overflow is raised with the provider's figures;
- ``KeyboardInterrupt`` stops the run cleanly: calls that did not run get an "interrupted" result,
  so the transcript stays valid, and the result says ``stop="interrupted"``;
- other provider errors (authentication, rate limits after retries) are raised: the caller
  decides whether to tell the user or retry.

Approval for writes and commands lives in the Toolbox's :class:`ApprovalPolicy` (its callback is
the UI's "may I?" prompt), so a call is approved in exactly one place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from contextfold.agent.toolbox import Toolbox
from contextfold.chat import (
    ChatRequest,
    ChatResponse,
    StreamDone,
    TextDelta,
    ThinkingDelta,
)
from contextfold.engine.session import Session, SystemPrompt
from contextfold.errors import ContextfoldError, ContextOverflowError
from contextfold.events import CallbackSink, Event
from contextfold.messages import ToolCallPart, ToolResultPart
from contextfold.providers.base import ChatModel
from contextfold.tool_spec import ToolSpec

__all__ = [
    "DEFAULT_MAX_STEPS",
    "DEFAULT_SYSTEM_PROMPT",
    "INTERRUPTED_RESULT",
    "AgentHooks",
    "AgentResult",
    "StopReason",
    "run_agent",
]

DEFAULT_MAX_STEPS = 50
"""Model calls one :func:`run_agent` may make before it stops and hands back to the user."""

INTERRUPTED_RESULT = "[interrupted by the user before this tool call ran]"
"""The result given to tool calls that an interrupt kept from running."""

DEFAULT_SYSTEM_PROMPT = """\
You are a coding agent working in the user's project through tools. Read before you edit, make \
small changes, and run the project's tests after each one. Say briefly what you are doing.

Your context window is managed for you. Long tool outputs are cut and old ones are replaced by \
short placeholders, each with a ref such as ref_0123abcd4567: call read_result with that ref \
(and a line range or a pattern) to read the full text again; nothing is lost. When a note says \
the context is filling up, call compact_context (with a focus if you have one) before large \
reads or long outputs.

When the task is done, answer without calling a tool: say what you changed and how you \
checked it."""
"""The coding agent's system prompt (``contextfold chat`` and ``run``)."""

StopReason = Literal["answered", "max_steps", "interrupted"]


@dataclass
class AgentHooks:
    """Callbacks for a user interface; every one is optional.

    - ``on_text_delta(text)``: reply text as it streams (setting it makes the loop stream);
    - ``on_thinking_delta(text)``: model reasoning as it streams;
    - ``on_response(response)``: each complete model reply, once it is in the transcript;
    - ``on_tool_call(call)``: just before a tool call runs;
    - ``on_tool_result(call, result)``: the result as the transcript holds it (cut or offloaded
      outputs show their preview and ``ref``);
    - ``on_event(event)``: every engine event emitted during the run (compaction, masking,
      offloading, deferral, restart, token usage...), as it happens.
    """

    on_text_delta: Callable[[str], None] | None = None
    on_thinking_delta: Callable[[str], None] | None = None
    on_response: Callable[[ChatResponse], None] | None = None
    on_tool_call: Callable[[ToolCallPart], None] | None = None
    on_tool_result: Callable[[ToolCallPart, ToolResultPart], None] | None = None
    on_event: Callable[[Event], None] | None = None


@dataclass
class AgentResult:
    """How a run ended: the final text, why it stopped, and what it took."""

    text: str
    """The model's last reply text (the answer when ``stop == "answered"``)."""
    stop: StopReason
    steps: int
    """Model calls made."""
    tool_calls: int
    session_id: str
    """The session the run ended in (a restart continues in a child session)."""
    recovered_overflows: int = 0
    responses: list[ChatResponse] = field(default_factory=list)


def run_agent(
    session: Session,
    model: ChatModel,
    toolbox: Toolbox,
    task: str | None = None,
    *,
    system: SystemPrompt = DEFAULT_SYSTEM_PROMPT,
    max_steps: int = DEFAULT_MAX_STEPS,
    hooks: AgentHooks | None = None,
) -> AgentResult:
    """Run the model on ``session`` until it answers without tools; the :class:`AgentResult`.

    ``task``, when given, is added as the user's message first (otherwise the session must
    already end with something for the model to answer). See the module docstring for how
    tool errors, overflows and interrupts are handled.
    """
    hooks = hooks or AgentHooks()
    if task is not None:
        session.add_user(task)
    result = AgentResult(text="", stop="max_steps", steps=0, tool_calls=0, session_id=session.id)
    with _forward_events(session, hooks.on_event):
        try:
            while result.steps < max_steps:
                response = _call_model(session, model, toolbox.specs(), system, hooks, result)
                result.steps += 1
                session.add_assistant(response)
                result.responses.append(response)
                result.text = response.text
                if hooks.on_response:
                    hooks.on_response(response)
                if not response.tool_calls:
                    result.stop = "answered"
                    break
                _run_tool_calls(session, toolbox, response.tool_calls, hooks, result)
        except KeyboardInterrupt:
            result.stop = "interrupted"
        finally:
            result.session_id = session.id
    return result


def _call_model(
    session: Session,
    model: ChatModel,
    tools: list[ToolSpec],
    system: SystemPrompt,
    hooks: AgentHooks,
    result: AgentResult,
) -> ChatResponse:
    """One model call on a freshly prepared request, with one overflow recovery.

    Only the provider's refusal is recovered from: an overflow ``prepare`` raises itself means
    nothing was sent and nothing more can be compacted, so it goes to the caller.
    """
    while True:
        request = session.prepare(system=system, tools=tools).to_chat_request()
        try:
            return _complete(model, request, hooks)
        except ContextOverflowError as error:
            session.recover(error)  # learns the limit, compacts hard; raises on a second one
            result.recovered_overflows += 1


def _complete(model: ChatModel, request: ChatRequest, hooks: AgentHooks) -> ChatResponse:
    """The model's response; streamed (deltas to the hooks) when the UI shows text live."""
    if hooks.on_text_delta is None and hooks.on_thinking_delta is None:
        return model.complete(request)
    response: ChatResponse | None = None
    for event in model.stream(request):
        if isinstance(event, TextDelta) and hooks.on_text_delta:
            hooks.on_text_delta(event.text)
        elif isinstance(event, ThinkingDelta) and hooks.on_thinking_delta:
            hooks.on_thinking_delta(event.text)
        elif isinstance(event, StreamDone):
            response = event.response
    if response is None:  # a ChatModel must end its stream with StreamDone
        raise RuntimeError(f"{model!r} ended a stream without a StreamDone event")
    return response


def _run_tool_calls(
    session: Session,
    toolbox: Toolbox,
    calls: Iterable[ToolCallPart],
    hooks: AgentHooks,
    result: AgentResult,
) -> None:
    """Run each call and add its result; on an interrupt, answer the calls left unrun."""
    pending = list(calls)
    try:
        while pending:
            call = pending[0]
            if hooks.on_tool_call:
                hooks.on_tool_call(call)
            part = _run_one(session, toolbox, call)
            result.tool_calls += 1
            # Added before it leaves ``pending``: an interrupt must not answer a call twice.
            stored = session.add_tool_results([part])[0].tool_results[0]
            pending.pop(0)
            if hooks.on_tool_result:
                hooks.on_tool_result(call, stored)
    except KeyboardInterrupt:
        session.add_tool_results(
            ToolResultPart(c.call_id, c.name, INTERRUPTED_RESULT, is_error=True) for c in pending
        )
        raise


def _run_one(session: Session, toolbox: Toolbox, call: ToolCallPart) -> ToolResultPart:
    """The result of one call: engine tools in the session, the rest in the toolbox."""
    try:
        part = session.run_engine_tool(call)
    except ContextfoldError as exc:
        # A store that cannot be written, a compaction that cannot run: the model reads why and
        # goes on. The tools answer bad arguments and unreadable outputs themselves; anything
        # else is a bug, which must not pass for a tool result.
        return ToolResultPart(
            call.call_id, call.name, f"{call.name} failed: {type(exc).__name__}: {exc}", True
        )
    if part is not None:
        return part
    return toolbox.run(call).to_result(call)


@contextmanager
def _forward_events(session: Session, callback: Callable[[Event], None] | None) -> Iterator[None]:
    """Send the engine's events to ``callback`` while the run lasts."""
    if callback is None:
        yield
        return
    sink = CallbackSink(callback)
    sinks = session.engine.events.sinks
    sinks.append(sink)
    try:
        yield
    finally:
        sinks.remove(sink)
