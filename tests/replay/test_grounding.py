"""Grounding probes: what the agent uses after a compaction point, looked up in the view there;
failed approaches, looked up in the final view."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.baselines import BASELINE_SLIDING, replay_method
from contextfold.messages import Message, Meta, SummaryPart, ToolCallPart, ToolResultPart
from contextfold.model_registry import default_registry
from contextfold.replay import replay
from contextfold.replay.grounding import (
    GroundingPlan,
    GroundingTally,
    UsedItem,
    call_target,
    check_failed_approaches,
    check_items,
    extract_items,
    failed_approach_needle,
    failed_approaches,
    is_failed_result,
)
from contextfold.replay.probes import STATUSES, ViewText
from contextfold.tokens.counters import counter_for
from contextfold.transcripts import Transcript, load_transcript
from tests.replay.conftest import coding_session

CONFIG = "src/app/config.py"
REF = "ref_0123456789ab"


def _bash(call_id: str, command: str) -> ToolCallPart:
    return ToolCallPart.from_args(call_id, "bash", {"command": command})


def _session() -> list[Message]:
    """A task, a read of a config file (whose output names a setting), then a turn that edits
    that file and uses the setting: the path and the setting are used, and were seen before."""
    read = _bash("c1", f"cat {CONFIG}")
    edit = ToolCallPart.from_args(
        "c2", "Edit", {"file_path": CONFIG, "old_string": "MAX_RETRIES = 3", "new": "x"}
    )
    return [
        Message.user("Raise the retry limit in the app config.", id="task"),
        Message.assistant("Reading the config.", [read], id="a1"),
        Message.tool(ToolResultPart("c1", "bash", "MAX_RETRIES = 3\nTIMEOUT_MS = 2500"), id="r1"),
        Message.assistant("I will raise MAX_RETRIES.", [edit], id="a2"),
        Message.tool(ToolResultPart("c2", "Edit", "The file was updated."), id="r2"),
    ]


# --------------------------------------------------------------------------------------------------
# extraction
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("edit src/pkg/mod.py now", {("path", "src/pkg/mod.py")}),
        ("see README.md.", {("path", "readme.md")}),
        (
            "call parse_args then getValue",
            {("identifier", "parse_args"), ("identifier", "getvalue")},
        ),
        ("use os.path here", {("identifier", "os.path")}),
        ("line 1234, not 42", {("number", "1234")}),
        ("pi is 3.14159", {("number", "3.14159")}),
        ('it printed "connection refused"', {("quoted", "connection refused")}),
        ("plain words only, nothing else", set()),
        # The parts of a path are not items of their own.
        ("open tests/test_slug_2024.py", {("path", "tests/test_slug_2024.py")}),
    ],
)
def test_extract_items(text: str, expected: set[tuple[str, str]]) -> None:
    assert {(item.kind, item.text) for item in extract_items(text)} == expected


def test_the_plan_keeps_only_what_appeared_before_the_compaction_point() -> None:
    messages = _session()
    plan = GroundingPlan(messages)
    used = {item.text for item in plan.items_at(3)}
    # The file path and the setting came from the history; the quoted edit text too.
    assert {CONFIG.casefold(), "max_retries"} <= used
    # At the first turn nothing of the path had been seen but the task (which does not name it).
    assert CONFIG.casefold() not in {item.text for item in plan.items_at(1)}
    assert plan.items_at(0) == ()  # not a turn


def test_the_plan_looks_k_turns_ahead() -> None:
    messages = [
        Message.user("The flag is ENABLE_CACHE_V2.", id="task"),
        Message.assistant("Step one.", id="a1"),
        Message.assistant("Step two.", id="a2"),
        Message.assistant("Now set ENABLE_CACHE_V2.", id="a3"),
    ]
    assert GroundingPlan(messages, lookahead=2).items_at(1) == ()
    assert GroundingPlan(messages, lookahead=3).items_at(1) == (
        UsedItem("identifier", "enable_cache_v2"),
    )


# --------------------------------------------------------------------------------------------------
# statuses at a compaction point
# --------------------------------------------------------------------------------------------------

_ITEMS = (UsedItem("path", CONFIG.casefold()), UsedItem("identifier", "timeout_ms"))
_OUTPUT = "MAX_RETRIES = 3\nTIMEOUT_MS = 2500"


def _view_whole() -> list[Message]:
    return _session()[:3]


def _view_summarized_away() -> list[Message]:
    summary = Message(
        "user", (SummaryPart("## Progress\n- read the config"),), meta=Meta(kind="summary")
    )
    return [_session()[0], summary]


def _view_summary_naming_them() -> list[Message]:
    summary = Message(
        "user",
        (SummaryPart(f"Read `{CONFIG}`: TIMEOUT_MS = 2500"),),
        meta=Meta(kind="summary"),
    )
    return [_session()[0], summary]


def _view_offloaded() -> list[Message]:
    messages = _session()
    placeholder = f"[bash output masked: 2 lines → read_result {REF}]"
    masked = messages[2].with_parts([ToolResultPart("c1", "bash", placeholder, ref=REF)])
    return [messages[0], Message.assistant("Reading.", id="a1"), masked]


@pytest.mark.parametrize(
    ("view", "with_store", "expected"),
    [
        (_view_whole, True, "verbatim"),
        (_view_summarized_away, True, "lost"),
        (_view_summary_naming_them, False, "summary"),
        # The path was in the call's arguments (dropped) and the output (offloaded): recoverable
        # through the ref with a store, lost without one.
        (_view_offloaded, True, "recoverable"),
        (_view_offloaded, False, "lost"),
    ],
    ids=["whole", "summarized-away", "summary-names-them", "offloaded", "offloaded-no-store"],
)
def test_grounding_status_of_used_items(
    view: Callable[[], list[Message]], with_store: bool, expected: str
) -> None:
    store = {REF: f"$ cat {CONFIG}\n{_OUTPUT}"}
    counts = check_items(_ITEMS, view(), store.get if with_store else None)
    # Both items share one fate in each view; every other status counts none.
    assert counts == {status: (2 if status == expected else 0) for status in STATUSES}


def test_the_tally_pools_points_and_skips_points_with_nothing_used() -> None:
    tally = GroundingTally()
    tally.add(_ITEMS, ViewText.of(_view_whole()))
    tally.add((), ViewText.of(_view_whole()))
    tally.add(_ITEMS, ViewText.of(_view_summarized_away()))
    assert (tally.points, tally.total, tally.in_view, tally.lost) == (2, 4, 2, 2)
    assert tally.lost_examples == [f"path: {CONFIG.casefold()}", "identifier: timeout_ms"]
    pooled = GroundingTally()
    pooled.merge(tally)
    pooled.merge(tally)
    assert pooled.to_json()["counts"] == {"verbatim": 4, "summary": 0, "recoverable": 0, "lost": 4}


# --------------------------------------------------------------------------------------------------
# failed approaches
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "is_error", "failed"),
    [
        ("ok", True, True),
        ("Traceback (most recent call last):\n  File 'x.py'\nKeyError: 'a'", False, True),
        ("ModuleNotFoundError: No module named 'foo'", False, True),
        ("error: pathspec 'x' did not match", False, True),
        ("bash: pytestt: command not found", False, True),
        ("<returncode>2</returncode>\n<output></output>", False, True),
        ("<returncode>0</returncode>\n<output>fine</output>", False, False),
        ("    Raises:\n        ValueError: when empty", False, False),  # a docstring, indented
        ("1 passed in 0.1s", False, False),
    ],
)
def test_is_failed_result(content: str, is_error: bool, failed: bool) -> None:
    assert is_failed_result(content, is_error) is failed


@pytest.mark.parametrize(
    ("call", "target"),
    [
        (ToolCallPart.from_args("c", "Edit", {"file_path": CONFIG}), CONFIG),
        (_bash("c", "python -m pytest tests/test_a.py -k slow"), "tests/test_a.py"),
        (_bash("c", "cd /testbed && python reproduce.py"), "reproduce.py"),
        (_bash("c", "git commit -m fix"), "git commit"),
        (ToolCallPart.from_args("c", "think", {"thought": "hmm"}), None),
    ],
)
def test_call_target(call: ToolCallPart, target: str | None) -> None:
    assert call_target(call) == target


def _failing_then_superseded() -> list[Message]:
    first = _bash("c1", "python -m pytest tests/test_a.py")
    retry = _bash("c2", "python -m pytest tests/test_a.py")  # the same call: a retry
    other = _bash("c3", "python -m pytest tests/test_a.py -p no:cacheprovider")
    unrelated = _bash("c4", "ls src")
    return [
        Message.user("Make the tests pass.", id="task"),
        Message.assistant("", [first], id="a1"),
        Message.tool(ToolResultPart("c1", "bash", "ImportError: cannot import x", True), id="r1"),
        Message.assistant("", [retry], id="a2"),
        Message.tool(ToolResultPart("c2", "bash", "ImportError: cannot import x", True), id="r2"),
        Message.assistant("", [unrelated], id="a3"),
        Message.tool(ToolResultPart("c4", "bash", "app"), id="r4"),
        Message.assistant("", [other], id="a4"),
        Message.tool(ToolResultPart("c3", "bash", "1 passed"), id="r3"),
    ]


def test_a_failed_call_is_an_approach_only_once_a_different_call_supersedes_it() -> None:
    found = failed_approaches(_failing_then_superseded())
    # Both failing runs were superseded by the different one; the passing one is no failure.
    assert [(a.message_index, a.target) for a in found] == [
        (1, "tests/test_a.py"),
        (3, "tests/test_a.py"),
    ]
    assert found[0].needle == "python -m pytest tests/test_a.py"
    # Never superseded: not an approach the agent abandoned.
    assert failed_approaches(_failing_then_superseded()[:5]) == []


def test_the_needle_is_the_first_line_of_the_longest_argument() -> None:
    call = ToolCallPart.from_args(
        "c", "Edit", {"file_path": "a.py", "old_string": "def f():\n    return 1"}
    )
    assert failed_approach_needle(call) == "def f():"


def test_failed_approaches_kept_summarized_or_lost_in_the_final_view() -> None:
    messages = _failing_then_superseded()
    found = failed_approaches(messages)
    kept = check_failed_approaches(found, messages)
    assert kept["verbatim"] == 2
    summary = Message(
        "user",
        (SummaryPart("Tried `python -m pytest tests/test_a.py`: ImportError."),),
        meta=Meta(kind="summary"),
    )
    assert check_failed_approaches(found, [messages[0], summary])["summary"] == 2
    assert check_failed_approaches(found, [messages[0], messages[-1]])["lost"] == 2
    # A known limit of matching by wording: the superseding call quotes the failed one whole.
    assert check_failed_approaches(found, [messages[0], messages[-2]])["verbatim"] == 2


# --------------------------------------------------------------------------------------------------
# wired into the replays
# --------------------------------------------------------------------------------------------------


def _coding_transcript(tmp_path: Path) -> Transcript:
    path = tmp_path / "session.json"
    path.write_text(json.dumps(coding_session(40)))
    return load_transcript(path)


def test_the_engine_replay_probes_grounding_at_its_compaction_points(tmp_path: Path) -> None:
    transcript = _coding_transcript(tmp_path)
    run = replay(transcript, "summarize", window=6_000)
    compacted = sum(1 for t in run.turns if t.edits)
    assert compacted > 0
    assert 0 < run.grounding.points <= compacted
    assert run.grounding.total == sum(run.grounding.counts.values()) > 0
    assert run.failed_approaches is not None
    assert run.to_json(turns=False)["grounding"]["points"] == run.grounding.points


def test_a_baseline_is_probed_at_each_request_it_cut_and_never_recovers(tmp_path: Path) -> None:
    transcript = _coding_transcript(tmp_path)
    info = replace(default_registry().get("gpt-4o"), context_window=6_000)
    run = replay_method(BASELINE_SLIDING, transcript, info, counter_for(info), ())
    cut = sum(1 for t in run.turns if t.edits)
    assert cut > 0 and 0 < run.grounding.points <= cut
    assert run.grounding.recoverable == 0
