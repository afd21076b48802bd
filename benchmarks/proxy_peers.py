"""``contextfold proxy`` beside other proxies: latency each adds to the same requests.

Every proxy runs as a subprocess (``contextfold proxy`` too, so that none shares the client's
process) and forwards to one :class:`~tests.proxy.upstreams.ScriptedUpstream` on loopback, in the
benchmark's process. Each target gets its own copy of one conversation (the same tool outputs,
in the same order; the tool-call ids in each copy are those its proxy handed back), grown through
it to about each size, then timed for ``steps`` requests. In each step every target is called
once, the direct call included, in an order that rotates from step to step, so a burst of load
from the machine's other tenants hits all of them alike. A target's added latency in a step is its
wall time minus the direct call's in that step.

The peers are in :mod:`benchmarks.peers.proxies` (how each is installed and started offline).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks._proxy_workload import (
    append_turn,
    contextfold_proxy,
    history_tokens,
    post,
    tool_output,
    tool_script,
)
from benchmarks._results import markdown_table, percentile
from benchmarks.peers.proxies import (
    PEER_PROXIES,
    PeerProxy,
    PeerUnavailable,
    ensure_installed,
    run_peer,
)
from tests.proxy.servers import serve
from tests.proxy.upstreams import ScriptedUpstream

__all__ = ["SideBySide", "measure_side_by_side", "side_by_side_table"]

DIRECT = "direct"
CONTEXTFOLD = "contextfold"
TIMED_TURN_WORDS = 10
"""The tool output each timed request adds (about 60 tokens with the reply)."""


@dataclass
class Target:
    """One way to reach the upstream, with its own copy of the conversation."""

    name: str
    client: httpx.Client
    history: list[dict[str, Any]] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    upstream_tokens: list[int] = field(default_factory=list)


@dataclass
class SizeRow:
    size: int
    tokens: int
    """The history's size (the direct copy's) at the first timed request."""
    seconds: dict[str, list[float]]
    upstream_tokens: dict[str, list[int]]

    def added(self, name: str) -> list[float]:
        """Per step, the target's wall time minus the direct call's."""
        return [t - d for t, d in zip(self.seconds[name], self.seconds[DIRECT], strict=True)]


@dataclass
class SideBySide:
    rows: list[SizeRow]
    labels: dict[str, str]
    """Target name -> what ran (package and version)."""
    unavailable: dict[str, str]
    """Peers that could not run here -> why."""


def measure_side_by_side(
    sizes: Sequence[int],
    steps: int,
    folder: Path,
    peers: Sequence[PeerProxy],
    *,
    install: bool,
) -> SideBySide:
    upstream = ScriptedUpstream(tool_script, window=None)
    result = SideBySide([], {DIRECT: "the scripted upstream", CONTEXTFOLD: "contextfold proxy"}, {})
    with serve(upstream) as up_url, _targets(up_url, folder, peers, result, install) as targets:
        for index, size in enumerate(sizes):
            row = _measure_size(targets, upstream, size, steps, seed=index)
            result.rows.append(row)
            print(_row_line(row), flush=True)
    return result


@contextmanager
def _targets(
    up_url: str, folder: Path, peers: Sequence[PeerProxy], result: SideBySide, install: bool
) -> Iterator[list[Target]]:
    with ExitStack() as stack:
        key = {"x-api-key": "bench-side-by-side"}
        urls = {DIRECT: (up_url, key)}
        urls[CONTEXTFOLD] = (
            stack.enter_context(contextfold_proxy(up_url, folder / "side-by-side.db", workers=1)),
            key,
        )
        for peer in peers:
            try:
                venv = ensure_installed(peer, install=install)
                urls[peer.name] = stack.enter_context(
                    run_peer(peer, venv, up_url, folder / "peers")
                )
                result.labels[peer.name] = f"{peer.requirement} ({peer.note})"
            except PeerUnavailable as error:
                print(f"{peer.name}: not measured: {error}", flush=True)
                result.unavailable[peer.name] = str(error)
        targets = []
        for name, (url, headers) in urls.items():
            client = httpx.Client(
                base_url=url, headers={**key, **headers}, timeout=300, trust_env=False
            )
            targets.append(Target(name, stack.enter_context(client)))
        yield targets


def _measure_size(
    targets: list[Target], upstream: ScriptedUpstream, size: int, steps: int, seed: int
) -> SizeRow:
    """Grow each target's copy of a new conversation to about ``size`` tokens through it
    (untimed), then time ``steps`` requests of every target, rotating their order."""
    rng = random.Random(seed)
    first = {"role": "user", "content": f"Fix the failing test in project {seed}."}
    for target in targets:
        target.history = [dict(first)]
        target.seconds, target.upstream_tokens = [], []
    direct = targets[0]
    words = 150  # about 250 tokens a tool output
    while history_tokens(direct.history) < size:
        output = tool_output(rng, words)
        for target in targets:
            append_turn(target.history, post(target.client, target.history), output)
        upstream.requests.clear()  # the recorded bodies would pile up in memory
        # Big histories: grow by bigger outputs first, so building them stays quick.
        words = 2_500 if size >= 50_000 and len(direct.history) < 40 else 150
    tokens = history_tokens(direct.history)
    for step in range(steps):
        output = tool_output(rng, TIMED_TURN_WORDS)
        shift = step % len(targets)
        for target in targets[shift:] + targets[:shift]:
            before = len(upstream.requests)
            started = time.perf_counter()
            reply = post(target.client, target.history)
            target.seconds.append(time.perf_counter() - started)
            target.upstream_tokens.append(
                sum(r.input_tokens or 0 for r in upstream.requests[before:])
            )
            append_turn(target.history, reply, output)
        upstream.requests.clear()
    return SizeRow(
        size,
        tokens,
        {t.name: t.seconds for t in targets},
        {t.name: t.upstream_tokens for t in targets},
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def _row_line(row: SizeRow) -> str:
    parts = [f"direct p50 {_ms(percentile(row.seconds[DIRECT], 50))} ms"]
    for name in row.seconds:
        if name != DIRECT:
            added = row.added(name)
            parts.append(f"{name} +{_ms(percentile(added, 50))} / +{_ms(percentile(added, 99))} ms")
    return f"side by side at {row.tokens} tokens: " + ", ".join(parts)


def side_by_side_table(result: SideBySide) -> str:
    rows = []
    for row in result.rows:
        direct_tokens = percentile([float(t) for t in row.upstream_tokens[DIRECT]], 50)
        for name, seconds in row.seconds.items():
            added = row.added(name)
            sent = percentile([float(t) for t in row.upstream_tokens[name]], 50)
            rows.append(
                (
                    f"{row.size // 1000}k",
                    name,
                    len(seconds),
                    f"{_ms(percentile(seconds, 50))} / {_ms(percentile(seconds, 99))}",
                    "—"
                    if name == DIRECT
                    else f"{_ms(percentile(added, 50))} / {_ms(percentile(added, 99))}",
                    f"{sent / direct_tokens:.2f}" if direct_tokens else "—",
                )
            )
    return markdown_table(
        (
            "history",
            "via",
            "requests",
            "wall p50 / p99 ms",
            "added p50 / p99 ms",
            "tokens upstream / direct",
        ),
        rows,
    )


def peers_named(names: str | None) -> list[PeerProxy]:
    """The peers a ``--peers`` value names (all of them for None)."""
    if names is None:
        return list(PEER_PROXIES)
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    known = {p.name: p for p in PEER_PROXIES}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise SystemExit(f"unknown peer(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[n] for n in wanted]
