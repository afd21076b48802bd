"""deepagents' context management (``create_deep_agent``) as a real peer.

What it is. ``deepagents.create_deep_agent`` builds a LangChain agent whose middleware manages
the context two ways: its ``FilesystemMiddleware`` moves a tool result over its limit (20,000
tokens at 4 characters a token) into the agent's virtual filesystem and leaves in the message a
pointer with a head-and-tail preview; its ``SummarizationMiddleware`` (deepagents' own, built on
LangChain's) clips large ``write_file``/``edit_file`` arguments of older calls, and past its
trigger writes the messages it cuts to a history file and puts a summary (naming that file)
in their place, tracked as an event in the state rather than by rewriting the messages.

How it is driven. We call ``create_deep_agent`` with a fake chat model (a
``GenericFakeChatModel`` whose ``bind_tools`` does nothing) whose profile gives
``max_input_tokens`` = the effective window, and its default ``StateBackend``; the defaults it
derives from that profile stand (summarize at 85 % of the window, keep the newest 10 %, clip
arguments from 85 %, everything it cuts goes to the summary). The one thing we change is the
summary text: deepagents lets a ``summarizer`` replace the model call, so we build its
summarization middleware with its own factory (``create_summarization_middleware``, the one
``create_deep_agent`` calls) with our extractive summarizer as ``summarizer`` (through
:class:`MeteredSummarizer`, which counts what it reads), and hand it to ``create_deep_agent``,
which puts it in the place of its default. Then we take the middleware instances out of the
compiled agent (they are held by its model and tool nodes) and call their hooks ourselves:

- every tool result goes through ``FilesystemMiddleware.wrap_tool_call`` (our handler returns
  the transcript's result, as the tool would), and what it returns is what the state keeps;
- before every request, ``FilesystemMiddleware.wrap_model_call`` wraps
  ``SummarizationMiddleware.wrap_model_call``, which wraps a handler standing in for the model
  provider: it measures the messages it was handed with the transcript's counter (ours, as
  every method's requests are measured) and, like a provider, refuses a request over the window
  with ``ContextOverflowError``. deepagents catches that and recovers its own way (summarizes,
  or moves the newest large results to its filesystem, and sends once more); the refused
  requests are reported as such (over the window, not billed). The messages of the request
  that goes through are the view. The state updates the hooks return (the summarization
  event, messages they rewrote) are applied to the state as the graph would apply them.

The refusal matters: deepagents decides when to summarize with LangChain's approximate count
(characters / 4, system prompt and tool schemas included), which can sit well under the real
count (0.75 of it on the longest Claude Code session of the corpus): it then learns of an
overflow from the provider, before its own trigger is reached.

The request carries the replayed agent's own system prompt and tools (as OpenAI tool schemas),
not the prompt and tools deepagents would add for itself, so the middleware weighs the same
request the other methods send. The ``StateBackend`` reads and writes the state's ``files``
through LangGraph's config keys; we supply them, backed by a dict.

What it costs the agent. A result moved to the filesystem, and what a summary replaced, are
readable again only through deepagents' own tools, not our ``read_result``: both count as out
of view. When nothing deepagents does brings a request into the window, it raises
``ContextOverflowError`` and the agent run would stop; the replay instead sends the last
request it tried, over the window, leaves the state as it was, and counts these in
``overflow_errors``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from typing import Any

# Imported here so that a missing deepagents leaves this module (and its row) out.
from deepagents import create_deep_agent
from deepagents.backends import StateBackend
from deepagents.middleware.filesystem import FilesystemMiddleware
from deepagents.middleware.summarization import (
    SUMMARIZATION_EVENT_KEY,
    SUMMARIZATION_SESSION_ID_KEY,
    SummarizationMiddleware,
    create_summarization_middleware,
)
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

from benchmarks.baselines import Compaction, _LangChainHistory
from benchmarks.peers import Peer
from benchmarks.peers.langchain_editing import edited_view, lc_text
from contextfold.compaction.summary import StructuredSummary
from contextfold.messages import Message, Meta, TextPart
from contextfold.replay.driver import MeteredSummarizer
from contextfold.replay.probes import SUMMARY_KINDS
from contextfold.tokens.counters import TokenCounter
from contextfold.tool_spec import ToolSpec
from contextfold.wire.chat_completions import tools_to_openai

__all__ = ["PEERS", "PEER_DEEPAGENTS", "DeepAgentsPeer"]

PEER_DEEPAGENTS = "deepagents"


class _ToolFreeFakeModel(GenericFakeChatModel):
    """A fake chat model that accepts tools and ignores them (never asked to answer here)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        del tools, kwargs
        return self


