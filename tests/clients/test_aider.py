"""aider (PyPI ``aider-chat``, in a venv of its own) with 3 files added and 4 edit turns in one
chat, directly (the control) and through the proxy at 16k and 30k (issue 26).

aider has no tools: it answers in SEARCH/REPLACE blocks (edit format ``diff``), and every
request carries the files added to the chat in one user message ("I have *added these files to
the chat*…", then an assistant "Ok…") placed AFTER the chat history and before the current
message. :class:`AiderScript` decides each turn from what it sees: the current instruction
(``CF-EDIT-k`` in the latest user message) and the files' current content in the file message.
It refuses when the instruction is not in view, when the file to edit is not in view, or when
the previous edit does not show in it (the view is stale, and a real model's SEARCH block would
not match). A request without aider's main system prompt is a side request (aider summarizing
its own history when it outgrows ``max_input_tokens / 16``): it gets a short summary.

:mod:`tests.clients.aider_driver` runs the four turns through aider's Python API
(``Coder.create(...).run(with_message=...)`` per turn).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import client_venv
from tests.clients.harness import ClientRun, Session, clean_env, drive, run_client
from tests.clients.plans import SIDE_TEXT, refusal
from tests.clients.repo import make_repo
from tests.clients.responses_upstream import AnyProtocol, ResponsesUpstream
from tests.clients.wire import read
from tests.proxy.upstreams import Reply, UpstreamError

pytestmark = pytest.mark.slow

DRIVER = Path(__file__).with_name("aider_driver.py")
TIMEOUT = 300.0
CATALOG_ENTRIES = 220
"""Entries of ``inventory/catalog.py``, the third file added (~5k tokens): the files alone take
a good part of a 16k window."""
TASK = "CF-EDIT-1: in inventory/stock.py make reorder_level return the gap to the threshold."
_INSTRUCTION = re.compile(r"CF-EDIT-(\d)")


@dataclass(frozen=True)
class Edit:
    """One turn: the instruction, and the SEARCH/REPLACE the scripted model answers with."""

    message: str
    path: str
    search: str
    replace: str


EDITS = (
    Edit(
        TASK,
        "inventory/stock.py",
        "    return 0  # TODO(cf-1)",
        "    return max(0, threshold - on_hand)",
    ),
    Edit(
        "CF-EDIT-2: in inventory/pricing.py set the tax to 0.2.",
        "inventory/pricing.py",
        "TAX = 0.0  # TODO(cf-2)",
        "TAX = 0.2",
    ),
    Edit(
        "CF-EDIT-3: in inventory/catalog.py mark the last entry as discontinued.",
        "inventory/catalog.py",
        f'    "SKU{CATALOG_ENTRIES - 1:05d}": "in stock",',
        f'    "SKU{CATALOG_ENTRIES - 1:05d}": "discontinued",',
    ),
    Edit(
        "CF-EDIT-4: in inventory/stock.py raise LIMIT to 250.",
        "inventory/stock.py",
        # Spans the line edit 1 changed: it matches only if the view shows the current file.
        "LIMIT = 100\n\n\ndef reorder_level(on_hand, threshold=20):\n"
        '    """How many units to order so that the stock gets back to the threshold."""\n'
        "    return max(0, threshold - on_hand)",
        "LIMIT = 250\n\n\ndef reorder_level(on_hand, threshold=20):\n"
        '    """How many units to order so that the stock gets back to the threshold."""\n'
        "    return max(0, threshold - on_hand)",
    ),
)
FILES = ["inventory/stock.py", "inventory/pricing.py", "inventory/catalog.py"]


def make_catalog(work: Path) -> None:
    lines = ['"""The catalog: every SKU and its state."""', "", "CATALOG = {"]
    lines += [f'    "SKU{i:05d}": "in stock",' for i in range(CATALOG_ENTRIES)]
    lines += ["}", ""]
    (work / "inventory" / "catalog.py").write_text("\n".join(lines))


@dataclass
class AiderScript:
    """Answers aider's requests with :data:`EDITS` (see the module docstring)."""

    steps: Sequence[Edit] = EDITS
    completed: int = 0
    side_requests: int = 0
    main_requests: int = 0
    refusals: list[str] = field(default_factory=list)
    _asked: set[int] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def asked(self, step: int) -> bool:
        return step in self._asked

    def __call__(self, protocol: AnyProtocol, body: dict[str, Any]) -> Reply | UpstreamError:
        with self._lock:
            systems, messages = read(protocol, body)
            system = "\n".join(
                systems + [t for m in messages if m.role == "system" for t in m.texts()]
            )
            if "SEARCH/REPLACE" not in system:
                self.side_requests += 1
                return Reply(text=f"{SIDE_TEXT}: the user asked for scripted edits, made in turn.")
            self.main_requests += 1
            decision = self._decide([(m.role, "\n".join(m.texts())) for m in messages])
            if isinstance(decision, str):
                self.refusals.append(decision)
                return refusal(protocol, decision)
            return decision

    def _decide(self, messages: Sequence[tuple[str, str]]) -> Reply | str:
        latest = next((text for role, text in reversed(messages) if role == "user"), "")
        found = _INSTRUCTION.search(latest)
        if found is None:
            return f"the latest user message holds no CF-EDIT instruction: {latest[:300]!r}"
        number = int(found.group(1))
        edit = self.steps[number - 1]
        files = "\n".join(text for role, text in messages if role == "user" and "```" in text)
        if edit.path not in files:
            return f"{edit.path} (to edit for CF-EDIT-{number}) is not in view"
        if edit.search not in files:
            return f"{edit.path} in view does not hold the text CF-EDIT-{number} replaces"
        if number > 1:
            previous = self.steps[number - 2]
            if previous.replace not in files:
                return f"CF-EDIT-{number - 1}'s change to {previous.path} does not show in view"
            self.completed = max(self.completed, number - 1)
        self._asked.add(number - 1)
        fence = "```"
        block = (
            f"{edit.path}\n{fence}python\n<<<<<<< SEARCH\n{edit.search}\n=======\n"
            f"{edit.replace}\n>>>>>>> REPLACE\n{fence}\n"
        )
        return Reply(text=f"Doing CF-EDIT-{number}.\n\n{block}")


