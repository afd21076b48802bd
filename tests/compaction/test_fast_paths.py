"""Compaction's shortcuts give what the full computation gives.

Each shortcut (a pre-check before parsing, a count carried instead of recounted, a parse
remembered) is compared with the computation it replaces, on the shared transcripts when they
are present and on generated data.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.compaction import (
    CompactionContext,
    Compactor,
    StructuredSummary,
    SummaryItem,
    hygiene,
    summary,
)
from contextfold.engine._sizes import CompactionCounter, ViewSizes
from contextfold.history import shell, turns
from contextfold.history.repair import repair
from contextfold.messages import Message, Meta, SummaryPart
from contextfold.outputs.intake import InMemoryBlobStore
from contextfold.tokens.counters import HeuristicCounter, TiktokenCounter
from contextfold.tokens.tokenizers import encoding
from contextfold.transcripts import load_transcripts
from tests.compaction.conftest import CharCounter, agent_log, chat, make_ctx
from tests.conftest import shared_path

SESSION = "fast"


def _reads_whole_file_by_parsing(command: str) -> bool:
    """What :func:`hygiene._reads_whole_file` answered before its pre-check: always parsed."""
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    operands = [w for w in words[1:] if w != "-n"]
    return bool(words) and words[0] in ("cat", "nl") and len(operands) == 1


def _load(paths: Sequence[Path]) -> list[list[Message]]:
    out = []
    for path in paths:
        for transcript in load_transcripts(path):
            messages, _ = repair(transcript.messages)
            out.append(messages)
    return out


@pytest.fixture(scope="module")
def sessions() -> list[list[Message]]:
    """A few real sessions of each kind: native calls, text actions, Claude Code."""
    deepseek = sorted(shared_path("trajectories", "mini-swe-agent-deepseek").glob("*.json"))
    gemini = sorted(shared_path("trajectories", "mini-swe-agent-gemini3pro").glob("*.json"))
    claude = sorted(shared_path("trajectories", "claude-code").glob("*.jsonl"))
    return _load(deepseek[::25] + gemini[:2] + claude[:2])


def _commands(view: Sequence[Message]) -> list[str]:
    out = []
    for message in view:
        for call in message.tool_calls:
            command = hygiene._command(call)
            if command is not None:
                out.append(command)
    return out


WORDS = st.sampled_from(
    [
        "cat",
        "nl",
        "cd",
        "-n",
        "c'at'",
        '"cat"',
        "\\cat",
        "ca\\t",
        "'nl'",
        "a.py",
        "x y",
        "|",
        ";",
        "'",
        '"',
        "#",
        "&&",
        "\\",
        "\x00",
    ]
)
BLANKS = st.sampled_from(["", " ", "\t", "\n", "\x0b", "\x0c", "\xa0", "\u2003", "\r"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(WORDS, BLANKS, st.text(max_size=6)), max_size=6))
def test_the_whole_file_pre_check_answers_as_parsing_does(pieces: list[str]) -> None:
    command = "".join(pieces)
    assert hygiene._reads_whole_file(command) == _reads_whole_file_by_parsing(command)


def test_the_whole_file_pre_check_answers_as_parsing_does_on_real_commands(
    sessions: list[list[Message]],
) -> None:
    commands = [c for view in sessions for c in _commands(view)]
    assert len(commands) > 100
    for command in commands:
        assert hygiene._reads_whole_file(command) == _reads_whole_file_by_parsing(command), command


def _real_ctx(view: Sequence[Message], *, hard: bool = False) -> CompactionContext:
    counter = HeuristicCounter()
    total = counter.count_messages(view)
    window = max(4_000, int(total * 0.8))
    return CompactionContext(
        view=view,
        counter=counter,
        target_tokens=window // 2,
        window_tokens=window,
        blobs=InMemoryBlobStore(),
        session_id=SESSION,
        hard=hard,
    )


@pytest.mark.parametrize("preset", ["mask-first", "summarize", "window"])
@pytest.mark.parametrize("hard", [False, True], ids=["soft", "hard"])
def test_the_size_a_compaction_carries_is_the_count_of_its_view(
    sessions: list[list[Message]], preset: str, hard: bool
) -> None:
    """The run subtracts what each edit freed instead of counting the view again: the size it
    ends with is what counting its view gives."""
    for view in sessions:
        ctx = _real_ctx(view, hard=hard)
        result = Compactor.preset(preset).compact(ctx)
        assert result.before_tokens == ctx.counter.count_messages(view)
        assert result.after_tokens == ctx.counter.count_messages(result.view)
        mask = Compactor.preset(preset).mask(ctx)
        assert mask.after_tokens == ctx.counter.count_messages(mask.view)


@pytest.mark.parametrize(
    "view", [agent_log(40), chat(12)], ids=["agent_log", "chat"], scope="module"
)
def test_the_size_a_context_knows_is_the_count_of_its_view(view: list[Message]) -> None:
    ctx = make_ctx(view, target=1_000, window=4_000)
    counted = CharCounter().count_messages(view)
    assert ctx.tokens() == counted
    assert ctx.with_view(view, counted).tokens() == counted
    # Another view, or any other change made with replace, forgets the size it knew.
    shorter = view[:-2]
    assert ctx.with_view(view, counted).with_view(shorter).tokens() == CharCounter().count_messages(
        shorter
    )
    result = Compactor.preset("mask-first").compact(ctx)
    assert result.after_tokens == CharCounter().count_messages(result.view)


def test_a_remembered_summary_parse_is_a_fresh_parse(sessions: list[list[Message]]) -> None:
    """Summaries written on real sessions, parsed again (remembered) and parsed anew, agree;
    so do a summary's parts written with the same sections but held in other objects."""
    parts: list[SummaryPart] = []
    for view in sessions:
        result = Compactor.preset("summarize").compact(_real_ctx(view))
        parts += [p for m in result.view for p in m.parts_of(SummaryPart)]
    assert parts
    for part in parts:
        fresh = StructuredSummary.from_sections(part.sections)
        assert StructuredSummary.from_part(part) == fresh
        copy = SummaryPart(part.text, json.loads(json.dumps(part.sections)), part.covers)
        assert StructuredSummary.from_part(copy) == fresh  # lists, not tuples: parsed anew
        again = SummaryPart(part.text, {k: tuple(v) for k, v in part.sections.items()})
        assert StructuredSummary.from_part(again) == fresh