class DeepAgentsPeer:
    """The middleware ``create_deep_agent`` configures, driven hook by hook on the state."""

    name = PEER_DEEPAGENTS

    def __init__(
        self,
        system: str,
        tools: Sequence[ToolSpec],
        counter: TokenCounter,
        max_input_tokens: int,
    ) -> None:
        from langchain_core.messages import SystemMessage

        self.model = _ToolFreeFakeModel(
            messages=iter(()), profile={"max_input_tokens": max_input_tokens}
        )
        backend = StateBackend()
        summarization = create_summarization_middleware(
            self.model, backend, summarizer=self._summarize
        )
        # Our tools go in each request, not to the agent: names such as ``read_file`` would
        # clash with deepagents' own tools, and the middleware reads tools from the request.
        agent = create_deep_agent(
            model=self.model,
            system_prompt=system or None,
            backend=backend,
            middleware=[summarization],
        )
        built = _middleware_of(agent)
        self.filesystem = _one(built, FilesystemMiddleware)
        self.summarization = _one(built, SummarizationMiddleware)
        if self.summarization is not summarization:
            raise RuntimeError("create_deep_agent did not use the summarization middleware given")
        self.system_message = SystemMessage(system) if system else None
        self.tools: list[Any] = list(tools_to_openai(tools))
        self.system, self.tool_specs = system, list(tools)
        self.counter, self.window = counter, max_input_tokens
        self.history = _LangChainHistory()
        # The history file's name is made from a random id the middleware keeps in the state;
        # a fixed one makes replays repeatable (the summary message names that file).
        self.state: dict[str, Any] = {
            "messages": [],
            "files": {},
            SUMMARIZATION_SESSION_ID_KEY: "session_replay",
        }
        self.summarizer = MeteredSummarizer(counter)
        self.summaries: dict[str, tuple[Message, StructuredSummary | None]] = {}
        """Summary messages by their text: our message and the structured summary behind it."""
        self._pending: StructuredSummary | None = None
        self.offloaded = 0
        """Tool results moved to the filesystem since the last request."""
        self._offload_cpu = 0.0
        self.out_of_view = 0
        """Neutral messages the last view left out (cut by a summary)."""
        self.overflow_errors = 0
        """Requests deepagents refused to send (``ContextOverflowError``); sent anyway here."""

    # -- feeding the transcript ---------------------------------------------------------------

    def add(self, message: Message) -> None:
        converted = self.history.add(message)
        if message.role == "tool":
            started = time.thread_time()
            converted = [self._through_tool_hook(item) for item in converted]
            self._offload_cpu += time.thread_time() - started
        # New ids (m{index}.{k}): appending is what the messages reducer would do.
        self.state["messages"].extend(converted)

    def _through_tool_hook(self, result: Any) -> Any:
        """``result`` as ``FilesystemMiddleware.wrap_tool_call`` lets it into the state."""
        from langchain_core.messages import AIMessage
        from langgraph.prebuilt.tool_node import ToolCallRequest

        call = next(
            (
                c
                for m in reversed(self.state["messages"])
                if isinstance(m, AIMessage)
                for c in m.tool_calls
                if c["id"] == result.tool_call_id
            ),
            None,
        )
        if call is None:  # a result without its call: the tool node would never produce it
            return result
        request = ToolCallRequest(tool_call=call, tool=None, state=self.state, runtime=None)  # type: ignore[arg-type]
        with self._graph_context():
            returned = self.filesystem.wrap_tool_call(request, lambda _: result)
        if returned is result or returned.content == result.content:
            return result
        self.offloaded += 1
        return returned

    # -- one request --------------------------------------------------------------------------

    def request(self) -> tuple[list[Message], Compaction | None]:
        from langchain.agents.middleware.types import ModelRequest, ModelResponse
        from langchain_core.exceptions import ContextOverflowError
        from langchain_core.messages import AIMessage

        sent: list[Any] = []
        commands: list[Any] = []
        refused: list[int] = []
        provider_cpu = 0.0

        def model(request: ModelRequest[Any]) -> ModelResponse[Any]:
            # The provider: it refuses a request over the window, which deepagents catches
            # (it then summarizes, or offloads the newest results, and sends once more).
            nonlocal provider_cpu
            started = time.thread_time()
            sent[:] = request.messages
            view = edited_view(self.history, sent, self._summary_message)
            size = self.counter.count_request(view, system=self.system, tools=self.tool_specs)
            provider_cpu += time.thread_time() - started
            if size > self.window:
                refused.append(size)
                raise ContextOverflowError(f"prompt is too long: {size} tokens > {self.window}")
            return ModelResponse(result=[AIMessage("")])

        def summarizing(request: ModelRequest[Any]) -> ModelResponse[Any]:
            response = self.summarization.wrap_model_call(request, model)
            unwrapped: ModelResponse[Any] = _unwrapped(response, commands)
            return unwrapped

        request: ModelRequest[Any] = ModelRequest(
            model=self.model,
            messages=list(self.state["messages"]),
            system_message=self.system_message,
            tools=self.tools,
            state=self.state,  # type: ignore[arg-type]
        )
        started, read_before = time.thread_time(), self.summarizer.read
        try:
            with self._graph_context():
                _unwrapped(self.filesystem.wrap_model_call(request, summarizing), commands)
        except ContextOverflowError:
            # Nothing deepagents did brought the request into the window: the agent run would
            # stop here. The replay goes on: the last request it tried is sent, over the window
            # (it is counted there, not among the refused), and the state stays as it was.
            self.overflow_errors += 1
            self._pending = None
            commands.clear()
            if refused:
                refused.pop()
            else:
                event = self.state.get(SUMMARIZATION_EVENT_KEY)
                messages = self.state["messages"]
                sent[:] = self.summarization._apply_event_to_messages(messages, event)
        for command in commands:
            self._apply(command.update or {})
        cpu = time.thread_time() - started - provider_cpu + self._offload_cpu
        read = self.summarizer.read - read_before
        view = edited_view(self.history, sent, self._summary_message)
        out_of_view = len(self.history.messages) - len(
            {owner for item in sent if (owner := self.history.owner(item)) is not None}
        )
        cut, self.out_of_view = max(0, out_of_view - self.out_of_view), out_of_view
        offloaded, self.offloaded, self._offload_cpu = self.offloaded, 0, 0.0
        if cut or read:
            return view, Compaction("summary", cut, cpu, tuple(refused), read)
        if offloaded or refused:
            return view, Compaction("drop", offloaded, cpu, tuple(refused))
        return view, None

    def _apply(self, update: dict[str, Any]) -> None:
        """Apply one state update the middleware returned, as the agent graph would."""
        from langgraph.graph.message import add_messages

        for key, value in update.items():
            if key == "messages":
                # Messages the middleware rewrote replace theirs by id, as the reducer does.
                self.state["messages"] = add_messages(self.state["messages"], value)
            elif key == "files":
                self.state["files"] = {**self.state["files"], **value}
            else:
                self.state[key] = value

    # -- summaries ----------------------------------------------------------------------------

    def _summarize(self, lc_messages: list[Any]) -> str:
        """deepagents' ``summarizer`` hook: gets the messages it chose to summarize."""
        previous: StructuredSummary | None = None
        for item in lc_messages:
            found = self.summaries.get(lc_text(item))
            if found is not None and found[1] is not None:
                previous = found[1]
        messages = [
            m for m in edited_view(self.history, lc_messages) if m.meta.kind not in SUMMARY_KINDS
        ]
        summary = self.summarizer.summarize(messages, previous)
        self._pending = summary
        return summary.render()

    def _summary_message(self, lc_message: Any) -> Message | None:
        """Our message for deepagents' summary message (made once, then the same each time)."""
        text = lc_text(lc_message)
        found = self.summaries.get(text)
        if found is None:
            note = Message(
                "user",
                (TextPart(text),),
                id=f"deepagents-summary{len(self.summaries) + 1}",
                meta=Meta(kind="summary"),
            )
            found = self.summaries[text] = (note, self._pending)
            self._pending = None
        return found[0]

    # -- the state's files, for the StateBackend ----------------------------------------------

    @contextmanager
    def _graph_context(self) -> Iterator[None]:
        """Run as if inside a graph node: the ``StateBackend`` reads and writes ``files``."""
        from langchain_core.runnables.config import var_child_runnable_config
        from langgraph._internal._constants import CONFIG_KEY_READ, CONFIG_KEY_SEND

        def read(channel: str, fresh: bool = False) -> Any:
            del fresh
            return self.state.get(channel)

        def send(writes: Sequence[tuple[str, Any]]) -> None:
            for channel, value in writes:
                self._apply({channel: value})

        config: Any = {"configurable": {CONFIG_KEY_READ: read, CONFIG_KEY_SEND: send}}
        token = var_child_runnable_config.set(config)
        try:
            yield
        finally:
            var_child_runnable_config.reset(token)


