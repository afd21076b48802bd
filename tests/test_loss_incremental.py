"""The loss report a session keeps (issue 28): a :class:`LossTracker` that remembers what earlier
reports read gives, at every compaction, the very report a full recomputation gives: the same
items in the same order, the same messages, the same facts. Checked at every compaction of real
replays (the shared transcripts, skipped when absent) and of synthetic sessions, against a new
tracker and against the plain lookups the report was first written with (every fact looked up
in every text of both views)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.engine_overhead import (
    corpus_turns,
    grown_session,
)
from contextfold.messages import Message
from contextfold.replay import DEFAULT_PRESETS, replay
from contextfold.retention import _fact_index as fact_index
from contextfold.retention import loss as loss_module
from contextfold.retention.ledger import (
    Identifiers,
    Ledger,
    LedgerItem,
    message_identifiers,
    stored_refs,
)
from contextfold.retention.loss import (
    LossItem,
    LossReport,
    LossTracker,
    _facts,
    _ledger_needles,
    _messages_out,
)
from contextfold.retention.probes import Probe, ViewText, is_summary, normalize
from contextfold.transcripts import Transcript, load_transcript, load_transcripts
from tests.conftest import shared_path
from tests.replay.conftest import EXAMPLE, coding_session

# --------------------------------------------------------------------------------------------------
# The plain report: every fact looked up in both views' whole text, nothing remembered
# --------------------------------------------------------------------------------------------------


class _PlainPlaces:
    def __init__(self, view: ViewText, pinned: str, ledger: Ledger) -> None:
        self.view = view
        self.pinned = pinned
        self.listed = normalize(ledger.render())

    def place(self, needles: Sequence[str]) -> str:
        if self.view.shows(needles):
            return "verbatim"
        if any(n in self.view.in_summary for n in needles):
            return "summary"
        if any(n in self.pinned for n in needles):
            return "pinned"
        if any(n in self.listed for n in needles):
            return "ledger"
        return "recoverable" if self.view.holding_ref(needles) is not None else "lost"


def plain_report(
    before: Sequence[Message],
    after: Sequence[Message],
    *,
    pins: Iterable[str] = (),
    ledger: Ledger | None = None,
    previous_ledger: Ledger | None = None,
    read_ref: Callable[[str], str | None] | None = None,
    known: Iterable[Probe] = (),
) -> LossReport:
    ledger = ledger or Ledger()
    previous_ledger = previous_ledger or Ledger()
    pinned = normalize("\n".join(pins))
    was = _PlainPlaces(
        ViewText.of(before, read_ref, extra_refs=previous_ledger.refs), pinned, previous_ledger
    )
    now = _PlainPlaces(ViewText.of(after, read_ref, extra_refs=ledger.refs), pinned, ledger)
    facts = _facts(before, known)
    items: list[LossItem] = []
    lost_sources: set[str] = set()
    for probe in facts:
        place = now.place(probe.needles)
        if place == "verbatim" or place == was.place(probe.needles):
            continue
        ref = now.view.holding_ref(probe.needles) if place == "recoverable" else None
        items.append(LossItem(probe.kind, probe.text, place, ref))  # type: ignore[arg-type]
        if place == "lost":
            lost_sources.update(probe.sources)
    messages = _messages_out(before, after, frozenset(now.view.refs), lost_sources)
    return LossReport(tuple(items), tuple(messages), tuple(facts))


# --------------------------------------------------------------------------------------------------
# Every report of a run, checked as it is made
# --------------------------------------------------------------------------------------------------


@contextmanager
def checked_reports(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[LossReport]]:
    """Check every report a session's tracker makes against a new tracker's and the plain
    one, and the ledger items it finds out of view, the refs it finds stored and the
    identifiers it read of each message against plain lookups; the reports made."""
    made: list[LossReport] = []
    kept = LossTracker.report

    def report(self: LossTracker, *args: Any, **kwargs: Any) -> LossReport:
        known = tuple(kwargs.pop("known", ()))
        got = kept(self, *args, known=known, **kwargs)
        assert got == kept(LossTracker(), *args, known=known, **kwargs)
        assert got == plain_report(*args, known=known, **kwargs)
        made.append(got)
        return got

    kept_left = LossTracker.left_the_view

    def left_the_view(
        self: LossTracker, items: Iterable[LedgerItem], after: Sequence[Message]
    ) -> list[LedgerItem]:
        items = list(items)
        got = kept_left(self, items, after)
        view = ViewText.of([m for m in after if not is_summary(m)])
        assert got == [i for i in items if not view.shows(_ledger_needles(i))]
        return got

    kept_stored = LossTracker.stored_refs

    def stored(self: LossTracker, view: Sequence[Message]) -> frozenset[str]:
        got = kept_stored(self, view)
        assert got == stored_refs(view)
        return got

    kept_identifiers = LossTracker.identifiers

    def identifiers(self: LossTracker, message: Message) -> Identifiers:
        got = kept_identifiers(self, message)
        assert got == message_identifiers(message)
        return got

    with monkeypatch.context() as patch:
        patch.setattr(loss_module.LossTracker, "identifiers", identifiers)
        patch.setattr(loss_module.LossTracker, "stored_refs", stored)
        patch.setattr(loss_module.LossTracker, "report", report)
        patch.setattr(loss_module.LossTracker, "left_the_view", left_the_view)
        yield made


def _replayed(
    transcripts: Iterable[Transcript], monkeypatch: pytest.MonkeyPatch, window: int = 16_000
) -> int:
    """Replay each transcript with every default preset at a small window, checking every
    report; the number of reports with an item."""
    with checked_reports(monkeypatch) as made:
        for transcript in transcripts:
            for preset in DEFAULT_PRESETS:
                replay(transcript, preset, window=window)
    return sum(1 for r in made if r.items)


@pytest.mark.shared_data
def test_every_report_of_real_replays_is_the_full_recomputation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = shared_path("trajectories")
    deepseek = sorted((root / "mini-swe-agent-deepseek").glob("*.json"))
    transcripts = [
        load_transcript(max(deepseek, key=lambda p: p.stat().st_size)),
        load_transcript(deepseek[0]),
        load_transcript(root / "claude-code" / "tool_heavy.jsonl"),
        *load_transcripts(root / "tau-bench" / "gpt-4o-airline.json")[:1],
    ]
    assert _replayed(transcripts, monkeypatch) > 0


@pytest.mark.shared_data
def test_every_report_of_the_engine_overhead_session_is_the_full_recomputation(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The engine's own path (TurnState.accounted at each compaction) on the session the
    # engine_overhead benchmark times, grown past a few dozen compactions.
    turns, _ = corpus_turns()
    with checked_reports(monkeypatch) as made:
        engine, _, _ = grown_session(tmp_path, 2_500, turns)
        engine.close()
    assert len(made) >= 10
    assert sum(1 for r in made if r.items) > 0


def _synthetic_session(steps: int) -> dict[str, Any]:
    """An OpenAI-messages session whose facts come and go: files edited, failing runs with
    error lines (some met again later), the user's constraints along the way, ids and paths
    quoted again in later outputs."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the parser crash on empty input. Never touch setup.py."},
    ]
    for step in range(steps):
        module = step % 7
        if step % 4 == 0:
            name, args = "write_file", {"path": f"src/pkg/mod{module}.py", "content": "x = 1\n"}
            output = f"Wrote src/pkg/mod{module}.py"
        elif step % 4 == 1:
            name, args = "bash", {"command": f"python -m pkg.mod{module}"}
            output = "\n".join(
                [f"line {i}: building mod{module} id {step:04d}a{module:03d}f9c" for i in range(30)]
                + [
                    "Traceback (most recent call last):",
                    f'  File "src/pkg/mod{module}.py", line 9, in run',
                    f"ValueError: module {module} has no attribute run{module}",
                    "exit code 1",
                ]
            )
        elif step % 4 == 2:
            name, args = "read_file", {"path": f"src/pkg/mod{(module + 3) % 7}.py"}
            output = "\n".join(f"def f{i}(x): return x + {i}  # mod{module}" for i in range(40))
        else:
            name, args = "bash", {"command": "ls src/pkg"}
            output = " ".join(f"mod{i}.py" for i in range(7)) + " setup.py"
        call_id = f"call_{step:03d}"
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {step}: {name} on mod{module}.",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
        if step % 25 == 24:
            messages.append(
                {"role": "user", "content": f"Keep going. Do not rename mod{module}.py ever."}
            )
    messages.append({"role": "assistant", "content": "Done."})
    return {"model": "gpt-4o", "messages": messages}


