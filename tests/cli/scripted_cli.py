"""The ``contextfold`` command with ``--model scripted`` answering from a JSON script.

The pseudo-terminal tests run the real program in a child process, where a test cannot patch
the model factory; this entry point does it from a file. Usage::

    python -m tests.cli.scripted_cli SCRIPT.json chat --model scripted ...

The script is a JSON list: a string is a final answer; ``{"tool": name, "args": {...}}`` is an
assistant message calling that tool; ``"delay": seconds`` beside either (``{"answer": text,
"delay": 2}`` for an answer) makes the model take that long, as a real one does.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contextfold import Message, ScriptedModel, ToolCallPart
from contextfold.cli import _agent_setup, main
from contextfold.providers import ChatRequest
from contextfold.providers.scripted import ScriptItem


def scripted_item(raw: str | dict[str, Any], n: int) -> ScriptItem:
    """A script entry as the :class:`ScriptedModel` answer it stands for."""
    if isinstance(raw, str):
        return raw
    if "delay" in raw:
        inner = raw["answer"] if "answer" in raw else {k: v for k, v in raw.items() if k != "delay"}
        return _slow(scripted_item(inner, n), float(raw["delay"]))
    call = ToolCallPart.from_args(f"call_{n}", raw["tool"], raw["args"])
    return Message.assistant(raw.get("text", ""), [call])


def _slow(answer: ScriptItem, seconds: float) -> Callable[[ChatRequest], str | Message]:
    """``answer``, given after ``seconds``."""
    assert isinstance(answer, str | Message)

    def respond(request: ChatRequest) -> str | Message:
        time.sleep(seconds)
        return answer

    return respond


def run_scripted(script: Path, argv: list[str]) -> None:
    """Run the CLI on ``argv`` with the scripted model answering from ``script``."""
    items = [scripted_item(raw, n) for n, raw in enumerate(json.loads(script.read_text()))]
    model = ScriptedModel(items)
    _agent_setup.model_from_name = lambda *args, **kwargs: model  # type: ignore[assignment]
    sys.argv = ["contextfold", *argv]
    main()


if __name__ == "__main__":
    run_scripted(Path(sys.argv[1]), sys.argv[2:])
