"""What every real-client test does: serve the scripted upstream, put the proxy in front of it
(or not: the direct control), run the client as a bounded subprocess, then measure and check.

- :func:`proxied` runs ``contextfold proxy``'s app in this process (as
  ``tests/proxy/test_claude_code.py`` does), behind a :class:`TaggingRecorder` that records
  each client request and appends ``cf-client-request/N`` to its ``user-agent`` header. The
  proxy forwards ``user-agent`` upstream, so every upstream request names the client request
  it was made for (requests without the tag are paired by time), and :func:`check_invariants`
  compares each pair.
- :func:`run_client` runs a client in its own process group, with a clean environment that
  reaches nothing but loopback (``HTTPS_PROXY``/``HTTP_PROXY`` point at a port where nothing
  listens), and kills the whole group when it outlives its timeout.
- :class:`RunFigures` is the row of RESULTS.md's "Real clients through the proxy" table; it is
  appended as a JSON line to ``$CONTEXTFOLD_CLIENT_RESULTS`` and printed past pytest's capture.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tests.clients.invariants import Violation, check
from tests.clients.responses_upstream import AnyProtocol, as_chat_body
from tests.proxy.servers import serve
from tests.proxy.upstreams import RecordedRequest, count_input_tokens, default_counter

__all__ = [
    "REFUSING_PROXY",
    "ClientExchange",
    "ClientRun",
    "ProxyRun",
    "RunFigures",
    "Session",
    "TaggingRecorder",
    "check_invariants",
    "clean_env",
    "conversation_sessions",
    "count_tokens",
    "drive",
    "protocol_of_path",
    "proxied",
    "record_figures",
    "run_client",
]

REFUSING_PROXY = "http://127.0.0.1:9"
"""Where a client's connections to anything but loopback go: nothing listens there."""

TAG_HEADER = "user-agent"
_TAG = re.compile(r"cf-client-request/(\d+)")
_MODEL_PATHS = {
    "/v1/messages": "anthropic",
    "/v1/chat/completions": "openai",
    "/v1/responses": "responses",
}


def protocol_of_path(path: str) -> AnyProtocol | None:
    """The protocol a model request on ``path`` speaks (None: not a model request)."""
    for suffix, protocol in _MODEL_PATHS.items():
        if path.endswith(suffix):
            return protocol  # type: ignore[return-value]
    return None


def count_tokens(protocol: AnyProtocol, body: Mapping[str, Any]) -> int:
    """A request's input tokens, counted as the scripted upstream counts them."""
    if protocol == "responses":
        return count_input_tokens("openai", as_chat_body(body), default_counter("openai"))
    return count_input_tokens(protocol, body, default_counter(protocol))


# -- the client side of the proxy ------------------------------------------------------------------


@dataclass
class ClientExchange:
    """One request a client sent to the proxy, and the proxy's answer."""

    number: int
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    started: float
    status: int | None = None
    finished: float | None = None
    response: bytearray = field(default_factory=bytearray)

    def json(self) -> Any:
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None


class TaggingRecorder:
    """An ASGI app passing everything to ``app``, recording each HTTP exchange and tagging its
    ``user-agent`` with ``cf-client-request/N`` (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.exchanges: list[ClientExchange] = []
        self._lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        with self._lock:
            number = len(self.exchanges)
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            record = ClientExchange(
                number, scope["method"], scope["path"], headers, b"".join(chunks), time.time()
            )
            self.exchanges.append(record)
        agent = headers.get(TAG_HEADER, "")
        tagged = [(k, v) for k, v in scope["headers"] if k.decode("latin-1") != TAG_HEADER]
        tagged.append((TAG_HEADER.encode(), f"{agent} cf-client-request/{number}".encode()))
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": record.body, "more_body": False}
            return await receive()

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                record.status = message["status"]
            elif message["type"] == "http.response.body":
                record.response.extend(message.get("body", b""))
                if not message.get("more_body", False):
                    record.finished = time.time()
            await send(message)

        await self.app({**scope, "headers": tagged}, replay, capture)


@dataclass
class ProxyRun:
    """A proxy serving for the length of a test: its URL, what clients sent it, its store and
    its access log lines."""

    url: str
    recorder: TaggingRecorder
    store: Path
    window: int
    access_log: list[dict[str, Any]]
    notices: list[str]

    def model_exchanges(self) -> list[ClientExchange]:
        return [e for e in self.recorder.exchanges if protocol_of_path(e.path) is not None]

    def errors(self) -> str:
        """The proxy's error answers and notices, for a failure message."""
        lines = [
            f"{e.method} {e.path} -> {e.status}: "
            f"{bytes(e.response[:400]).decode('utf-8', 'replace')}"
            for e in self.recorder.exchanges
            if e.status is not None and e.status >= 400
        ]
        lines += [f"proxy notice: {n}" for n in self.notices[-10:]]
        return "\nproxy errors:\n" + "\n".join(lines[:30]) if lines else ""


