"""``contextfold chat``: the coding agent in a terminal, with a live context meter."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from contextfold.cli import _render
from contextfold.cli._agent_setup import (
    ApprovalOption,
    BaseUrlOption,
    ModelOption,
    PresetOption,
    ResumeOption,
    StoreOption,
    WindowOption,
    agent_settings,
    build_agent,
)
from contextfold.cli._repl import ChatRepl, EventRelay

__all__ = ["PauseOnLossOption", "chat"]

PauseOnLossOption = Annotated[
    bool,
    typer.Option(
        "--pause-on-loss",
        metavar="",
        help="After a compaction that took facts out of the context with nothing left to read "
        "them back (no summary quoting them, no pin, no ledger entry, no ref), list them and "
        "ask whether the agent may go on; answering no stops the task as Ctrl-C would.",
    ),
]


def chat(
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    window: WindowOption = None,
    resume: ResumeOption = None,
    preset: PresetOption = None,
    approval: ApprovalOption = None,
    store: StoreOption = None,
    pause_on_loss: PauseOnLossOption = False,
) -> None:
    """Chat with the coding agent in this folder; it reads, edits and runs commands here.

    The status line shows how full the context window is (coloured by zone: ok, mask, compact,
    block), the share of prompt tokens read from the provider's cache, and the cost so far. A
    line marked ◆ announces every compaction, mask batch, offloaded output, tool deferral and
    restart as it happens, then how many facts it took out of view and where each can still be
    read (summary, pins, the artifact ledger, behind a ref) or that it is lost; the transcript
    keeps everything, and the agent reads a ref back with read_result.

    In the default `ask` approval mode you confirm each file write and shell command, after
    seeing all of it (paged when long: q stops and declines).
    Type /help for the commands (/tokens, /context, /compact, /resume, ...).

    Examples:

        contextfold chat --model anthropic/claude-sonnet-4-5

        contextfold chat --model ollama/qwen3:8b --window 32768 --approval auto

        contextfold chat --resume ses_0123abcd

        contextfold chat --pause-on-loss
    """
    settings = agent_settings(
        model=model,
        base_url=base_url,
        window=window,
        preset=preset,
        approval=approval,
        store=store,
    )
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    relay = EventRelay()
    repl: ChatRepl | None = None

    def approve(tool_name: str, summary: str) -> bool:
        return repl.approve(tool_name, summary) if repl is not None else False

    agent = build_agent(settings, root=Path.cwd(), approve=approve, sinks=[relay])
    try:
        session = agent.open_session(resume, title="chat")
        repl = ChatRepl(
            agent,
            session,
            relay,
            out=_render.console(),
            interactive=interactive,
            pause_on_loss=pause_on_loss,
        )
        repl.run()
    finally:
        agent.close()
