"""The ``contextfold`` command with ``--model scripted`` answering from a JSON script.

The pseudo-terminal tests run the real program in a child process, where a test cannot patch
the model factory; this entry point does it from a file. Usage::

    python -m tests.cli.scripted_cli SCRIPT.json chat --model scripted ...

The script is a JSON list: a string is a final answer; ``{"tool": name, "args": {...}}`` is an
assistant message calling that tool.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from contextfold import Message, ScriptedModel, ToolCallPart
from contextfold.cli import _agent_setup, main


def scripted_item(raw: str | dict[str, Any], n: int) -> str | Message:
    """A script entry as the :class:`ScriptedModel` answer it stands for."""
    if isinstance(raw, str):
        return raw
    call = ToolCallPart.from_args(f"call_{n}", raw["tool"], raw["args"])
    return Message.assistant(raw.get("text", ""), [call])


def run_scripted(script: Path, argv: list[str]) -> None:
    """Run the CLI on ``argv`` with the scripted model answering from ``script``."""
    items = [scripted_item(raw, n) for n, raw in enumerate(json.loads(script.read_text()))]
    model = ScriptedModel(items)
    _agent_setup.model_from_name = lambda *args, **kwargs: model  # type: ignore[assignment]
    sys.argv = ["contextfold", *argv]
    main()


if __name__ == "__main__":
    run_scripted(Path(sys.argv[1]), sys.argv[2:])
