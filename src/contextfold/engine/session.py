"""A conversation under the engine's care: :class:`Session`, the face an agent uses.

Everything an agent adds goes through ``add_*``; :meth:`Session.prepare` runs one turn's pass
(:mod:`._turn`) and returns the request to send. The session holds nothing but its working set
(:class:`~._core.SessionCore`): a session can be built from a :class:`~._deps.SessionDeps`
alone, without an engine, which is how tests give it fakes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Protocol

from contextfold.chat import ChatResponse
from contextfold.compaction import Compactor, CompactResult, RestartPolicy, Summarizer
from contextfold.engine._compact import compact_now, compaction_failed, recover
from contextfold.engine._core import SessionCore
from contextfold.engine._deps import SessionDeps
from contextfold.engine._render import SystemPrompt
from contextfold.engine._restart import restart
from contextfold.engine._tools import run_engine_tool
from contextfold.engine._turn import prepare
from contextfold.engine.policy import ContextPolicy
from contextfold.engine.request import PreparedRequest
from contextfold.errors import ContextOverflowError, UsageError
from contextfold.events import EventBus, PinAdded, TokenUsage, Trigger
from contextfold.messages import Message, Part, ToolCallPart, ToolResultPart, Usage
from contextfold.model_registry import ModelInfo, Provider
from contextfold.outputs.intake import OutputLimits, prepare_tool_output
from contextfold.prompt.instructions import InstructionsLoader
from contextfold.providers.from_sdk import chat_response_from_sdk
from contextfold.retention.ledger import Ledger
from contextfold.retention.pins import Pin, PinSource, extract_pins
from contextfold.store import SessionInfo, SessionStore
from contextfold.tokens.counter import TokenCounter
from contextfold.tool_spec import ToolSpec
from contextfold.tools.deferral import READ_RESULT_TOOL
from contextfold.usage import SessionUsage

__all__ = ["Session", "SessionOwner", "SystemPrompt"]


class SessionOwner(Protocol):
    """What :attr:`Session.engine` offers: the :class:`~contextfold.engine.ContextEngine` that
    made the session (its model, store, policy and events, and more sessions).

    A protocol rather than the class: the engine module imports this one, and a session must not
    depend on the engine that builds it (a session built from its dependencies has none).
    """

    @property
    def model(self) -> ModelInfo: ...
    @property
    def store(self) -> SessionStore: ...
    @property
    def policy(self) -> ContextPolicy: ...
    @property
    def counter(self) -> TokenCounter: ...
    @property
    def compactor(self) -> Compactor: ...
    @property
    def summarizer(self) -> Summarizer: ...
    @property
    def instructions(self) -> InstructionsLoader | None: ...
    @property
    def provider(self) -> Provider: ...
    @property
    def events(self) -> EventBus: ...

    @property
    def effective_window(self) -> int: ...

    def new_session(
        self,
        *,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        session_id: str | None = None,
        parent_id: str | None = None,
    ) -> Session: ...

    def resume(self, session_id: str) -> Session: ...


class Session:
    """One conversation: its transcript in the store and the view the model sees.

    Made by :meth:`ContextEngine.new_session` or :meth:`ContextEngine.resume`; see
    :mod:`contextfold.engine` for the loop an agent runs with it. ``deps`` is what it works
    with, ``info`` its stored session, ``view`` (with ``last_seq`` and ``last_edit``) where the
    stored transcript stands, ``state`` a saved state to continue from.
    """

    def __init__(
        self,
        deps: SessionDeps,
        info: SessionInfo,
        *,
        view: Sequence[Message] = (),
        last_seq: int = 0,
        last_edit: int = 0,
        state: Mapping[str, Any] | None = None,
        owner: SessionOwner | None = None,
    ) -> None:
        self._core = SessionCore(
            deps, info, view=view, last_seq=last_seq, last_edit=last_edit, saved=state
        )
        self._owner = owner
        self._spawned: list[Session] = []
        """Sessions :meth:`restarted` made: closed with this one."""

    # -- identity and state ----------------------------------------------------------------------

    @property
    def engine(self) -> SessionOwner:
        """The engine that made this session (its store, policy, model, events)."""
        if self._owner is None:
            raise UsageError("this session was built from its dependencies, without an engine")
        return self._owner

    @property
    def deps(self) -> SessionDeps:
        """What the session works with: model, policy, counter, compactor, store, events."""
        return self._core.deps

    @property
    def id(self) -> str:
        """The store id of the session being written (it changes when the session restarts)."""
        return self._core.id

    @property
    def info(self) -> SessionInfo:
        """The stored session being written, as it was when it was opened or made."""
        return self._core.info

    @property
    def view(self) -> tuple[Message, ...]:
        """What the model sees next (before repair and notes)."""
        return tuple(self._core.view)

    @property
    def last_request(self) -> PreparedRequest | None:
        """The latest :meth:`prepare` result."""
        return self._core.state.last

    @property
    def restarts(self) -> int:
        """How many times this conversation continued in a child session."""
        return self._core.state.restarts

    @property
    def context_window(self) -> int:
        """The window requests are planned against: the model's, or the smaller limit a
        provider stated when it refused a request (kept across resumes)."""
        return self._core.state.window.context_window

    @property
    def learned_window(self) -> int | None:
        """The limit a provider stated when it refused a request as too long, if smaller than
        the model's window."""
        return self._core.state.window.learned

    @property
    def effective_window(self) -> int:
        """Tokens a request's prompt may take: :attr:`context_window` minus the reply reserve."""
        return self._core.effective_window

    @property
    def largest_reply(self) -> int:
        """Tokens of the largest reply in the view (0 before the first): what a host sizing
        its reply reserve from the session's own replies reads (kept as the view changes)."""
        return self._core.sizes.largest_reply

    def reserve_for_reply(self, tokens: int | None) -> None:
        """Keep ``tokens`` of the window free for the next reply, in place of the policy's
        reserve (``None``: the policy's again), at most half the window. For a host that knows
        what its replies need (the proxy: its client's ``max_tokens`` and the replies so far);
        not saved with the session."""
        window = self._core.state.window
        half = max(1, window.context_window // 2)
        window.reserve = None if tokens is None else max(1, min(tokens, half))

    @property
    def output_limits(self) -> OutputLimits:
        """What one tool output may keep inline (its token limit shrinks with the window)."""
        return self._core.output_limits

    @property
    def stored_head(self) -> tuple[int, int]:
        """Where this session's writer stands in the store: its last message seq and last edit
        number. A host keeping sessions between requests compares it with the store's own
        (:meth:`~contextfold.store.SQLiteStore.session_head`) to know it is still current."""
        writer = self._core.writer
        return writer.last_seq, writer.last_edit

    @property
    def persisted(self) -> bool:
        """False once the store failed and the session went on in memory."""
        return self._core.writer.store_ok

    @contextmanager
    def writes_together(self) -> Iterator[None]:
        """A block whose store writes commit as one transaction, when the store offers one (the
        SQL stores' ``atomic()``; other stores write as they go). For a host adding several
        messages at once (a framework's new history items: a reply and its tool results): one
        commit instead of one per message. An error raised in the block is raised after what
        the block wrote is committed, so a message whose ``add`` returned is kept, as without
        the block; a crash inside it keeps none of its messages (the host still holds them and
        sends them again). The writer's check against a stale writer runs on each write as
        before. Keep the block short: on SQLite other writers wait for it; never call a model
        inside. A failed commit sends the session on in memory, as any store failure does."""
        error: BaseException | None = None
        with self._core.writer.together():
            try:
                yield
            except BaseException as exc:  # raised again once the writes before it are kept
                error = exc
        if error is not None:
            raise error

    # -- adding to the conversation --------------------------------------------------------------

    def add_message(self, message: Message) -> Message:
        """Append any message to the transcript (and to the view if the agent may see it).

        A user's message is read for standing constraints ("always…", "never…", "don't…"),
        which are pinned (see :meth:`pin`), unless the policy's ``extract_pins`` is off.
        """
        added = self._core.add_message(message)
        extracting = self._core.deps.policy.extract_pins
        if (
            extracting
            and added.role == "user"
            and added.meta.kind == "message"
            and added.meta.agent_visible
        ):
            for text in extract_pins(added.text):
                self._add_pin(text, "extracted")
        return added

    def add_user(self, content: str | Sequence[Part] | Message) -> Message:
        """Append what the user said; it starts a new turn."""
        core = self._core
        core.state = replace(core.state, turn=core.state.turn + 1)
        core.state.deferral.end_turn()
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
        appended: its ``tool_calls`` are the calls to answer. The turn's state is saved here, once.
        The reply, its usage event and that state are written in one transaction (as
        :meth:`writes_together` does): a crash keeps all three or none, and one commit costs less
        than three.
        """
        if not isinstance(reply, Message | ChatResponse):
            reply = chat_response_from_sdk(reply)
        if isinstance(reply, ChatResponse):
            usage = usage or reply.usage
            reply = reply.message
        usage = usage or reply.meta.usage
        with self.writes_together():
            message = self.add_message(reply)
            core = self._core
            for call in message.tool_calls:
                core.state.deferral.mark_used(call.name)
            if usage is not None:
                self._record(usage, message)
            if core.state.refused is not None:  # a reply ends the refusal (the state is frozen)
                core.state = replace(core.state, refused=None)
            core.save_state()
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
        core = self._core
        added: list[Message] = []
        for result in results:
            prepared = prepare_tool_output(
                result,
                session_id=core.id,
                blobs=core.blobs,
                limits=core.output_limits,
                policy=core.deps.policy.output_policy,
                counter=core.deps.counter,
            )
            for event in prepared.events:
                core.emit(event)
            added.append(self.add_message(Message.tool(prepared.part)))
        return added

    def add(self, message: Message) -> None:
        """Append a message of any role the way its ``add_*`` method does: a user message starts
        a turn, tool results go through truncation and offloading, a reply anchors on its
        usage. For hosts that receive a whole history to replay (the proxy, the framework
        integrations) rather than events one by one."""
        if message.role == "user":
            self.add_user(message)
        elif message.role == "tool":
            self.add_tool_results(message.tool_results)
        elif message.role == "assistant":
            self.add_assistant(message)
        else:
            self.add_message(message)

    def _call_name(self, call_id: str) -> str:
        for message in reversed(self._core.view):
            for call in message.tool_calls:
                if call.call_id == call_id:
                    return call.name
        return ""

    def record(self, usage: Usage, *, reply: Message | None = None) -> None:
        """Count a model call's reported usage and anchor the next estimate on it.

        :meth:`add_assistant` calls this; call it yourself only when you append replies another
        way. ``reply`` is the assistant message the call produced.
        """
        self._record(usage, reply)
        self._core.save_state()

    def _record(self, usage: Usage, reply: Message | None) -> None:
        core = self._core
        state = core.state
        last = state.last
        if last is not None:
            # The anchor covers the view the estimates will be made from. A repaired request
            # differs from it (a synthesized result, say): its report includes those tokens,
            # and the next request will carry the same repairs.
            state.estimator.record(
                usage, state.last_view(), system=state.fixed_text, tools=last.tools, reply=reply
            )
        state.usage.add(usage)
        core.emit(
            TokenUsage(
                session_id=core.id,
                turn=state.usage.calls,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens,
                cache_write_tokens=usage.cache_write_tokens,
                context_tokens=usage.total_tokens,
                window=core.effective_window,
            )
        )

    # -- pins --------------------------------------------------------------------------------------

    @property
    def pins(self) -> tuple[Pin, ...]:
        """The standing constraints every request carries verbatim, oldest first."""
        return self._core.state.pins.pins

    @property
    def ledger(self) -> Ledger:
        """The artifact ledger every request carries (:mod:`contextfold.retention.ledger`): the
        files, commands, errors and identifiers the session touched, as of its latest compaction
        (empty before the first one)."""
        return self._core.state.ledger

    def pin(self, text: str) -> Pin | None:
        """Pin ``text``: from the next request on, every request's system prompt carries it
        verbatim, whatever compaction does to the conversation. Returns the new pin, or
        ``None`` when it was pinned already. Explicit pins are never dropped to make room for
        extracted ones; past :data:`~contextfold.retention.pins.MAX_PINS` explicit pins a new one
        raises :class:`~contextfold.UsageError`."""
        if not isinstance(text, str) or not text.strip():
            raise UsageError("session.pin() needs some text")
        return self._add_pin(text, "explicit")

    def unpin(self, pin: Pin | str | int) -> Pin | None:
        """Unpin a pin given as itself, its text, or its 1-based position in :attr:`pins`; the
        pin removed, or ``None`` when there was no such pin."""
        removed = self._core.state.pins.remove(pin)
        if removed is not None:
            self._core.save_state()
        return removed

    def _add_pin(self, text: str, source: PinSource) -> Pin | None:
        core = self._core
        pins = core.state.pins
        try:
            added = pins.add(text, source)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        if added is not None:
            core.emit(PinAdded(session_id=core.id, text=added.text, source=source, pins=len(pins)))
        core.save_state()  # a pin survives a crash before the next turn
        return added

    # -- the per-turn pass -------------------------------------------------------------------------

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
        return prepare(self._core, system, list(tools), engine_tools)

    # -- manual compaction, overflow recovery, restart ---------------------------------------------

    def compact(self, focus: str | None = None, *, trigger: Trigger = "manual") -> CompactResult:
        """Compact now (``/compact``, the ``compact_context`` tool); what it did, in
        ``result.describe()`` (``result.changed`` is false when nothing could be removed).

        The target is the usual compact target, or half the current usage when that is already
        below it: whoever asks explicitly wants room now, for example before a large read.
        """
        return compact_now(self._core, focus, trigger)

    def recover(self, error: ContextOverflowError) -> CompactResult:
        """Answer a provider's context overflow: learn its limit, compact hard, then retry.

        When the error states the provider's limit (``error.limit``) and it is smaller than the
        window, the session keeps it and plans every later request against it; when it states
        the size of the refused request (``error.prompt_tokens``), the estimate anchors on it.
        The retry is never the request that was refused: if the compaction can remove nothing
        more, the next :meth:`prepare` raises with the figures. A second overflow before a reply
        is recorded raises ``error`` again, and so does an overflow the engine raised itself.
        """
        return recover(self._core, error)

    def restarted(
        self, *, policy: RestartPolicy | None = None, focus: str | None = None
    ) -> Session:
        """A new session continuing this conversation in a child stored session: the task, a
        structured summary (``focus`` says what matters most) and the last complete turns, as
        many as ``policy`` carries (default: the compactor's restart policy, else
        :class:`~contextfold.compaction.RestartPolicy`'s defaults). This session stays on the
        parent; the store's error is raised when it cannot make the child."""
        core = self._core
        child = Session(
            core.deps,
            core.info,
            view=core.view,
            last_seq=core.writer.last_seq,
            last_edit=core.writer.last_edit,
            state=core.state.saved(),
            owner=self._owner,
        )
        restart_policy = policy or core.deps.compactor.restart or RestartPolicy()
        restarted = restart(
            child._core,
            child._core.state,
            restart_policy,
            reason="manual",
            focus=focus,
            reuse_summary=False,
            strict=True,
        )
        assert restarted is not None  # strict: the store's error is raised instead
        child._core.state = restarted.state
        child._core.save_state()
        self._spawned.append(child)
        return child

    # -- the engine's own tools ------------------------------------------------------------------

    def run_engine_tool(self, call: ToolCallPart) -> ToolResultPart | None:
        """Answer a call to ``read_result``, ``compact_context`` or ``tool_search``; ``None`` for
        any other tool (the agent runs those)."""
        return run_engine_tool(self._core, call)

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
        core = self._core
        # Measured now: replies and outputs added since the last prepare() count too.
        return core.state.usage.report(core.measure_now().tokens, core.effective_window)

    def close(self) -> None:
        """Stop the background worker (the store stays open: it belongs to the engine)."""
        for child in self._spawned:
            child.close()
        self._spawned.clear()
        core = self._core
        if core.background is not None:
            core.background.close()
            state = core.state
            if state.background_started:  # announced, never used: it ends as failed
                core.state = replace(state, background_started=False)
                tokens = state.last.tokens if state.last is not None else 0
                reason = "discarded: the session closed before it was needed"
                compaction_failed(core, "background", tokens, tokens, reason)
