"""The scripted model's brain for a headless Claude Code session (``claude -p``).

:class:`ClaudeCodeScript` is a :data:`~tests.proxy.upstreams.Script`: a
:class:`~tests.proxy.upstreams.ScriptedUpstream` built on it makes Claude Code run a fixed plan of
:data:`PLAN_STEPS` turns of real tools in a work directory, then answer :data:`FINAL_TEXT`:

- ``Bash`` commands printing 100,000 lines (Claude Code keeps outputs over ~30 KB out of the
  conversation itself: it saves them under ``~/.claude`` and sends a 2 KB ``<persisted-output>``
  preview naming the file), small ``Bash`` commands, two calls in parallel once;
- ``Read`` of the large files it made, and of the saved 100,000-line outputs, 500-2,000 lines at
  a time (about 6-25 KB each: Claude Code refuses a read over 25,000 tokens, which it measures by
  asking ``/v1/messages/count_tokens``).

Which step comes next is read from the request itself, not from a count of calls the script
answered, so a retried request (a client retry, the proxy's retry after an overflow) gets the
same answer, and a history the proxy shrank still says where the session is: every tool call id
carries its step number (``toolu_cf007s…``), and the latest step among the ids in the request is
the one done. Requests without Claude Code's ``Bash`` tool are side requests (a title, a check):
they get :data:`SIDE_TEXT`, and are counted.

``read_result``. When the request's tools include the ``read_result`` engine tool (only the
proxy adds it) and a tool result in the request shows a ref of an offloaded output, the script
once calls ``read_result`` on it (call id ``toolu_cf007r…``, after step 7's result), and goes on
with the plan when that result comes back. The proxy answers that call itself: Claude Code never
sees it.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextfold.outputs.blobs import REF_PATTERN
from tests.proxy.upstreams import Protocol, Reply, ToolCall, UpstreamError

__all__ = [
    "FINAL_TEXT",
    "PLAN_STEPS",
    "SIDE_TEXT",
    "ClaudeCodeScript",
    "tool_results",
]

FINAL_TEXT = "FINAL: the scripted session ran every step of its plan."
"""The last answer; Claude Code prints it."""
SIDE_TEXT = "Scripted session"
"""The answer to a request that is not the main conversation (a title, a quota check)."""

NOTES_LINES = 4_000
"""Lines of ``notes.txt``, the large text file step 0 makes (about 250 KB)."""
NUMBERS_LINES = 100_000
"""Lines of ``numbers.txt`` and of the big ``seq`` outputs."""

_CALL_ID = re.compile(r"^toolu_cf(\d{3})([sr])")
_PERSISTED = re.compile(r"Full output saved to: (\S+)")

_Plan = Callable[["_Progress"], list[tuple[str, dict[str, Any]]]]


@dataclass
class _Progress:
    """What the plan's steps may use: the work directory and the saved outputs seen so far."""

    workdir: Path
    saved_outputs: list[str] = field(default_factory=list)

    def path(self, name: str) -> str:
        return str(self.workdir / name)

    def saved(self, which: int) -> str:
        """The file Claude Code saved its ``which``-th persisted output to (numbers.txt when it
        saved none: the read still happens, and the test's check of saved outputs fails)."""
        if which < len(self.saved_outputs):
            return self.saved_outputs[which]
        return self.path("numbers.txt")


def _bash(command: str, description: str) -> tuple[str, dict[str, Any]]:
    return "Bash", {"command": command, "description": description}


def _read(path: str, offset: int, limit: int) -> tuple[str, dict[str, Any]]:
    return "Read", {"file_path": path, "offset": offset, "limit": limit}


def _make_files(p: _Progress) -> list[tuple[str, dict[str, Any]]]:
    notes = (
        f'for i in $(seq 1 {NOTES_LINES}); do echo "$i: lorem ipsum dolor sit amet, '
        f'consectetur adipiscing elit $i"; done > notes.txt'
    )
    command = f"{notes} && seq 1 {NUMBERS_LINES} > numbers.txt && wc -l notes.txt numbers.txt"
    return [_bash(command, "Make two large files to work on")]


PLAN: tuple[_Plan, ...] = (
    _make_files,
    lambda p: [_bash(f"seq 1 {NUMBERS_LINES}", "Print 100k lines")],
    lambda p: [_read(p.saved(0), 1, 2000)],
    lambda p: [_bash("wc -l < numbers.txt", "Count lines")],
    lambda p: [_read(p.path("notes.txt"), 1, 1000)],
    lambda p: [_bash("ls -la", "List the work dir")],
    lambda p: [_bash("grep -c 7 numbers.txt", "Count numbers with a 7")],
    lambda p: [_read(p.path("numbers.txt"), 50_000, 2000)],
    lambda p: [_bash("seq 1 4000", "Print 4k lines")],
    lambda p: [_bash("echo $((6 * 7))", "Multiply")],
    lambda p: [
        _bash("head -n 3 notes.txt", "First notes"),
        _bash("tail -n 3 notes.txt", "Last notes"),
    ],
    lambda p: [_read(p.saved(0), 60_000, 2000)],
    lambda p: [_bash('python3 -c "print(sum(range(1, 100001)))"', "Sum in Python")],
    lambda p: [_bash("head -n 400 notes.txt", "Print 400 notes")],
    lambda p: [_bash("du -b numbers.txt notes.txt", "File sizes")],
    lambda p: [_read(p.path("notes.txt"), 2000, 800)],
    lambda p: [_bash("awk 'NR % 10000 == 0' numbers.txt", "Every 10000th number")],
    lambda p: [_bash(f"seq {NUMBERS_LINES} -1 1", "Print 100k lines backwards")],
    lambda p: [_bash("uname -s", "Kernel name")],
    lambda p: [_read(p.path("numbers.txt"), 90_000, 1500)],
    lambda p: [_bash("sort -rn numbers.txt | head -n 5", "Largest numbers")],
    lambda p: [_bash("pwd", "Where am I")],
    lambda p: [_bash("seq 1 3000 | awk '{s += $1} END {print s}'", "Sum with awk")],
    lambda p: [_read(p.path("notes.txt"), 3500, 500)],
    lambda p: [_bash(f"grep -n 'elit {NOTES_LINES}$' notes.txt", "Find the last note")],
    lambda p: [_bash("seq 1 3000 | sed 's/^/row /'", "Print 3k rows")],
    lambda p: [_bash("date +%Y", "The year")],
    lambda p: [_bash("wc -w notes.txt", "Count words")],
    lambda p: [_read(p.saved(1), 1, 1000)],
    lambda p: [_bash("ls", "List again")],
    lambda p: [_bash("echo step-30-ok", "Say where we are")],
    lambda p: [_bash("tail -n 1 numbers.txt", "Last number")],
)
PLAN_STEPS = len(PLAN)

