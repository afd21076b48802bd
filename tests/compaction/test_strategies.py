"""Each strategy on its own: what it hides, what it keeps, and that nothing is lost."""

from __future__ import annotations

import pytest

from contextfold.compaction import (
    ClearToolResults,
    Compactor,
    DropOldest,
    MaskObservations,
    RecentWindow,
    Summarize,
    ToolResultDigest,
    TruncateToolResults,
)
from contextfold.edits import DropEdit, MaskEdit, SummarizeEdit, apply_edits
from contextfold.events import ObservationsMasked
from contextfold.history.repair import validate
from contextfold.history.turns import last_user_index, recent_window_start, task_index
from contextfold.messages import Message, SummaryPart, ToolCallPart, ToolResultPart
from contextfold.outputs.blobs import REF_PATTERN
from contextfold.outputs.intake import InMemoryBlobStore

from .conftest import SESSION, CharCounter, agent_log, chat, make_ctx, results_of, tool_round

counter = CharCounter()


def _recoverable(original: list[Message], view: list[Message], blobs: InMemoryBlobStore) -> None:
    """Every result the view shows differently names a ref that returns the original text."""
    before = results_of(original)
    for call_id, result in results_of(view).items():
        if result.content != before[call_id].content:
            assert result.ref is not None
            assert blobs.get_blob(SESSION, result.ref) == before[call_id].content
    for call_id in before.keys() - results_of(view).keys():
        ref = blobs.put_blob(SESSION, before[call_id].content).ref  # content addressed
        assert blobs.get_blob(SESSION, ref) == before[call_id].content


# -- masking ---------------------------------------------------------------------------------------


def test_mask_frees_at_least_the_batch_minimum_in_one_edit() -> None:
    view = agent_log(rounds=40, output_chars=2_000)
    blobs = InMemoryBlobStore()
    events: list[object] = []
    ctx = make_ctx(view, target=10**6, window=40_000, blobs=blobs, emit=events.append)
    edits = MaskObservations(min_batch_share=0.05).plan(ctx)
    assert len(edits) == 1 and isinstance(edits[0], MaskEdit)
    after = apply_edits(view, edits)
    freed = counter.count_messages(view) - counter.count_messages(after)
    assert freed >= 2_000
    # Oldest first, and no more than the batch needs (each result frees ~480 tokens).
    assert [i.message_id for i in edits[0].items] == [f"t{n}" for n in range(len(edits[0].items))]
    assert len(edits[0].items) == 5
    for item in edits[0].items:
        assert item.content.endswith(item.ref or "?") and "\n" not in item.content
    _recoverable(view, after, blobs)
    assert isinstance(events[0], ObservationsMasked) and events[0].count == len(edits[0].items)


def test_mask_frees_what_the_target_needs_when_that_is_more() -> None:
    view = agent_log(rounds=80, output_chars=2_000)
    total = counter.count_messages(view)
    ctx = make_ctx(view, target=total - 12_000, window=40_000)
    after = apply_edits(view, MaskObservations().plan(ctx))
    assert counter.count_messages(after) <= total - 12_000


def test_mask_leaves_the_recent_window_and_masked_results_alone() -> None:
    view = agent_log(rounds=30, output_chars=2_000)
    ctx = make_ctx(view, target=0, window=40_000)
    start = ctx.window_start()
    first = MaskObservations().plan(ctx)
    masked_once = apply_edits(view, first)
    second = MaskObservations().plan(make_ctx(masked_once, target=0, window=40_000))
    ids_first = {i.call_id for e in first for i in e.items}  # type: ignore[union-attr]
    ids_second = {i.call_id for e in second for i in e.items}  # type: ignore[union-attr]
    assert ids_first and not ids_first & ids_second
    protected = {r.call_id for m in view[start:] for r in m.tool_results}
    assert protected and not (ids_first | ids_second) & protected


# -- Anthropic clearing ----------------------------------------------------------------------------


def _mixed_tools() -> list[Message]:
    view = [Message.user("task", id="u")]
    for n, name in enumerate(["Read", "Bash", "memory", "Read", "Bash", "Read", "Bash"]):
        view.append(
            Message.assistant(
                "",
                [
                    ToolCallPart.from_args(
                        f"c{n}", name, {"file_path": f"f{n}.py", "pad": "p" * 400}
                    )
                ],
                id=f"a{n}",
            )
        )
        view.append(
            Message.tool(
                ToolResultPart(f"c{n}", name, f"{name} output {n} " + "o" * 2_000), id=f"t{n}"
            )
        )
    return view