def test_a_summary_counted_item_by_item_is_counted_whole_on_real_sessions(
    sessions: list[list[Message]],
) -> None:
    """Summaries written on real sessions, and extended by the compactions after them: a
    summary message counts as its text encoded whole (the counter counts it item by item)."""
    counter = TiktokenCounter("o200k_base")
    encoder = encoding("o200k_base")
    texts: list[str] = []
    for view in sessions:
        ctx = _real_ctx(view)
        for _ in range(3):  # each compaction extends the summary before it
            result = Compactor.preset("summarize").compact(ctx)
            texts += [m.text for m in result.view if m.meta.kind == "summary"]
            if len(result.view) < 8:
                break
            ctx = _real_ctx(result.view)
    assert len(texts) > 5
    for text in texts:
        message = Message("user", (SummaryPart(text, {}),))
        empty = Message("user", (SummaryPart("", {}),))
        whole = len(encoder.encode_ordinary(text))
        assert counter.count_message(message) - counter.count_message(empty) == whole


def test_the_reads_of_a_view_asked_again_are_its_reads(sessions: list[list[Message]]) -> None:
    """file_reads remembers the last view it read: asked again for the same messages (another
    list of them), for a view of the same length with one message changed, or for another
    view, it answers what reading the view anew gives."""
    for view in sessions:
        fresh = hygiene._file_reads(view)
        assert hygiene.file_reads(view) == fresh
        assert hygiene.file_reads(list(view)) == fresh  # the same messages, another list
        assert hygiene.file_reads(tuple(view)) == fresh
        first = hygiene.file_reads(view)
        first.clear()  # a caller's list is its own
        assert hygiene.file_reads(view) == fresh
        ctx = _real_ctx(view)
        masked = Compactor.preset("mask-first").mask(ctx).view
        if len(masked) == len(view):
            assert hygiene.file_reads(masked) == hygiene._file_reads(masked)
        shorter = view[: len(view) // 2]
        assert hygiene.file_reads(shorter) == hygiene._file_reads(shorter)
        assert hygiene.file_reads(view) == fresh


@pytest.mark.parametrize("counter_name", ["o200k_base", "heuristic"])
def test_the_compaction_counter_counts_what_the_engine_counter_counts(
    sessions: list[list[Message]], counter_name: str
) -> None:
    """The counter a compaction gets answers view messages from the session's counts, and
    counts the messages it rewrites from the texts it remembers: every message before and
    after each compaction (and the summaries, masked copies and notes it made) counts as a
    fresh counter counts it, and so does each summary (:meth:`CompactionCounter.count_summary`)
    and each view the session's sizes are reset to."""
    for view in sessions[:4]:
        engine_counter = (
            TiktokenCounter("o200k_base") if counter_name == "o200k_base" else HeuristicCounter()
        )
        fresh = (
            TiktokenCounter("o200k_base") if counter_name == "o200k_base" else HeuristicCounter()
        )
        sizes = ViewSizes(engine_counter, view)
        counter = CompactionCounter(engine_counter, sizes)
        total = fresh.count_messages(view)
        window = max(4_000, int(total * 0.8))
        ctx = CompactionContext(
            view=tuple(view),
            counter=counter,
            target_tokens=window // 2,
            window_tokens=window,
            blobs=InMemoryBlobStore(),
            session_id=SESSION,
        )
        for preset in ("mask-first", "summarize"):
            result = Compactor.preset(preset).compact(ctx)
            assert result.after_tokens == fresh.count_messages(result.view)
            for message in (*result.view, *view):
                assert counter.count_message(message) == fresh.count_message(message)
            if result.summary is not None:  # as the cost schedule sizes it
                text = result.summary.render()
                assert counter.count_summary(text) == fresh.count_text(text)
        # The view's sizes after an edit (those of the messages it kept are the ones held).
        for after in (result.view, view):
            sizes.reset(after)
            assert sizes.messages == [fresh.count_message(m) for m in after]
            assert sizes.total == fresh.count_messages(after)


def test_a_remembered_item_line_is_the_line_rendered_anew(sessions: list[list[Message]]) -> None:
    """Items of summaries written on real sessions render, again and again, as a new item with
    the same text, sources and refs renders once."""
    summaries = [
        Compactor.preset("summarize").compact(_real_ctx(view)).summary for view in sessions
    ]
    items = [i for s in summaries if s is not None for items in s.sections.values() for i in items]
    assert items
    for item in items:
        line = SummaryItem(item.text, item.sources, item.refs).render()
        assert item.render() == item.render() == line
        assert replace(item, text=item.text + "!").render() != line


@given(st.text(alphabet="ab./ \t", max_size=12))
def test_a_remembered_normal_path_is_the_path_normalised_anew(path: str) -> None:
    fresh = hygiene._normal_path.__wrapped__(path)
    assert hygiene._normal_path(path) == hygiene._normal_path("".join(list(path))) == fresh


def _tokens_or_error(tokens: Callable[[str], list[str]], text: str) -> list[str] | str:
    try:
        return tokens(text)
    except ValueError as error:
        return f"ValueError: {error}"


@settings(max_examples=3_000, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab-./*=#$é0 \t\r\n\x0b();<>|&'\"\\")), max_size=24))
def test_the_shell_tokens_are_those_shlex_reads(text: str) -> None:
    assert _tokens_or_error(shell._tokens, text) == _tokens_or_error(shell._shlex_tokens, text)


def test_the_shell_tokens_are_those_shlex_reads_on_real_commands(
    sessions: list[list[Message]],
) -> None:
    commands = [c for view in sessions for c in _commands(view)]
    assert commands
    for command in commands:
        for text in (command, shell._strip_heredocs(command)[0]):
            fast = _tokens_or_error(shell._tokens, text)
            assert fast == _tokens_or_error(shell._shlex_tokens, text), text


def test_a_remembered_section_line_is_the_line_read_anew(sessions: list[list[Message]]) -> None:
    """Lines of summaries written (and extended) on real sessions, with the lines a stored or
    model-written section may hold besides items, read again (remembered) and read anew, give
    the same item, count of earlier items left out, or nothing."""
    lines = ["", "  ", "(none)", " (none) ", "… 0 earlier items", "… 1 earlier item", " - x  "]
    for view in sessions:
        ctx = _real_ctx(view)
        for _ in range(2):  # the second compaction extends the first one's summary
            result = Compactor.preset("summarize").compact(ctx)
            for part in (p for m in result.view for p in m.parts_of(SummaryPart)):
                lines += [line for section in part.sections.values() for line in section]
            ctx = _real_ctx(result.view)
    assert len(lines) > 50
    for line in lines:
        fresh = summary._section_line.__wrapped__(line)
        assert summary._section_line(line) == summary._section_line("".join(list(line))) == fresh
    # A count of none left out is kept as such, as reading the line always did.
    parsed = StructuredSummary.from_sections({"Errors Encountered": ("… 0 earlier items", "x")})
    assert parsed.omitted == {"Errors Encountered": 0}


def _units_anew(view: Sequence[Message]) -> tuple[list[range], list[int]]:
    return turns._cut_units(view), [i for i, m in enumerate(view) if turns.is_user_turn(m)]


def test_remembered_units_and_turns_are_those_of_the_view_cut_anew(
    sessions: list[list[Message]],
) -> None:
    """The units and turn starts remembered for the view asked about last, handed out for a
    view of the same shape, are those the view cut anew gives: asked in turn for real views,
    their masked copies (the same shape), another list of the same messages, a view of the same
    length with a message of another shape (a user turn that became a note, a result answering
    another call), and a shorter view."""
    for view in sessions:
        ctx = _real_ctx(view)
        masked = Compactor.preset("mask-first").mask(ctx).view
        variants: list[Sequence[Message]] = [view, masked, list(view), tuple(masked)]
        task = turns.task_index(view)
        if task is not None:
            note = Message("user", view[task].parts, id=view[task].id, meta=Meta(kind="synthetic"))
            variants.append([*view[:task], note, *view[task + 1 :]])
        answered = next((i for i, m in enumerate(view) if m.tool_results), None)
        if answered is not None:
            other = replace(view[answered].tool_results[0], call_id="another-call")
            variants.append([*view[:answered], Message.tool(other), *view[answered + 1 :]])
        variants += [view[: len(view) // 2], view]
        for variant in variants:
            assert (turns.atomic_units(variant), turns.turn_starts(variant)) == _units_anew(variant)


def test_files_are_restored_from_the_least_room_a_file_needs(
    sessions: list[list[Message]],
) -> None:
    """The restore note gives up before looking for files when the room left beside its header
    is less than the least of a file it restores; with that least, files the view no longer
    shows come back (on real sessions, after a summary)."""
    restore = hygiene.RestoreFiles()
    restored = 0
    for view in sessions:
        ctx = _real_ctx(view)
        after = Compactor.preset("summarize").compact(ctx).view
        note = restore.note(ctx, view, after, 1_000_000)
        if note is None:
            continue
        header = note.text.split("\n\n")[0]
        least = ctx.counter.count_message(Message.user(header)) + hygiene.RESTORE_MIN_FILE_TOKENS
        assert restore.note(ctx, view, after, least - 1) is None
        assert restore.note(ctx, view, after, least) is not None
        restored += 1
    assert restored