READ_RESULT_AFTER = 2
"""The earliest step after which the script calls ``read_result`` (when it can)."""


def tool_results(body: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(tool_use_id, text)`` of every tool result in an Anthropic request body."""
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "tool_result":
                yield str(block.get("tool_use_id")), _text(block.get("content"))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(item.get("text", "")) for item in content if isinstance(item, Mapping))
    return ""


def _tool_names(body: Mapping[str, Any]) -> set[str]:
    tools = body.get("tools") or []
    return {str(t.get("name")) for t in tools if isinstance(t, Mapping)}


class ClaudeCodeScript:
    """Answers Claude Code's requests with :data:`PLAN` (see the module docstring).

    After a run: :attr:`main_requests` and :attr:`side_requests` count the requests answered,
    :attr:`read_result_call` is the ``read_result`` call made (None when none was), and
    :attr:`saved_outputs` the files Claude Code said it saved big outputs to.
    """

    def __init__(self, workdir: Path) -> None:
        self.progress = _Progress(workdir)
        self.main_requests = 0
        self.side_requests = 0
        self.read_result_call: ToolCall | None = None

    @property
    def saved_outputs(self) -> list[str]:
        return self.progress.saved_outputs

    def __call__(self, protocol: Protocol, body: dict[str, Any]) -> Reply | UpstreamError:
        if protocol != "anthropic" or "Bash" not in _tool_names(body):
            self.side_requests += 1
            return Reply(text=SIDE_TEXT)
        self.main_requests += 1
        results = list(tool_results(body))
        self._note_saved_outputs(results)
        done, kind = self._last_step(results)
        if done is None and results:
            return _refusal("no tool result in the request carries one of the script's call ids")
        step = -1 if done is None else done
        if self._should_read_result(body, step, kind):
            ref = self._visible_ref(results)
            if ref is not None:
                call = ToolCall(
                    f"toolu_cf{step:03d}r{uuid.uuid4().hex[:12]}",
                    "read_result",
                    {"ref": ref, "start_line": 1, "end_line": 40},
                )
                self.read_result_call = call
                return Reply(text=f"Reading back the stored output {ref}.", tool_calls=[call])
        upcoming = step + 1
        if upcoming >= PLAN_STEPS:
            return Reply(text=FINAL_TEXT)
        calls = [
            ToolCall(f"toolu_cf{upcoming:03d}s{uuid.uuid4().hex[:12]}", name, arguments)
            for name, arguments in PLAN[upcoming](self.progress)
        ]
        # Thinking now and then, so signed thinking blocks travel back in the history.
        thinking = f"Step {upcoming} of {PLAN_STEPS}: next tool." if upcoming % 5 == 0 else None
        return Reply(text=f"Step {upcoming}.", tool_calls=calls, thinking=thinking)

    def _note_saved_outputs(self, results: list[tuple[str, str]]) -> None:
        for _, text in results:
            for path in _PERSISTED.findall(text):
                if path not in self.progress.saved_outputs:
                    self.progress.saved_outputs.append(path)

    @staticmethod
    def _last_step(results: list[tuple[str, str]]) -> tuple[int | None, str]:
        """The latest step whose result is in the request, and whether it was a plan step
        (``"s"``) or the ``read_result`` call made after it (``"r"``, which comes later)."""
        latest: tuple[int, str] | None = None
        for call_id, _ in results:
            match = _CALL_ID.match(call_id)
            if match is not None:
                found = (int(match.group(1)), match.group(2))
                latest = found if latest is None else max(latest, found)
        return (None, "") if latest is None else latest

    def _should_read_result(self, body: Mapping[str, Any], step: int, kind: str) -> bool:
        return (
            self.read_result_call is None
            and kind == "s"
            and step >= READ_RESULT_AFTER
            and "read_result" in _tool_names(body)
        )

    @staticmethod
    def _visible_ref(results: list[tuple[str, str]]) -> str | None:
        for _, text in reversed(results):
            match = REF_PATTERN.search(text)
            if match is not None:
                return match.group(0)
        return None


def _refusal(why: str) -> UpstreamError:
    message = f"scripted upstream: {why}"
    return UpstreamError(
        400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    )