def _unwrapped(response: Any, commands: list[Any]) -> Any:
    """The model response inside ``response``, collecting the state updates it carries."""
    from langchain.agents.middleware.types import ExtendedModelResponse

    while isinstance(response, ExtendedModelResponse):
        if response.command is not None:
            commands.append(response.command)
        response = response.model_response
    return response


def _middleware_of(agent: Any) -> list[Any]:
    """The middleware instances a compiled agent holds (found through its nodes' closures)."""
    from langchain.agents.middleware.types import AgentMiddleware

    found: dict[int, Any] = {}
    seen: set[int] = set()

    def walk(value: Any, depth: int) -> None:
        if id(value) in seen or depth > 8:
            return
        seen.add(id(value))
        if isinstance(value, AgentMiddleware):
            found.setdefault(id(value), value)
            return
        for attribute in ("__self__", "__func__", "func"):
            inner = getattr(value, attribute, None)
            if inner is not None:
                walk(inner, depth + 1)
        for cell in getattr(value, "__closure__", None) or ():
            try:
                walk(cell.cell_contents, depth + 1)
            except ValueError:  # an empty cell
                continue
        if isinstance(value, (list, tuple)):
            for item in value:
                walk(item, depth + 1)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item, depth + 1)

    for node in agent.nodes.values():
        walk(node.bound, 0)
    return list(found.values())


def _one(middleware: Sequence[Any], kind: type) -> Any:
    """The one instance of ``kind`` among ``middleware``."""
    matches = [m for m in middleware if type(m) is kind]
    if len(matches) != 1:
        raise RuntimeError(f"expected one {kind.__name__} in the deep agent, found {len(matches)}")
    return matches[0]


def _label() -> str:
    return (
        f"peer: deepagents {metadata.version('deepagents')} (create_deep_agent defaults: "
        "large tool results to its filesystem, summarization at 85 % of the window)"
    )


def _make(
    system: str, tools: Sequence[ToolSpec], counter: TokenCounter, window: int
) -> DeepAgentsPeer:
    return DeepAgentsPeer(system, tools, counter, window)


PEERS = (Peer(PEER_DEEPAGENTS, _label, _make),)
