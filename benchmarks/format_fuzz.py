"""Malformed transcripts: a bounded fuzz of every importer, counting what escapes but FormatError.

Seeds: for each of the seven formats, a small file rendered from one fixed conversation by the
test writers (``tests/formats/writers.py``), and, when ``../shared/data`` is present, records
sampled from the real corpus (Claude Code sessions, mini-swe-agent trajectories, tau-bench runs).
Each run mutates one seed (:func:`mutate`: one to three of :data:`MUTATIONS` — a value replaced
by another JSON type, deep nesting, huge numbers and timestamps, a missing key, a wrong type for
a key the importers branch on, records duplicated, dropped or swapped — and sometimes the text
truncated), writes it, reads it with the format's own importer and with ``load_transcripts``
(format detection), and counts what it read with both counters as ``contextfold count`` does.

A run fails when anything but :class:`~contextfold.FormatError` escapes (its site is the
innermost contextfold frame of the traceback), or when a ``FormatError`` does not name the file,
or names no line for a problem inside the content (:func:`problem`). The test
``tests/formats/test_fuzz.py`` drives the same mutations with hypothesis.

Run: ``python -m benchmarks.format_fuzz [--quick] [--runs N] [--seed N] [--write]``. To measure
older code, put its ``src`` first on ``PYTHONPATH``: sites are reported relative to whichever
``contextfold`` package was imported.
"""

from __future__ import annotations

import copy
import json
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

if __package__ in (None, ""):  # run as a file: import the repository's packages
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import contextfold
from benchmarks._results import (
    TRAJECTORIES,
    benchmark_arguments,
    markdown_table,
    should_write,
    write_section,
)
from contextfold.errors import FormatError, UnknownFormatError
from contextfold.messages import Message, Meta, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from contextfold.messages import Usage as _Usage
from contextfold.tokens.counters import HeuristicCounter, TiktokenCounter
from contextfold.transcripts import (
    SUPPORTED_FORMATS,
    load_chat,
    load_claude_code,
    load_codex,
    load_mini_swe_agent,
    load_tau_bench,
    load_transcripts,
)
from contextfold.transcripts._files import read_source
from contextfold.transcripts.generic import contextfold_from_source
from contextfold.wire import to_openai
from tests.formats import writers

RUNS = 30_000
"""Runs of a full benchmark (the issue's fuzz made 31,217)."""
QUICK_RUNS = 700
SEED = 13
"""The random seed: the same runs every time, so figures before and after a fix compare."""
MAX_MUTATIONS = 3
TEXT_SHARE = 0.25
"""Share of runs whose text is also damaged: cut short (a file still being written) or one
character replaced (a broken escape, bracket or quote)."""
ROOT_SHARE = 0.02
"""Share of mutations that replace the whole document (or every record) with an odd value."""
CORPUS_RECORDS = 40
"""Records (Claude Code lines, trajectory messages) a corpus seed keeps: real, and small."""
CORPUS_FILES = 2
"""Files sampled per corpus folder."""

PACKAGE_DIR = Path(contextfold.__file__).resolve().parent

Shape = Literal["json", "jsonl"]


@dataclass(frozen=True)
class Seed:
    """One well-formed transcript to mutate: a document, or the records of a JSON Lines file."""

    format: str
    origin: str
    shape: Shape
    value: Any

    @property
    def file_name(self) -> str:
        """A name the format is usually found under (the importers never trust it)."""
        if self.format == "mini-swe-agent":
            return "run.traj.json"
        return "transcript.jsonl" if self.shape == "jsonl" else "transcript.json"


# --------------------------------------------------------------------------------------------------
# Seeds
# --------------------------------------------------------------------------------------------------


def _conversation() -> list[Message]:
    """A short coding session with what importers branch on: a system prompt, thinking, two
    calls (one failing), usage on every reply."""
    usage = _Usage(1_200, 80, 400, 100)
    calls = [
        ToolCallPart.from_args("call_1", "bash", {"command": "pytest -q"}),
        ToolCallPart.from_args("call_2", "read_file", {"path": "src/app.py", "limit": 40}),
    ]
    return [
        Message.system("You are a careful coding agent."),
        Message.user("Fix the failing date parser in src/app.py."),
        Message(
            "assistant",
            (ThinkingPart("Run the tests first.", "sig-1"), TextPart("Running tests."), *calls),
            meta=Meta(usage=usage),
        ),
        Message.tool(ToolResultPart("call_1", "bash", "1 failed: test_parse_date", True)),
        Message.tool(ToolResultPart("call_2", "read_file", "def parse(s):\n    return s\n")),
        Message(
            "assistant", (TextPart("Fixed: parse() now reads ISO dates."),), meta=Meta(usage=usage)
        ),
    ]


