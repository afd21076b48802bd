"""Test-side writers: render a neutral conversation in each supported transcript format.

Each writer produces the smallest faithful rendition of the format (the shape real files have,
including the quirks the importers must handle: split Claude Code responses, forked parent
chains, progress noise, Codex token counts, stringified mini-swe-agent tool calls), so a round
trip "neutral -> file -> import" checks the importer against an independent description.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from contextfold.messages import (
    Message,
    Meta,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from contextfold.wire.anthropic import to_anthropic
from contextfold.wire.chat_completions import to_openai
from tests.strategies import ident, json_object, text
from tests.strategies import visible_text as nonempty_text

# -- neutral conversations -------------------------------------------------------------------------


@st.composite
def usages(draw: st.DrawFn, *, cache_write: bool = True) -> Usage:
    """A usage a provider could report: cached reads and writes are part of the prompt (only
    Anthropic reports cache writes)."""
    uncached, read = draw(st.integers(0, 50_000)), draw(st.integers(0, 50_000))
    write = draw(st.integers(0, 50_000)) if cache_write else 0
    return Usage(uncached + read + write, draw(st.integers(0, 4_000)), read, write)


@st.composite
def conversations(
    draw: st.DrawFn,
    *,
    system: bool = True,
    thinking: bool = False,
    usage: bool = True,
    cache_write: bool = True,
    errors: bool = True,
) -> list[Message]:
    """User turns, each with zero to two tool rounds and a closing assistant reply. Options
    leave out what a format cannot carry (usage, cache writes, failed results, thinking)."""
    out: list[Message] = []
    if system and draw(st.booleans()):
        out.append(Message.system(draw(nonempty_text)))

    def assistant(parts: list[Part]) -> Message:
        if thinking and draw(st.booleans()):
            parts.insert(0, ThinkingPart(draw(nonempty_text), draw(ident)))
        reported = draw(usages(cache_write=cache_write)) if usage else None
        return Message("assistant", tuple(parts), meta=Meta(usage=reported))

    for turn in range(draw(st.integers(1, 3))):
        out.append(Message.user(draw(nonempty_text)))
        for step in range(draw(st.integers(0, 2))):
            calls = [
                ToolCallPart.from_args(f"call_{turn}_{step}_{i}", draw(ident), draw(json_object))
                for i in range(draw(st.integers(1, 3)))
            ]
            lead: list[Part] = [TextPart(draw(nonempty_text))] if draw(st.booleans()) else []
            out.append(assistant([*lead, *calls]))
            out.extend(
                Message.tool(
                    ToolResultPart(c.call_id, c.name, draw(text), errors and draw(st.booleans()))
                )
                for c in calls
            )
        out.append(assistant([TextPart(draw(nonempty_text))]))
    return out


def semantic(
    messages: Sequence[Message], *, usage: bool = True, thinking: bool = True
) -> list[Any]:
    """What a reader of the conversation sees, independent of how a format groups messages:
    one entry per user/system/assistant message and one per tool result."""
    out: list[Any] = []
    for m in messages:
        if m.role == "tool":
            out.extend(("result", r.call_id, r.name, r.content, r.is_error) for r in m.tool_results)
            continue
        texts = tuple(p.text for p in m.parts if isinstance(p, TextPart))
        entry: tuple[Any, ...] = (m.role, texts)
        if m.role == "assistant":
            calls = tuple((c.call_id, c.name, c.args()) for c in m.tool_calls)
            thoughts = tuple(p.text for p in m.parts if isinstance(p, ThinkingPart))
            entry += (calls, thoughts if thinking else (), m.meta.usage if usage else None)
        out.append(entry)
    return out


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
    return path


def write_jsonl(path: Path, records: Sequence[Any]) -> Path:
    lines = (json.dumps(r, ensure_ascii=False) for r in records)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# -- mini-swe-agent (native tool calls) ------------------------------------------------------------


def mini_swe_agent_native(
    messages: Sequence[Message], *, stringify: bool = False
) -> dict[str, Any]:
    """A mini-swe-agent 2.x trajectory; ``stringify`` writes ``tool_calls`` as a JSON string."""
    rows: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            for r in m.tool_results:
                extra = {"returncode": 1 if r.is_error else 0, "raw_output": r.content}
                rows.append(
                    {
                        "role": "tool",
                        "tool_call_id": r.call_id,
                        "content": r.content,
                        "extra": extra,
                    }
                )
            continue
        [wire] = to_openai([m])
        if m.role == "assistant":
            wire["content"] = wire["content"] or ""
            calls = wire.pop("tool_calls", [])
            wire["tool_calls"] = json.dumps(calls) if stringify else calls
            usage = m.meta.usage or Usage()
            wire["extra"] = {
                "response": {
                    "id": f"resp-{len(rows)}",
                    "model": "deepseek-chat",
                    "usage": {
                        "prompt_tokens": usage.input_tokens,
                        "completion_tokens": usage.output_tokens,
                        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
                    },
                },
                "timestamp": 1_700_000_000.5 + len(rows),
            }
        rows.append(wire)
    rows.append({"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}})
    return {
        "info": {"mini_version": "2.2.7", "config": {"model": {"model_name": "deepseek/x"}}},
        "messages": rows,
        "trajectory_format": "mini-swe-agent-1.1",
        "instance_id": "repo__issue-1",
    }


# -- Claude Code -----------------------------------------------------------------------------------


def claude_code(messages: Sequence[Message], *, session_id: str = "sess-1") -> list[dict[str, Any]]:
    """Claude Code records: one assistant record per content block (usage repeated, output
    tokens final only in the last), tool results parented on the record of their call (which
    forks the parent chain as parallel calls do), progress and snapshot records as noise."""
    records: list[dict[str, Any]] = [{"type": "file-history-snapshot", "messageId": "m0"}]
    parent: str | None = None
    call_record: dict[str, str] = {}

    def add(record: dict[str, Any], parent_uuid: str | None) -> str:
        uuid = f"uuid-{len(records)}"
        record.update(
            uuid=uuid,
            parentUuid=parent_uuid,
            sessionId=session_id,
            isSidechain=False,
            timestamp=f"2026-01-01T00:00:{len(records) % 60:02d}Z",
        )
        records.append(record)
        return uuid

    for index, m in enumerate(messages):
        if m.role == "user":
            parent = add({"type": "user", "message": {"role": "user", "content": m.text}}, parent)
        elif m.role == "tool":
            for r in m.tool_results:
                block = {
                    "type": "tool_result",
                    "tool_use_id": r.call_id,
                    "content": r.content,
                    "is_error": r.is_error,
                }
                record = {
                    "type": "user",
                    "message": {"role": "user", "content": [block]},
                    "toolUseResult": {"stdout": r.content},
                }
                parent = add(record, call_record.get(r.call_id, parent))
        elif m.role == "assistant":
            blocks = to_anthropic([m]).messages[0]["content"]
            usage = m.meta.usage or Usage()
            for position, block in enumerate(blocks):
                last = position == len(blocks) - 1
                raw_usage = {
                    "input_tokens": usage.input_tokens
                    - usage.cache_read_tokens
                    - usage.cache_write_tokens,
                    "cache_creation_input_tokens": usage.cache_write_tokens,
                    "cache_read_input_tokens": usage.cache_read_tokens,
                    "output_tokens": usage.output_tokens if last else min(1, usage.output_tokens),
                }
                message = {
                    "id": f"msg_{index}",
                    "model": "claude-test",
                    "role": "assistant",
                    "content": [block],
                    "usage": raw_usage,
                }
                parent = add({"type": "assistant", "message": message, "requestId": "r"}, parent)
                if block["type"] == "tool_use":
                    call_record[block["id"]] = parent
                    add({"type": "progress", "data": {"type": "hook_progress"}}, parent)
    return records


# -- Codex -----------------------------------------------------------------------------------------


def codex(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Codex rollout lines; a failed result uses the older ``{"content", "success": false}``."""
    lines: list[dict[str, Any]] = []
    total = 0

    def add(kind: str, payload: dict[str, Any]) -> None:
        lines.append({"timestamp": "2026-01-01T00:00:00.000Z", "type": kind, "payload": payload})

    add("session_meta", {"id": "thread-1", "cwd": "/w", "cli_version": "0.50.0"})
    add("turn_context", {"model": "gpt-test", "cwd": "/w"})
    for m in messages:
        if m.role in ("user", "system"):
            role = "user" if m.role == "user" else "developer"
            content = [{"type": "input_text", "text": m.text}]
            add("response_item", {"type": "message", "role": role, "content": content})
        elif m.role == "tool":
            for r in m.tool_results:
                output: Any = {"content": r.content, "success": False} if r.is_error else r.content
                add(
                    "response_item",
                    {"type": "function_call_output", "call_id": r.call_id, "output": output},
                )
        else:
            for part in m.parts:
                if isinstance(part, ThinkingPart):
                    summary = [{"type": "summary_text", "text": part.text}]
                    add(
                        "response_item",
                        {"type": "reasoning", "summary": summary, "encrypted_content": "x"},
                    )
                elif isinstance(part, TextPart):
                    content = [{"type": "output_text", "text": part.text}]
                    add(
                        "response_item",
                        {"type": "message", "role": "assistant", "content": content},
                    )
                elif isinstance(part, ToolCallPart):
                    add(
                        "response_item",
                        {
                            "type": "function_call",
                            "name": part.name,
                            "arguments": part.arguments,
                            "call_id": part.call_id,
                        },
                    )
            usage = m.meta.usage or Usage()
            total += usage.total_tokens
            last = {
                "input_tokens": usage.input_tokens,
                "cached_input_tokens": usage.cache_read_tokens,
                "output_tokens": usage.output_tokens,
                "reasoning_output_tokens": 0,
                "total_tokens": usage.total_tokens,
            }
            info = {
                "total_token_usage": {"total_tokens": total},
                "last_token_usage": last,
                "model_context_window": 272_000,
            }
            add("event_msg", {"type": "token_count", "info": info})
            # Codex repeats the latest count; the importer must count it once.
            add("event_msg", {"type": "token_count", "info": info})
    return lines


# -- tau-bench and plain lists ---------------------------------------------------------------------


def tau_bench(runs: Sequence[Sequence[Message]]) -> list[dict[str, Any]]:
    return [
        {
            "task_id": i,
            "trial": 0,
            "reward": 1.0,
            "info": {"task": {"instruction": f"do {i}"}},
            "traj": to_openai(run),
        }
        for i, run in enumerate(runs)
    ]


def anthropic_request(messages: Sequence[Message]) -> dict[str, Any]:
    request = to_anthropic(messages)
    return {"model": "claude-test", "system": request.system, "messages": request.messages}
