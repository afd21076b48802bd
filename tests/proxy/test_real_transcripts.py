"""Real agent sessions replayed through the proxy, request by request, as their clients sent them.

Claude Code sessions go through ``POST /v1/messages``, a mini-swe-agent (DeepSeek) run through
``POST /v1/chat/completions``. Before each recorded assistant turn the client sends its whole
history so far; the scripted upstream answers with exactly the recorded assistant message, and
the client appends the reply *it received* (read back from the proxy's response) to its history,
so every next request extends the last one the way a real client's does. The transcripts live in
``../shared/data`` (never copied into the project): the tests skip when it is absent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextfold.messages import Message, TextPart, ThinkingPart
from contextfold.proxy import ProxyConfig, create_app
from contextfold.store import open_store
from contextfold.transcripts import load_transcript
from contextfold.wire import from_openai, to_anthropic, to_openai
from contextfold.wire.anthropic import from_anthropic_message, tools_to_anthropic
from contextfold.wire.chat_completions import tools_to_openai
from tests.conftest import TRAJECTORIES
from tests.proxy.servers import serve
from tests.proxy.upstreams import Protocol, Reply, ScriptedUpstream, ToolCall, UpstreamError


def _said(message: Message) -> tuple[object, ...]:
    """What a message says, for comparing a stored message with the one the client sent."""
    calls = tuple(
        (c.call_id, c.name, json.dumps(c.args(), sort_keys=True)) for c in message.tool_calls
    )
    return message.role, message.text.strip(), calls


DATA = TRAJECTORIES
WINDOW = 32_000
SESSION_HEADER = "x-contextfold-session"
API_KEY = "sk-test-replay"

pytestmark = pytest.mark.skipif(
    not DATA.is_dir(), reason=f"real transcripts not found at {DATA} (../shared/data is absent)"
)


@dataclass(frozen=True)
class Recorded:
    """One transcript to replay: where it is, which protocol its client speaks, and how many of
    its assistant turns to replay (long sessions are cut to keep the test quick)."""

    path: str
    protocol: Protocol
    max_turns: int


TRANSCRIPTS = [
    Recorded("claude-code/subagent.jsonl", "anthropic", 12),
    # A long Claude Code session: its first turns, well before its own compaction.
    Recorded("claude-code/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl", "anthropic", 40),
    Recorded(
        "mini-swe-agent-deepseek/dev_marshmallow-code__marshmallow-1343_"
        "marshmallow-code__marshmallow-1343.traj.json",
        "openai",
        40,
    ),
]


def _reply_for(message: Message) -> Reply:
    """The recorded assistant message as the scripted model says it."""
    thinking = "\n".join(p.text for p in message.parts if isinstance(p, ThinkingPart) and p.text)
    text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart))
    calls = []
    for call in message.tool_calls:
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            arguments = {"_raw": call.arguments}
        if not isinstance(arguments, dict):
            arguments = {"_raw": call.arguments}
        calls.append(ToolCall(call.call_id, call.name, arguments))
    return Reply(text=text, tool_calls=calls, thinking=thinking or None)


class ReplayClient:
    """A client replaying one transcript through the proxy; it keeps the history it would
    have (recorded user and tool messages, and the assistant replies it actually received)."""

    def __init__(self, base_url: str, recorded: Recorded) -> None:
        transcript = load_transcript(DATA / recorded.path)
        visible = [m for m in transcript.messages if m.meta.agent_visible]
        cut = transcript.compactions[0].index if transcript.compactions else len(visible)
        self.recorded = visible[:cut]
        self.protocol = recorded.protocol
        self.max_turns = recorded.max_turns
        self.tools = transcript.tools
        self.model = transcript.model or "recorded-model"
        self.http = httpx.Client(base_url=base_url, timeout=120)
        self.history: list[Message | dict[str, Any]] = []
        self.sessions: list[str] = []
        self.queue: list[Reply] = []
        self.last_body: dict[str, Any] = {}

    def wire_messages(self, history: list[Message | dict[str, Any]]) -> list[dict[str, Any]]:
        """The history in the client's wire format: recorded messages encoded by the repo's
        encoders, each reply exactly as the proxy returned it."""
        out: list[dict[str, Any]] = []
        run: list[Message] = []
        for item in [*history, None]:
            if isinstance(item, Message):
                run.append(item)
                continue
            if run and self.protocol == "anthropic":
                out += to_anthropic(run).messages
            elif run:
                out += to_openai(run)
            run = []
            if item is not None:
                out.append(item)
        return out

    def body(self, history: list[Message | dict[str, Any]]) -> dict[str, Any]:
        system = [m.text for m in history if isinstance(m, Message) and m.role == "system"]
        body: dict[str, Any] = {"model": self.model, "max_tokens": 1024}
        if self.protocol == "anthropic":
            if system:
                body["system"] = "\n\n".join(system)
            body["messages"] = self.wire_messages(
                [m for m in history if not (isinstance(m, Message) and m.role == "system")]
            )
            if self.tools:
                body["tools"] = tools_to_anthropic(self.tools)
            return body
        body["messages"] = self.wire_messages(history)
        if self.tools:
            body["tools"] = tools_to_openai(self.tools)
        return body

    def send(self, history: list[Message | dict[str, Any]]) -> tuple[str, dict[str, Any]]:
        """One request; the session it landed in and the assistant message the client got."""
        path = "/v1/messages" if self.protocol == "anthropic" else "/v1/chat/completions"
        headers = (
            {"x-api-key": API_KEY, "anthropic-version": "2023-06-01"}
            if self.protocol == "anthropic"
            else {"authorization": f"Bearer {API_KEY}"}
        )
        self.last_body = self.body(history)
        response = self.http.post(path, json=self.last_body, headers=headers)
        assert response.status_code == 200, response.text[:2000]
        answer = response.json()
        if self.protocol == "anthropic":
            received = {"role": "assistant", "content": answer["content"]}
        else:
            message = answer["choices"][0]["message"]
            received = {k: message[k] for k in ("role", "content", "tool_calls") if k in message}
        return response.headers[SESSION_HEADER], received

    def sent_messages(self) -> list[Message]:
        """The last request's messages read as the proxy reads them (an Anthropic user turn
        with tool results and text is two neutral messages; consecutive turns merged)."""
        raw = self.last_body["messages"]
        if self.protocol == "openai":
            return from_openai(raw)
        names: dict[str, str] = {}
        out: list[Message] = []
        for index, message in enumerate(raw):
            out += from_anthropic_message(message, call_names=names, index=index)
        return out

    def replay(self) -> Iterator[int]:
        """Send one request per recorded assistant turn; yields the turn's index."""
        turns = 0
        for message in self.recorded:
            if message.role != "assistant":
                self.history.append(message)
                continue
            if turns == self.max_turns:
                return
            self.queue.append(_reply_for(message))
            session, received = self.send(self.history)
            self.sessions.append(session)
            self.history.append(received)
            turns += 1
            yield turns