class _ListHandler(logging.Handler):
    def __init__(self, sink: list[Any], parse: bool) -> None:
        super().__init__()
        self.sink, self.parse = sink, parse

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if self.parse:
            try:
                self.sink.append(json.loads(text))
            except ValueError:
                self.sink.append({"raw": text})
        else:
            self.sink.append(text)


@contextlib.contextmanager
def proxied(
    upstream_url: str,
    window: int,
    store: Path,
    upstream_transport: Any = None,
    **options: Any,
) -> Iterator[ProxyRun]:
    """``contextfold proxy --upstream upstream_url --window window --store store`` in this
    process, behind a :class:`TaggingRecorder`, with its access log captured
    (``upstream_transport``: the proxy's ``httpx`` transport to the upstream, see
    ``create_app``)."""
    from contextfold.proxy import ProxyConfig, create_app

    config = ProxyConfig(upstream=upstream_url, window=window, store=str(store), **options)
    recorder = TaggingRecorder(create_app(config, upstream_transport=upstream_transport))
    access: list[dict[str, Any]] = []
    notices: list[str] = []
    handlers = [
        (logging.getLogger("contextfold.proxy.access"), _ListHandler(access, parse=True)),
        (logging.getLogger("contextfold.proxy"), _ListHandler(notices, parse=False)),
    ]
    levels = []
    for logger, handler in handlers:
        levels.append(logger.level)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    try:
        with serve(recorder) as url:
            yield ProxyRun(url, recorder, store, window, access, notices)
    finally:
        for (logger, handler), level in zip(handlers, levels, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)


