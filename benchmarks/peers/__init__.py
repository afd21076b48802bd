"""Real peers: other projects' context management, run offline with their own fake models.

Each module here wraps one framework's code as a :class:`benchmarks.baselines.ContextMethod`
(fed the transcript message by message, asked for the next request's messages) and lists what it
adds in ``PEERS``. The framework's own code decides what the view keeps; only the model is fake.
A module whose framework is not installed contributes nothing (its rows are left out of the run,
and :func:`missing_peers` says which were).

:mod:`benchmarks.peers.proxies` is of another kind: other HTTP proxies (Headroom, LiteLLM), each
installed into a virtual environment of its own and run as a subprocess beside ``contextfold
proxy`` by ``benchmarks/proxy.py``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchmarks.baselines import ContextMethod
    from contextfold.tokens.counters import TokenCounter
    from contextfold.tool_spec import ToolSpec

__all__ = ["PEER_MODULES", "Peer", "missing_peers", "real_peers"]

PEER_MODULES = (
    "langchain_editing",
    "deepagents_peer",
    "openai_agents_peer",
    "pydantic_ai_harness_peer",
)
"""The modules of this package that define peers, in display order."""

MakePeer = Callable[[str, "Sequence[ToolSpec]", "TokenCounter", int], "ContextMethod"]


@dataclass(frozen=True, slots=True)
class Peer:
    """One real peer: its row name, what it is (package and version), and how to make it for
    one transcript: ``make(system, tools, counter, effective_window)``."""

    name: str
    label: Callable[[], str]
    make: MakePeer


@cache
def _load() -> tuple[tuple[Peer, ...], tuple[str, ...]]:
    """Each peer module imported once (the registry is asked for names in every table)."""
    peers: list[Peer] = []
    missing: list[str] = []
    for module_name in PEER_MODULES:
        try:
            module = importlib.import_module(f"{__name__}.{module_name}")
        except ImportError as error:
            # The framework is not installed (or the module is not written yet): no rows.
            missing.append(f"{module_name}: {error}")
            continue
        peers.extend(module.PEERS)
    return tuple(peers), tuple(missing)


def real_peers() -> tuple[Peer, ...]:
    """Every peer whose framework is installed, in display order."""
    return _load()[0]


def missing_peers() -> tuple[str, ...]:
    """The peer modules that could not be loaded, each with why."""
    return _load()[1]
