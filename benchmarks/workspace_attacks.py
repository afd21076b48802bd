"""Workspace attacks: symlink swap races, hard links and linked AGENTS.md, tried and stopped.

Each attack is tried against the coding tools (and the instructions loader) and, in the same run,
against a check by name: resolve the path (symlinks followed, the result inside the workspace),
then open it by name, which is what the tools did before they opened through descriptors. An
escape is a try that read a secret from outside the workspace (its text in what the tool
returned) or changed a file outside it.

- **swap races**: a thread keeps replacing a path by a real file (or folder) and by a symlink to
  one outside, while the tool reads or writes it thousands of times;
- **hard links**: a name in the workspace for a file outside (``read_file``, ``grep``,
  ``write_file``, ``edit_file``);
- **a symlinked folder in the middle of a path**, pointing outside;
- **an AGENTS.md symlinked outside** (a cloned repository can carry one to
  ``~/.aws/credentials``).

It also times opening and reading a file four folders deep by name and through descriptors: the
fence's cost, as a ratio in the same run.

Run: ``python -m benchmarks.workspace_attacks [--quick] [--write]``.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

if __package__ in (None, ""):  # run as a file: import the repository's packages
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import (
    benchmark_arguments,
    markdown_table,
    percentile,
    record_targets,
    should_write,
    target,
    timings,
    write_section,
)
from contextfold.agent import ApprovalPolicy, Toolbox, Workspace, coding_toolbox
from contextfold.prompt.instructions import InstructionsLoader

RACE_TRIES = 4_000
"""Calls per swap race in a full run (the issue's adversarial run made 4,000)."""
QUICK_RACE_TRIES = 300
TIMING_RUNS = 2_000
SECRET = "aws_secret_access_key = TOPSECRET-benchmark\n"
SECRET_MARK = "TOPSECRET"


@dataclass
class Attack:
    """One attack: its tries and escapes against the tools and against a check by name."""

    name: str
    tool: str
    tries: int
    escapes_by_name: int
    escapes: int
    outcomes: Counter[str]
    """How the tools answered (read, refused as outside, stopped as changed, ...)."""


class Scene:
    """A workspace beside a folder of secrets, rebuilt for each attack."""

    def __init__(self, base: Path) -> None:
        self.root = base / "ws"
        self.home = base / "home"
        for folder in (self.root, self.home):
            folder.mkdir()
        self.secret = self.home / "credentials"
        self.secret.write_text(SECRET)
        self.workspace = Workspace(self.root)
        self.tools: Toolbox = coding_toolbox(self.workspace, ApprovalPolicy.auto())

    def outside_changed(self) -> bool:
        """Whether anything outside changed (restored when it did, so the next try counts)."""
        changed = self.secret.read_text() != SECRET or len(list(self.home.iterdir())) != 1
        if changed:
            for path in self.home.iterdir():
                if path != self.secret:
                    path.unlink()
            self.secret.write_text(SECRET)
        return changed


# -- a check by name: what the tools did before the fence ------------------------------------------


def read_by_name(workspace: Workspace, path: str) -> str:
    try:
        return workspace.resolve(path).read_bytes().decode("utf-8", "replace")
    except Exception as exc:
        return f"error: {exc}"


def write_by_name(workspace: Workspace, path: str, text: str) -> None:
    with suppress(Exception):
        target = workspace.resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


# -- the attacks -----------------------------------------------------------------------------------


@contextmanager
def swapping(path: Path, real_folder: bool, link_to: Path) -> Iterator[None]:
    """Another process keeps replacing ``path`` by a real file (or folder) and by a symlink to
    ``link_to``: a process of its own, so that it swaps as fast as an attacker would, not when
    the interpreter lock lets it."""
    stop = multiprocessing.Event()
    started = multiprocessing.Event()
    swapper = multiprocessing.Process(
        target=swap_until, args=(str(path), real_folder, str(link_to), stop, started)
    )
    swapper.start()
    started.wait(timeout=10)
    try:
        yield
    finally:
        stop.set()
        swapper.join(timeout=10)


def swap_until(
    where: str, real_folder: bool, link_to: str, stop: EventType, started: EventType
) -> None:
    path = Path(where)
    spare = path.with_name(path.name + ".spare")

    def make_real(at: Path) -> None:
        if real_folder:
            at.mkdir()
            (at / "credentials").write_text("inside\n")
        else:
            at.write_text("inside\n")

    def make_link(at: Path) -> None:
        at.symlink_to(link_to, target_is_directory=real_folder)

    while not stop.is_set():
        for make in (make_real, make_link):
            with suppress(OSError):
                remove(spare)
                make(spare)
                try:
                    os.replace(spare, path)
                except OSError:  # a folder over a link or a folder: in two steps
                    remove(path)
                    os.replace(spare, path)
        started.set()


def remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        for child in path.iterdir():
            child.unlink()
        path.rmdir()


def race(scene: Scene, tool: str, tries: int, *, folder: bool) -> Attack:
    """A swap race on ``swap.txt`` (or on the folder ``conf/`` above ``credentials``)."""
    path = "conf/credentials" if folder else "swap.txt"
    swapped = scene.root / path.split("/")[0]
    link_to = scene.home if folder else scene.secret

    outcomes: Counter[str] = Counter()
    escapes = escapes_by_name = 0
    with swapping(swapped, folder, link_to):
        for index in range(tries):
            if tool == "read_file":
                outcome = scene.tools.run_with("read_file", {"path": path})
                escapes += SECRET_MARK in outcome.content
                escapes_by_name += SECRET_MARK in read_by_name(scene.workspace, path)
            else:
                outcome = scene.tools.run_with("write_file", {"path": path, "content": f"{index}"})
                escapes += scene.outside_changed()
                write_by_name(scene.workspace, path, f"{index}")
                escapes_by_name += scene.outside_changed()
            outcomes[str(outcome.metadata.get("error", "done"))] += 1
    where = "a folder in the path" if folder else "the file"
    name = f"{where} swapped with a symlink to outside, during each call"
    return Attack(name, tool, tries, escapes_by_name, escapes, outcomes)


def hard_links(scene: Scene) -> list[Attack]:
    os.link(scene.secret, scene.root / "notes.txt")
    attacks = []
    calls: list[tuple[str, dict[str, object]]] = [
        ("read_file", {"path": "notes.txt"}),
        ("grep", {"pattern": "TOP.ECRET"}),  # the pattern itself must not hold the mark
        ("write_file", {"path": "notes.txt", "content": "pwned\n"}),
        ("edit_file", {"path": "notes.txt", "old_string": SECRET_MARK, "new_string": "pwned"}),
    ]
    for tool, arguments in calls:
        outcome = scene.tools.run_with(tool, arguments)
        if tool in ("read_file", "grep"):
            escaped = SECRET_MARK in outcome.content
            by_name = SECRET_MARK in read_by_name(scene.workspace, "notes.txt")
        else:
            escaped = scene.outside_changed()
            (scene.root / "notes.txt").write_text("pwned\n")  # by name: in place, through it
            by_name = scene.outside_changed()
            if not (scene.root / "notes.txt").samefile(scene.secret):
                (scene.root / "notes.txt").unlink()
                os.link(scene.secret, scene.root / "notes.txt")
        kind = str(outcome.metadata.get("error", "done"))
        if "[not searched:" in outcome.content:
            kind = "hard_link (passed over, with a note)"
        attacks.append(
            Attack(
                "a hard link to a file outside",
                tool,
                1,
                int(by_name),
                int(escaped),
                Counter([kind]),
            )
        )
    return attacks


def linked_folder(scene: Scene) -> list[Attack]:
    (scene.root / "src").mkdir()
    (scene.root / "src" / "vendor").symlink_to(scene.home, target_is_directory=True)
    read = scene.tools.run_with("read_file", {"path": "src/vendor/credentials"})
    write = scene.tools.run_with("write_file", {"path": "src/vendor/new.txt", "content": "x"})
    write_escaped = scene.outside_changed()
    by_name_read = SECRET_MARK in read_by_name(scene.workspace, "src/vendor/credentials")
    write_by_name(scene.workspace, "src/vendor/new.txt", "x")
    name = "a symlinked folder in the middle of the path, to outside"
    return [
        Attack(
            name,
            "read_file",
            1,
            int(by_name_read),
            int(SECRET_MARK in read.content),
            Counter([str(read.metadata.get("error", "done"))]),
        ),
        Attack(
            name,
            "write_file",
            1,
            int(scene.outside_changed()),
            int(write_escaped),
            Counter([str(write.metadata.get("error", "done"))]),
        ),
    ]


def linked_instructions(scene: Scene) -> Attack:
    (scene.root / ".git").mkdir()
    (scene.root / "AGENTS.md").symlink_to(scene.secret)
    loaded = InstructionsLoader(scene.root, include_global=False).load()
    by_name = SECRET_MARK in (scene.root / "AGENTS.md").read_text()  # the loader before
    return Attack(
        "AGENTS.md symlinked to ~/.aws/credentials",
        "instructions",
        1,
        int(by_name),
        int(SECRET_MARK in loaded.text),
        Counter(["refused, user warned" if loaded.refused else "read"]),
    )


# -- cost ------------------------------------------------------------------------------------------


def open_cost(scene: Scene, runs: int) -> tuple[float, float]:
    """Median seconds to open and read a file four folders deep: by name, through the fence."""
    deep = scene.root / "a" / "b" / "c" / "d"
    deep.mkdir(parents=True)
    (deep / "f.py").write_text("x = 1\n" * 50)
    path = "a/b/c/d/f.py"

    def by_name() -> None:
        scene.workspace.resolve(path).read_bytes()

    def fenced() -> None:
        with scene.workspace.open_file(path, tool="read_file") as opened:
            opened.handle.read()

    by_name_times = timings(by_name, runs)
    fenced_times = timings(fenced, runs)
    return percentile(by_name_times, 50), percentile(fenced_times, 50)


# -- report ----------------------------------------------------------------------------------------


def run_attacks(tries: int) -> list[Attack]:
    attacks: list[Attack] = []
    steps: list[Callable[[Scene], list[Attack]]] = [
        lambda s: [race(s, "read_file", tries, folder=False)],
        lambda s: [race(s, "write_file", tries, folder=False)],
        lambda s: [race(s, "read_file", tries // 2, folder=True)],
        lambda s: [race(s, "write_file", tries // 2, folder=True)],
        hard_links,
        linked_folder,
        lambda s: [linked_instructions(s)],
    ]
    for step in steps:
        with tempfile.TemporaryDirectory(prefix="cf-attack-") as base:
            attacks.extend(step(Scene(Path(base))))
    return attacks


def report(attacks: Sequence[Attack], by_name_s: float, fenced_s: float) -> str:
    rows = [
        [
            a.name,
            f"`{a.tool}`",
            f"{a.tries:,}",
            f"{a.escapes_by_name:,}",
            f"**{a.escapes:,}**",
            ", ".join(f"{kind} {count:,}" for kind, count in a.outcomes.most_common()),
        ]
        for a in attacks
    ]
    tries = sum(a.tries for a in attacks)
    escapes = sum(a.escapes for a in attacks)
    by_name = sum(a.escapes_by_name for a in attacks)
    table = markdown_table(
        [
            "attack",
            "tool",
            "tries",
            "escapes: check by name, then open by name",
            "escapes: contextfold",
            "what the tool answered",
        ],
        rows,
    )
    ratio = fenced_s / by_name_s if by_name_s else 0.0
    return (
        f"Workspace attacks tried and stopped: **{escapes} escapes in {tries:,} tries** "
        f"(a check by name then an open by name, as the tools did before: {by_name:,}). An "
        "escape is a try that returned a secret from outside the workspace or changed a file "
        "there. Answers: `done` the call worked on the file inside; `outside_workspace` the "
        "check saw the link; `path_changed` a link appeared after the check and the descriptor "
        "walk stopped at it; `hard_link` a file with a name outside.\n\n"
        f"{table}\n\n"
        f"Cost of the fence: opening and reading a file four folders deep takes "
        f"{fenced_s * 1e6:.0f} µs through descriptors against {by_name_s * 1e6:.0f} µs by name "
        f"(median of {TIMING_RUNS:,}; {ratio:.2f}x). Reproduce: "
        "`python -m benchmarks.workspace_attacks`."
    )


def main(argv: Sequence[str] | None = None) -> None:
    args = benchmark_arguments(__doc__.splitlines()[0]).parse_args(argv)
    tries = QUICK_RACE_TRIES if args.quick else RACE_TRIES
    attacks = run_attacks(tries)
    with tempfile.TemporaryDirectory(prefix="cf-attack-") as base:
        by_name_s, fenced_s = open_cost(Scene(Path(base)), TIMING_RUNS // (10 if args.quick else 1))
    body = report(attacks, by_name_s, fenced_s)
    print(body)
    if not should_write(args):
        return
    write_section("workspace_attacks", "Hostile input: the workspace", body, quick=args.quick)
    escapes = sum(a.escapes for a in attacks)
    tries_total = sum(a.tries for a in attacks)
    record_targets(
        "workspace_attacks",
        [
            target(
                "workspace",
                "0 escapes from the workspace: swap races, hard links, linked AGENTS.md",
                f"{escapes} in {tries_total:,} tries",
                escapes == 0,
                versus=f"check by name: {sum(a.escapes_by_name for a in attacks):,} escapes",
            )
        ],
        {"escapes": escapes, "tries": tries_total, "open_cost_ratio": fenced_s / by_name_s},
        quick=args.quick,
    )


if __name__ == "__main__":
    main()
