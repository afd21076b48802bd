"""contextfold for pydantic-ai: one capability, and the model gets the engine's view.

The one-line change::

    from contextfold import ContextEngine, model_for_window
    from contextfold.integrations.pydantic_ai import ContextFold

    engine = ContextEngine(model_for_window(32_000), store="agent.db")
    agent = Agent(model, tools=tools, capabilities=[ContextFold(engine)])  # <- this

On every model request :class:`ContextFold` appends what is new in the run's history to a
contextfold session (the store keeps the whole transcript), and sends the model the engine's view
instead: big tool outputs cut or offloaded behind a ``read_result`` ref, old outputs masked,
compaction when the window fills, a valid history that fits. It adds the ``read_result`` tool to
the agent, so the model can read an offloaded output back.

Why a capability and not a ``history_processors`` entry: pydantic-ai writes what a history
processor returns back into the run's history, so the agent would keep the cut view and the
next call would start from previews. ``before_model_request`` changes only what this request
sends; the agent's history (``result.all_messages()``) stays whole.

``ContextFold(engine, engine.resume(session_id))`` continues a stored conversation, in this
process or another.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

# Absolute imports of the real framework: this module shares its name with the package.
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import RunContext, Tool, ToolDefinition
from pydantic_ai.toolsets import FunctionToolset

from contextfold.engine import ContextEngine, PreparedRequest, Session
from contextfold.hosts.sync import HistorySync
from contextfold.integrations._memo import ToolSpecs, schema_fields
from contextfold.integrations._pydantic_ai_mapping import (
    HistoryMapping,
    from_messages,
    to_messages,
)
from contextfold.messages import Message, ToolCallPart, new_message_id
from contextfold.tool_spec import ToolSpec
from contextfold.tools.deferral import READ_RESULT_TOOL

__all__ = ["ContextFold", "from_messages", "read_result_tool", "to_messages"]


def read_result_tool(sync: HistorySync) -> Tool[Any]:
    """contextfold's ``read_result`` as a pydantic-ai tool, answered from ``sync``'s session
    (which reads the store: offloaded outputs of earlier runs and processes too)."""

    def read_result(**arguments: Any) -> str:
        call = ToolCallPart.from_args(new_message_id("call"), READ_RESULT_TOOL.name, arguments)
        result = sync.session.run_engine_tool(call)
        if result is None:  # cannot happen for read_result; said rather than asserted away
            raise RuntimeError("the engine did not answer read_result")
        return result.content

    return Tool[Any].from_schema(
        read_result,
        name=READ_RESULT_TOOL.name,
        description=READ_RESULT_TOOL.description,
        json_schema=dict(READ_RESULT_TOOL.parameters),
    )


def _spec(tool: ToolDefinition) -> ToolSpec:
    return ToolSpec(tool.name, tool.description or "", dict(tool.parameters_json_schema))


def _spec_fields(tool: ToolDefinition) -> tuple[object, ...]:
    # pydantic-ai makes new definitions for every request, from the tool's own schema object.
    return schema_fields(tool.name, tool.description, tool.parameters_json_schema)


@dataclass
class ContextFold(AbstractCapability[Any]):
    """The capability: give it the engine (and a resumed session to continue one)."""

    engine: ContextEngine
    session: Session | None = None
    title: str | None = "pydantic-ai"
    sync: HistorySync = field(init=False)
    last_request: PreparedRequest | None = field(default=None, init=False)
    """The engine's last prepared request: what the model was given, with its token count."""
    last_history: tuple[Message, ...] = field(default=(), init=False)
    """The run's whole history at the last request, as contextfold messages (what pydantic-ai
    would have sent without the capability)."""

    _mapping: HistoryMapping = field(default_factory=HistoryMapping, init=False, repr=False)
    """The conversions of the run's history and of the engine's view, each message once."""
    _specs: ToolSpecs[ToolDefinition] = field(
        default_factory=lambda: ToolSpecs(_spec_fields, _spec), init=False, repr=False
    )
    """The tools' specs, each made once."""

    def __post_init__(self) -> None:
        self.sync = HistorySync(self.engine, self.session, title=self.title)

    def get_toolset(self) -> FunctionToolset[Any]:
        return FunctionToolset([read_result_tool(self.sync)])

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        history = self._mapping.to_messages(request_context.messages)
        params = request_context.model_request_parameters
        system_prompts = [m for m in history if m.role == "system"]
        # Instructions reach the model outside the messages; the engine counts them as system.
        instructions = [p.content for p in params.instruction_parts or ()]
        system = "\n\n".join([*(m.text for m in system_prompts), *instructions])
        tools = self._specs.specs([*params.function_tools, *params.output_tools])
        # engine_tools=False: read_result is already among the agent's tools (get_toolset).
        # On a worker thread: the engine reads and writes the store.
        prepared = await asyncio.to_thread(
            self.sync.prepare, history, system=system or None, tools=tools, engine_tools=False
        )
        self.last_request = prepared
        self.last_history = tuple(history)
        # The system prompt parts go back as they were; the view holds the conversation.
        view = [*system_prompts, *prepared.messages]
        request_context.messages = self._mapping.from_messages(view)
        return request_context

    async def after_run(
        self, ctx: RunContext[Any], *, result: AgentRunResult[Any]
    ) -> AgentRunResult[Any]:
        # The run's last answer reaches no further model request: store it now, so the store
        # holds the whole transcript when the run ends.
        history = self._mapping.to_messages(result.all_messages())
        await asyncio.to_thread(self.sync.update, history)
        return result

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds an engine: not expressible in an agent spec