def synthetic_seeds(messages: Sequence[Message] | None = None) -> list[Seed]:
    """One seed per supported format, rendered by the test writers from ``messages`` (default:
    :func:`_conversation`)."""
    messages = list(messages or _conversation())
    no_thinking = [
        m.with_parts(p for p in m.parts if not isinstance(p, ThinkingPart)) for m in messages
    ]
    export: list[dict[str, Any]] = [
        {"kind": "session", "id": "sess_fuzz", "model": "gpt-4o", "title": "fuzz", "metadata": {}}
    ]
    export += [
        {"kind": "message", "seq": n, "message": m.with_meta(created_at=1.7e9 + n).to_dict()}
        for n, m in enumerate(messages, 1)
    ]
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    conversation = [m for m in messages if m.role != "system"]
    seeds = [
        Seed("claude-code", "writers", "jsonl", writers.claude_code(conversation)),
        Seed("codex", "writers", "jsonl", writers.codex(messages)),
        Seed("mini-swe-agent", "writers", "json", writers.mini_swe_agent_native(no_thinking)),
        Seed("tau-bench", "writers", "json", writers.tau_bench([no_thinking, no_thinking[:3]])),
        Seed(
            "openai-messages",
            "writers",
            "json",
            {"model": "gpt-4o", "tools": tools, "messages": to_openai(no_thinking)},
        ),
        Seed("anthropic-messages", "writers", "json", writers.anthropic_request(messages)),
        Seed("contextfold", "writers", "jsonl", export),
    ]
    assert {s.format for s in seeds} == set(SUPPORTED_FORMATS)
    return seeds


def corpus_seeds(root: Path = TRAJECTORIES) -> list[Seed]:
    """Records sampled from the real corpus (the first files of each folder, cut to
    :data:`CORPUS_RECORDS` records); none when the corpus is absent."""
    if not root.is_dir():
        return []
    seeds: list[Seed] = []
    for path in sorted((root / "claude-code").glob("*.jsonl"))[:CORPUS_FILES]:
        lines = path.read_text(encoding="utf-8").splitlines()[:CORPUS_RECORDS]
        seeds.append(Seed("claude-code", path.name, "jsonl", [json.loads(x) for x in lines]))
    for folder in ("mini-swe-agent-deepseek", "mini-swe-agent-gemini3pro"):
        for path in sorted((root / folder).glob("*.json"))[:CORPUS_FILES]:
            document = json.loads(path.read_text(encoding="utf-8"))
            document["messages"] = document["messages"][:CORPUS_RECORDS]
            seeds.append(Seed("mini-swe-agent", path.name, "json", document))
    for path in sorted((root / "tau-bench").glob("*.json"))[:1]:
        runs = json.loads(path.read_text(encoding="utf-8"))[:CORPUS_FILES]
        for run in runs:
            run["traj"] = run["traj"][:CORPUS_RECORDS]
        seeds.append(Seed("tau-bench", path.name, "json", runs))
        seeds.append(Seed("openai-messages", path.name, "json", runs[0]["traj"]))
    return seeds


# --------------------------------------------------------------------------------------------------
# Mutations
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Raw:
    """JSON text put in verbatim where a value was (what ``json.dumps`` cannot write: deep
    nesting, 5,000-digit numbers, ``NaN``)."""

    text: str


def _nested(depth: int, opening: str, closing: str, inner: str = "0") -> Raw:
    return Raw(opening * depth + inner + closing * depth)


ODD_VALUES: tuple[Any, ...] = (
    None,
    True,
    False,
    0,
    -1,
    3.5,
    2**64,
    -(2**63),
    10**30,
    1e300,
    "",
    "x",
    "2026-01-01T00:00:00Z",
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
    "\ud800",
    [],
    [None],
    ["x", 1],
    {},
    {"type": "text"},
    {"role": "user"},
    Raw("1e999"),
    Raw("-1e999"),
    Raw("NaN"),
    Raw("9" * 400),
    Raw("9" * 5_000),
    Raw("1" + "0" * 25),
    _nested(8, "[", "]"),
    _nested(900, "[", "]"),
    _nested(990, '{"a":', "}"),
    _nested(3_000, "[", "]"),
    _nested(100_000, "[", "]"),
    _nested(2_000, '{"type":', "}"),
    "[" * 100_000 + "]" * 100_000,  # JSON text inside a string: arguments, tool outputs
    '{"a":' * 3_000 + "1" + "}" * 3_000,
)
"""Values that replace real ones: every JSON type, edges of numbers and dates, deep nesting."""

