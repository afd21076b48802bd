"""``contextfold run``: the coding agent on one task, without interaction."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Annotated, Any

import typer

from contextfold.agent import (
    DEFAULT_MAX_STEPS,
    AgentHooks,
    AgentResult,
    ApprovalCallback,
    run_agent,
)
from contextfold.cli import _render
from contextfold.cli._agent_setup import (
    Agent,
    ApprovalOption,
    BaseUrlOption,
    MaxStepsOption,
    ModelOption,
    PresetOption,
    ResumeOption,
    StoreOption,
    WindowOption,
    agent_settings,
    build_agent,
)
from contextfold.cli._approval import ApprovalPrompt
from contextfold.cli._meter import MeterTracker
from contextfold.cli._printer import TranscriptPrinter
from contextfold.cli._store import browsable
from contextfold.engine import Session
from contextfold.errors import UsageError
from contextfold.events import Event
from contextfold.messages import ToolCallPart, ToolResultPart
from contextfold.providers import ChatResponse
from contextfold.redaction import might_hold_secret, redact_json

__all__ = ["EXIT_INTERRUPTED", "EXIT_STEP_LIMIT", "run"]

EXIT_STEP_LIMIT = 2
"""Exit status when the step limit stopped the agent before it answered."""
EXIT_INTERRUPTED = 130
"""Exit status after Ctrl-C (the shell's convention for SIGINT)."""


def run(
    task: Annotated[
        str,
        typer.Argument(
            metavar="TASK", help="The task, in quotes; `-` reads it from stdin.", show_default=False
        ),
    ],
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            metavar="",
            help="Print one JSON object per line: the agent's text, tool calls and results, "
            "every engine event, and a final record. Secrets are redacted, as in the store.",
        ),
    ] = False,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    window: WindowOption = None,
    resume: ResumeOption = None,
    preset: PresetOption = None,
    approval: ApprovalOption = None,
    store: StoreOption = None,
    max_steps: MaxStepsOption = DEFAULT_MAX_STEPS,
) -> None:
    """Run the coding agent on one task in this folder and print its final answer.

    Progress (tool calls, and a ◆ line for every compaction, offload or restart) goes to stderr;
    only the answer goes to stdout. With --json, stdout carries one event per line instead:
    `{"type": "text" | "tool_call" | "tool_result" | "final" | <engine event>, ...}`.

    Writes and shell commands follow --approval: `ask` (the default) asks on the terminal and
    refuses when there is none; pass --approval auto to let the agent change files unattended.
    The exit status is 0 when the agent answered, 2 when --max-steps stopped it, 130 after Ctrl-C.

    Examples:

        contextfold run "Why does test_parser fail?" --model openai/gpt-4.1-mini

        contextfold run --json --approval auto "Fix the failing test" > events.jsonl
    """
    if task == "-":
        task = sys.stdin.read().strip()
    if not task.strip():
        raise UsageError("the task is empty: give it in quotes, or `-` to read it from stdin")
    settings = agent_settings(
        model=model,
        base_url=base_url,
        window=window,
        preset=preset,
        approval=approval,
        store=store,
    )
    err = _render.error_console()
    agent = build_agent(settings, root=Path.cwd(), approve=_approver(err.is_terminal))
    try:
        session = agent.open_session(resume, title=task[:80])
        with _forgotten_if_unanswered(agent, session, new=resume is None):
            result = _run(agent, session, task, max_steps, as_json=as_json)
    finally:
        agent.close()
    if result.stop == "max_steps":
        raise typer.Exit(EXIT_STEP_LIMIT)
    if result.stop == "interrupted":
        raise typer.Exit(EXIT_INTERRUPTED)


@contextmanager
def _forgotten_if_unanswered(agent: Agent, session: Session, *, new: bool) -> Iterator[None]:
    """Delete a new session that a failure left without a single reply (the model was
    unreachable, the key wrong): a failed run leaves no one-message session behind."""
    try:
        yield
    except Exception:
        if new and not any(m.role == "assistant" for m in session.view):
            with suppress(Exception):  # the failure is what the user needs to see
                browsable(agent.engine.store).delete_session(session.id)
        raise


