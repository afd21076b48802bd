"""mini-swe-agent trajectories (``*.traj.json``).

A trajectory is one JSON object ``{"info", "messages", "trajectory_format", "instance_id"}``
whose messages are OpenAI chat messages with an ``extra`` field (the raw provider response with
its usage on assistant messages; return code and raw output on observations). Two shapes exist:

- **native tool calls** (mini-swe-agent 2.x with tool calling): assistant messages carry
  ``tool_calls`` and observations are ``tool`` messages;
- **text actions** (``trajectory_format: mini-swe-agent-1``): the assistant writes one fenced
  bash block and the observation comes back as a *user* message
  ``<returncode>N</returncode>\\n<output>...</output>``.

Text actions are imported, by default, as what they functionally are: the bash block becomes a
synthetic :class:`~contextfold.messages.ToolCallPart` named ``bash`` appended to the assistant
message (whose text stays verbatim) and the observation a ``tool`` message holding the original
text verbatim, ``is_error`` when the return code is not 0. Both carry the ``"text_actions"``
flag. ``actions="text"`` imports the trajectory exactly as recorded instead (plain text).

The final ``exit`` message of native trajectories is not a conversation message (the model never
reads it); its status and submission go to ``Transcript.metadata``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal, TypeAlias

from contextfold.messages import Message, ToolCallPart, ToolResultPart
from contextfold.tool_spec import ToolSpec
from contextfold.transcripts._files import SourceFile, parse_timestamp, read_source
from contextfold.transcripts.transcript import Transcript, flag_invalid_arguments
from contextfold.wire.chat_completions import from_openai_message, usage_from_openai
from contextfold.wire.values import MessageError, as_id, child, string, tool_specs

__all__ = [
    "DEFAULT_ACTION_REGEX",
    "FORMAT",
    "TEXT_ACTIONS",
    "ActionMode",
    "load_mini_swe_agent",
    "looks_like_mini_swe_agent",
    "mini_swe_agent_from_source",
]

FORMAT = "mini-swe-agent"

ActionMode: TypeAlias = Literal["tools", "text"]
"""How text actions are imported: as synthetic tool calls and results, or as plain text."""

DEFAULT_ACTION_REGEX = r"```bash\s*\n(.*?)\n```"
"""mini-swe-agent's own default for finding the action in an assistant message; a trajectory
that recorded another ``action_regex`` in its config is read with that one."""

TEXT_ACTIONS = "text_actions"
"""The ``Meta.flags`` marker on messages whose tool call or result was derived from text."""

_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")


def looks_like_mini_swe_agent(document: Any) -> bool:
    """True when a parsed JSON document is a mini-swe-agent trajectory."""
    if not isinstance(document, Mapping) or not isinstance(document.get("messages"), list):
        return False
    if (string(document, "trajectory_format") or "").startswith("mini-swe-agent"):
        return True
    info = document.get("info")
    return isinstance(info, Mapping) and "mini_version" in info


def load_mini_swe_agent(
    path: str | os.PathLike[str], *, actions: ActionMode = "tools"
) -> Transcript:
    """The transcript of one ``.traj.json`` file (see the module docstring for ``actions``)."""
    return mini_swe_agent_from_source(read_source(path), actions=actions)


def mini_swe_agent_from_source(source: SourceFile, *, actions: ActionMode = "tools") -> Transcript:
    """The transcript of an already parsed trajectory file."""
    document = source.document
    if source.shape != "json" or not looks_like_mini_swe_agent(document):
        raise source.error("not a mini-swe-agent trajectory (no 'messages' and 'info' fields)")
    if actions not in ("tools", "text"):
        raise ValueError(f"actions must be 'tools' or 'text', not {actions!r}")
    raw_messages: list[Any] = document["messages"]
    info = child(document, "info")
    config = child(info, "config")
    native = any(
        isinstance(m, Mapping) and (m.get("role") == "tool" or m.get("tool_calls"))
        for m in raw_messages
    )
    messages, exit_record = _read_messages(raw_messages, source)
    warnings: list[str] = []
    if not native and actions == "tools":
        regex, regex_warning = _action_regex(config)
        warnings += [regex_warning] if regex_warning else []
        messages = _actions_as_tools(messages, regex, info)
    messages, flagged = flag_invalid_arguments(messages)
    warnings += flagged

    metadata: dict[str, Any] = {"action_format": "tool_calls" if native else "text"}
    for key in ("instance_id", "trajectory_format"):
        if document.get(key) is not None:
            metadata[key] = document[key]
    for key in ("mini_version", "exit_status", "submission"):
        if info.get(key) is not None:
            metadata[key] = info[key]
    if exit_record:
        metadata.setdefault("exit_status", exit_record.get("exit_status"))
        metadata.setdefault("submission", exit_record.get("submission"))
    stats = info.get("model_stats")
    if isinstance(stats, Mapping):
        metadata.update({k: v for k, v in stats.items() if k in ("instance_cost", "api_calls")})

    model_config = child(config, "model")
    recorded_model = model_config.get("model_name")
    model = recorded_model if isinstance(recorded_model, str) else _response_model(messages)
    instance_id = as_id(document.get("instance_id"))
    return Transcript(
        messages=messages,
        format=FORMAT,
        path=source.path,
        model=model,
        session_id=instance_id or source.stem,
        title=instance_id,
        tools=_recorded_tools(config),
        metadata=metadata,
        warnings=warnings,
    )


def _read_messages(
    raw_messages: Sequence[Any], source: SourceFile
) -> tuple[list[Message], Mapping[str, Any] | None]:
    """Neutral messages with source-derived ids, usage and times; plus the ``exit`` record."""
    out: list[Message] = []
    call_names: dict[str, str] = {}
    exit_record: Mapping[str, Any] | None = None
    for index, raw in enumerate(raw_messages):
        if isinstance(raw, Mapping) and raw.get("role") == "exit":
            extra = raw.get("extra")
            exit_record = extra if isinstance(extra, Mapping) else {}
            continue
        try:
            message = from_openai_message(raw, call_names=call_names, path=source.path, index=index)
        except MessageError as exc:
            raise source.error_at(exc.reason, ("messages", index)) from None
        for call in message.tool_calls:
            call_names[call.call_id] = call.name
        extra = child(raw, "extra")
        out.append(_with_extra(replace(message, id=f"{source.stem}:{index}"), extra))
    return out, exit_record


def _with_extra(message: Message, extra: Mapping[str, Any]) -> Message:
    response = child(extra, "response")
    created = parse_timestamp(extra.get("timestamp")) or parse_timestamp(response.get("created"))
    provider = {k: response[k] for k in ("id", "model", "provider") if response.get(k) is not None}
    meta = replace(message.meta, created_at=created, provider=provider or message.meta.provider)
    if message.role == "assistant":
        meta = replace(meta, usage=usage_from_openai(response.get("usage")))
    if message.role == "tool" and _failed(extra):
        message = message.with_parts(replace(r, is_error=True) for r in message.tool_results)
    return replace(message, meta=meta)


def _failed(extra: Mapping[str, Any]) -> bool:
    returncode = extra.get("returncode")
    if isinstance(returncode, int) and not isinstance(returncode, bool) and returncode != 0:
        return True
    return bool(extra.get("exception_info"))


def _action_regex(config: Mapping[str, Any]) -> tuple[re.Pattern[str], str | None]:
    """The regex the run found actions with, and a warning when the recorded one does not
    compile (the default is used then)."""
    pattern = string(child(config, "agent"), "action_regex")
    if pattern is not None:
        try:
            return re.compile(pattern, re.DOTALL), None
        except (re.error, RecursionError, OverflowError) as exc:
            warning = f"the recorded action_regex does not compile ({exc}); the default is used"
            return re.compile(DEFAULT_ACTION_REGEX, re.DOTALL), warning
    return re.compile(DEFAULT_ACTION_REGEX, re.DOTALL), None


def _actions_as_tools(
    messages: list[Message], regex: re.Pattern[str], info: Mapping[str, Any]
) -> list[Message]:
    """Pair each assistant message holding exactly one action with the user message right after
    it (its observation) and turn the pair into a tool call and its result.

    mini-swe-agent runs an action only when the reply holds exactly one; any other count gets a
    format-error message instead, which stays an ordinary user message here.
    """
    out: list[Message] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        following = messages[index + 1] if index + 1 < len(messages) else None
        commands = regex.findall(message.text) if message.role == "assistant" else []
        if len(commands) != 1 or following is None or following.role != "user":
            out.append(message)
            index += 1
            continue
        call_id = f"action_{message.id.rsplit(':', 1)[-1]}"
        call = ToolCallPart.from_args(call_id, "bash", {"command": commands[0]})
        flags = (*message.meta.flags, TEXT_ACTIONS)
        out.append(
            message.with_parts((*message.parts, call)).with_meta(flags=flags),
        )
        observation = following.text
        failed = _observation_failed(observation, info)
        result = ToolResultPart(call_id, "bash", observation, failed)
        meta = replace(following.meta, kind="tool_result", flags=(TEXT_ACTIONS,))
        out.append(Message("tool", (result,), id=following.id, meta=meta))
        index += 2
    return out


def _observation_failed(text: str, info: Mapping[str, Any]) -> bool:
    match = _RETURNCODE.search(text)
    if match:
        return int(match.group(1)) != 0
    # Without a return code the text is the final submission (a success) or an execution
    # failure such as a timeout notice.
    submission = info.get("submission")
    return not (isinstance(submission, str) and text == submission)


def _response_model(messages: Sequence[Message]) -> str | None:
    for message in messages:
        model = message.meta.provider.get("model")
        if isinstance(model, str) and model:
            return model
    return None


def _recorded_tools(config: Mapping[str, Any]) -> list[ToolSpec]:
    """Tool definitions when the run recorded the ones it sent (the provider's prompt token
    counts include them); mini-swe-agent's own configs usually do not."""
    candidates: list[Any] = [config.get("tools")]
    for section in ("model", "agent"):
        block = config.get(section)
        if isinstance(block, Mapping):
            candidates.append(block.get("tools"))
            kwargs = block.get("model_kwargs")
            if isinstance(kwargs, Mapping):
                candidates.append(kwargs.get("tools"))
    for candidate in candidates:
        specs = tool_specs(candidate)
        if specs:
            return specs
    return []
