"""contextfold for LangChain v1 agents: one middleware for ``create_agent``.

The one-line change::

    from contextfold import ContextEngine, model_for_window
    from contextfold.integrations.langchain import ContextFoldMiddleware

    engine = ContextEngine(model_for_window(200_000), store="agent.db")
    agent = create_agent(model, tools, middleware=[ContextFoldMiddleware(engine)])

The agent's graph state keeps the whole transcript, exactly as LangChain built it. On every
model call the middleware (``wrap_model_call``) appends what is new to a contextfold session and
hands the model the engine's view instead: big tool outputs cut or offloaded to the store, old
ones masked, the conversation compacted when the window fills, the history repaired so that
providers accept it. The middleware registers a ``read_result`` tool that reads an offloaded
output back.

One contextfold session per conversation: per LangGraph ``thread_id`` when the run has one
(a thread seen again after a restart of the process resumes its stored session), else one for
the middleware instance.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from itertools import chain
from typing import Any, NamedTuple

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.config import get_config

from contextfold.engine import ContextEngine, PreparedRequest, Session
from contextfold.hosts.digests import message_digest
from contextfold.hosts.sync import HistorySync
from contextfold.integrations._langchain_messages import (
    from_message,
    from_messages,
    to_message,
    to_messages,
)
from contextfold.integrations._memo import LatestObjects, ToolSpecs
from contextfold.messages import Message, ThinkingPart
from contextfold.sequences import common_prefix, same_objects
from contextfold.store import BrowsableSessionStore
from contextfold.tool_spec import ToolSpec
from contextfold.tools.deferral import READ_RESULT_TOOL

__all__ = [
    "ContextFoldMiddleware",
    "from_message",
    "from_messages",
    "to_messages",
    "tool_spec",
]

ModelCallResult = ModelResponse[Any] | AIMessage


class ContextFoldMiddleware(AgentMiddleware):
    """Hands the model contextfold's view of the agent's history on every call.

    ``engine`` holds the sessions; ``title`` names them in the store (a thread's session is
    titled ``"<title> thread <thread_id>"``, which is how a restarted process finds it again).
    ``session`` continues a stored session for runs without a ``thread_id``
    (``engine.resume(session_id)``).
    """

    def __init__(
        self,
        engine: ContextEngine,
        *,
        title: str = "langchain",
        session: Session | None = None,
    ) -> None:
        super().__init__()
        self.engine = engine
        self.title = title
        self._default = HistorySync(engine, session, title=title)
        self._threads: dict[str, HistorySync] = {}
        self._converted = _Converted((), {}, (), {})
        self._keys: LatestObjects[_Key] = LatestObjects()
        self._view = _MappedView([], [])
        self._last_originals: (
            tuple[list[AnyMessage], list[Message], dict[_Key, AnyMessage]] | None
        ) = None
        # A provider's dict tool may change in place: converted every call.
        self._specs: ToolSpecs[BaseTool | dict[str, Any]] = ToolSpecs(_tool_fields, tool_spec)
        self._lock = threading.Lock()
        self._replied: dict[HistorySync, list[BaseMessage]] = {}
        """Per conversation, the history as the last model call saw it, with the reply: not
        stored yet (see :meth:`_record`)."""
        self.tools: Sequence[BaseTool] = [self._read_result_tool()]

    # -- conversations ---------------------------------------------------------------------------

    def sync_for(self, thread_id: str | None = None) -> HistorySync:
        """The conversation of ``thread_id`` (the instance's own without one)."""
        if thread_id is None:
            return self._default
        if thread_id not in self._threads:
            title = f"{self.title} thread {thread_id}"
            stored = self._stored_session(title)
            self._threads[thread_id] = HistorySync(self.engine, stored, title=title)
        return self._threads[thread_id]

    def session(self, thread_id: str | None = None) -> Session:
        """The contextfold session holding ``thread_id``'s transcript now."""
        return self.sync_for(thread_id).session

    def _stored_session(self, title: str) -> Session | None:
        """The thread's latest session in the store, so that a new process continues it."""
        store = self.engine.store
        if not isinstance(store, BrowsableSessionStore):
            return None
        # Most recently updated first: after a rewrite (a child session) that is the child.
        for info in store.list_sessions():
            if info.title == title:
                return self.engine.resume(info.id)
        return None

    def _current_sync(self, config: RunnableConfig | None = None) -> HistorySync:
        return self.sync_for(_thread_id(config))

    # -- the model call --------------------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult:
        """Call the model with the engine's view; its reply is stored with what follows it
        (:meth:`_record`)."""
        sync = self._current_sync()
        response = handler(self._viewed(sync, request))
        self._replied[sync] = [*request.messages, *response.result]
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult:
        """:meth:`wrap_model_call` for async runs (the store is written off the event loop)."""
        sync = self._current_sync()
        viewed = await asyncio.to_thread(self._viewed, sync, request)
        response = await handler(viewed)
        self._replied[sync] = [*request.messages, *response.result]
        return response

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Store the run's last reply: no model call follows it."""
        self._record(self._current_sync())
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """:meth:`after_agent` for async runs (the store is written off the event loop)."""
        await asyncio.to_thread(self._record, self._current_sync())
        return None

    def _neutral(self, messages: Sequence[BaseMessage]) -> list[Message]:
        """``messages`` as contextfold messages (as :func:`to_messages` makes them), each message
        object converted once: the graph state hands the model the same objects call after
        call, and converting the whole history again (three times a call) was most of what the
        middleware added to a call. The objects of the latest history are remembered (held, so
        their ids cannot be reused); LangChain messages are not changed in place once in the
        state."""
        latest = self._converted
        held, known, converted, held_names = latest
        start = len(held)
        if start <= len(messages) and same_objects(held, messages[:start]):
            # The history of the call before starts this one: only what follows is read.
            fresh, names, out = dict(known), dict(held_names), list(converted)
        else:
            start, fresh, names, out = 0, {}, {}, []
        for message in messages[start:]:
            if isinstance(message, AIMessage):
                names.update({c["id"]: c["name"] for c in message.tool_calls if c["id"]})
            hit = known.get(id(message))
            neutral = hit[1] if hit is not None and hit[0] is message else None
            if neutral is None:
                neutral = to_message(message, names)
            fresh[id(message)] = (message, neutral)
            out.append(neutral)
        self._converted = _Converted(tuple(messages), fresh, tuple(out), names)
        return out

    def _viewed(self, sync: HistorySync, request: ModelRequest[Any]) -> ModelRequest[Any]:
        self._record(sync, request.messages)
        system = request.system_message
        neutral = self._neutral(request.messages)
        prepared = sync.prepare(
            neutral,
            system=system.text if system is not None else None,
            tools=self._specs.specs(request.tools),
            # read_result is one of request.tools already (this middleware registers it).
            engine_tools=False,
        )
        return request.override(
            messages=self._view_messages(prepared, request.messages, neutral),
            system_message=_view_system(prepared, system),
        )

    def _view_messages(
        self, prepared: PreparedRequest, history: Sequence[AnyMessage], neutral: Sequence[Message]
    ) -> list[AnyMessage]:
        """The view as LangChain messages: the original object for every message the engine left
        as it was (nothing of it lost), a converted one where the engine rewrote it (``neutral``:
        ``history`` converted). The engine keeps its view's messages between calls, so each is
        mapped once: the view mostly begins with the last call's messages (told in C), whose
        mappings are taken as they were; only the messages after them are looked up among the
        last view's, then mapped. The history's keys are taken once per message too."""
        with self._lock:
            view = list(prepared.messages)
            last = self._view
            same = common_prefix(last.messages, view)
            mapped = last.mapped[:same]
            if same < len(view):
                known = {id(m): (m, found) for m, found in zip(*last, strict=True)}
                originals: dict[_Key, AnyMessage] | None = None
                for message in view[same:]:
                    hit = known.get(id(message))
                    if hit is not None and hit[0] is message:
                        found = hit[1]
                    elif message.role == "system":
                        found = []  # the request's system_message carries the system prompt
                    else:
                        if originals is None:
                            originals = self._originals(history, neutral)
                        original = originals.get(_unchanged_key(message))
                        found = [original] if original is not None else from_message(message)
                        known[id(message)] = (message, found)
                    mapped.append(found)
            self._view = _MappedView(view, mapped)
            return list(chain.from_iterable(mapped))

    def _originals(
        self, history: Sequence[AnyMessage], neutral: Sequence[Message]
    ) -> dict[_Key, AnyMessage]:
        """The history's messages by what must match for a view message to be one of them (the
        last one holding a key wins). The history of the call before usually starts this one,
        with the same objects: its map is extended with what is new, not made again (a call
        would otherwise read the whole history each time the view holds a new message)."""
        originals: dict[_Key, AnyMessage] = {}
        start = 0
        last = self._last_originals
        if last is not None:
            held_history, held_neutral, held = last
            known = len(held_history)
            if (
                known <= len(history)
                and same_objects(held_history, history[:known])
                and same_objects(held_neutral, neutral[:known])
            ):
                originals, start = held, known
        for converted, original in zip(neutral[start:], history[start:], strict=True):
            key = self._keys.get((converted,))
            if key is None:
                key = _unchanged_key(converted)
                self._keys.keep((converted,), key)
            originals[key] = original
        self._keys.rotate()
        self._last_originals = (list(history), list(neutral), originals)
        return originals

    def _record(self, sync: HistorySync, history: Sequence[BaseMessage] = ()) -> None:
        """Store the last model call's reply, before a call on ``history`` (or at the end of
        the run). A reply is stored when the next call comes, with that call's new messages (its
        tool results): one commit per call instead of two, as a commit costs as much as the
        rest of the update. That is when ``history`` goes on from the reply (the same objects,
        told in C); a history that does not (another middleware rewrote it) gets the reply
        stored on its own first, in the session that held the call, as it always was. A run
        that ends with the model's answer stores it in :meth:`after_agent`; one that ends in
        an error or an interrupt stores it with its next call."""
        replied = self._replied.pop(sync, None)
        if replied is None:
            return
        if len(replied) <= len(history) and same_objects(replied, history[: len(replied)]):
            return  # the call's update stores it
        sync.update(self._neutral(replied))

    # -- read_result -----------------------------------------------------------------------------

    def _read_result_tool(self) -> BaseTool:
        def read_result(config: RunnableConfig, **arguments: Any) -> str:
            ref = str(arguments.pop("ref", ""))
            return self._current_sync(config).session.read_result(ref, **arguments).content

        return StructuredTool.from_function(
            func=read_result,
            name=READ_RESULT_TOOL.name,
            description=READ_RESULT_TOOL.description,
            args_schema=dict(READ_RESULT_TOOL.parameters),
        )


def tool_spec(tool: BaseTool | dict[str, Any]) -> ToolSpec:
    """A LangChain tool as the engine counts it (name, description, JSON schema)."""
    try:
        function = convert_to_openai_tool(tool)["function"]
    except (KeyError, TypeError, ValueError):
        # A provider's built-in tool (web search...): its own dict is what the model is sent.
        name = str(tool.get("name", tool.get("type", "tool"))) if isinstance(tool, dict) else "tool"
        return ToolSpec(name, "", dict(tool) if isinstance(tool, dict) else {})
    return ToolSpec(
        function["name"],
        function.get("description", ""),
        function.get("parameters", {"type": "object", "properties": {}}),
    )


def _tool_fields(tool: BaseTool | dict[str, Any]) -> tuple[object, ...] | None:
    """What :func:`tool_spec` reads of a tool object (None: a dict, converted every call)."""
    if not isinstance(tool, BaseTool):
        return None
    return (tool, tool.name, tool.description, tool.args_schema)


def _thread_id(config: RunnableConfig | None) -> str | None:
    if config is None:
        try:
            config = get_config()
        except RuntimeError:  # called outside a LangGraph run
            return None
    thread = (config.get("configurable") or {}).get("thread_id")
    return str(thread) if thread is not None else None


_Key = tuple[bytes, tuple[ThinkingPart, ...]]


class _MappedView(NamedTuple):
    """The last view :meth:`ContextFoldMiddleware._view_messages` mapped: its messages (held, so
    that no id is reused meanwhile) and what each became (none for a system message)."""

    messages: list[Message]
    mapped: list[list[AnyMessage]]


class _Converted(NamedTuple):
    """The latest history :meth:`ContextFoldMiddleware._neutral` converted: its objects, each
    object's conversion by ``id`` (held, so that no id is reused meanwhile), the conversions in
    order and the tool names its calls gave."""

    messages: tuple[BaseMessage, ...]
    by_id: dict[int, tuple[BaseMessage, Message]]
    converted: tuple[Message, ...]
    names: dict[str, str]


def _unchanged_key(message: Message) -> _Key:
    """What must match for a view message to be the framework's own: the digest leaves
    thinking out, and a view whose engine dropped old thinking must not get it back."""
    return message_digest(message), tuple(message.parts_of(ThinkingPart))


def _view_system(prepared: PreparedRequest, system: SystemMessage | None) -> SystemMessage | None:
    text = prepared.system_text
    if system is not None and system.text == text:
        return system  # kept as given: its blocks may carry cache_control and the like
    return SystemMessage(content=text) if text else None