def test_clear_keeps_the_last_uses_and_excluded_tools() -> None:
    view = _mixed_tools()
    blobs = InMemoryBlobStore()
    edits = ClearToolResults(keep=2, exclude_tools=("memory",)).plan(
        make_ctx(view, target=0, window=10**5, blobs=blobs)
    )
    assert len(edits) == 1 and isinstance(edits[0], MaskEdit) and edits[0].reason == "clear"
    assert [i.call_id for i in edits[0].items] == ["c0", "c1", "c3", "c4"]
    after = apply_edits(view, edits)
    assert results_of(after)["c2"].content.startswith("memory output")
    assert results_of(after)["c6"].content.startswith("Bash output")
    assert all("cleared" in m.meta.flags for m in after if m.id in {"t0", "t1", "t3", "t4"})
    _recoverable(view, after, blobs)
    # Inputs stay unless asked.
    assert all(c.arguments != "{}" for m in after for c in m.tool_calls)


def test_clear_tool_inputs_empties_the_arguments_and_stores_them() -> None:
    view = _mixed_tools()
    blobs = InMemoryBlobStore()
    edits = ClearToolResults(keep=1, clear_tool_inputs=["Read"]).plan(
        make_ctx(view, target=0, window=10**5, blobs=blobs)
    )
    after = apply_edits(view, edits)
    calls = {c.call_id: c for m in after for c in m.tool_calls}
    assert calls["c0"].arguments == "{}" and calls["c3"].arguments == "{}"
    assert calls["c1"].arguments != "{}"  # a Bash call: its inputs stay
    refs = REF_PATTERN.findall(results_of(after)["c0"].content)
    assert blobs.get_blob(SESSION, refs[-1]) == next(c for c in view[1].tool_calls).arguments


def test_clear_does_nothing_below_clear_at_least() -> None:
    view = _mixed_tools()
    assert (
        ClearToolResults(keep=2, clear_at_least=100_000).plan(
            make_ctx(view, target=0, window=10**5)
        )
        == []
    )
    assert ClearToolResults(trigger_tokens=10**6).plan(make_ctx(view, target=0, window=10**5)) == []


# -- truncation ------------------------------------------------------------------------------------


def test_truncate_cuts_big_old_outputs_to_head_and_tail_with_a_ref() -> None:
    view = [Message.user("task", id="u")]
    lines = "\n".join(f"line {i} " + "z" * 40 for i in range(1_000))
    view += tool_round(900, "pytest", "START\n" + lines + "\nFAILED test_x")
    view += tool_round(901, "ls", "small")
    view += chat(turns=4, rounds_per_turn=1)[1:]
    blobs = InMemoryBlobStore()
    edits = TruncateToolResults(above_tokens=2_000, keep_tokens=500).plan(
        make_ctx(view, target=0, window=10**5, blobs=blobs)
    )
    assert len(edits) == 1 and isinstance(edits[0], MaskEdit) and edits[0].reason == "truncate"
    assert [i.call_id for i in edits[0].items] == ["c900"]
    cut = results_of(apply_edits(view, edits))["c900"]
    assert cut.content.startswith("Total output lines:") and "START" in cut.content
    assert cut.content.rstrip().endswith("FAILED test_x")
    assert counter.count_text(cut.content) <= 1_000
    assert cut.ref is not None and cut.ref in cut.content
    _recoverable(view, apply_edits(view, edits), blobs)


def test_truncate_spares_the_recent_window_unless_hard() -> None:
    view = [Message.user("task", id="u"), *tool_round(0, "cat big.log", "b" * 40_000)]
    soft = TruncateToolResults().plan(make_ctx(view, target=0, window=10**6))
    hard = TruncateToolResults().plan(make_ctx(view, target=0, window=10**6, hard=True))
    assert soft == [] and len(hard) == 1


# -- digest ----------------------------------------------------------------------------------------


def test_digest_folds_the_oldest_rounds_into_one_message() -> None:
    view = agent_log(rounds=16, output_chars=800)
    blobs = InMemoryBlobStore()
    ctx = make_ctx(view, target=0, window=10**5, blobs=blobs, recent=RecentWindow(max_share=0.01))
    edits = ToolResultDigest(cutoff=10).plan(ctx)
    assert len(edits) == 1 and isinstance(edits[0], SummarizeEdit)
    after = apply_edits(view, edits)
    validate(after)
    assert len(results_of(after)) == 10
    digest = edits[0].summary
    assert (
        digest.meta.kind == "tool_summary"
        and not digest.meta.user_visible
        and digest.role == "user"
    )
    part = digest.parts[0]
    assert isinstance(part, SummaryPart)
    calls = part.sections["Tool Calls"]
    assert len(calls) == 6 and calls[0].startswith("bash: cat file0.py → ok")
    for line, n in zip(calls, range(6), strict=True):
        ref = REF_PATTERN.search(line)
        assert ref and blobs.get_blob(SESSION, ref.group()) == results_of(view)[f"c{n}"].content
    assert part.sections["Files Read"][0].startswith("file0.py")
    # A second pass merges into the same digest rather than adding another.
    more = after + tool_round(99, "cat late.py", "l" * 800)
    again = ToolResultDigest(cutoff=10).plan(
        make_ctx(more, target=0, window=10**5, recent=RecentWindow(max_share=0.01))
    )
    final = apply_edits(more, again)
    digests = [m for m in final if m.meta.kind == "tool_summary"]
    assert len(digests) == 1 and len(digests[0].parts[0].sections["Tool Calls"]) == 7  # type: ignore[union-attr]
    validate(final)


