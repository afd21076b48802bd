"""ShrinkToFit when the target leaves the conversation little or nothing: the task keeps its text,
a message is cut at most once, and no edit that frees nothing is ever applied."""

from __future__ import annotations

from dataclasses import dataclass

from contextfold.compaction import CompactionContext, Compactor, ShrinkToFit, Summarize
from contextfold.compaction._shrink import cut_text, was_cut
from contextfold.compaction.pipeline import freed_by
from contextfold.edits import ContextEdit, DropEdit, SummarizeEdit, apply_edit
from contextfold.messages import Message, TextPart
from contextfold.outputs.blobs import BlobInfo
from contextfold.outputs.intake import InMemoryBlobStore

from .conftest import CharCounter, agent_log, chat, make_ctx, tool_round

counter = CharCounter()


class RecordingBlobs(InMemoryBlobStore):
    """Blobs in memory, and every text that was put (to count stored copies)."""

    def __init__(self) -> None:
        super().__init__()
        self.stored: list[str] = []

    def put_blob(self, session_id: str, content: str, *, tool_name: str | None = None) -> BlobInfo:
        self.stored.append(content)
        return super().put_blob(session_id, content, tool_name=tool_name)


TASK = "Fix the crash in parser.py on empty input; keep the public API."


def _small_window_view() -> list[Message]:
    """The task, a few tool rounds, a later request and a last round with a big output."""
    view = [Message.system("You are terse.", id="sys"), Message.user(TASK, id="task")]
    for n in range(3):
        view += tool_round(n, f"cat f{n}.py", "o" * 1_200, text=f"Reading f{n}.py.")
    view.append(Message.user("Now look at the tokenizer too, and say what you found.", id="last"))
    view += tool_round(9, "cat tokenizer.py", "t" * 3_000, text="Reading the tokenizer.")
    return view


def _edits_one_by_one(view: list[Message], edits: tuple[ContextEdit, ...]) -> list[int]:
    """What each edit freed, applied in order."""
    freed = []
    for edit in edits:
        after = apply_edit(view, edit)
        freed.append(freed_by(counter, view, after))
        view = after
    return freed


def test_the_task_keeps_its_text_when_the_target_leaves_the_conversation_nothing() -> None:
    view = _small_window_view()
    blobs = RecordingBlobs()
    ctx = make_ctx(view, target=0, window=2_000, blobs=blobs, room_tokens=600)

    result = Compactor.preset("mask-first").compact(ctx, hard=True)

    ids = [m.id for m in result.view]
    assert result.view[ids.index("task")].text == TASK
    assert "last" in ids
    assert all(freed > 0 for freed in _edits_one_by_one(view, result.edits))
    assert result.after_tokens <= 600  # what the conversation can be given at all
    assert not any(b.startswith("[text cut") for b in blobs.stored)


def test_a_message_is_cut_at_most_once() -> None:
    view = _small_window_view()
    blobs = RecordingBlobs()
    first = Compactor.preset("mask-first").compact(
        make_ctx(view, target=0, window=2_000, blobs=blobs, room_tokens=600), hard=True
    )
    shrunk = [e.first_id for e in first.edits if isinstance(e, SummarizeEdit)]
    assert len(shrunk) == len(set(shrunk))  # one edit per message in a compaction
    stored = len(blobs.stored)

    again = Compactor.preset("mask-first").compact(
        make_ctx(first.view, target=0, window=2_000, blobs=blobs, room_tokens=600), hard=True
    )

    assert again.edits == ()  # everything left was cut once already, or keeps its text
    assert len(blobs.stored) == stored
    assert all(was_cut(m) or m in view for m in first.view)  # cut, or as it was


