"""Context hygiene: superseded reads, big old call arguments, old thinking, files restored after
a summary. Each edit keeps what it takes out behind a ref and leaves a valid history."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import replace

import pytest

from contextfold.compaction import Compactor, MaskObservations, RecentWindow
from contextfold.compaction.hygiene import (
    FILE_RESTORE_FLAG,
    OLD_ARGUMENTS_ABOVE_TOKENS,
    RESTORE_FILE_MAX_TOKENS,
    RESTORE_MAX_FILES,
    RESTORE_MAX_WINDOW_SHARE,
    ClearOldThinking,
    RestoreFiles,
    SupersededReads,
    TrimOldArguments,
    file_reads,
)
from contextfold.edits import (
    ClearedThinking,
    ContextEdit,
    MaskEdit,
    SummarizeEdit,
    apply_edit,
    edit_from_dict,
    edit_to_dict,
)
from contextfold.history.repair import history_rules_for, validate
from contextfold.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from contextfold.outputs.intake import InMemoryBlobStore
from contextfold.outputs.read_result import read_result
from tests.engine.helpers import EngineFactory, start

from .conftest import SESSION, CharCounter, make_ctx, results_of

counter = CharCounter()


def _valid(view: Sequence[Message]) -> None:
    for provider in ("anthropic", "openai"):
        validate(view, provider=history_rules_for(provider))


def _applied(view: Sequence[Message], edits: Sequence[ContextEdit]) -> list[Message]:
    return functools.reduce(apply_edit, edits, list(view))


def _read(blobs: InMemoryBlobStore, ref: str) -> str:
    """What the ``read_result`` tool answers for ``ref`` (one page)."""
    result = read_result(blobs, SESSION, {"ref": ref}, call_id="r", max_bytes=8 * 1024)
    assert not result.is_error, result.content
    return result.content


def _file(path: str, lines: int, version: str = "v1") -> str:
    return "\n".join(f"{i:5d}\tdef f{i}(x):  # {path} {version}" for i in range(lines))


def _round(n: int, call: ToolCallPart, output: str, *, thinking: str = "") -> list[Message]:
    parts: tuple[ThinkingPart | TextPart | ToolCallPart, ...] = (
        (ThinkingPart(thinking, signature=f"sig{n}"),) if thinking else ()
    )
    parts = (*parts, TextPart(f"Step {n}."), call)
    return [
        Message("assistant", parts, id=f"a{n}"),
        Message.tool(ToolResultPart(call.call_id, call.name, output), id=f"t{n}"),
    ]


def _read_call(n: int, path: str, **more: object) -> ToolCallPart:
    return ToolCallPart.from_args(f"c{n}", "read_file", {"path": path, **more})


def _session() -> list[Message]:
    """A task, then reads, a re-read, a partial read and a big write, then three short turns."""
    view = [
        Message.system("You are a coding agent.", id="sys"),
        Message.user("Fix app.py", id="u0"),
    ]
    view += _round(0, _read_call(0, "src/app.py"), _file("src/app.py", 60), thinking="plan " * 80)
    view += _round(1, _read_call(1, "src/util.py", offset=10, limit=5), _file("src/util.py", 5))
    body = "\n".join(f"line {i}: " + "z" * 60 for i in range(60))
    write = ToolCallPart.from_args("c2", "write_file", {"path": "src/new.py", "content": body})
    view += _round(2, write, "wrote src/new.py", thinking="write it " * 40)
    view += _round(3, _read_call(3, "./src/app.py"), _file("src/app.py", 60, "v2"))
    view += _round(4, _read_call(4, "src/util.py", offset=50, limit=5), _file("src/util.py", 5))
    for turn in range(1, 4):
        view.append(Message.user(f"Now step {turn}.", id=f"u{turn}"))
        n = 4 + turn
        call = ToolCallPart.from_args(f"c{n}", "bash", {"command": f"pytest -k t{turn}"})
        view += _round(n, call, f"{turn} passed", thinking=f"think {turn} " * 30)
    return view


# -- superseded reads ------------------------------------------------------------------------------


def test_a_file_read_again_later_leaves_a_one_line_placeholder_with_its_ref() -> None:
    view, blobs = _session(), InMemoryBlobStore()
    ctx = make_ctx(view, target=10**6, window=40_000, blobs=blobs)
    edits = SupersededReads().plan(ctx)
    assert len(edits) == 1 and isinstance(edits[0], MaskEdit)
    (item,) = edits[0].items  # only the first read of src/app.py: the util.py parts differ
    assert (item.message_id, item.call_id) == ("t0", "c0")
    assert "\n" not in item.content and item.content.startswith("[superseded]")
    assert "src/app.py" in item.content and "c3" in item.content and item.ref in item.content
    assert item.ref is not None and _file("src/app.py", 60)[:2_000] in _read(blobs, item.ref)
    after = _applied(view, edits)
    _valid(after)
    assert results_of(after)["c3"].content == _file("src/app.py", 60, "v2")  # the newer stays
    assert counter.count_messages(after) < counter.count_messages(view)
    # Planned again on its own result, it finds nothing left to do.
    assert SupersededReads().plan(make_ctx(after, target=10**6, window=40_000, blobs=blobs)) == []


def test_a_read_of_the_whole_file_supersedes_a_read_of_part_of_it() -> None:
    view = _session()
    view += _round(20, _read_call(20, "src/util.py"), _file("src/util.py", 80))
    view.append(Message.user("Thanks.", id="u9"))
    edits = SupersededReads().plan(make_ctx(view, target=10**6, window=40_000))
    superseded = {i.call_id for e in edits if isinstance(e, MaskEdit) for i in e.items}
    assert superseded == {"c0", "c1", "c4"}  # both parts of util.py, and the first app.py


def test_shell_reads_are_superseded_only_by_what_holds_their_output() -> None:
    def bash(n: int, command: str | list[str], output: str) -> list[Message]:
        return _round(n, ToolCallPart.from_args(f"c{n}", "bash", {"command": command}), output)

    view = [Message.user("go", id="u")]
    view += bash(0, "git diff src/a.py", "-old line\n+new line\n" * 40)  # not in the file
    view += bash(1, "cd /repo && grep -n parse src/a.py", "12: def parse(x):\n" * 40)
    view += bash(2, ["bash", "-lc", "cat src/a.py"], _file("src/a.py", 40))  # Codex's argv
    view += bash(3, "git diff src/a.py", "-old line\n+new line\n" * 41)
    view.append(Message.user("ok", id="u1"))
    edits = SupersededReads().plan(make_ctx(view, target=10**6, window=40_000))
    superseded = {i.call_id: i.content for e in edits if isinstance(e, MaskEdit) for i in e.items}
    assert set(superseded) == {"c0", "c1"}
    assert "(call c3)" in superseded["c0"] and "(call c2)" in superseded["c1"]


def test_failed_reads_and_other_tools_are_not_reads() -> None:
    view = [Message.user("go", id="u")]
    view += _round(0, _read_call(0, "a.py"), "x" * 400)
    view += _round(1, ToolCallPart.from_args("c1", "read_result", {"ref": "ref_1"}), "y" * 400)
    view[-1] = Message.tool(ToolResultPart("c1", "read_result", "y" * 400), id="t1")
    error = Message.tool(ToolResultPart("c2", "read_file", "No such file", is_error=True), id="t2")
    view += [Message.assistant("", [_read_call(2, "a.py")], id="a2"), error]
    assert [r.path for r in file_reads(view)] == ["a.py", "a.py"]
    assert SupersededReads().plan(make_ctx(view, target=10**6, window=40_000)) == []


# -- old call arguments ----------------------------------------------------------------------------


def test_big_old_write_arguments_keep_their_head_valid_json_and_a_ref() -> None:
    view, blobs = _session(), InMemoryBlobStore()
    ctx = make_ctx(view, target=10**6, window=40_000, blobs=blobs, recent=RecentWindow(turns=1))
    edits = TrimOldArguments(above_tokens=500).plan(ctx)
    assert len(edits) == 1 and isinstance(edits[0], MaskEdit) and not edits[0].items
    (item,) = edits[0].arguments
    assert (item.message_id, item.call_id) == ("a2", "c2")
    after = _applied(view, edits)
    _valid(after)
    (call,) = next(m for m in after if m.id == "a2").tool_calls
    original = next(c for m in view for c in m.tool_calls if c.call_id == "c2")
    assert (call.call_id, call.name) == ("c2", "write_file")
    args = json.loads(call.arguments)
    assert args["path"] == "src/new.py" and original.args()["content"].startswith(
        args["content"].split("…")[0]
    )
    assert item.ref is not None and item.ref in args["content"]
    assert counter.count_text(call.arguments) < 200 < OLD_ARGUMENTS_ABOVE_TOKENS
    assert blobs.get_blob(SESSION, item.ref) == original.arguments
    assert "src/new.py" in _read(blobs, item.ref)
    # Not cut twice; calls in the recent window (c5..c7) are left alone however low the bar.
    again = make_ctx(after, target=10**6, window=40_000, recent=RecentWindow(turns=1))
    trimmed = [a.call_id for e in TrimOldArguments(above_tokens=5).plan(again) for a in e.arguments]  # type: ignore[union-attr]
    assert "c2" not in trimmed and not {"c7"} & set(trimmed)


def test_arguments_that_are_not_a_json_object_are_left_alone() -> None:
    view = [Message.user("go", id="u")]
    view += _round(0, ToolCallPart("c0", "apply_patch", "*** Begin Patch\n" + "+x\n" * 900), "ok")
    view += [Message.user("next", id="u1")]
    view += _round(1, ToolCallPart("c1", "bash", '{"command": "ls"}'), "ok")
    ctx = make_ctx(view, target=10**6, window=40_000, recent=RecentWindow(turns=1))
    assert TrimOldArguments(above_tokens=100).plan(ctx) == []


# -- old thinking ----------------------------------------------------------------------------------


def test_old_thinking_leaves_the_view_but_the_current_turn_keeps_its_signed_thinking() -> None:
    view, blobs = _session(), InMemoryBlobStore()
    ctx = make_ctx(view, target=10**6, window=40_000, blobs=blobs, recent=RecentWindow(turns=1))
    edits = ClearOldThinking().plan(ctx)
    assert len(edits) == 1 and isinstance(edits[0], MaskEdit)
    cleared = {t.message_id for t in edits[0].thinking}
    assert cleared == {"a0", "a2", "a5", "a6"}  # not a7: it answers the last user turn
    after = _applied(view, edits)
    _valid(after)
    by_id = {m.id: m for m in after}
    assert (
        not list(by_id["a0"].parts_of(ThinkingPart))
        and "thinking_cleared" in by_id["a0"].meta.flags
    )
    assert [p.signature for p in by_id["a7"].parts_of(ThinkingPart)] == ["sig7"]
    ref = next(t.ref for t in edits[0].thinking if t.message_id == "a0")
    assert ref is not None and ("plan " * 80).strip() in blobs.get_blob(SESSION, ref)
    # The transcript keeps the parts: the edit only changes the view.
    assert list(next(m for m in view if m.id == "a0").parts_of(ThinkingPart))


def test_a_message_of_thinking_alone_keeps_it_and_one_turn_clears_nothing() -> None:
    lone = Message("assistant", (ThinkingPart("hmm", "s"),), id="x")
    masked = apply_edit([lone], MaskEdit((), thinking=(ClearedThinking("x"),)))
    assert masked[0] is lone
    one_turn = [Message.user("go", id="u")]
    for n in range(6):
        one_turn += _round(n, _read_call(n, f"f{n}.py"), "o" * 300, thinking="t" * 200)
    ctx = make_ctx(one_turn, target=10**6, window=40_000, recent=RecentWindow(turns=0))
    assert ClearOldThinking().plan(ctx) == []  # every thinking belongs to the current turn


# -- in the presets: the mask batch and compaction -------------------------------------------------


def test_the_mask_batch_carries_the_hygiene_edits_in_its_one_edit() -> None:
    view, blobs = _session(), InMemoryBlobStore()
    ctx = make_ctx(view, target=10**6, window=6_000, blobs=blobs, recent=RecentWindow(turns=1))
    result = Compactor.preset("mask-first").mask(ctx)
    assert len(result.edits) == 1
    (edit,) = result.edits
    assert isinstance(edit, MaskEdit) and edit.arguments and edit.thinking
    assert any(i.content.startswith("[superseded]") for i in edit.items)
    _valid(result.view)
    # Persisted and replayed like any mask edit.
    assert edit_from_dict(json.loads(json.dumps(edit_to_dict(edit)))) == edit
    assert _applied(view, [edit_from_dict(edit_to_dict(edit))]) == list(result.view)


def test_hygiene_alone_never_makes_a_mask_batch() -> None:
    view = _session()
    ctx = make_ctx(view, target=10**6, window=10**6, recent=RecentWindow(turns=1))
    share = MaskObservations(min_batch_share=0.5, riders=(SupersededReads(),))
    (edit,) = share.plan(ctx)
    assert isinstance(edit, MaskEdit)
    assert not any(i.content.startswith("[superseded]") for i in edit.items)


def test_presets_put_hygiene_before_masking_and_restore_files_after_a_summary() -> None:
    mask_first = Compactor.preset("mask-first")
    names = [s.name for s in mask_first.strategies]
    assert names[: names.index("mask") + 1][-4:] == [
        "supersede",
        "trim_arguments",
        "clear_thinking",
        "mask",
    ]
    assert mask_first.restore_files == RestoreFiles()
    assert Compactor.preset("summarize").restore_files == RestoreFiles()
    assert Compactor.preset("window").restore_files is None


# -- files restored after a summary ----------------------------------------------------------------


def _long_session() -> list[Message]:
    """Reads of seven files, one written whole and one edited after its read, then many turns."""
    view = [Message.system("You are a coding agent.", id="sys"), Message.user("Fix it.", id="u0")]
    for n in range(7):
        view += _round(n, _read_call(n, f"src/m{n}.py"), _file(f"src/m{n}.py", 40))
    edit = ToolCallPart.from_args(
        "c7", "edit_file", {"path": "src/m5.py", "old_string": "a", "new_string": "b"}
    )
    view += _round(7, edit, "edited")
    body = "\n".join(f"new line {i}" for i in range(30))
    write = ToolCallPart.from_args("c8", "write_file", {"path": "src/m6.py", "content": body})
    view += _round(8, write, "written")
    for n in range(9, 40):
        view.append(Message.user(f"Go on {n}.", id=f"u{n}"))
        call = ToolCallPart.from_args(f"c{n}", "bash", {"command": f"pytest -k t{n}"})
        view += _round(n, call, f"ran t{n}\n" + "log line\n" * 40)
    return view


def test_a_compaction_restores_the_files_worked_on_after_its_summary() -> None:
    view, blobs = _long_session(), InMemoryBlobStore()
    window = 60_000
    ctx = make_ctx(view, target=counter.count_messages(view) // 2, window=window, blobs=blobs)
    result = Compactor.preset("summarize").compact(ctx)
    assert result.reached_target and "restore_files" in result.strategies_run
    _valid(result.view)
    summary_at = next(i for i, m in enumerate(result.view) if m.meta.kind == "summary")
    note = result.view[summary_at + 1]
    assert FILE_RESTORE_FLAG in note.meta.flags and note.meta.kind == "context_note"
    assert note.role == "user" and not note.meta.user_visible
    text = note.text
    # The five files touched last, most recent first: m6 (written whole), m5 (edited after its
    # read: said so), then m4, m3, m2; not m1 nor m0.
    paths = [p for p in (f"src/m{n}.py" for n in range(7)) if f'path="{p}"' in text]
    assert len(paths) == RESTORE_MAX_FILES and "src/m0.py" not in paths
    assert text.index('path="src/m6.py"') < text.index('path="src/m5.py"')
    assert "new line 29" in text
    assert "edited after this" in text.split('path="src/m5.py"')[1].split("</file>")[0]
    assert counter.count_message(note) <= RESTORE_MAX_WINDOW_SHARE * window
    # Every file names a ref that returns it.
    ref = text.split('path="src/m4.py" ref="')[1].split('"')[0]
    assert _file("src/m4.py", 40)[:500] in _read(blobs, ref)
    # The restore is part of the summary's edit: one cache break, replayed from the record.
    (summarized,) = [e for e in result.edits if isinstance(e, SummarizeEdit)]
    assert summarized.follow == (note,)
    stored = [edit_from_dict(json.loads(json.dumps(edit_to_dict(e)))) for e in result.edits]
    assert _applied(view, stored) == list(result.view)


def test_files_are_capped_each_and_left_out_when_they_do_not_fit_the_target() -> None:
    view = _long_session()
    view[3] = Message.tool(ToolResultPart("c0", "read_file", _file("src/m0.py", 3_000)), id="t0")
    view += _round(50, _read_call(50, "src/m0.py"), _file("src/m0.py", 3_000))
    view.append(Message.user("Last.", id="u50"))
    big = make_ctx(view, target=counter.count_messages(view) // 2, window=400_000)
    note = RestoreFiles().note(big, view, view[:3], room=10**6)
    assert note is not None
    block = note.text.split('path="src/m0.py"')[1].split("</file>")[0]
    assert counter.count_text(block) <= RESTORE_FILE_MAX_TOKENS and "cut to its head" in block
    # A target with no room for a file: the compaction keeps its summary and restores nothing.
    without = replace(Compactor.preset("summarize"), restore_files=None)
    loose = make_ctx(view, target=counter.count_messages(view) // 4, window=60_000)
    tight = replace(loose, target_tokens=without.compact(loose).after_tokens + 60)
    result = Compactor.preset("summarize").compact(tight)
    assert result.reached_target
    assert "restore_files" not in result.strategies_run
    assert not any(FILE_RESTORE_FLAG in m.meta.flags for m in result.view)


def test_hard_compactions_restore_nothing() -> None:
    view = _long_session()
    ctx = make_ctx(view, target=counter.count_messages(view) // 2, window=60_000, hard=True)
    result = Compactor.preset("mask-first").compact(ctx)
    assert not any(FILE_RESTORE_FLAG in m.meta.flags for m in result.view)


# -- through the engine ----------------------------------------------------------------------------


def test_a_session_that_reads_the_same_file_again_masks_the_old_read_with_a_ref() -> None:
    make_engine = EngineFactory()
    try:
        _reads_again(make_engine)
    finally:
        make_engine.close_all()


def _reads_again(make_engine: EngineFactory) -> None:
    engine, _ = make_engine()
    source = "\n".join(f"def parse_{i}(text): return text.split({i})" for i in range(30))
    driver = start(engine, output=lambda turn: source + f"\n# read {turn}")
    calls = iter(range(10_000))

    def respond(request: object) -> Message:
        n = next(calls)
        call = ToolCallPart.from_args(f"call_{n}", "read_file", {"path": "src/parser.py"})
        return Message.assistant(f"Reading the parser again ({n}).", [call])

    driver.model.default = respond  # type: ignore[attr-defined]
    request = driver.until(
        lambda r: any(
            p.content.startswith("[superseded]") for m in r.messages for p in m.tool_results
        ),
        limit=60,
    )
    _valid(request.messages)
    placeholder = next(
        p for m in request.messages for p in m.tool_results if p.content.startswith("[superseded]")
    )
    assert "src/parser.py" in placeholder.content and placeholder.ref is not None
    run = driver.session.run_engine_tool  # type: ignore[attr-defined]
    page = run(ToolCallPart.from_args("r1", "read_result", {"ref": placeholder.ref}))
    assert not page.is_error and "def parse_0(text)" in page.content and "of 31]" in page.content
    edits = [r.edit for r in engine.store.iter_edits(driver.session.id)]
    assert any(
        isinstance(e, MaskEdit) and any(i.content.startswith("[superseded]") for i in e.items)
        for e in edits
    )


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_every_hygiene_view_is_a_valid_history(provider: str) -> None:
    view = _session()
    ctx = make_ctx(view, target=10**6, window=40_000, recent=RecentWindow(turns=1))
    for strategy in (SupersededReads(), TrimOldArguments(above_tokens=200), ClearOldThinking()):
        view = _applied(view, strategy.plan(ctx.with_view(view)))
        validate(view, provider=history_rules_for(provider))  # type: ignore[arg-type]


def test_a_session_compacted_by_hand_restores_its_files_and_resumes_with_them() -> None:
    make_engine = EngineFactory()
    try:
        _compacts_and_resumes(make_engine)
    finally:
        make_engine.close_all()


def _compacts_and_resumes(make_engine: EngineFactory) -> None:
    engine, _ = make_engine(window=40_000)
    session = engine.new_session(title="restore")
    session.add_user("Make the parser accept empty input.")
    for n in range(3):
        call = _read_call(n, f"src/p{n}.py")
        session.add_assistant(Message.assistant(f"Reading p{n}.", [call]))
        session.add_tool_result(call.call_id, _file(f"src/p{n}.py", 25))
    for n in range(3, 110):  # more than the recent window (a quarter of the window) holds
        call = ToolCallPart.from_args(f"c{n}", "bash", {"command": f"pytest -k case{n}"})
        session.add_assistant(Message.assistant(f"Running case {n}.", [call]))
        session.add_tool_result(call.call_id, f"case {n}\n" + "collected 1 item ... ok\n" * 30)
    result = session.compact()
    assert result.changed and "restore_files" in result.strategies_run
    view = session.view
    (note,) = [m for m in view if FILE_RESTORE_FLAG in m.meta.flags]
    assert view[view.index(note) - 1].meta.kind == "summary"
    assert all(f'path="src/p{n}.py"' in note.text for n in range(3))
    assert counter.count_message(note) <= RESTORE_MAX_WINDOW_SHARE * 40_000
    _valid(view)
    ref = note.text.split('path="src/p2.py" ref="')[1].split('"')[0]
    run = session.run_engine_tool  # type: ignore[attr-defined]
    page = run(ToolCallPart.from_args("r1", "read_result", {"ref": ref}))
    assert not page.is_error and "src/p2.py v1" in page.content
    # The store holds the restore in the summary's edit: a resumed session sees the same view.
    assert [m.id for m in engine.resume(session.id).view] == [m.id for m in view]