def test_every_report_of_a_synthetic_replay_is_the_full_recomputation(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sessions = {"facts.json": _synthetic_session(120), "reads.json": coding_session(80)}
    transcripts = [load_transcript(EXAMPLE)]
    for name, session in sessions.items():
        (tmp_path / name).write_text(json.dumps(session))
        transcripts.append(load_transcript(tmp_path / name))
    assert _replayed(transcripts, monkeypatch, 6_000) > 0


@pytest.mark.parametrize("searched_anchors", [0, 1_000])
def test_reports_are_the_same_whether_texts_are_split_or_searched(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, searched_anchors: int
) -> None:
    # Every anchor looked up as a whole token by a search, or every text split into its tokens.
    monkeypatch.setattr(fact_index, "SEARCHED_ANCHORS", searched_anchors)
    (tmp_path / "facts.json").write_text(json.dumps(_synthetic_session(120)))
    assert _replayed([load_transcript(tmp_path / "facts.json")], monkeypatch, 6_000) > 0


_WORDS = st.sampled_from(
    ["src", "pkg", "mod1.py", "setup.py", "test_issue.py", "error:", "valueerror", "x", "é", "1"]
)
_TEXTS = st.lists(_WORDS, max_size=12).map(lambda w: normalize(" ".join(w).replace(" / ", "/")))


@settings(max_examples=200, deadline=None)
@given(
    needles=st.lists(st.lists(_TEXTS.filter(bool), min_size=1, max_size=2), max_size=24),
    texts=st.lists(_TEXTS, max_size=8),
    later=st.lists(_TEXTS, max_size=4),
    searched_anchors=st.sampled_from([0, 4, 1_000]),
    split=st.booleans(),
)
def test_the_fact_index_answers_what_a_plain_search_does(
    needles: list[list[str]],
    texts: list[str],
    later: list[str],
    searched_anchors: int,
    split: bool,
) -> None:
    facts = [(f"fact{i}", tuple(n)) for i, n in enumerate(needles)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fact_index, "SEARCHED_ANCHORS", searched_anchors)
        index = fact_index.FactIndex()
        index.hold(texts)
        index.add_facts(facts[: len(facts) // 2])
        index.hold(later, split=split)
        index.add_facts(facts)
        for text in {*texts, *later}:
            assert index.shown(text) == {k for k, ns in facts if any(n in text for n in ns)}
        held = [t for t in {*texts, *later} if t]
        wanted = {n for _, ns in facts for n in ns}
        assert index.found_in(held, wanted) == {n for n in wanted if any(n in t for t in held)}