def test_a_huge_task_is_cut_only_to_fit_the_room() -> None:
    view = [Message.user("T" * 8_000, id="task"), *tool_round(0, "ls", "x" * 400)]
    blobs = RecordingBlobs()

    kept = ShrinkToFit().plan(make_ctx(view, target=100, window=10_000, hard=True))
    cut = ShrinkToFit().plan(
        make_ctx(view, target=100, window=10_000, hard=True, blobs=blobs, room_tokens=1_000)
    )

    assert "task" not in [e.first_id for e in kept if isinstance(e, SummarizeEdit)]
    [task] = [e.summary for e in cut if isinstance(e, SummarizeEdit) and e.first_id == "task"]
    assert counter.count_message(task) <= 1_000
    assert "T" * 100 in task.text and "read_result ref_" in task.text  # head + tail + ref


def test_a_huge_task_keeps_its_short_instruction_whole() -> None:
    """Agents put pages of context before the instruction in one message (Claude Code's first
    message: reminders, then the task). A cut takes from the pages, not from the instruction."""
    instruction = " ".join([TASK] * 4)  # longer than a cut marker: the old split cut it
    task = Message("user", (TextPart("C" * 8_000), TextPart(instruction)), id="task")
    view = [task, *tool_round(0, "ls", "x" * 400)]

    cut = ShrinkToFit().plan(
        make_ctx(view, target=100, window=10_000, hard=True, room_tokens=1_000)
    )

    [shrunk] = [e.summary for e in cut if isinstance(e, SummarizeEdit) and e.first_id == "task"]
    assert shrunk.parts[1] == TextPart(instruction)
    assert "read_result ref_" in shrunk.parts[0].text  # the pages, cut, one read away


def test_a_text_shorter_than_its_cut_marker_is_neither_cut_nor_stored() -> None:
    blobs = RecordingBlobs()
    ctx = make_ctx([], target=0, window=1_000, blobs=blobs)
    assert cut_text(ctx, "ok, done", 0) == "ok, done"
    assert blobs.stored == []


# -- the pipeline accepts no edit that frees nothing ---------------------------------------------


@dataclass(frozen=True)
class Proposals:
    """A fake strategy proposing fixed edits (some of which make the view bigger)."""

    edits: tuple[ContextEdit, ...]
    name: str = "proposals"

    def plan(self, ctx: CompactionContext) -> list[ContextEdit]:
        return list(self.edits)


def test_an_edit_that_frees_nothing_is_never_applied() -> None:
    view = agent_log(rounds=4, output_chars=400)
    longer = Message.user("a placeholder much longer than the message " * 10, id="x")
    bigger = SummarizeEdit("a0", "a0", longer)
    same = SummarizeEdit("a1", "a1", view[4])  # a1 rewritten as itself: frees 0
    useful = DropEdit(("a2", "t2"))

    result = Compactor([Proposals((bigger, same, useful))]).compact(
        make_ctx(view, target=1, window=10_000)
    )

    assert result.edits == (useful,)
    only_bad = Compactor([Proposals((bigger, same))]).compact(
        make_ctx(view, target=1, window=10_000)
    )
    assert only_bad.edits == () and only_bad.strategies_run == ()


def test_a_summary_larger_than_what_precedes_the_last_request_takes_the_place_after_it() -> None:
    # A later request early on, then a long tool loop: the messages before the request are
    # too few to hold the summary, so it stands for the loop after it (both edits free tokens).
    view = chat(turns=1, rounds_per_turn=1, output_chars=20)
    view.append(Message.user("Now refactor the tokenizer.", id="u1"))
    for n in range(1, 12):
        view += tool_round(n, f"grep -n def tok{n}.py", "y" * 800)
    view += tool_round(99, "pytest", "ok")

    result = Compactor([Summarize()]).compact(make_ctx(view, target=10, window=4_000))

    assert result.summary is not None
    assert all(freed > 0 for freed in _edits_one_by_one(view, result.edits))
    ids = [m.id for m in result.view]
    assert ids.index("u1") < next(i for i, m in enumerate(result.view) if m.meta.kind == "summary")