def _scripted(client_queue: list[Reply]) -> ScriptedUpstream:
    def script(protocol: Protocol, body: dict[str, Any]) -> Reply | UpstreamError:
        if not client_queue:
            return UpstreamError(500, {"error": {"message": "no scripted reply left"}})
        return client_queue.pop(0)

    return ScriptedUpstream(script, window=WINDOW)


_BLOB_REF = re.compile(r'ref="(ref_[0-9a-f]+)"')


def _missing_from_store(store_path: Path, session_id: str, sent: list[Message]) -> list[str]:
    """What the client sent that the stored session does not hold. Tool results are stored one
    per message, and a large one as a cut version whose full text is a blob it names."""
    with open_store(store_path) as store:
        stored = [m for _, m in store.iter_messages(session_id)]
        digests = {_said(m) for m in stored if m.role != "tool"}
        results = {r.call_id: r.content for m in stored for r in m.tool_results}
        missing: list[str] = []
        for index, message in enumerate(sent):
            if message.role == "system":
                continue
            if message.role != "tool":
                if _said(message) not in digests:
                    missing.append(f"message {index} ({message.role})")
                continue
            for result in message.tool_results:
                kept = results.get(result.call_id)
                if kept is None:
                    missing.append(f"result {result.call_id}")
                elif kept != result.content:
                    refs = _BLOB_REF.findall(kept)
                    if not refs or store.get_blob(session_id, refs[0]) != result.content:
                        missing.append(f"full output of {result.call_id}")
        return missing


@pytest.mark.parametrize("recorded", TRANSCRIPTS, ids=[t.path.split("/")[0] for t in TRANSCRIPTS])
def test_a_replayed_session_stays_in_one_session_under_the_window(
    recorded: Recorded, tmp_path: Path
) -> None:
    store_path = tmp_path / "proxy.db"
    queue: list[Reply] = []
    upstream = _scripted(queue)
    with serve(upstream) as upstream_url:
        config = ProxyConfig(
            upstream=upstream_url + "/v1", window=WINDOW, store=store_path, tenant_salt=b"salt"
        )
        with serve(create_app(config)) as proxy_url:
            client = ReplayClient(proxy_url, recorded)
            client.queue = queue
            turns = list(client.replay())

    assert len(turns) >= min(recorded.max_turns, 10), "the transcript had too few turns"
    assert len(set(client.sessions)) == 1, f"the replay forked: {client.sessions}"
    assert not queue, "every scripted reply was asked for"
    calls = [r for r in upstream.requests if r.protocol is not None]
    assert len(calls) == len(turns)  # no overflow retries, no engine rounds
    assert all(0 < (r.input_tokens or 0) <= WINDOW for r in calls), [r.input_tokens for r in calls]

    # The store keeps the whole conversation the client sent, shrunk only in what went up.
    sent = client.sent_messages()
    assert len(sent) > len(turns)
    missing = _missing_from_store(store_path, client.sessions[0], sent)
    assert not missing, f"client messages not in the stored session: {missing[:10]}"


def test_a_rewritten_history_starts_a_session_linked_to_the_original(tmp_path: Path) -> None:
    recorded = TRANSCRIPTS[2]
    store_path = tmp_path / "proxy.db"
    queue: list[Reply] = []
    upstream = _scripted(queue)
    with serve(upstream) as upstream_url:
        config = ProxyConfig(
            upstream=upstream_url + "/v1", window=WINDOW, store=store_path, tenant_salt=b"salt"
        )
        with serve(create_app(config)) as proxy_url:
            client = ReplayClient(proxy_url, recorded)
            client.queue = queue
            client.max_turns = 12
            list(client.replay())
            (original,) = set(client.sessions)

            # The client compacts its own history: the system prompt and the task stay, the
            # middle goes, the last two exchanges stay; then it asks again.
            history = client.history[:-1]  # ends with a tool result, as a real next request
            replies = [i for i, m in enumerate(history) if isinstance(m, dict)]
            rewritten = history[:2] + history[replies[-2] :]
            queue.append(Reply(text="continuing after the client's own compaction"))
            forked, received = client.send(rewritten)

    assert forked != original
    assert received["content"] == "continuing after the client's own compaction"
    with open_store(store_path) as store:
        assert store.get_session(forked).parent_id == original
        assert store.get_session(original).parent_id is None
