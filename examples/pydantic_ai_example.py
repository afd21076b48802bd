"""contextfold in a pydantic-ai agent, offline: a FunctionModel reads three 20,000-line build
logs through an 8k window, then reads one back with ``read_result``.

    python examples/pydantic_ai_example.py

For each model call it prints the tokens pydantic-ai would have sent (its whole history) and the
tokens the model was given (the engine's view).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai import messages as pa
from pydantic_ai.models.function import AgentInfo, FunctionModel

from contextfold import ContextEngine, ContextPolicy, model_for_window
from contextfold.integrations.pydantic_ai import ContextFold
from contextfold.tool_spec import ToolSpec

SYSTEM = "You read build logs."


def build_log(job: int) -> str:
    return "\n".join(f"job {job}: step {i} ok" for i in range(20_000)) + f"\njob {job}: FAILED"


def main() -> None:
    store = Path(tempfile.mkdtemp()) / "example.db"
    engine = ContextEngine(
        model_for_window(8_000, max_output_tokens=1_000),
        store=str(store),
        policy=ContextPolicy(background=False),
    )
    fold = ContextFold(engine)
    refs: list[str] = []
    calls = 0

    def model(messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
        nonlocal calls
        calls += 1
        tools = [
            ToolSpec(t.name, t.description or "", t.parameters_json_schema)
            for t in info.function_tools
        ]
        whole = [m for m in fold.last_history if m.role != "system"]
        would_send = engine.counter.count_request(whole, system=SYSTEM, tools=tools)
        sent = fold.last_request.tokens if fold.last_request else 0
        print(
            f"call {calls}: pydantic-ai would send {would_send:>7} tokens; the model got {sent:>5}"
        )
        for part in messages[-1].parts:
            if isinstance(part, pa.ToolReturnPart):
                refs.extend(re.findall(r"ref_[0-9a-f]{12}", str(part.content)))
                if part.tool_name == "read_result":
                    print("  read_result gave back:", str(part.content).splitlines()[-1])
        if calls <= 3:
            return pa.ModelResponse(parts=[pa.ToolCallPart("build_log", {"job": calls})])
        if calls == 4:
            args = {"ref": refs[0], "pattern": "FAILED"}
            return pa.ModelResponse(parts=[pa.ToolCallPart("read_result", args)])
        return pa.ModelResponse(parts=[pa.TextPart("Job 1 failed at its last step.")])

    agent = Agent(FunctionModel(model), system_prompt=SYSTEM, capabilities=[fold])

    @agent.tool_plain(name="build_log")
    def build_log_tool(job: int) -> str:
        """The build log of a CI job."""
        return build_log(job)

    result = agent.run_sync("Which job failed, and where?")
    print("answer:", result.output)
    session_id = fold.sync.session.id
    engine.close()

    resumed = ContextEngine(model_for_window(8_000), store=str(store))
    view = resumed.resume(session_id).view
    print(f"a new engine on {store.name} resumes session {session_id}: {len(view)} messages")
    resumed.close()


if __name__ == "__main__":
    main()