# -- summarizing -----------------------------------------------------------------------------------


def test_summarize_keeps_task_and_recent_window_around_one_summary() -> None:
    view = chat(turns=6, rounds_per_turn=3)
    blobs = InMemoryBlobStore()
    ctx = make_ctx(view, target=0, window=10**6, blobs=blobs)
    start = ctx.window_start()
    edits = Summarize().plan(ctx)
    after = apply_edits(view, edits)
    validate(after)
    assert after[0].id == "u0"
    summary = after[1]
    assert summary.meta.kind == "summary" and isinstance(summary.parts[0], SummaryPart)
    assert summary.parts[0].covers == (view[1].id, view[start - 1].id)
    assert [m.id for m in after[2:]] == [m.id for m in view[start:]]
    _recoverable(view, after, blobs)
    refs = REF_PATTERN.findall(summary.text)
    assert refs and all(blobs.get_blob(SESSION, r) for r in refs)


def test_a_new_summary_extends_the_previous_one() -> None:
    view = chat(turns=6, rounds_per_turn=3)
    first = apply_edits(view, Summarize().plan(make_ctx(view, target=0, window=10**6)))
    old_files = {i.split(" ")[0] for i in first[1].parts[0].sections["Files Read"]}  # type: ignore[union-attr]
    grown = [*first, Message.user("One more thing.", id="u9")]
    for n in range(50, 60):
        grown += tool_round(n, f"grep -n x extra{n}.py", "w" * 800)
    grown.append(Message.assistant("All done.", id="fin"))
    second = apply_edits(grown, Summarize().plan(make_ctx(grown, target=0, window=10**6)))
    summaries = [m for m in second if m.meta.kind == "summary"]
    assert len(summaries) == 1
    part = summaries[0].parts[0]
    assert isinstance(part, SummaryPart)
    new_files = {i.split(" ")[0] for i in part.sections["Files Read"]}
    assert old_files < new_files  # kept everything, added the new reads
    assert part.covers is not None and part.covers[0] == view[1].id


def test_summarize_keeps_the_last_user_message_when_the_window_is_past_it() -> None:
    view = agent_log(rounds=4, output_chars=400)
    view.append(Message.user("Also update the changelog.", id="late"))
    for n in range(10, 40):
        view += tool_round(n, f"cat f{n}.py", "q" * 2_000)
    ctx = make_ctx(view, target=0, window=20_000)
    after = apply_edits(view, Summarize().plan(ctx))
    validate(after)
    ids = [m.id for m in after]
    assert "task" in ids and "late" in ids
    assert after[ids.index("late") - 1].meta.kind == "summary"


# -- dropping --------------------------------------------------------------------------------------


@pytest.mark.parametrize("hard", [False, True])
def test_drop_never_touches_the_task_nor_the_last_user_message(hard: bool) -> None:
    view = chat(turns=8, rounds_per_turn=2, output_chars=1_500)
    blobs = InMemoryBlobStore()
    ctx = make_ctx(view, target=1, window=10**6, hard=hard, blobs=blobs)
    edits = DropOldest().plan(ctx)
    assert edits and all(isinstance(e, SummarizeEdit | DropEdit) for e in edits)
    after = apply_edits(view, edits)
    validate(after)
    ids = [m.id for m in after]
    assert ids[0] == "u0" and "u7" in ids
    assert last_user_index(after) == ids.index("u7") and task_index(after) == 0
    _recoverable(view, after, blobs)


def test_a_drop_leaves_a_note_with_the_refs_of_what_left() -> None:
    view = chat(turns=8, rounds_per_turn=2, output_chars=1_500)
    blobs = InMemoryBlobStore()
    ctx = make_ctx(view, target=1, window=10**6, blobs=blobs)
    after = apply_edits(view, DropOldest().plan(ctx))
    [note] = [m for m in after if m.meta.kind == "drop_note"]
    assert "left the context" in note.text
    refs = REF_PATTERN.findall(note.text)
    assert refs and all(blobs.get_blob(ctx.session_id, ref) for ref in refs)


