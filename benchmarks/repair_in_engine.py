"""History repair inside the engine: what a turn costs when the view carries one old defect.

A session grows to N messages of synthetic agent turns (a reply with one call, a 30-line output,
usage reported as a provider reports it) through a window large enough that nothing is
compacted. In one copy, the second call is never answered (a crash mid-call), so every request
after it needs a repair. ``prepare()`` is timed in CPU time on the turns after the view reaches N
messages, in both copies, beside a full ``normalize.repair`` of the defective view: what every
turn paid on top before the engine kept the repaired view (it also recounted the view).

Run alone: ``python -m benchmarks.repair_in_engine [--quick]`` prints the table; the ``outputs``
benchmark writes it to RESULTS.md.
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Sequence
from functools import partial

from benchmarks._results import markdown_table, timings
from contextfold import ContextEngine, ContextPolicy, Message, ToolCallPart, model_for_window
from contextfold.history.repair import repair
from contextfold.messages import Usage

SIZES = (1_000, 3_000)
QUICK_SIZES = (300,)
TIMED_TURNS = 100
QUICK_TIMED_TURNS = 20
HEADERS = [
    "view (messages)",
    "prepare p50, clean view (ms)",
    "prepare p50, one old defect (ms)",
    "full repair of that view (ms, what each turn added before)",
]
_SYSTEM = "You are a careful coding agent."
_TASK = "Fix the failing date parser."


def _output(turn: int) -> str:
    return "\n".join(f"src/mod{turn}.py:{i}: value = compute({i}, {turn})" for i in range(30))


def grow(size: int, timed_turns: int, *, defect: bool) -> tuple[list[float], list[Message]]:
    """CPU seconds of each ``prepare()`` after the view reaches ``size`` messages, and the view."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # this machine's SQLite warns about the WAL bug
        engine = ContextEngine(
            model_for_window(5_000_000, max_output_tokens=4_000),
            store=":memory:",
            policy=ContextPolicy(background=False),
        )
    try:
        session = engine.new_session(title="repair in the engine")
        session.add_user(_TASK)
        times: list[float] = []
        turn = 0
        while len(times) < timed_turns:
            turn += 1
            timed = len(session.view) >= size
            started = time.thread_time()
            request = session.prepare(system=_SYSTEM)
            if timed:
                times.append(time.thread_time() - started)
            call = ToolCallPart.from_args(f"call_{turn}", "bash", {"command": f"cat mod{turn}"})
            reply = Message.assistant(f"Reading module {turn}.", [call])
            session.add_assistant(reply, usage=Usage(request.tokens, 30))
            if defect and turn == 2:
                continue  # the tool never answered
            session.add_tool_result(call.call_id, _output(turn), name="bash")
        return times, list(session.view)
    finally:
        engine.close()


def rows(quick: bool) -> list[list[object]]:
    """One row per view size."""
    out: list[list[object]] = []
    turns = QUICK_TIMED_TURNS if quick else TIMED_TURNS
    for size in QUICK_SIZES if quick else SIZES:
        clean, _ = grow(size, turns, defect=False)
        defective, view = grow(size, turns, defect=True)
        full_repair = partial(repair, view, provider="anthropic")
        full = statistics.median(timings(full_repair, 5 if quick else 20, time.thread_time))
        out.append(
            [
                f"{size:,}",
                f"{statistics.median(clean) * 1e3:.2f}",
                f"{statistics.median(defective) * 1e3:.2f}",
                f"{full * 1e3:.2f}",
            ]
        )
    return out


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one small view, a few turns")
    args = parser.parse_args(argv)
    print(markdown_table(HEADERS, rows(args.quick)))


if __name__ == "__main__":
    main()
