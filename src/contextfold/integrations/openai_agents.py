"""contextfold in the OpenAI Agents SDK: a session backed by the store, and the engine's view on
every model call of a run.

The change to an agent that already runs with the SDK::

    session = ContextfoldSession("chat-1", engine)   # engine = ContextEngine(model, store=...)
    agent = Agent(name="coder", tools=[*tools, session.read_result_tool()])
    result = await Runner.run(agent, task, session=session, run_config=session.run_config())

- :class:`ContextfoldSession` is the SDK's ``Session``: it gives the SDK back its items exactly as
  they were added (kept in the store as an event log) and puts the same history, as contextfold
  messages, in a contextfold session the engine manages.
- :meth:`ContextfoldSession.model_input_filter` is a ``RunConfig.call_model_input_filter``: the
  SDK calls it before every model call of a run, with the whole history. It hands the model the
  engine's view instead: big outputs cut or offloaded, old ones masked, compacted when needed,
  always within the window and valid. The agent's instructions stay the system prompt.
- :meth:`ContextfoldSession.read_result_tool` is the ``read_result`` function tool the model uses
  to read an offloaded output back.

The filter also works without the session (``Runner.run(..., run_config=...)`` alone): build a
:class:`ContextfoldInputFilter` on a :class:`~contextfold.hosts.sync.HistorySync`.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterable
from typing import Any, cast

from agents import FunctionTool, RunConfig
from agents.items import TResponseInputItem
from agents.run_config import CallModelData, ModelInputData
from agents.tool import Tool
from agents.tool_context import ToolContext

from contextfold.engine import ContextEngine, PreparedRequest
from contextfold.engine import Session as ContextSession
from contextfold.errors import SessionNotFoundError
from contextfold.hosts.sync import HistorySync
from contextfold.integrations._memo import ToolSpecs, schema_fields
from contextfold.integrations._openai_agents_items import (
    Item,
    ItemsToMessages,
    MessagesToItems,
    items_from_messages,
    messages_from_items,
    plain_item,
)
from contextfold.integrations._openai_agents_log import ItemLog
from contextfold.tool_spec import ToolSpec
from contextfold.tools.deferral import READ_RESULT_TOOL

__all__ = [
    "ContextfoldInputFilter",
    "ContextfoldSession",
    "items_from_messages",
    "messages_from_items",
    "read_result_tool",
    "tool_specs",
]


def tool_specs(tools: Iterable[Tool]) -> list[ToolSpec]:
    """The agent's function tools as contextfold sees them (their definitions count toward the
    window). Hosted tools have no schema here; the SDK sends them by type."""
    return [_tool_spec(t) for t in tools if isinstance(t, FunctionTool)]


def _tool_spec(tool: FunctionTool) -> ToolSpec:
    return ToolSpec(tool.name, tool.description, dict(tool.params_json_schema))


def _tool_fields(tool: FunctionTool) -> tuple[object, ...]:
    return schema_fields(tool.name, tool.description, tool.params_json_schema)


def read_result_tool(sync: HistorySync) -> FunctionTool:
    """``read_result`` as an SDK function tool: it reads an offloaded output back from the
    session ``sync`` keeps (same name, description and parameters as the engine's own tool)."""

    async def invoke(context: ToolContext[Any], arguments: str) -> str:
        from contextfold.messages import ToolCallPart

        call = ToolCallPart(context.tool_call_id, READ_RESULT_TOOL.name, arguments or "{}")
        result = await asyncio.to_thread(sync.session.run_engine_tool, call)
        assert result is not None  # read_result is always an engine tool
        return result.content

    return FunctionTool(
        name=READ_RESULT_TOOL.name,
        description=READ_RESULT_TOOL.description,
        params_json_schema=dict(READ_RESULT_TOOL.parameters),
        on_invoke_tool=invoke,
        # The engine's schema has optional arguments, which strict mode does not allow.
        strict_json_schema=False,
    )


class ContextfoldInputFilter:
    """A ``RunConfig.call_model_input_filter`` that hands the model the engine's view.

    On every call it appends to the contextfold session what the history gained since the last
    call, lets the engine prepare the request, and maps the view back to SDK items: unchanged
    messages as the very items the SDK gave, changed ones rebuilt. ``last_request`` is the
    engine's last request (what the model got, counted).
    """

    def __init__(self, sync: HistorySync) -> None:
        self.sync = sync
        self.last_request: PreparedRequest | None = None
        # Each converts only what is new since the last call (see their docstrings).
        self.conversion = ItemsToMessages()
        self._view = MessagesToItems()
        self._specs = ToolSpecs(_tool_fields, _tool_spec)
        self._lock = threading.Lock()

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        return await asyncio.to_thread(self.filter, data.model_data, data.agent.tools)

    def filter(self, model_data: ModelInputData, tools: Iterable[Tool] = ()) -> ModelInputData:
        """The synchronous work of :meth:`__call__` (the engine may count and compact)."""
        with self._lock:  # the conversions remember the last call's history and view
            return self._filter(model_data, tools)

    def _filter(self, model_data: ModelInputData, tools: Iterable[Tool]) -> ModelInputData:
        messages = self.conversion.convert(model_data.input)
        # HistorySync keeps system messages out of the transcript: developer/system items in
        # the history join the instructions, which every call resends.
        system_texts = [model_data.instructions or ""]
        system_texts += [m.text for m in messages if m.role == "system"]
        system = "\n\n".join(t for t in system_texts if t)
        prepared = self.sync.prepare(
            messages,
            system=system or None,
            tools=self._specs.specs(t for t in tools if isinstance(t, FunctionTool)),
            engine_tools=False,
        )
        self.last_request = prepared
        view = [m for m in prepared.messages if m.role != "system"]
        items = self._view.items(view, messages)
        return ModelInputData(
            input=cast(list[TResponseInputItem], items),
            instructions=prepared.system_text or None,
        )


class ContextfoldSession:
    """The SDK's ``Session`` protocol, backed by a contextfold engine and its store.

    ``session_id`` names the conversation: a new one starts a contextfold session with that id,
    an existing one (in this store, from any process) resumes with its items and its view.
    """

    session_settings: Any = None

    def __init__(self, session_id: str, engine: ContextEngine, *, title: str | None = None) -> None:
        self.session_id = session_id
        self.engine = engine
        store = engine.store
        started: ContextSession | None = None
        try:
            store.get_session(session_id)
        except SessionNotFoundError:
            started = engine.new_session(title=title, session_id=session_id)
        self._log = ItemLog(store, session_id)
        view_id = self._log.view_session or session_id
        view = started if started is not None else engine.resume(view_id)
        self.sync = HistorySync(engine, view, title=title)
        self.filter = ContextfoldInputFilter(self.sync)
        self._lock = asyncio.Lock()
        # The log's items, each converted once, by the filter's converter: the log and the
        # SDK's input are the same history, and so become the same message objects.
        self._logged = self.filter.conversion

    # -- the SDK's Session protocol --------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The history, latest ``limit`` items (all when None), as they were added."""
        async with self._lock:
            items = self._log.items if limit is None else self._log.items[-limit:] if limit else []
            return cast(list[TResponseInputItem], json.loads(json.dumps(items)))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append items; the engine's session gets what they add, as contextfold messages."""
        plain = [plain_item(item) for item in items]
        async with self._lock:
            await asyncio.to_thread(self._add, plain)

    def _add(self, plain: list[Item]) -> None:
        # One trip to a worker thread for both: each costs a thread handoff. And one commit:
        # the log's event and the messages it adds are written together, or not at all.
        with self.sync.session.writes_together():
            self._log.add(plain)
            self._update()

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the last item (None when there is none)."""
        async with self._lock:
            item = await asyncio.to_thread(self._log.pop)
            return cast(TResponseInputItem, item) if item is not None else None

    async def clear_session(self) -> None:
        """Forget every item. The stored transcript stays; the next history starts a new
        contextfold session (the old one its parent)."""
        async with self._lock:
            await asyncio.to_thread(self._log.clear)

    # -- contextfold's pieces ----------------------------------------------------------------------

    def model_input_filter(self) -> ContextfoldInputFilter:
        """The ``call_model_input_filter`` that gives the model the engine's view."""
        return self.filter

    def run_config(self, **options: Any) -> RunConfig:
        """A ``RunConfig`` with :meth:`model_input_filter` set (other options passed through)."""
        return RunConfig(call_model_input_filter=self.filter, **options)

    def read_result_tool(self) -> FunctionTool:
        """The ``read_result`` tool for the agent's tools."""
        return read_result_tool(self.sync)

    @property
    def items(self) -> list[Item]:
        """The items held now (not copies: read, do not change)."""
        return self._log.items

    def _update(self) -> None:
        self.sync.update(self._logged.convert(self._log.items, owned=True))
        self._log.moved_view(self.sync.session.id)