def _run(
    agent: Agent, session: Session, task: str, max_steps: int, *, as_json: bool
) -> AgentResult:
    """The agent on ``task``, printed as JSON lines or as a transcript on stderr."""
    if as_json:
        return _run_json(agent, session, task, max_steps)
    err = _render.error_console()
    printer = TranscriptPrinter(
        err, MeterTracker(session), one_line=not err.is_terminal, show_final=False
    )
    result = run_agent(
        session,
        agent.model,
        agent.toolbox,
        task,
        system=agent.system,
        max_steps=max_steps,
        hooks=printer.hooks(),
    )
    printer.finish()
    _finish_plain(result, printer)
    return result


def _approver(can_ask: bool) -> ApprovalCallback:
    """The ``ask`` callback: all of the call shown on the terminal (stderr, paged) and a yes or
    no, else a refusal explained once."""
    warned = False
    err = _render.error_console()

    def answer(question: str) -> str:
        err.print(question, end="", markup=False)
        return sys.stdin.readline()

    prompt = ApprovalPrompt(err, ask=answer, read_key=typer.getchar, scope="this run")

    def approve(tool_name: str, summary: str) -> bool:
        nonlocal warned
        if can_ask and sys.stdin.isatty():
            return prompt(tool_name, summary)
        if not warned:
            warned = True
            _render.print_error(
                f"{tool_name} refused: approval mode is `ask` and there is no terminal to ask; "
                "pass --approval auto to allow writes and commands",
                warning=True,
            )
        return False

    return approve


def _finish_plain(result: AgentResult, printer: TranscriptPrinter) -> None:
    if result.text:
        # The answer as written when it goes to a file or a pipe; shown safely on a terminal.
        text = _render.printable(result.text) if sys.stdout.isatty() else result.text
        sys.stdout.write(text.rstrip() + "\n")
    reading = printer.meter.read()
    _render.error_console().print(
        f"[dim]{result.steps} model calls · {result.tool_calls} tool calls · context "
        f"{_render.escape(reading.text())} · session {result.session_id}[/dim]",
        highlight=False,
    )
    if result.stop == "max_steps":
        _render.print_error(
            f"stopped after {result.steps} model calls without an answer (--max-steps); "
            f"continue with: contextfold run --resume {result.session_id} TASK",
            warning=True,
        )


def _json_line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def _emitter(redact: bool) -> Callable[[dict[str, Any]], None]:
    """Prints a record as one JSON line, redacted like everything contextfold keeps: the output
    usually goes to a file (`> events.jsonl`), and tool results carry what `env` or `cat .env`
    printed. ``redact=False`` (the `redact` setting off) prints records as they are."""

    def emit(record: dict[str, Any]) -> None:
        line = _json_line(record)
        if redact and might_hold_secret(line):
            line = _json_line(redact_json(record))
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    return emit


def _run_json(agent: Agent, session: Session, task: str, max_steps: int) -> AgentResult:
    """Run with every step printed as a JSON line (see :func:`run`)."""
    emit = _emitter(agent.settings.get("redact") is not False)
    emit(
        {
            "type": "session",
            "session_id": session.id,
            "model": agent.model.name,
            "window": agent.engine.model.context_window,
            "effective_window": agent.engine.effective_window,
        }
    )

    def on_response(response: ChatResponse) -> None:
        if response.text:
            emit({"type": "text", "text": response.text})

    def on_tool_call(call: ToolCallPart) -> None:
        arguments: Any = call.args() if call.arguments_valid else call.arguments
        emit(
            {
                "type": "tool_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": arguments,
            }
        )

    def on_tool_result(call: ToolCallPart, result: ToolResultPart) -> None:
        emit(
            {
                "type": "tool_result",
                "call_id": call.call_id,
                "name": result.name,
                "is_error": result.is_error,
                "content": result.content,
                "ref": result.ref,
            }
        )

    def on_event(event: Event) -> None:
        emit(event.to_dict())

    hooks = AgentHooks(
        on_response=on_response,
        on_tool_call=on_tool_call,
        on_tool_result=on_tool_result,
        on_event=on_event,
    )
    result = run_agent(
        session,
        agent.model,
        agent.toolbox,
        task,
        system=agent.system,
        max_steps=max_steps,
        hooks=hooks,
    )
    usage = session.usage()
    emit(
        {
            "type": "final",
            "text": result.text,
            "stop": result.stop,
            "steps": result.steps,
            "tool_calls": result.tool_calls,
            "session_id": result.session_id,
            "usage": {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cache_read_tokens": usage.cache_read_tokens,
                "cache_write_tokens": usage.cache_write_tokens,
                "context_tokens": usage.context_tokens,
                "window": usage.window,
                "cost": usage.cost,
            },
        }
    )
    return result