# -- running a client ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientRun:
    """A finished client process (``returncode`` None: killed at its timeout)."""

    command: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float

    def failure(self, extra: str = "") -> str:
        code = "timed out (killed)" if self.returncode is None else f"exited {self.returncode}"
        return (
            f"{' '.join(self.command[:3])}... {code} after {self.seconds:.0f}s\n"
            f"stdout (tail):\n{self.stdout[-3000:]}\nstderr (tail):\n{self.stderr[-3000:]}{extra}"
        )


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """A client's environment: its own HOME, a PATH, and no way out but loopback."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "HTTPS_PROXY": REFUSING_PROXY,
        "HTTP_PROXY": REFUSING_PROXY,
        "https_proxy": REFUSING_PROXY,
        "http_proxy": REFUSING_PROXY,
        "ALL_PROXY": REFUSING_PROXY,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        # The plans run the repository's Python, edit a module, then run it again. Bytecode is
        # checked against its source's mtime in whole seconds and its size, and the plans'
        # `LIMIT = 100` -> `LIMIT = 250` keeps the size: a fast client edits within the second
        # and the check imports the stale .pyc ("limit FAILED", the step-18 flake).
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.update(extra)
    return env


def run_client(
    command: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    stdin: str | None = None,
) -> ClientRun:
    """Run ``command`` in its own process group; kill the group at ``timeout`` seconds."""
    started = time.monotonic()
    process = subprocess.Popen(
        list(command),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(stdin, timeout=timeout)
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        code = None
    finally:
        # Whatever the client left running in its group (a shell, a language server) goes too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    return ClientRun(list(command), code, stdout, stderr, time.monotonic() - started)


# -- checks and figures ----------------------------------------------------------------------------


def _pair(
    upstream: Sequence[RecordedRequest], client: Sequence[ClientExchange]
) -> list[tuple[RecordedRequest, ClientExchange | None]]:
    by_number = {e.number: e for e in client}
    pairs: list[tuple[RecordedRequest, ClientExchange | None]] = []
    for request in upstream:
        match = _TAG.search(request.headers.get(TAG_HEADER, ""))
        exchange = by_number.get(int(match.group(1))) if match else None
        if exchange is None:  # untagged: the latest model request begun before it
            begun = [e for e in client if protocol_of_path(e.path) is not None]
            exchange = begun[-1] if begun else None
        pairs.append((request, exchange))
    return pairs


def reply_floor(window: int) -> int:
    """The least room a request must leave for the reply (the proxy's own floor: 4,096 tokens
    or an eighth of a small window)."""
    return min(4_096, window // 8)


def check_invariants(
    upstream: Sequence[RecordedRequest],
    client: Sequence[ClientExchange] | None,
    *,
    task: str | None,
    window: int | None = None,
) -> list[tuple[int, Violation]]:
    """Every invariant on every upstream model request (side requests included: a title
    request must not grow tools either), against the client request it was made for;
    ``client`` None: direct mode, where each request is its own client request. Returns
    ``(upstream request number, violation)`` pairs."""
    found: list[tuple[int, Violation]] = []
    requests = [r for r in upstream if protocol_of_path(r.path) is not None]
    pairs: list[tuple[RecordedRequest, Any, AnyProtocol | None]]
    if client is None:
        pairs = [(r, r.body, None) for r in requests]
    else:
        pairs = [
            (r, e.json() if e else None, protocol_of_path(e.path) if e else None)
            for r, e in _pair(requests, client)
        ]
    for number, (request, client_body, client_protocol) in enumerate(pairs):
        if not isinstance(client_body, Mapping):
            continue
        protocol = protocol_of_path(request.path)
        assert protocol is not None
        room = None
        if window is not None and request.input_tokens is not None:
            room = window - request.input_tokens - reply_floor(window)
        counter = (
            default_counter(protocol) if protocol != "responses" else default_counter("openai")
        )
        # A bridged request is read in each side's own protocol.
        sent_in = client_protocol or protocol
        found_here = check(
            sent_in,
            client_body,
            protocol,
            request.body,
            task=task,
            room=room,
            count=counter.count_text,
        )
        for violation in found_here:
            found.append((number, violation))
    return found


def conversation_sessions(store: Path, marker: re.Pattern[str]) -> tuple[int, int]:
    """``(sessions, chains)`` of one conversation in the proxy's store: the sessions whose
    transcript holds a call id (or a text) matching ``marker`` (the script's), and how many of
    them have no parent among them (one conversation should be one chain)."""
    from contextfold.store import open_store

    ids: dict[str, str | None] = {}
    with open_store(store) as opened:
        for info in opened.list_sessions():
            for _, message in opened.iter_messages(info.id):
                if any(marker.search(_marked(p)) for p in message.parts):
                    ids[info.id] = info.parent_id
                    break
    roots = sum(1 for parent in ids.values() if parent not in ids)
    return len(ids), roots


def _marked(part: Any) -> str:
    """What of a stored message part a conversation's marker is looked for in: a call id, or
    a text (for clients that make no calls)."""
    return f"{getattr(part, 'call_id', '')}\n{getattr(part, 'text', '')}"


@dataclass
class RunFigures:
    """One row of "Real clients through the proxy" (issue 26's "Show")."""

    client: str
    mode: str
    window: int | None
    passed: bool = False
    exit_code: int | None = None
    seconds: float = 0.0
    client_requests: int = 0
    upstream_requests: int = 0
    client_tokens: int = 0
    upstream_tokens: int = 0
    peak_client_request: int = 0
    peak_upstream_request: int = 0
    sessions: int | None = None
    session_chains: int | None = None
    invariant_breaks: int = 0
    breaks_by_rule: dict[str, int] = field(default_factory=dict)
    steps_completed: int = 0
    steps_planned: int = 0
    side_requests: int = 0
    refusals: list[str] = field(default_factory=list)
    note: str = ""

    def line(self) -> str:
        where = f"window {self.window:,}" if self.window else "direct"
        return (
            f"{self.client} {self.mode} ({where}): exit {self.exit_code}, "
            f"{self.steps_completed}/{self.steps_planned} steps, {self.client_requests} client "
            f"requests ({self.client_tokens:,} tokens, peak {self.peak_client_request:,}), "
            f"{self.upstream_requests} upstream ({self.upstream_tokens:,} tokens, peak "
            f"{self.peak_upstream_request:,}), sessions {self.sessions} in "
            f"{self.session_chains} chain(s), {self.invariant_breaks} invariant breaks "
            f"{self.breaks_by_rule or ''}, {self.side_requests} side requests"
            + (f", refusals: {self.refusals[:2]}" if self.refusals else "")
            + (f" [{self.note}]" if self.note else "")
        )


def fill_traffic(
    figures: RunFigures,
    upstream: Sequence[RecordedRequest],
    client: Sequence[ClientExchange] | None,
) -> None:
    """Requests and tokens on both sides (direct mode: the client's requests are the
    upstream's)."""
    # A path the upstream does not serve (the proxy probing for its protocol) is no request.
    model = [r for r in upstream if protocol_of_path(r.path) is not None and r.protocol]
    figures.upstream_requests = len(model)
    sizes = [r.input_tokens or 0 for r in model]
    figures.upstream_tokens = sum(sizes)
    figures.peak_upstream_request = max(sizes, default=0)
    if client is None:
        figures.client_requests = figures.upstream_requests
        figures.client_tokens = figures.upstream_tokens
        figures.peak_client_request = figures.peak_upstream_request
        return
    sent = []
    for exchange in client:
        protocol = protocol_of_path(exchange.path)
        body = exchange.json()
        if protocol is not None and isinstance(body, Mapping):
            sent.append(count_tokens(protocol, body))
    figures.client_requests = len(sent)
    figures.client_tokens = sum(sent)
    figures.peak_client_request = max(sent, default=0)


def record_figures(figures: RunFigures, show: Callable[[str], None]) -> None:
    """Print the figures past pytest's capture and append them to
    ``$CONTEXTFOLD_CLIENT_RESULTS`` when it is set."""
    show("\n" + figures.line())
    target = os.environ.get("CONTEXTFOLD_CLIENT_RESULTS")
    if target:
        with open(target, "a", encoding="utf-8") as out:
            out.write(json.dumps(asdict(figures)) + "\n")


def breaks_by_rule(found: Sequence[tuple[int, Violation]]) -> dict[str, int]:
    return dict(Counter(v.rule for _, v in found))


def describe_breaks(found: Sequence[tuple[int, Violation]], limit: int = 12) -> str:
    lines = [f"  upstream request {n}: {v}" for n, v in found[:limit]]
    more = f"\n  ... and {len(found) - limit} more" if len(found) > limit else ""
    return "invariant breaks:\n" + "\n".join(lines) + more


# -- one whole client test -------------------------------------------------------------------------


@dataclass
class Session:
    """What one client test runs and checks (see :func:`drive`).

    ``runs``: given the base URL (the proxy's or the upstream's), runs the client one or more
    times (stopping at the first failure) and returns the finished runs. ``landed``: None when
    every edit landed, else what did not. ``final``: a text the last run's output must hold.
    ``one_session``: the conversation must be one stored session (else one chain of sessions is
    enough).
    """

    client: str
    script: Any
    runs: Callable[[str], list[ClientRun]]
    landed: Callable[[], str | None]
    task: str | None
    final: str | None
    call_mark: re.Pattern[str] = re.compile(r"cf\d{3}s\d")
    one_session: bool = True
    note: str = ""
    """Said beside the figures (e.g. the window the client itself was told)."""
    ends_on_last_call: bool = False
    """The last step's call ends the client (mini-swe-agent's submit): its result never comes
    back, so it counts as done when it was asked for and the run exited 0."""
    proxy_options: dict[str, Any] = field(default_factory=dict)


def drive(
    session: Session, upstream: Any, window: int | None, tmp: Path, show: Callable[[str], None]
) -> tuple[RunFigures, list[str]]:
    """Serve ``upstream``, put the proxy in front of it at ``window`` (None: the direct
    control), run the client, and check everything; returns the figures (also recorded) and
    the problems found (empty: the test passes)."""
    script = session.script
    figures = RunFigures(session.client, "proxy" if window else "direct", window)
    figures.steps_planned = len(script.steps)
    figures.note = session.note
    problems: list[str] = []
    proxy: ProxyRun | None = None
    with contextlib.ExitStack() as stack:
        upstream_url = stack.enter_context(serve(upstream))
        if window is not None:
            proxy = stack.enter_context(
                proxied(upstream_url, window, tmp / "proxy.db", **session.proxy_options)
            )
        runs = session.runs(proxy.url if proxy else upstream_url)
    extra = proxy.errors() if proxy else ""
    problems += [run.failure(extra) for run in runs if run.returncode != 0]
    figures.exit_code = runs[-1].returncode if runs else None
    figures.seconds = round(sum(r.seconds for r in runs), 1)
    if session.final and runs and runs[-1].returncode == 0 and session.final not in runs[-1].stdout:
        problems.append(f"the final answer is not in the client's output: {runs[-1].stdout[-800:]}")
    not_landed = session.landed()
    if not_landed:
        problems.append(f"not every edit landed: {not_landed}")
    client = proxy.model_exchanges() if proxy else None
    fill_traffic(figures, upstream.requests, client)
    breaks = check_invariants(upstream.requests, client, task=session.task, window=window)
    figures.invariant_breaks = len(breaks)
    figures.breaks_by_rule = breaks_by_rule(breaks)
    if breaks:
        problems.append(describe_breaks(breaks))
    completed = script.completed
    if session.ends_on_last_call and runs and runs[-1].returncode == 0:
        completed = max(completed, len(script.steps) if script.asked(len(script.steps) - 1) else 0)
    figures.steps_completed = completed
    figures.side_requests = script.side_requests
    figures.refusals = script.refusals[:5]
    if completed < len(script.steps):
        problems.append(
            f"{completed} of {len(script.steps)} steps done; refusals: {script.refusals[:3]}"
        )
    if proxy is not None:
        figures.sessions, figures.session_chains = conversation_sessions(
            proxy.store, session.call_mark
        )
        if figures.session_chains != 1 or (session.one_session and figures.sessions != 1):
            problems.append(
                f"{figures.sessions} stored sessions in {figures.session_chains} chains for one "
                "conversation"
            )
    figures.passed = not problems
    record_figures(figures, show)
    dump_traffic(figures, upstream.requests, client, problems, proxy.access_log if proxy else [])
    return figures, problems


def dump_traffic(
    figures: RunFigures,
    upstream: Sequence[RecordedRequest],
    client: Sequence[ClientExchange] | None,
    problems: Sequence[str],
    access_log: Sequence[Mapping[str, Any]] = (),
) -> None:
    """With ``$CONTEXTFOLD_CLIENT_DUMP`` set to a directory, write every request both sides saw
    (JSON lines), for whoever fixes what a test found."""
    target = os.environ.get("CONTEXTFOLD_CLIENT_DUMP")
    if not target:
        return
    name = f"{figures.client}-{figures.mode}-{figures.window or 0}.jsonl"
    path = Path(target) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"figures": asdict(figures), "problems": list(problems)}) + "\n")
        for exchange in client or []:
            record = {
                "side": "client",
                "number": exchange.number,
                "method": exchange.method,
                "path": exchange.path,
                "headers": {k: v for k, v in exchange.headers.items() if k not in _SECRET},
                "status": exchange.status,
                "body": exchange.json(),
                "response": bytes(exchange.response[:20_000]).decode("utf-8", "replace"),
            }
            out.write(json.dumps(record) + "\n")
        for line in access_log:
            out.write(json.dumps({"side": "access_log", **line}) + "\n")
        for request in upstream:
            record = {
                "side": "upstream",
                "method": request.method,
                "path": request.path,
                "headers": {k: v for k, v in request.headers.items() if k not in _SECRET},
                "input_tokens": request.input_tokens,
                "body": request.body,
            }
            out.write(json.dumps(record) + "\n")


_SECRET = ("authorization", "x-api-key")
