"""contextfold in an OpenAI Agents SDK run, offline: a scripted model runs a tool whose outputs
are far bigger than an 8k window, then reads one back with ``read_result``.

    python examples/openai_agents_example.py

Prints, for every model call, the tokens the SDK would have sent (its whole history) and the
tokens the model got (the engine's view), then resumes the conversation from the SQLite file.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from pathlib import Path

from agents import Agent, Runner, function_tool
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from agents.testing.model import ModelScriptItem

from contextfold import ContextEngine, ContextPolicy, model_for_window
from contextfold.integrations.openai_agents import (
    ContextfoldSession,
    messages_from_items,
    tool_specs,
)
from contextfold.store import SQLiteStore

WINDOW = 8_000
INSTRUCTIONS = "You explore repositories."
LINES = 20_000


@function_tool
def list_files(directory: str) -> str:
    """List every file under a directory, one path per line."""
    return "\n".join(f"{directory}/pkg_{i // 100}/module_{i}.py" for i in range(LINES))


def find_ref(call: ModelCall) -> str:
    """The last ref the engine left in the model's input."""
    refs = re.findall(r"ref_[0-9a-f]{12}", json.dumps(call.input))
    return str(refs[-1])


def script() -> list[ModelScriptItem]:
    steps: list[ModelScriptItem] = [
        [function_call("list_files", {"directory": f"src{i}"}, call_id=f"call_{i}")]
        for i in range(3)
    ]
    steps.append(
        ModelStep.respond(
            lambda call: [
                function_call(
                    "read_result",
                    {"ref": find_ref(call), "start_line": 19_990, "end_line": 20_000},
                    call_id="call_read",
                )
            ]
        )
    )
    steps.append([assistant_message("src2 holds 20,000 modules; the last is module_19999.py.")])
    return steps


async def main(store: Path) -> None:
    engine = ContextEngine(
        model_for_window(WINDOW, max_output_tokens=1_000),
        store=SQLiteStore(store, warn_wal_reset=False),
        policy=ContextPolicy(background=False),
    )
    session = ContextfoldSession("example", engine, title="agents example")
    model = ScriptedModel(script())
    agent = Agent(
        name="explorer",
        instructions=INSTRUCTIONS,
        model=model,
        tools=[list_files, session.read_result_tool()],
    )
    result = await Runner.run(
        agent,
        "How many modules are in src2?",
        session=session,
        run_config=session.run_config(tracing_disabled=True),
    )
    specs = tool_specs(agent.tools)
    items = await session.get_items()
    print(f"window {WINDOW} tokens; {len(model.calls)} model calls")
    for n, call in enumerate(model.calls, 1):
        got = engine.counter.count_request(
            messages_from_items(call.input), system=call.system_instructions or "", tools=specs
        )
        print(f"  call {n}: model got {got:>7,} tokens")
    whole = engine.counter.count_request(
        messages_from_items(items), system=INSTRUCTIONS, tools=specs
    )
    print(f"the whole history the SDK would have sent last: {whole:,} tokens")
    print(f"final answer: {result.final_output}")
    engine.close()

    again = ContextEngine(
        model_for_window(WINDOW, max_output_tokens=1_000),
        store=SQLiteStore(store, warn_wal_reset=False),
    )
    resumed = ContextfoldSession("example", again)
    print(
        f"resumed from {store.name}: {len(await resumed.get_items())} items, same as before:",
        await resumed.get_items() == items,
    )
    again.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(Path(tmp) / "contextfold.db"))