KEYS: tuple[str, ...] = (
    "type",
    "role",
    "usage",
    "timestamp",
    "content",
    "message",
    "payload",
    "messages",
    "traj",
    "info",
    "extra",
    "tool_calls",
    "function",
    "arguments",
    "input",
    "output",
    "text",
    "id",
    "uuid",
    "parentUuid",
    "call_id",
    "tool_use_id",
    "response",
    "created",
    "model",
    "system",
    "tools",
    "kind",
    "seq",
    "summary",
    "subtype",
    "compactMetadata",
    "isSidechain",
    "isCompactSummary",
    "last_token_usage",
    "info",
    "name",
    "parts",
    "meta",
)
"""Keys the importers branch on: targeted mutations pick these."""

Slot = tuple[Any, Any]  # (container, key or index)


def _slots(value: Any) -> Iterator[Slot]:
    """Every (container, key) place in a JSON value, the containers themselves included."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, child in node.items():
                yield node, key
                stack.append(child)
        elif isinstance(node, list):
            for index, child in enumerate(node):
                yield node, index
                stack.append(child)


def _containers(value: Any, kind: type) -> list[Any]:
    found = [value] if isinstance(value, kind) else []
    found += [c[k] for c, k in _slots(value) if isinstance(c[k], kind)]
    return found


def _odd(rng: random.Random) -> Any:
    return copy.deepcopy(rng.choice(ODD_VALUES))


def replace_any(value: Any, rng: random.Random) -> None:
    """A value anywhere (a whole record included) becomes another JSON type or an edge value."""
    slots = list(_slots(value))
    if slots:
        container, key = rng.choice(slots)
        container[key] = _odd(rng)


def replace_key(value: Any, rng: random.Random) -> None:
    """A key the importers branch on (``type``, ``role``, ``usage``...) gets an odd value."""
    slots = [(c, k) for c, k in _slots(value) if isinstance(c, dict) and k in KEYS]
    if slots:
        container, key = rng.choice(slots)
        container[key] = _odd(rng)


def add_key(value: Any, rng: random.Random) -> None:
    """An object gains a key the importers branch on, with an odd value."""
    objects = _containers(value, dict)
    if objects:
        rng.choice(objects)[rng.choice(KEYS)] = _odd(rng)


def delete_key(value: Any, rng: random.Random) -> None:
    """An object loses one of its keys."""
    objects = [o for o in _containers(value, dict) if o]
    if objects:
        chosen = rng.choice(objects)
        del chosen[rng.choice(list(chosen))]


def wrap(value: Any, rng: random.Random) -> None:
    """A value is wrapped in a few levels of lists or objects (the right data, one level off)."""
    slots = list(_slots(value))
    if slots:
        container, key = rng.choice(slots)
        for _ in range(rng.randint(1, 4)):
            container[key] = [container[key]] if rng.random() < 0.5 else {"x": container[key]}


def reshuffle(value: Any, rng: random.Random) -> None:
    """A list (records, messages, blocks) has an item duplicated, dropped, swapped, or is
    emptied."""
    lists = [item for item in _containers(value, list) if item]
    if not lists:
        return
    items = rng.choice(lists)
    action = rng.randrange(4)
    i, j = rng.randrange(len(items)), rng.randrange(len(items))
    if action == 0:
        items.insert(j, copy.deepcopy(items[i]))
    elif action == 1:
        del items[i]
    elif action == 2:
        items[i], items[j] = items[j], items[i]
    else:
        items.clear()


MUTATIONS: tuple[Callable[[Any, random.Random], None], ...] = (
    replace_any,
    replace_key,
    replace_key,
    add_key,
    delete_key,
    wrap,
    reshuffle,
)
"""Structural mutations; targeted replacement is drawn twice as often."""


def _dumps(value: Any, indent: int | None) -> str:
    raws: list[str] = []

    def placeholder(item: Any) -> str:
        if not isinstance(item, Raw):
            raise TypeError(f"cannot write {type(item).__name__}")
        raws.append(item.text)
        return f"\x00raw{len(raws) - 1}\x00"

    text = json.dumps(value, indent=indent, default=placeholder)
    for number, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x00raw{number}\x00"), raw, 1)
    return text


def render(seed: Seed, value: Any, rng: random.Random) -> str:
    """The file text of a (mutated) seed value: JSON Lines one record a line, JSON documents
    compact or indented."""
    if seed.shape == "jsonl" and isinstance(value, list):
        return "".join(_dumps(record, None) + "\n" for record in value)
    return _dumps(value, rng.choice((None, 1)))


def truncate(text: str, rng: random.Random) -> str:
    """The text cut short: anywhere, or inside its last line with no newline after (a JSON Lines
    file still being written), or one middle line cut (a damaged file)."""
    body = [line for line in text.split("\n") if line]
    choice = rng.randrange(3)
    if choice == 0 or len(body) < 2:
        return text[: rng.randrange(len(text) + 1)]
    if choice == 1:
        last = body[-1]
        return "\n".join(body[:-1]) + "\n" + last[: rng.randrange(len(last))]
    middle = rng.randrange(len(body) - 1)
    body[middle] = body[middle][: rng.randrange(len(body[middle]))]
    return "\n".join(body) + "\n"


def corrupt(text: str, rng: random.Random) -> str:
    """One character replaced by one that matters to JSON."""
    at = rng.randrange(len(text)) if text else 0
    return text[:at] + rng.choice('"{}[],:\\\n x0\x00\u00e9') + text[at + 1 :]


TEXT_MUTATIONS: tuple[Callable[[str, random.Random], str], ...] = (truncate, corrupt)


def mutate(seed: Seed, rng: random.Random) -> str:
    """The text of ``seed`` after one to :data:`MAX_MUTATIONS` mutations (and, for
    :data:`TEXT_SHARE` of runs, damage to the text itself)."""
    value = copy.deepcopy(seed.value)
    for _ in range(rng.randint(1, MAX_MUTATIONS)):
        if rng.random() < ROOT_SHARE:
            value = _odd(rng)
        else:
            rng.choice(MUTATIONS)(value, rng)
    text = render(seed, value, rng)
    if rng.random() < TEXT_SHARE:
        text = rng.choice(TEXT_MUTATIONS)(text, rng)
    return text


# --------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------

READERS: dict[str, Callable[[Path], object]] = {
    "claude-code": load_claude_code,
    "codex": load_codex,
    "mini-swe-agent": load_mini_swe_agent,
    "tau-bench": load_tau_bench,
    "openai-messages": load_chat,
    "anthropic-messages": load_chat,
    "contextfold": lambda path: contextfold_from_source(read_source(path)),
}
"""Each format's own importer (contextfold exports have no public loader of their own)."""