def test_an_earlier_note_folds_into_the_next_one_with_its_counts_and_refs() -> None:
    view = agent_log(rounds=12, output_chars=1_500)
    blobs = InMemoryBlobStore()
    total = counter.count_messages(view)
    first = apply_edits(
        view, DropOldest().plan(make_ctx(view, target=total - 1_500, window=4_000, blobs=blobs))
    )
    [note] = [m for m in first if m.meta.kind == "drop_note"]
    first_refs = REF_PATTERN.findall(note.text)

    second = apply_edits(
        first, DropOldest().plan(make_ctx(first, target=1, window=4_000, blobs=blobs))
    )

    [merged] = [m for m in second if m.meta.kind == "drop_note"]  # one note, not a note of notes
    dropped = len(view) - len(second) + 1  # every message gone, the note standing for them
    assert merged.text.startswith(f"[{dropped} earlier messages ({dropped // 2} tool calls)")
    outputs = merged.parts[0].sections["outputs"]  # type: ignore[union-attr]
    assert all(any(ref in o for o in outputs) for ref in first_refs)
    assert len(outputs) == dropped // 2


def test_a_note_alone_is_never_dropped() -> None:
    view = agent_log(rounds=6, output_chars=1_500)
    blobs = InMemoryBlobStore()
    once = apply_edits(
        view, DropOldest().plan(make_ctx(view, target=1, window=4_000, hard=True, blobs=blobs))
    )
    assert DropOldest().plan(make_ctx(once, target=1, window=4_000, hard=True, blobs=blobs)) == []


def test_drop_stops_once_the_target_is_met() -> None:
    view = agent_log(rounds=30, output_chars=1_000)
    total = counter.count_messages(view)
    after = apply_edits(
        view, DropOldest().plan(make_ctx(view, target=total - 1_000, window=20_000))
    )
    assert total - 1_600 < counter.count_messages(after) <= total - 1_000


# -- hard mode -------------------------------------------------------------------------------------


@pytest.mark.parametrize("preset", ["mask-first", "summarize", "window"])
@pytest.mark.parametrize("target", [300, 1_000, 5_000])
def test_hard_mode_always_fits(preset: str, target: int) -> None:
    view = [Message.system("You are terse.", id="sys"), Message.user("T" * 20_000, id="task")]
    for n in range(6):
        view += tool_round(n, f"cat f{n}", "o" * 8_000)
    view.append(Message.user("and this " * 500, id="last"))
    view.append(
        Message.assistant(
            "", [ToolCallPart("big", "Write", '{"content": "' + "w" * 12_000 + '"}')], id="A"
        )
    )
    view.append(Message.tool(ToolResultPart("big", "Write", "r" * 30_000), id="R"))
    blobs = InMemoryBlobStore()
    # The conversation can be given no more than the target: even the task must be cut.
    ctx = make_ctx(view, target=target, window=40_000, blobs=blobs, room_tokens=target)
    result = Compactor.preset(preset).compact(ctx, hard=True)
    assert result.after_tokens <= target, result
    assert counter.count_messages(result.view) == result.after_tokens
    validate(result.view)
    ids = [m.id for m in result.view]
    assert {"sys", "task", "last", "A", "R"} <= set(ids)
    # The task survives as head + tail with a ref to its full text.
    task = result.view[ids.index("task")]
    if task.text != view[1].text:
        ref = REF_PATTERN.search(task.text)
        assert ref and blobs.get_blob(SESSION, ref.group()) == view[1].text
    _recoverable(view, list(result.view), blobs)


def test_hard_window_is_smaller_than_the_soft_one() -> None:
    view = chat(turns=5)
    soft = make_ctx(view, target=0, window=10**6).window_start()
    hard = make_ctx(view, target=0, window=10**6, hard=True).window_start()
    assert hard > soft and hard == recent_window_start(view, counter, turns=0)


def test_a_summary_after_masking_still_sees_the_errors_behind_the_placeholders() -> None:
    # More errors than a placeholder keeps: the summary must still get the first one.
    failing = (
        "<returncode>1</returncode>\n<output>\n"
        + "collected 40 items\n" * 30
        + 'Traceback (most recent call last):\n  File "app.py", line 9\n'
        + "ZeroDivisionError: division by zero\n"
        + "".join(f"error: step {n} failed\n" for n in range(4))
        + "error: build failed\n</output>"
    )
    view = agent_log(rounds=12, output_chars=1_500)
    view[4:6] = tool_round(99, "python app.py", failing)
    blobs = InMemoryBlobStore()
    mask = MaskObservations(min_batch_share=1.0)
    masked = apply_edits(view, mask.plan(make_ctx(view, target=1, window=4_000, blobs=blobs)))
    shown = "".join(p.content for m in masked for p in m.tool_results)
    assert "division by zero" not in shown and "error: build failed" in shown
    ctx = make_ctx(masked, target=1, window=4_000, blobs=blobs)
    summarized = apply_edits(masked, Summarize().plan(ctx))
    summary = next(m for m in summarized if m.meta.kind == "summary")
    assert "ZeroDivisionError: division by zero" in summary.text
