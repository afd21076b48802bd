"""A scripted model that decides each step from what it can see, for tool-calling clients.

:class:`PlanScript` answers every main-conversation request of a client with the next step of a
plan (:class:`Step`: tool calls, or a text that ends the turn). Which step comes next is read
from the request alone, never from a count of requests answered, so a client's retry gets the
same answer, and a view the proxy shrank is judged on what it shows:

- every call id the script makes carries its step number (``toolu_cf007s0…``, ``call_cf007s0…``);
  the latest step whose calls all have their results in the request is the step done;
- a turn-ending text carries ``[cf-step N]``; the step after it needs the user's next message
  (:attr:`Step.user`), which must be in view after the last assistant message;
- the results of the step done must show what that step must produce (:attr:`Step.expect`:
  strings the result texts contain, e.g. a marker a command echoes or a line of a file read).

It refuses to go on (an HTTP 400 in the protocol's shape, which fails the client and so the
test) when a call of the script's is in view without its result (the newest tool result is
missing), when results are in view but none carries the script's ids, when the step done does
not show what it must, when the user's message a step waits for is not in view, and when the
same step is asked for a third time (its call and result keep vanishing). A view that hides the
step the model needs would mislead a real model; here it fails the test.

Requests without the client's marker tool are side requests (titles, quota checks, summaries):
they get :data:`SIDE_TEXT` and are counted.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.clients.responses_upstream import AnyProtocol
from tests.clients.wire import Msg, read, strip_reminders
from tests.proxy.upstreams import Reply, ToolCall, UpstreamError

__all__ = ["SIDE_TEXT", "PlanScript", "Step", "refusal"]

SIDE_TEXT = "Scripted session"
"""The answer to a request that is not the main conversation."""

_CALL_ID = re.compile(r"cf(\d{3})s(\d)")
_SAY = re.compile(r"\[cf-step (\d+)\]")


@dataclass(frozen=True)
class Step:
    """One step of a plan. ``calls``: ``(tool name, arguments)`` to call, in parallel; none
    makes the step a text that ends the client's turn. ``say``: the text sent with them.
    ``expect``: strings the step's results must contain (all of them, in any result).
    ``user``: a text the user's latest message must contain when this step is asked for (the
    task, or the prompt that resumes the conversation). ``thinking``: reasoning sent first."""

    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    say: str = ""
    expect: tuple[str, ...] = ()
    user: str | None = None
    thinking: str | None = None


def refusal(protocol: AnyProtocol, why: str) -> UpstreamError:
    """An HTTP 400 in ``protocol``'s error shape, saying why the script will not go on."""
    message = f"scripted upstream refuses to go on: {why}"
    if protocol == "anthropic":
        body = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    else:
        body = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    return UpstreamError(400, body)


@dataclass
class PlanScript:
    """Answers a client's requests with ``steps`` (see the module docstring).

    ``marker_tool``: a tool only the main conversation's requests offer. ``id_prefix``: how the
    client's protocol spells call ids (``toolu_`` for Anthropic). ``final``: the text after the
    last step. After a run, :attr:`completed` is the number of steps done (their results seen),
    :attr:`refusals` what the script refused and why, :attr:`reissued` the steps asked for again.
    """

    steps: Sequence[Step]
    marker_tool: str
    id_prefix: str = "call_"
    final: str = "FINAL: the scripted plan is done."
    side_requests: int = 0
    main_requests: int = 0
    completed: int = 0
    refusals: list[str] = field(default_factory=list)
    reissued: Counter[int] = field(default_factory=Counter)
    _issued: Counter[int] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def asked(self, step: int) -> bool:
        """Whether ``step`` was asked of the client."""
        return self._issued[step] > 0

    def __call__(self, protocol: AnyProtocol, body: dict[str, Any]) -> Reply | UpstreamError:
        with self._lock:
            if self.marker_tool not in _tool_names(body):
                self.side_requests += 1
                return Reply(text=SIDE_TEXT)
            self.main_requests += 1
            _, messages = read(protocol, body)
            decision = self._decide(messages)
            if isinstance(decision, str):
                self.refusals.append(decision)
                return refusal(protocol, decision)
            return decision

    def _decide(self, messages: Sequence[Msg]) -> Reply | str:
        results = {p.call_id: p.text for m in messages for p in m.results()}
        calls: dict[int, list[str]] = {}
        for message in messages:
            for call in message.calls():
                match = _CALL_ID.search(call.call_id)
                if match is not None:
                    calls.setdefault(int(match.group(1)), []).append(call.call_id)
        for step, ids in sorted(calls.items()):
            missing = [i for i in ids if i not in results]
            if missing:
                return f"the result of step {step} ({', '.join(missing)}) is not in the request"
        if results and not calls:
            return "tool results are in the request, but none answers one of the script's calls"
        said = [
            (int(m.group(1)), index)
            for index, message in enumerate(messages)
            if message.role == "assistant"
            for text in message.texts()
            for m in _SAY.finditer(text)
        ]
        done = max([*calls, *(s for s, _ in said)], default=-1)
        if done >= 0 and done in calls:
            texts = "\n".join(results[i] for i in calls[done])
            absent = [e for e in self.steps[done].expect if e not in texts]
            if absent:
                return f"the result of step {done} does not show {absent!r}: {texts[:300]!r}"
        self.completed = max(self.completed, done + 1)
        upcoming = done + 1
        if upcoming >= len(self.steps):
            return Reply(text=self.final)
        step = self.steps[upcoming]
        if step.user is not None:
            turn = _turn_user_words(messages)
            if step.user not in turn:
                return (
                    f"step {upcoming} waits for the user's message {step.user!r}; this turn's: "
                    + (repr(turn[:300]))
                )
        self._issued[upcoming] += 1
        if self._issued[upcoming] > 1:
            self.reissued[upcoming] += 1
        if self._issued[upcoming] > 2:
            return f"step {upcoming} asked for a third time: the request does not show it done"
        text = f"[cf-step {upcoming}] {step.say}".strip()
        tool_calls = [
            ToolCall(f"{self.id_prefix}cf{upcoming:03d}s{n}{uuid.uuid4().hex[:10]}", name, args)
            for n, (name, args) in enumerate(step.calls)
        ]
        return Reply(text=text, tool_calls=tool_calls, thinking=step.thinking)


def _tool_names(body: Mapping[str, Any]) -> set[str]:
    names: set[str] = set()
    for tool in body.get("tools") or []:
        if not isinstance(tool, Mapping):
            continue
        function = tool.get("function")
        if isinstance(function, Mapping):
            names.add(str(function.get("name")))
        names.add(str(tool.get("name")))
    return names


def _turn_user_words(messages: Sequence[Msg]) -> str:
    """What the user wrote after the last assistant message (the current turn), reminders out.
    Notes a proxy appends there do not hide the user's message, as long as it is there."""
    words: list[str] = []
    for message in reversed(messages):
        if message.role == "assistant":
            break
        if message.role == "user":
            words[:0] = [strip_reminders(t) for t in message.texts()]
    return "\n".join(w for w in words if w)