WHOLE_FILE_REASONS = ("the file is empty", "cannot read the file")
"""FormatError reasons about the whole file, which has no line to name (as for
:class:`~contextfold.UnknownFormatError`)."""

_COUNTERS = (TiktokenCounter("o200k_base"), HeuristicCounter())


def _count(result: object) -> None:
    """Count what was read, as ``contextfold count`` does (counting must not fail either)."""
    transcripts = result if isinstance(result, list) else [result]
    for transcript in transcripts:
        for part in transcript.walk():
            for counter in _COUNTERS:
                counter.count_messages(part.messages)
                counter.count_tools(part.tools)


def site(exc: BaseException) -> str:
    """Where an exception came from: its type and the innermost contextfold frame."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if Path(f.filename).resolve().is_relative_to(PACKAGE_DIR)]
    frame = (ours or frames or [None])[-1]
    if frame is None:
        return type(exc).__name__
    where = Path(frame.filename).resolve()
    shown = where.relative_to(PACKAGE_DIR) if where.is_relative_to(PACKAGE_DIR) else where.name
    return f"{type(exc).__name__} at {shown}:{frame.lineno} ({frame.name})"


def problem(exc: BaseException, path: Path) -> str | None:
    """What is wrong with an exception a reader raised for ``path`` (``None``: a proper
    :class:`FormatError`, naming the file, and the line unless the problem is the whole file)."""
    if not isinstance(exc, FormatError):
        return site(exc)
    raised_at = site(exc).split(" at ", 1)[-1]
    if exc.path != str(path):
        return f"FormatError not naming the file, at {raised_at}"
    whole_file = isinstance(exc, UnknownFormatError) or exc.reason.startswith(WHOLE_FILE_REASONS)
    if exc.line is None and not whole_file:
        return f"FormatError without a line, at {raised_at}"
    return None


def about_a_format_error(found: str) -> bool:
    """Whether a :func:`problem` is a FormatError lacking file or line (rather than another
    exception escaping)."""
    return found.startswith("FormatError ")


def read_mutated(seed: Seed, text: str, folder: Path) -> list[tuple[str, str]]:
    """Write ``text`` as ``seed``'s file in ``folder`` and read it with the format's importer and
    with ``load_transcripts``, counting what they read; (reader, problem) for each failure."""
    path = folder / seed.file_name
    path.write_text(text, encoding="utf-8")
    failures = []
    for reader_name, reader in ((seed.format, READERS[seed.format]), ("detect", load_transcripts)):
        try:
            _count(reader(path))
        except Exception as exc:  # the fuzz records whatever escapes
            found = problem(exc, path)
            if found is not None:
                failures.append((reader_name, found))
    return failures


# --------------------------------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------------------------------


@dataclass
class Tally:
    """Runs and failures of one format."""

    runs: int = 0
    failed: int = 0
    escaped: int = 0
    """Runs where something other than a FormatError escaped (the issue's measure)."""
    sites: Counter[str] = field(default_factory=Counter)


def fuzz(seeds: Sequence[Seed], runs: int, seed: int = SEED) -> tuple[dict[str, Tally], float]:
    """Per format, the runs made and what failed; and the slowest run's seconds."""
    rng = random.Random(seed)
    tallies = {name: Tally() for name in SUPPORTED_FORMATS}
    slowest = 0.0
    with tempfile.TemporaryDirectory(prefix="contextfold-fuzz-") as scratch:
        folder = Path(scratch)
        for _ in range(runs):
            chosen = rng.choice(seeds)
            text = mutate(chosen, rng)
            started = time.perf_counter()
            failures = read_mutated(chosen, text, folder)
            slowest = max(slowest, time.perf_counter() - started)
            tally = tallies[chosen.format]
            tally.runs += 1
            tally.failed += bool(failures)
            tally.escaped += any(not about_a_format_error(found) for _, found in failures)
            tally.sites.update(found for _, found in failures)
    return tallies, slowest


def report(tallies: dict[str, Tally], slowest: float, seeds: Sequence[Seed], seed: int) -> str:
    """The markdown body: a row per format, the total, and the failure sites."""

    def row(name: str, tally: Tally, corpus: int) -> tuple[object, ...]:
        escaping = sum(1 for where in tally.sites if not about_a_format_error(where))
        return (name, tally.runs, tally.escaped, escaping, tally.failed, len(tally.sites), corpus)

    total = Tally()
    rows = []
    for name, tally in tallies.items():
        rows.append(row(name, tally, sum(s.origin != "writers" for s in seeds if s.format == name)))
        total.runs += tally.runs
        total.failed += tally.failed
        total.escaped += tally.escaped
        total.sites.update(tally.sites)
    rows.append(row("**all**", total, sum(s.origin != "writers" for s in seeds)))
    headers = (
        "format",
        "runs",
        "runs where not a FormatError escaped",
        "its distinct sites",
        "runs failed (also: FormatError without file or line)",
        "all distinct sites",
        "corpus seeds",
    )
    sites = "\n".join(f"- {n} × {where}" for where, n in total.sites.most_common())
    return (
        f"{total.runs:,} mutated files (random seed {seed}), each read by its format's importer "
        "and by `load_transcripts`, then counted. A run fails when anything but a `FormatError` "
        "escapes, or when the `FormatError` names no file, or no line for a problem inside the "
        f"content. Slowest run: {slowest:.2f} s.\n\n{markdown_table(headers, rows)}\n\n"
        + (f"Failure sites:\n\n{sites}" if sites else "No failure site.")
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = benchmark_arguments(__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, help=f"runs (default {RUNS:,}; quick {QUICK_RUNS})")
    parser.add_argument("--seed", type=int, default=SEED, help="random seed")
    args = parser.parse_args(argv)
    runs = args.runs or (QUICK_RUNS if args.quick else RUNS)
    seeds = synthetic_seeds() + corpus_seeds()
    started = time.perf_counter()
    tallies, slowest = fuzz(seeds, runs, args.seed)
    body = report(tallies, slowest, seeds, args.seed)
    print(body)
    print(f"\n{time.perf_counter() - started:.1f} s")
    if should_write(args):
        write_section("format_fuzz", "Malformed input (importer fuzz)", body, quick=args.quick)


if __name__ == "__main__":
    main()
