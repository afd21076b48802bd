"""A conversation under the engine's care: what it holds, and the per-turn flow (DESIGN §3).

:meth:`Session.prepare` runs the flow: build the system prompt, choose the tools, measure the
budget by component, act on the zone (mask a batch, compact, compact hard, or wind down and
restart), add the notes for the model, repair the history, and render with cache breakpoints.
The helpers that measure and render live in :mod:`contextfold._engine_turn`, what each zone
does to the view in :mod:`contextfold._engine_zones`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from contextfold._engine_recovery import ENGINE_PROVIDER, OVERFLOW_RETRY_SHARE, RefusedRequest
from contextfold._engine_repair import ViewRepairer, closing_results
from contextfold._engine_sizes import CompactionCounter, ViewSizes
from contextfold._engine_store import LineageBlobs, SessionWriter
from contextfold._engine_turn import (
    Measurement,
    awareness_note,
    build_prompt,
    measure,
    render,
)
from contextfold._engine_types import PreparedRequest
from contextfold._engine_window import SessionWindow
from contextfold._engine_zones import ZoneActions
from contextfold._exceptions import ContextOverflowError
from contextfold._usage import SessionUsage, UsageTracker
from contextfold.compaction import (
    BackgroundCompactor,
    CompactResult,
    StructuredSummary,
)
from contextfold.events import (
    ComponentDegraded,
    Event,
    OverflowRecovered,
    TokenUsage,
)
from contextfold.messages import Message, Part, ToolCallPart, ToolResultPart, Usage
from contextfold.normalize import RepairReport
from contextfold.outputs import OutputLimits, prepare_tool_output
from contextfold.prompt import BuiltPrompt, PromptBuilder, PromptSection
from contextfold.providers._from_sdk import chat_response_from_sdk
from contextfold.providers.base import ChatResponse
from contextfold.store import SessionInfo
from contextfold.tokens import ContextSizeEstimator
from contextfold.tools import (
    COMPACT_CONTEXT_TOOL,
    READ_RESULT_TOOL,
    ToolDeferral,
    ToolSpec,
)

if TYPE_CHECKING:
    from contextfold.engine import ContextEngine

__all__ = ["Session"]

SystemPrompt = str | PromptBuilder | Iterable[PromptSection] | None


class Session(ZoneActions):
    """One conversation: its transcript in the store and the view the model sees.

    Made by :meth:`ContextEngine.new_session` or :meth:`ContextEngine.resume`; see
    :mod:`contextfold.engine` for the loop an agent runs with it.
    """

    def __init__(
        self,
        engine: ContextEngine,
        info: SessionInfo,
        *,
        view: Sequence[Message],
        last_seq: int,
        last_edit: int,
        state: Mapping[str, Any] | None,
    ) -> None:
        self.engine = engine
        self.info = info
        self._view: list[Message] = [m for m in view if m.meta.agent_visible]
        self._sizes = ViewSizes(engine.counter, self._view)
        self._compaction_counter = CompactionCounter(engine.counter, self._sizes)
        self._repairer = ViewRepairer(engine.provider, self._compaction_counter.count_message)
        self._writer = SessionWriter(
            engine.store, info.id, last_seq=last_seq, last_edit=last_edit, emit=self._emit
        )
        self._blobs = LineageBlobs(self._writer)
        self._estimator = ContextSizeEstimator(engine.counter)
        self._usage = UsageTracker(engine.model)
        self._deferral = engine_deferral(engine)
        self._window = SessionWindow(engine.model, engine.policy.reserved_output)
        self._background = (
            BackgroundCompactor(engine.compactor) if engine.policy.background else None
        )
        self._last: PreparedRequest | None = None
        self._last_unrepaired: list[Message] | None = None
        """The view the latest request was made from, when repairs changed it on the way."""
        self._last_fixed_text = ""
        self._previous_tail: int | None = None
        self._turn = 0
        self._restarts = 0
        self._wind_down_sent = False
        self._refused: RefusedRequest | None = None
        """The request a provider refused, until a reply comes: it is never sent again, and a
        second refusal before a reply is not recovered from."""
        self._mask_retry_at: int | None = None
        """Raw tokens of tool outputs in the view below which a declined mask batch is not
        planned again."""
        self._compact_retry_at: int | None = None
        """Estimated tokens below which a failed threshold compaction is not tried again."""
        self._summary: StructuredSummary | None = None
        self._background_started = False
        self._collector: list[Event] | None = None
        if state:
            self._restore(state)

    # -- identity and state ----------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The store id of the session being written (it changes when the session restarts)."""
        return self._writer.session_id

    @property
    def view(self) -> tuple[Message, ...]:
        """What the model sees next (before repair and notes)."""
        return tuple(self._view)

    @property
    def last_request(self) -> PreparedRequest | None:
        """The latest :meth:`prepare` result."""
        return self._last

    @property
    def restarts(self) -> int:
        """How many times this conversation continued in a child session."""
        return self._restarts

    @property
    def context_window(self) -> int:
        """The window requests are planned against: the model's, or the smaller limit a
        provider stated when it refused a request (kept across resumes)."""
        return self._window.context_window

    @property
    def learned_window(self) -> int | None:
        """The limit a provider stated when it refused a request as too long, if smaller than
        the model's window."""
        return self._window.learned

    @property
    def effective_window(self) -> int:
        """Tokens a request's prompt may take: :attr:`context_window` minus the reply reserve."""
        return self._window.effective_window

    @property
    def output_limits(self) -> OutputLimits:
        """What one tool output may keep inline (its token limit shrinks with the window)."""
        return self.engine.policy.output_limits_for(self.effective_window)

    @property
    def persisted(self) -> bool:
        """False once the store failed and the session went on in memory."""
        return self._writer.store_ok

    def _state(self) -> dict[str, Any]:
        return {
            "estimator": self._estimator.state(),
            "usage": self._usage.state(),
            "previous_tail": self._previous_tail,
            "turn": self._turn,
            "restarts": self._restarts,
            "wind_down_sent": self._wind_down_sent,
            "fixed_text": self._last_fixed_text,
            "tool_deferral": self._deferral.state(),
            **self._window.state(),
        }

    def _restore(self, state: Mapping[str, Any]) -> None:
        self._estimator.restore(state.get("estimator", {}), self._view)
        self._usage.restore(state.get("usage", {}))
        tail = state.get("previous_tail")
        self._previous_tail = int(tail) if tail is not None else None
        self._turn = int(state.get("turn", 0))
        self._restarts = int(state.get("restarts", 0))
        self._wind_down_sent = bool(state.get("wind_down_sent", False))
        self._last_fixed_text = str(state.get("fixed_text", ""))
        self._window.restore(state)
        deferral = state.get("tool_deferral")
        if isinstance(deferral, Mapping):
            self._deferral.restore(deferral)

    def _emit(self, event: Event) -> None:
        self.engine.events.emit(event)
        if self._collector is not None:
            self._collector.append(event)

    # -- adding to the conversation --------------------------------------------------------------

    def add_message(self, message: Message) -> Message:
        """Append any message to the transcript (and to the view if the agent may see it)."""
        if message.role != "tool" and message.meta.agent_visible:
            self._close_open_calls()  # the last response's calls can no longer be answered
        if message.meta.turn is None or message.meta.created_at is None:
            message = message.with_meta(
                turn=message.meta.turn if message.meta.turn is not None else self._turn,
                created_at=message.meta.created_at or time.time(),
            )
        self._writer.append([message])
        if message.meta.agent_visible:
            self._view.append(message)
            self._sizes.append(message)
        return message

    def _close_open_calls(self) -> None:
        """Append a synthesized result for each call of the last response still without one
        (see :func:`~contextfold._engine_repair.closing_results`)."""
        if self.engine.policy.repair:
            for result in closing_results(self._view):
                self.add_message(result)

    def add_user(self, content: str | Sequence[Part] | Message) -> Message:
        """Append what the user said; it starts a new turn."""
        self._turn += 1
        self._deferral.end_turn()
        if isinstance(content, Message):
            message = content
        elif isinstance(content, str):
            message = Message.user(content)
        else:
            message = Message("user", tuple(content))
        return self.add_message(message)

    def add_assistant(
        self, reply: Message | ChatResponse | object, usage: Usage | None = None
    ) -> Message:
        """Append the model's reply and anchor token counts on the usage it reported.

        ``reply`` is a :class:`~contextfold.Message`, a :class:`~contextfold.providers.ChatResponse`
        or the official SDKs' own reply: an OpenAI ``ChatCompletion`` or an Anthropic
        ``Message`` (converted by :func:`contextfold.providers.openai.response_from_completion`
        / :func:`contextfold.providers.anthropic.response_from_message`). Returns the message
        appended: its ``tool_calls`` are the calls to answer.
        """
        if not isinstance(reply, Message | ChatResponse):
            reply = chat_response_from_sdk(reply)
        if isinstance(reply, ChatResponse):
            usage = usage or reply.usage
            reply = reply.message
        usage = usage or reply.meta.usage
        message = self.add_message(reply)
        for call in message.tool_calls:
            self._deferral.mark_used(call.name)
        if usage is not None:
            self.record(usage, reply=message)
        self._refused = None
        return message

    def add_tool_result(
        self,
        call_id: str,
        content: str | bytes,
        *,
        name: str | None = None,
        is_error: bool = False,
    ) -> Message:
        """Append one tool output; large ones are cut or offloaded to the store with a ref."""
        if isinstance(content, bytes):
            content = content.decode("utf-8", errors="replace")
        part = ToolResultPart(call_id, name or self._call_name(call_id), content, is_error)
        return self.add_tool_results([part])[0]

    def add_tool_results(self, results: Iterable[ToolResultPart]) -> list[Message]:
        """Append tool results (one message each), each through truncation and offloading."""
        policy = self.engine.policy
        added: list[Message] = []
        for result in results:
            prepared = prepare_tool_output(
                result,
                session_id=self.id,
                blobs=self._blobs,
                limits=self.output_limits,
                policy=policy.output_policy,
                counter=self.engine.counter,
            )
            for event in prepared.events:
                self._emit(event)
            added.append(self.add_message(Message.tool(prepared.part)))
        return added

    def _call_name(self, call_id: str) -> str:
        for message in reversed(self._view):
            for call in message.tool_calls:
                if call.call_id == call_id:
                    return call.name
        return ""

    def record(self, usage: Usage, *, reply: Message | None = None) -> None:
        """Count a model call's reported usage and anchor the next estimate on it.

        :meth:`add_assistant` calls this; call it yourself only when you append replies another
        way. ``reply`` is the assistant message the call produced.
        """
        last = self._last
        if last is not None:
            # The anchor covers the view the estimates will be made from. A repaired request
            # differs from it (a synthesized result, say): its report includes those tokens,
            # and the next request will carry the same repairs.
            self._estimator.record(
                usage,
                self._last_view(),
                system=self._last_fixed_text,
                tools=last.tools,
                reply=reply,
            )
        self._usage.add(usage)
        window = self.effective_window
        self._emit(
            TokenUsage(
                session_id=self.id,
                turn=self._usage.calls,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens,
                cache_write_tokens=usage.cache_write_tokens,
                context_tokens=usage.total_tokens,
                window=window,
            )
        )
        self._writer.save_state(self._state())

    # -- the per-turn flow -------------------------------------------------------------------------

    def prepare(
        self,
        *,
        system: SystemPrompt = None,
        tools: Iterable[ToolSpec] = (),
        engine_tools: bool = True,
    ) -> PreparedRequest:
        """The next request: fits the window, valid for the provider, cache-friendly.

        ``system`` is the base prompt (a string) or prompt sections; AGENTS.md instructions are
        added when the engine has a loader. ``tools`` are the agent's tools; the engine's own
        (``read_result``, ``compact_context``, and ``tool_search`` when tools are deferred) are
        added unless ``engine_tools`` is false.
        """
        events: list[Event] = []
        self._collector = events
        try:
            return self._prepare(system, list(tools), engine_tools, events)
        finally:
            self._collector = None

    def _prepare(
        self,
        system: SystemPrompt,
        tools: list[ToolSpec],
        engine_tools: bool,
        events: list[Event],
    ) -> PreparedRequest:
        engine = self.engine
        self._close_open_calls()  # every call is answered before the model is called again
        built, stable_text, degraded = build_prompt(system, engine.instructions)
        if degraded:
            self._emit(self._degraded("prompt_builder", "plain concatenation", degraded))
        selected, deferred_names, tool_note = self._select_tools(tools, engine_tools)
        fixed = stable_text + (("\n\n" + built.dynamic_text) if built.dynamic_text else "")
        m = self._measure(fixed, selected, built)
        self._window.require_room(m.fixed_tokens, m.budget.tools, provider=ENGINE_PROVIDER)
        zone = m.zone
        restarts = self._restarts
        compaction = self._act_on_zone(m)
        if self._restarts != restarts or (compaction is not None and compaction.changed):
            # The view changed: the notes and the request's figures must describe the new one.
            m = self._measure(fixed, selected, built)
        notes = [n for n in (self._wind_down_note(m), tool_note) if n]
        if engine.policy.awareness_note and engine.policy.thresholds.wants_awareness_note(
            m.fraction
        ):
            notes.insert(0, awareness_note(m))
        view, repairs = self._repaired_view()
        request = render(
            engine,
            self,
            built=built,
            view=view,
            tools=selected,
            notes=notes,
            measurement=m,
            zone=zone,
            previous_tail=self._previous_tail,
            message_tokens=self._repairer.sizes() if repairs else self._sizes.messages,
        )
        if request.tokens > self.effective_window:
            raise ContextOverflowError(
                f"the request needs about {request.tokens:,} tokens but the window leaves "
                f"{self.effective_window:,} after the reply reserve; the system prompt and "
                f"tools alone take {m.fixed_tokens:,}",
                provider=ENGINE_PROVIDER,
                prompt_tokens=request.tokens,
                limit=self.effective_window,
            )
        if self._refused is not None:
            self._refused.check(request)
        request = _with(request, compaction, repairs, deferred_names, tuple(events))
        self._last = request
        self._last_unrepaired = list(self._view) if repairs else None
        self._last_fixed_text = request.system_text + (
            "\n\n" + request.note if request.note else ""
        )
        self._previous_tail = (
            request.message_breakpoints[-1] if request.message_breakpoints else None
        )
        self._writer.save_state(self._state())
        return request

    def _select_tools(
        self, tools: list[ToolSpec], engine_tools: bool
    ) -> tuple[list[ToolSpec], tuple[str, ...], str | None]:
        # The engine's own tools are never deferred, but they count against the budget.
        candidates = [*tools, READ_RESULT_TOOL, COMPACT_CONTEXT_TOOL] if engine_tools else tools
        try:
            selection = self._deferral.select(
                candidates,
                counter=self.engine.counter,
                effective_window=self.effective_window,
            )
        except Exception as exc:  # a deferral bug must never cost the agent its tools
            self._emit(self._degraded("tool_deferral", "all tools sent", exc))
            return candidates, (), None
        if selection.fallback_reason:
            self._emit(self._degraded("tool_deferral", "all tools sent", selection.fallback_reason))
        event = selection.event(self.id)
        if event is not None:
            self._emit(event)
        return list(selection.active), selection.deferred_names, selection.note

    def _degraded(self, component: str, fallback: str, error: object) -> ComponentDegraded:
        return ComponentDegraded(
            session_id=self.id, component=component, fallback=fallback, error=str(error)
        )

    def _repaired_view(self) -> tuple[list[Message], RepairReport]:
        if not self.engine.policy.repair:
            return list(self._view), RepairReport()
        return self._repairer.repair(self._view, self._sizes.generation)

    # -- manual compaction and overflow recovery --------------------------------------------------

    def compact(self, focus: str | None = None, *, trigger: str = "manual") -> CompactResult:
        """Compact now (``/compact``, the ``compact_context`` tool); what it did, in
        ``result.describe()`` (``result.changed`` is false when nothing could be removed).

        The target is the usual compact target, or half the current usage when that is already
        below it: whoever asks explicitly wants room now, for example before a large read.
        """
        m = self._measure_now()
        target = min(self.engine.policy.thresholds.compact_target, m.fraction / 2)
        return self._compact(m, trigger=trigger, target=target, focus=focus)

    def recover(self, error: ContextOverflowError) -> CompactResult:
        """Answer a provider's context overflow: learn its limit, compact hard, then retry.

        When the error states the provider's limit (``error.limit``) and it is smaller than the
        window, the session keeps it and plans every later request against it; when it states
        the size of the refused request (``error.prompt_tokens``), the estimate anchors on it.
        The retry is never the request that was refused: if the compaction can remove nothing
        more, the next :meth:`prepare` raises with the figures. A second overflow before a reply
        is recorded raises ``error`` again, and so does an overflow the engine raised itself.
        """
        if error.provider == ENGINE_PROVIDER:
            raise error  # nothing was sent: prepare() already compacted as hard as it could
        if self._refused is not None:
            raise ContextOverflowError(
                f"the provider still rejects the request after a hard compaction: {error}",
                provider=error.provider,
                status=error.status,
                prompt_tokens=error.prompt_tokens,
                limit=error.limit,
            ) from error
        refused = self._last
        self._refused = RefusedRequest.of(refused, error)
        learned = self._window.learn(error.limit)
        if refused is not None and error.prompt_tokens:  # its own count of what it refused
            self._estimator.rebase(
                self._last_view(),
                error.prompt_tokens,
                system=self._last_fixed_text,
                tools=refused.tools,
            )
        m = self._measure_now()
        self._window.require_room(m.fixed_tokens, m.budget.tools, provider=error.provider)
        # Against the (possibly learned) window, the usual target; but a request the provider
        # refused although it fits by our count means our count is off by an unknown amount:
        # the retry then aims at a share of what was refused.
        target = min(
            self.engine.policy.thresholds.compact_target, m.fraction * OVERFLOW_RETRY_SHARE
        )
        result = self._compact(m, trigger="overflow", target=target, hard=True)
        self._writer.save_state(self._state())
        self._emit(
            OverflowRecovered(
                session_id=self.id,
                before_tokens=error.prompt_tokens or m.tokens,
                after_tokens=self._measure_now().tokens,
                provider_message=str(error)[:500],
                limit=error.limit,
                window=self.context_window,
                learned_window=learned,
            )
        )
        return result

    def _last_view(self) -> list[Message]:
        """The view the latest request was made from (without its note for the model)."""
        if self._last_unrepaired is not None:
            return self._last_unrepaired
        view = list(self._last.messages) if self._last is not None else []
        if view and view[-1].meta.kind == "context_note":  # the note is always last
            view.pop()
        return view

    def _measure_now(self) -> Measurement:
        last = self._last
        tools = list(last.tools) if last else []
        built, stable_text, _ = build_prompt(None, None)
        fixed = self._last_fixed_text or stable_text
        return self._measure(fixed, tools, built)

    def _measure(self, fixed: str, tools: list[ToolSpec], built: BuiltPrompt) -> Measurement:
        return measure(
            self.engine, self._window, self._estimator, self._view, fixed, tools, built, self._sizes
        )

    # -- the engine's own tools ------------------------------------------------------------------

    def run_engine_tool(self, call: ToolCallPart) -> ToolResultPart | None:
        """Answer a call to ``read_result``, ``compact_context`` or ``tool_search``; ``None`` for
        any other tool (the agent runs those)."""
        from contextfold._engine_tools import run_engine_tool

        return run_engine_tool(self, call)

    def read_result(self, ref: str, **arguments: Any) -> ToolResultPart:
        """Read a stored output back (the ``read_result`` tool, for code and the CLI)."""
        call = ToolCallPart.from_args(
            "read_result", READ_RESULT_TOOL.name, {"ref": ref, **arguments}
        )
        result = self.run_engine_tool(call)
        assert result is not None
        return result

    # -- accounting ----------------------------------------------------------------------------

    def usage(self) -> SessionUsage:
        """Tokens, cache use and cost so far, and the calls left at the current rate."""
        # Measured now: replies and outputs added since the last prepare() count too.
        return self._usage.report(self._measure_now().tokens, self.effective_window)

    def close(self) -> None:
        """Stop the background worker (the store stays open: it belongs to the engine)."""
        if self._background is not None:
            self._background.close()
            if self._background_started:  # announced, never used: it ends as failed
                self._background_started = False
                tokens = self._last.tokens if self._last is not None else 0
                reason = "discarded: the session closed before it was needed"
                self._compaction_failed("background", tokens, tokens, reason)


def engine_deferral(engine: ContextEngine) -> ToolDeferral:
    """A per-session tool deferral with the engine's budget share."""
    return ToolDeferral(engine.policy.tool_budget_share)


def _with(
    request: PreparedRequest,
    compaction: CompactResult | None,
    repairs: RepairReport,
    deferred: tuple[str, ...],
    events: tuple[Event, ...],
) -> PreparedRequest:
    return replace(
        request, compaction=compaction, repairs=repairs, deferred_tools=deferred, events=events
    )