def landed(work: Path) -> str | None:
    """None when all four edits are in the files."""
    missing = [
        f"CF-EDIT-{n}"
        for n, edit in enumerate(EDITS, 1)
        if edit.replace not in (work / edit.path).read_text()
    ]
    return f"missing in the files: {missing}" if missing else None


def aider_session(python: Path, dirs: tuple[Path, Path], window: int) -> Session:
    home, work = dirs
    make_repo(work)
    make_catalog(work)
    script = AiderScript()

    def runs(base_url: str) -> list[ClientRun]:
        spec = {
            "base_url": base_url,
            "workdir": str(work),
            "window": window,
            "files": FILES,
            "messages": [e.message for e in EDITS],
        }
        spec_path = home / "aider-spec.json"
        spec_path.write_text(json.dumps(spec))
        env = clean_env(
            home,
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            AIDER_ANALYTICS="false",
            AIDER_CHECK_UPDATE="false",
            OPENAI_API_KEY="dummy",
        )
        return [
            run_client(
                [str(python), str(DRIVER), str(spec_path)], cwd=work, env=env, timeout=TIMEOUT
            )
        ]

    def done() -> str | None:
        # The last edit is complete when it landed (no later request shows it).
        problem = landed(work)
        if problem is None and script.asked(len(EDITS) - 1):
            script.completed = len(EDITS)
        return problem

    return Session(
        client="aider",
        script=script,
        runs=runs,
        landed=done,
        task=TASK,
        final=None,
        # aider makes no calls: its sessions are those holding the file message (every main
        # request carries it; its history summaries do not).
        call_mark=re.compile(r"SKU00000"),
        one_session=False,
        note=f"aider told its model holds {window:,}",
    )


@pytest.fixture(scope="module")
def aider() -> Path:
    return client_venv("aider", "aider-chat")


@pytest.mark.parametrize("window", [16_000, 30_000])
def test_aider_direct(
    aider: Path, dirs: tuple[Path, Path], window: int, show: Callable[[str], None]
) -> None:
    """The control; ``window`` is what aider is told its model holds (it summarizes its own
    history past a sixteenth of it)."""
    spec = aider_session(aider, dirs, window)
    _, problems = drive(spec, ResponsesUpstream(spec.script), None, dirs[0].parent, show)
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize("window", [16_000, 30_000])
def test_aider_through_the_proxy(
    aider: Path, dirs: tuple[Path, Path], window: int, show: Callable[[str], None]
) -> None:
    spec = aider_session(aider, dirs, window)
    _, problems = drive(spec, ResponsesUpstream(spec.script), window, dirs[0].parent, show)
    assert not problems, "\n\n".join(problems)
