"""How the source reads: import cycles, the files one turn passes through, the public API's size,
and the longest functions.

These are the figures the engine-package restructuring is judged by (issue 16). They are counted,
not timed, so a quick run gives the same figures as a full one.

- **Import cycles**: the modules of ``src/contextfold`` and the imports between them, read from
  the source (``ast``). An import at module level (outside ``if TYPE_CHECKING:``) binds the
  modules together at import time; a cycle is a strongly connected group of two or more modules.
  Imports inside functions are counted in a second figure: they run later, so they cannot fail at
  import time, but they still tie the modules' meanings together.
- **Files per turn**: one agent turn through a session (``prepare()``, the reply, the tool
  results) traced with :func:`sys.setprofile`: the ``contextfold`` files whose code runs, the
  calls from one file into another, and how often the turn enters the file that holds
  ``Session``. A steady turn and a compaction turn are traced separately.
- **One pass**: the ``prepare()`` of those turns alone, traced the same way on calls and returns:
  the files its code runs in, its *stops* (each stretch of consecutive calls and returns inside
  one file), how many of those stops come back to a file the pass had already left, and how many
  times it measures the request (calls of ``engine/_measure.py``'s ``measure``).
- **Public API**: the length of ``contextfold.__all__``.
- **Longest functions**: the ten with the most lines (``def`` to the last line).
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

if __package__ in (None, ""):  # run as a file: import as a package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import (
    ROOT,
    benchmark_arguments,
    markdown_table,
    should_write,
    write_section,
)

SOURCE = Path(os.environ.get("CONTEXTFOLD_ARCHITECTURE_SOURCE", ROOT / "src" / "contextfold"))
"""The package measured: this checkout's, or (set by ``--against``) an earlier revision's."""
PACKAGE = "contextfold"


# --------------------------------------------------------------------------------------------------
# the import graph
# --------------------------------------------------------------------------------------------------


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(SOURCE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


IMPORT_TIME = "at import time"
IN_FUNCTIONS = "counting imports inside functions"
WITH_TYPES = "counting imports for type checking too"
LEVELS = (IMPORT_TIME, IN_FUNCTIONS, WITH_TYPES)
"""Which imports tie two modules together, from the narrowest to the widest reading."""


def _imports(tree: ast.Module, level: str) -> Iterator[ast.ImportFrom | ast.Import]:
    """The import statements that count at ``level``: module level (outside ``if
    TYPE_CHECKING:``) always; those inside functions from :data:`IN_FUNCTIONS` on; those under
    ``if TYPE_CHECKING:`` only at :data:`WITH_TYPES`."""
    deferred = level != IMPORT_TIME
    typing_only = level == WITH_TYPES

    def walk(nodes: list[ast.stmt], in_function: bool) -> Iterator[ast.ImportFrom | ast.Import]:
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                if deferred or not in_function:
                    yield node
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                if typing_only:
                    yield from walk(node.body, in_function)
                yield from walk(node.orelse, in_function)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if deferred:
                    yield from walk(node.body, True)
            else:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.stmt):
                        yield from walk([child], in_function)

    yield from walk(tree.body, False)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def import_graph(level: str) -> dict[str, set[str]]:
    """Module -> the ``contextfold`` modules it imports (a name imported from a package counts as
    its submodule when one of that name exists)."""
    modules = source_modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        is_package = path.name == "__init__.py"
        for node in _imports(tree, level):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _resolve(name, is_package, node)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target.startswith(PACKAGE) and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups, key=lambda group: (-len(group), group))


# --------------------------------------------------------------------------------------------------
# functions
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FunctionLength:
    where: str
    name: str
    lines: int


def longest_functions(count: int = 10) -> list[FunctionLength]:
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                where = f"{path.relative_to(SOURCE.parent)}:{node.lineno}"
                found.append(FunctionLength(where, node.name, lines))
    return sorted(found, key=lambda f: (-f.lines, f.where))[:count]


# --------------------------------------------------------------------------------------------------
# one turn, traced
# --------------------------------------------------------------------------------------------------


@dataclass
class TurnTrace:
    """What one turn's calls crossed: the files entered and the calls between files."""

    session_file: str
    files: set[str] = field(default_factory=set)
    crossings: int = 0
    session_entries: int = 0

    def profile(self, frame: FrameType, event: str, _arg: object) -> None:
        if event != "call":
            return
        callee = frame.f_code.co_filename
        if not callee.startswith(str(SOURCE)):
            return
        self.files.add(callee)
        caller = frame.f_back.f_code.co_filename if frame.f_back else ""
        if caller != callee and caller.startswith(str(SOURCE)):
            self.crossings += 1
            if callee == self.session_file:
                self.session_entries += 1


