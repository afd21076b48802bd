"""Builders for compaction tests: conversations, a predictable counter, and contexts."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from contextfold.compaction import CompactionContext, RecentWindow
from contextfold.messages import Message, Meta, Part, ToolCallPart, ToolResultPart
from contextfold.outputs.intake import InMemoryBlobStore

SESSION = "s1"


class CharCounter:
    """Four characters a token, four tokens of overhead a message: easy to reason about."""

    name = "chars/4"

    def count_text(self, text: str) -> int:
        return (len(text) + 3) // 4

    def count_message(self, message: Message) -> int:
        return 4 + sum(self.count_text(_part_text(p)) for p in message.parts)

    def count_messages(self, messages: Iterable[Message]) -> int:
        return sum(self.count_message(m) for m in messages if m.meta.agent_visible)


def _part_text(part: Part) -> str:
    if isinstance(part, ToolCallPart):
        return part.name + part.arguments
    if isinstance(part, ToolResultPart):
        return part.content
    return getattr(part, "text", "")


def bash_call(call_id: str, command: str) -> ToolCallPart:
    return ToolCallPart(call_id, "bash", json.dumps({"command": command}))


def tool_round(
    n: int, command: str, output: str, *, text: str = "", is_error: bool = False
) -> list[Message]:
    """One assistant message calling bash, and its result (ids ``a<n>`` / ``t<n>``)."""
    return [
        Message.assistant(text, [bash_call(f"c{n}", command)], id=f"a{n}"),
        Message.tool(ToolResultPart(f"c{n}", "bash", output, is_error=is_error), id=f"t{n}"),
    ]


def agent_log(
    rounds: int, output_chars: int = 2_000, task: str = "Fix the bug in app.py"
) -> list[Message]:
    """A system prompt, one user task and ``rounds`` tool rounds (the shape of agent logs)."""
    view = [Message.system("You are a coding agent.", id="sys"), Message.user(task, id="task")]
    for n in range(rounds):
        body = (
            f"<returncode>0</returncode>\n<output>\n{n:04d} " + "x" * output_chars + "\n</output>"
        )
        view += tool_round(n, f"cat file{n}.py", body, text=f"Step {n}: reading file{n}.py.")
    return view


def chat(turns: int, rounds_per_turn: int = 2, output_chars: int = 800) -> list[Message]:
    """Several user turns, each with tool rounds and a final assistant answer."""
    view = [Message.user("Task: refactor the parser module.", id="u0")]
    n = 0
    for turn in range(turns):
        if turn:
            view.append(Message.user(f"Now do step {turn}.", id=f"u{turn}"))
        for _ in range(rounds_per_turn):
            view += tool_round(n, f"grep -n def parser{n}.py", "y" * output_chars)
            n += 1
        view.append(Message.assistant(f"Done with step {turn}.", id=f"done{turn}"))
    return view


def make_ctx(
    view: Sequence[Message],
    *,
    target: int,
    window: int,
    hard: bool = False,
    blobs: InMemoryBlobStore | None = None,
    recent: RecentWindow | None = None,
    **kwargs: Any,
) -> CompactionContext:
    return CompactionContext(
        view=list(view),
        counter=CharCounter(),
        target_tokens=target,
        window_tokens=window,
        blobs=blobs if blobs is not None else InMemoryBlobStore(),
        session_id=SESSION,
        hard=hard,
        recent=recent or RecentWindow(),
        **kwargs,
    )


def results_of(view: Sequence[Message]) -> dict[str, ToolResultPart]:
    return {r.call_id: r for m in view for r in m.tool_results}


def user_message(text: str, msg_id: str) -> Message:
    return Message("user", (Message.user(text).parts[0],), id=msg_id, meta=Meta())


@pytest.fixture
def blobs() -> InMemoryBlobStore:
    return InMemoryBlobStore()
