"""contextfold in a LangChain v1 agent, offline: a scripted fake chat model runs a tool that prints
20,000 lines, three times, through an 8,000-token window, and reads one line back with read_result.

Run: python examples/langchain_example.py  (needs the [langchain] extra)

For every model call it prints the tokens LangChain would have sent (the agent's whole state)
and the tokens the model got (contextfold's view).
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, ModelResponse, wrap_model_call
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from contextfold import ContextEngine, ContextPolicy, model_for_window
from contextfold.integrations.langchain import ContextFoldMiddleware, to_messages, tool_spec

SYSTEM = "You are a careful assistant. Use read_result to read outputs kept out of the context."
REF = re.compile(r"ref_[0-9a-f]{12}")


@tool
def seq(count: int) -> str:
    """Print the numbers 0..count-1, one per line."""
    return "\n".join(f"line {i}" for i in range(count))


class ScriptedModel(BaseChatModel):
    """A fake model: calls seq three times, reads line 12,345 of the first output, answers."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls += 1
        if self.calls in (1, 3, 4):
            reply = AIMessage(
                content="",
                tool_calls=[{"name": "seq", "args": {"count": 20_000}, "id": f"c{self.calls}"}],
            )
        elif self.calls == 2:
            ref = REF.findall(next(m.text for m in messages if isinstance(m, ToolMessage)))[0]
            read = {"ref": ref, "start_line": 12_346, "end_line": 12_346}
            reply = AIMessage(
                content="", tool_calls=[{"name": "read_result", "args": read, "id": "c2"}]
            )
        else:
            reply = AIMessage(content="Done: three outputs of 20,000 lines, line 12,345 read back.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def main() -> None:
    store = Path(tempfile.mkdtemp()) / "langchain_example.db"
    engine = ContextEngine(
        model_for_window(8_000, max_output_tokens=1_000),
        store=store,
        policy=ContextPolicy(background=False),
    )
    counted: list[tuple[int, int]] = []

    def tokens(request: ModelRequest[Any]) -> int:
        system = request.system_message.text if request.system_message else ""
        tools = [tool_spec(t) for t in request.tools]
        return engine.counter.count_request(
            to_messages(request.messages), system=system, tools=tools
        )

    @wrap_model_call
    def framework_view(  # outermost: what LangChain alone would send
        request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        counted.append((tokens(request), 0))
        return handler(request)

    @wrap_model_call
    def model_view(  # innermost: what the model got
        request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        counted[-1] = (counted[-1][0], tokens(request))
        return handler(request)

    contextfold = ContextFoldMiddleware(engine)
    agent = create_agent(
        ScriptedModel(),
        [seq],
        system_prompt=SYSTEM,
        middleware=[framework_view, contextfold, model_view],
    )
    state = agent.invoke({"messages": [HumanMessage("Count to 20,000, three times.")]})

    print(f"window: {engine.effective_window:,} tokens (effective)")
    for number, (whole, viewed) in enumerate(counted, 1):
        print(f"call {number}: LangChain would send {whole:>9,} tokens; the model got {viewed:>6,}")
    read = next(m for m in state["messages"] if getattr(m, "name", None) == "read_result")
    print("read_result:", " ".join(read.text.split())[:120])
    session = contextfold.session()
    print(f"store: {store} session {session.id} holds {len(state['messages'])} messages")
    print("answer:", state["messages"][-1].text)
    engine.close()


if __name__ == "__main__":
    main()