@dataclass
class PassTrace:
    """One ``prepare()``: the files it runs in, its stops, its returns to a file it had left,
    and its measurements (see the module docstring)."""

    files: set[str] = field(default_factory=set)
    stops: int = 0
    returns: int = 0
    measures: int = 0
    _current: str = ""
    _left: set[str] = field(default_factory=set)

    def profile(self, frame: FrameType, event: str, _arg: object) -> None:
        if event == "call":
            where = frame.f_code.co_filename
            if where.endswith("_measure.py") and frame.f_code.co_name == "measure":
                self.measures += 1
        elif event == "return":
            where = frame.f_back.f_code.co_filename if frame.f_back else ""
        else:
            return
        if not where.startswith(str(SOURCE)) or where == self._current:
            return
        self.files.add(where)
        self.stops += 1
        if where in self._left:
            self.returns += 1
        if self._current:
            self._left.add(self._current)
        self._current = where


def _both(turn: TurnTrace, one_pass: PassTrace) -> Callable[[FrameType, str, object], None]:
    """A profile function feeding both traces."""

    def profile(frame: FrameType, event: str, arg: object) -> None:
        turn.profile(frame, event, arg)
        one_pass.profile(frame, event, arg)

    return profile


def _session_file() -> str:
    session_class = importlib.import_module("contextfold").Session
    return str(Path(sys.modules[session_class.__module__].__file__ or ""))


def trace_turns(turns: int) -> tuple[TurnTrace, TurnTrace, PassTrace, PassTrace]:
    """Drive a session on a 16k window through ``turns`` synthetic agent turns; trace the last
    steady turn and the first compaction turn (its prepare() compacts), and their passes."""
    from benchmarks.engine_overhead import SYSTEM, synthetic_turns
    from contextfold import (
        ChatResponse,
        ContextEngine,
        ContextPolicy,
        Message,
        ToolCallPart,
        Usage,
        model_for_window,
    )

    session_file = _session_file()
    steady = compaction = None
    steady_pass = compaction_pass = None
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = ContextEngine(
            model_for_window(16_000),
            store=Path(folder) / "sessions.db",
            policy=ContextPolicy(background=False),
        )
        session = engine.new_session(title="architecture")
        session.add_user("Find where the parser is defined and fix its off-by-one.")
        for number, turn in enumerate(synthetic_turns(turns)):
            trace = TurnTrace(session_file)
            one_pass = PassTrace()

            sys.setprofile(_both(trace, one_pass))
            try:
                request = session.prepare(system=SYSTEM)
                sys.setprofile(trace.profile)  # the pass ends here; the turn goes on
                calls = [
                    ToolCallPart(f"call_{number}_{k}", name, arguments)
                    for k, (name, arguments) in enumerate(turn.calls)
                ]
                session.add_assistant(
                    ChatResponse(Message.assistant(turn.text, calls), Usage(request.tokens, 20))
                )
                for call, output in zip(calls, turn.outputs, strict=True):
                    session.add_tool_result(call.call_id, output, name=call.name)
            finally:
                sys.setprofile(None)
            if request.compaction is not None and compaction is None:
                compaction, compaction_pass = trace, one_pass
            elif request.compaction is None and number > 3:
                steady, steady_pass = trace, one_pass
        engine.close()
    if steady is None or compaction is None or steady_pass is None or compaction_pass is None:
        raise RuntimeError("the synthetic session had no steady or no compaction turn")
    return steady, compaction, steady_pass, compaction_pass


# --------------------------------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------------------------------


def measure(turns: int) -> dict[str, Any]:
    """Every figure, as plain JSON values (an earlier revision's come the same way)."""
    steady, compaction, steady_pass, compaction_pass = trace_turns(turns)
    package = importlib.import_module(PACKAGE)

    def traced(trace: TurnTrace) -> dict[str, int]:
        return {
            "files": len(trace.files),
            "crossings": trace.crossings,
            "session_entries": trace.session_entries,
        }

    def passed(trace: PassTrace) -> dict[str, int]:
        return {
            "files": len(trace.files),
            "stops": trace.stops,
            "returns": trace.returns,
            "measures": trace.measures,
        }

    return {
        "modules": len(source_modules()),
        "cycles": {level: cycles(import_graph(level)) for level in LEVELS},
        "all_size": len(package.__all__),
        "steady_turn": traced(steady),
        "compaction_turn": traced(compaction),
        "steady_pass": passed(steady_pass),
        "compaction_pass": passed(compaction_pass),
        "longest": [f.__dict__ for f in longest_functions()],
    }


def measure_revision(revision: str, turns: int) -> dict[str, Any]:
    """The same figures for the source of ``revision`` (checked out into a temporary folder and
    imported from there in a child process)."""
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", folder, revision],
            check=True,
            capture_output=True,
        )
        try:
            source = Path(folder) / "src"
            child = subprocess.run(
                [sys.executable, "-m", "benchmarks.architecture", "--json", "--no-write"]
                + (["--quick"] if turns < 60 else []),
                cwd=ROOT,
                env={
                    **os.environ,
                    "PYTHONPATH": os.pathsep.join([str(source), str(ROOT)]),
                    "CONTEXTFOLD_ARCHITECTURE_SOURCE": str(source / PACKAGE),
                },
                check=True,
                capture_output=True,
                text=True,
            )
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", folder],
                check=False,
                capture_output=True,
            )
    figures: dict[str, Any] = json.loads(child.stdout)
    return figures


def _turn_cells(turn: dict[str, int]) -> str:
    return (
        f"{turn['files']} files, {turn['crossings']:,} calls between files, "
        f"{turn['session_entries']} into Session's file"
    )


def _pass_cells(one: dict[str, int] | None) -> str:
    if one is None:
        return "–"
    return (
        f"{one['stops']} stops in {one['files']} files, {one['returns']} returns to a file it "
        f"had left, {one['measures']} measurements"
    )


def _summary_rows(figures: dict[str, Any]) -> list[str]:
    return [
        str(figures["modules"]),
        *(str(len(figures["cycles"][level])) for level in LEVELS),
        str(figures["all_size"]),
        _turn_cells(figures["steady_turn"]),
        _turn_cells(figures["compaction_turn"]),
        _pass_cells(figures.get("steady_pass")),
        _pass_cells(figures.get("compaction_pass")),
    ]


SUMMARY_LABELS = (
    "modules in `src/contextfold`",
    *(f"import cycles {level}" for level in LEVELS),
    "names in `contextfold.__all__`",
    "one steady agent turn",
    "one compaction turn",
    "one steady `prepare()`",
    "one compacting `prepare()`",
)


def report(figures: dict[str, Any], before: dict[str, Any] | None, revision: str) -> str:
    lines = [
        "`python -m benchmarks.architecture`: counted from the source and from traced agent "
        "turns (method in the script's docstring). Counts, not timings"
        + (f"; beside the same counts for revision `{revision}`." if before else "."),
        "",
    ]
    now = _summary_rows(figures)
    if before:
        then = _summary_rows(before)
        rows = [[label, a, b] for label, a, b in zip(SUMMARY_LABELS, then, now, strict=True)]
        lines.append(markdown_table(["", f"`{revision}`", "now"], rows))
    else:
        rows = [[label, a] for label, a in zip(SUMMARY_LABELS, now, strict=True)]
        lines.append(markdown_table(["", "now"], rows))
    lines.append("")
    for label, measured in ((f"`{revision}`", before), ("now", figures)):
        if not measured:
            continue
        for level, groups in measured["cycles"].items():
            if groups:
                lines.append(f"Cycles {level}, {label}:")
                lines.append("")
                lines += [f"- {len(group)} modules: " + ", ".join(group) for group in groups]
                lines.append("")
        lines.append(f"The ten longest functions, {label}:")
        lines.append("")
        lines.append(
            markdown_table(
                ["function", "where", "lines"],
                [[f"`{f['name']}`", f"`{f['where']}`", f["lines"]] for f in measured["longest"]],
            )
        )
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = benchmark_arguments(__doc__.splitlines()[0] if __doc__ else "architecture")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--against",
        metavar="REVISION",
        help="also count a git revision's source and show it beside this checkout's",
    )
    args = parser.parse_args(argv)
    turns = 30 if args.quick else 60
    figures = measure(turns)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    before = measure_revision(args.against, turns) if args.against else None
    text = report(figures, before, args.against or "")
    print(text)
    if should_write(args):
        write_section("architecture", "Source structure: import cycles, files per turn", text)


if __name__ == "__main__":
    main()
