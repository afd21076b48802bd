"""Running strategies to a target: :class:`Compactor`, :class:`CompactResult` and the presets.

:meth:`Compactor.compact` runs the COMPACT-zone strategies in order, applying each one's edits
before the next, and stops as soon as the view is at or under ``ctx.target_tokens``. A
compaction that ends above the target having freed less than ``min_progress`` of the window is a
*failure*: reported (``failed=True`` and a reason; the engine keeps any edits it made, notes the
shortfall on its ``CompactionFinished``, or emits ``CompactionFailed`` when it changed nothing),
never retried in a loop. :meth:`Compactor.mask` runs the MASK-zone strategies (one cheap batch).
Hard mode (``hard=True``, once per overflow or in the BLOCK zone) adds ``DropOldest`` and
``ShrinkToFit`` to the chain and shrinks the protections, so the result fits whenever the
system messages do.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import ClassVar, Literal, TypeAlias

from contextfold.compaction._context import CompactionContext
from contextfold.compaction._results import result_slots
from contextfold.compaction._shrink import ShrinkToFit
from contextfold.compaction._summarize import SUMMARY_INPUT_HEAD_CHARS, SUMMARY_INPUT_TAIL_CHARS
from contextfold.compaction.hygiene import RestoreFiles, hygiene_strategies
from contextfold.compaction.restart import RestartPolicy
from contextfold.compaction.strategies import (
    DEFAULT_MASK_BATCH_SHARE,
    DEFAULT_TRUNCATE_ABOVE_TOKENS,
    DEFAULT_TRUNCATE_KEEP_TOKENS,
    DropOldest,
    MaskObservations,
    Strategy,
    Summarize,
    TruncateToolResults,
    maskable,
    masked_result,
)
from contextfold.compaction.summary import StructuredSummary
from contextfold.edits import (
    ContextEdit,
    EditAction,
    MaskEdit,
    SummarizeEdit,
    apply_edit,
    edit_action,
)
from contextfold.errors import ConfigError
from contextfold.events import Event, SummarizerFellBack
from contextfold.history.turns import last_user_index
from contextfold.messages import Message, SummaryPart
from contextfold.tokens.counter import TokenCounter

__all__ = [
    "DEFAULT_MIN_PROGRESS",
    "NOTHING_TO_REMOVE",
    "PRESETS",
    "CompactResult",
    "Compactor",
    "Preset",
    "PresetName",
    "freed_by",
    "preset_named",
    "replaced_by",
]

DEFAULT_MIN_PROGRESS = 0.10
"""Least share of the window a compaction that stays above its target must free: less would be
followed at once by another one, and compactions would loop."""

NOTHING_TO_REMOVE = "the recent turns are kept verbatim, and nothing older could be made shorter"
"""Why a compaction over its target changed nothing, when no strategy found an edit worth making."""

_PAST_TENSE: Mapping[EditAction, str] = {
    "mask": "masked",
    "truncate": "truncated",
    "clear": "cleared",
    "digest": "digested",
    "summary": "summarized",
    "archive": "archived",
    "drop": "dropped",
}
"""Each edit action as :meth:`CompactResult.what_changed` words it, in the order it lists them."""


@dataclass(frozen=True)
class CompactResult:
    """What a compaction did: the figures, the edits to append, and the view they give.

    Token figures count the conversation only (the engine leaves the system prompt and tools
    out), with the compactor's counter. ``freed_tokens`` is ``before_tokens - after_tokens``.
    ``edits`` are valid even when ``failed`` is set (they did free something); the engine
    decides whether to keep them. ``changed`` tells whether there is anything to append at all:
    a result without edits changed nothing, whatever else it says, and :meth:`describe` says so
    (with :attr:`unchanged_reason`). ``summary`` is the structured summary written, if any;
    ``events`` what strategies reported (``ObservationsMasked``, ``SummarizerFellBack``) for the
    engine to publish. ``cpu_seconds`` is the CPU time of the thread that ran it.
    ``before_view`` is the view it started from (:meth:`message_changes` compares the two; the
    background worker uses its ids to tell whether the transcript moved on).
    """

    before_tokens: int
    after_tokens: int
    strategies_run: tuple[str, ...]
    edits: tuple[ContextEdit, ...]
    view: tuple[Message, ...]
    before_view: tuple[Message, ...]
    target_tokens: int = 0
    failed: bool = False
    reason: str = ""
    cpu_seconds: float = 0.0
    summary: StructuredSummary | None = None
    events: tuple[Event, ...] = ()
    hard: bool = False

    @classmethod
    def of_run(
        cls,
        ctx: CompactionContext,
        *,
        before_tokens: int,
        after_tokens: int,
        view: Sequence[Message],
        before_view: Sequence[Message] | None = None,
        edits: Sequence[ContextEdit] = (),
        strategies_run: Sequence[str] = (),
        failed: bool = False,
        reason: str = "",
        cpu_seconds: float = 0.0,
        summary: StructuredSummary | None = None,
        events: Sequence[Event] = (),
    ) -> CompactResult:
        """The result of a run on ``ctx`` that gave ``view``: the one way results are made, so
        that the target and hard mode always come from the context the run had, and the view it
        started from is ``ctx.view`` unless the run was moved onto another one."""
        return cls(
            before_tokens=before_tokens,
            after_tokens=after_tokens,
            strategies_run=tuple(strategies_run),
            edits=tuple(edits),
            view=tuple(view),
            before_view=tuple(ctx.view if before_view is None else before_view),
            target_tokens=ctx.target_tokens,
            failed=failed,
            reason=reason,
            cpu_seconds=cpu_seconds,
            summary=summary,
            events=tuple(events),
            hard=ctx.hard,
        )

    @property
    def freed_tokens(self) -> int:
        """Tokens the compaction took out of the view."""
        return self.before_tokens - self.after_tokens

    @property
    def reached_target(self) -> bool:
        """True when the view ended at or under the target."""
        return self.after_tokens <= self.target_tokens

    @property
    def changed(self) -> bool:
        """True when there are edits to append; false when the view is exactly as it was."""
        return bool(self.edits)

    @property
    def before_messages(self) -> int:
        """Messages in the view it started from."""
        return len(self.before_view)

    @property
    def after_messages(self) -> int:
        """Messages in the view it gives."""
        return len(self.view)

    @property
    def base_ids(self) -> tuple[str, ...]:
        """The ids of the view it started from."""
        return tuple(m.id for m in self.before_view)

    @property
    def unchanged_reason(self) -> str:
        """Why it changed nothing, in plain words ("" when it changed something)."""
        if self.changed:
            return ""
        if self.reason:
            return self.reason
        if self.reached_target:
            return f"the conversation is already small ({self.before_tokens:,} tokens)"
        return NOTHING_TO_REMOVE

    def message_changes(self) -> dict[str, EditAction]:
        """What happened to each message of :attr:`before_view` that the edits changed, by id,
        in the view's order: the action of the last edit that changed it (``"mask"``,
        ``"truncate"``, ``"summary"``, ``"drop"``...; see :func:`~contextfold.edits.edit_action`).

        A message counts once however many edits touched it; one that a summary replaced is
        ``"summary"`` even if the summary was dropped later in the same run.
        """
        started = {m.id for m in self.before_view}
        last: dict[str, EditAction] = {}
        view = [m for m in self.before_view if m.meta.agent_visible]
        for edit in self.edits:
            after = apply_edit(view, edit)
            action = edit_action(edit)
            for message in replaced_by(view, after):
                if message.id in started:
                    last[message.id] = action
            view = after
        return {m.id: last[m.id] for m in self.before_view if m.id in last}

    def what_changed(self) -> str:
        """``"14 of 48 messages (summarized 12, dropped 2)"``, or ``"nothing"``."""
        counts = Counter(self.message_changes().values())
        if not counts:
            return "nothing"
        parts = ", ".join(f"{w} {counts[a]:,}" for a, w in _PAST_TENSE.items() if a in counts)
        return f"{counts.total():,} of {self.before_messages:,} messages ({parts})"

    def describe(self) -> str:
        """What it did, on one line for a person: ``"compacted 14 of 48 messages (summarized 12,
        dropped 2): 6,120 → 5,602 tokens of conversation"``, or ``"nothing compacted: ..."`` with
        the reason when it changed nothing."""
        if not self.changed:
            return f"nothing compacted: {self.unchanged_reason}"
        return (
            f"compacted {self.what_changed()}: {self.before_tokens:,} → {self.after_tokens:,} "
            "tokens of conversation"
        )

    def __repr__(self) -> str:
        # The default repr would print both views whole; the figures and the verdict say more.
        return (
            f"CompactResult(changed={self.changed}, before_tokens={self.before_tokens}, "
            f"after_tokens={self.after_tokens}, strategies_run={self.strategies_run!r}, "
            f"edits={len(self.edits)}, failed={self.failed}, describe={self.describe()!r})"
        )


def failed_result(ctx: CompactionContext, reason: str) -> CompactResult:
    """A result that changed nothing and says why (used for worker errors)."""
    tokens = ctx.tokens()
    return CompactResult.of_run(
        ctx, before_tokens=tokens, after_tokens=tokens, view=ctx.view, failed=True, reason=reason
    )


@dataclass(frozen=True)
class Preset:
    """A named configuration: what runs in the MASK zone and in the COMPACT zone."""

    description: str
    mask: Callable[[Mapping[str, float]], tuple[Strategy, ...]]
    compact: Callable[[Mapping[str, float]], tuple[Strategy, ...]]
    restart: bool = False
    restore_files: bool = False
    """Whether a compaction that wrote a summary restores the files worked on after it."""


def _mask_batch(o: Mapping[str, float]) -> tuple[Strategy, ...]:
    # Hygiene rides on a batch worth a cache break by itself: it never causes one of its own.
    return (MaskObservations(min_batch_share=o["mask_batch_share"], riders=hygiene_strategies()),)


def _mask_first_chain(o: Mapping[str, float]) -> tuple[Strategy, ...]:
    return (
        TruncateToolResults(
            above_tokens=int(o["truncate_above_tokens"]), keep_tokens=int(o["truncate_keep_tokens"])
        ),
        *hygiene_strategies(),
        MaskObservations(min_batch_share=o["mask_batch_share"]),
        Summarize(),
        DropOldest(),
    )


PresetName: TypeAlias = Literal["mask-first", "summarize", "window", "restart"]
"""A named compaction configuration (the ``preset`` setting); see :data:`PRESETS`."""

PRESETS: Mapping[PresetName, Preset] = {
    "mask-first": Preset(
        "mask zone: one batch of old outputs masked, with superseded reads, big old call "
        "arguments and old thinking taken out; compact zone: truncate big outputs, the same "
        "hygiene, mask, summarize (the files worked on restored after it), then drop the oldest "
        "units (the default)",
        _mask_batch,
        _mask_first_chain,
        restore_files=True,
    ),
    "summarize": Preset(
        "no masking; compact zone: a structured summary plus the recent window (Codex / Claude "
        "Code style, the files worked on restored after it), dropping oldest units only if "
        "that is not enough",
        lambda o: (),
        lambda o: (Summarize(), DropOldest()),
        restore_files=True,
    ),
    "window": Preset(
        "no masking, no summary: the oldest whole units leave the view (a sliding window)",
        lambda o: (),
        lambda o: (DropOldest(),),
    ),
    "restart": Preset(
        "mask zone as mask-first; at the compact zone the engine winds the session down and "
        "restarts it with a summary and the last turns; in-place compaction (the mask-first "
        "chain) only when no restart is left or on overflow",
        _mask_batch,
        _mask_first_chain,
        restart=True,
        restore_files=True,
    ),
}
"""The presets by name (the ``preset`` setting)."""


def preset_named(text: str) -> PresetName:
    """The preset ``text`` names; :class:`ConfigError` listing the presets when none."""
    for name in PRESETS:
        if name == text:
            return name
    raise ConfigError("preset", f"unknown preset {text!r}; choose one of {sorted(PRESETS)}")


@dataclass
class Compactor:
    """Runs strategies in order until the view fits its target; see the module docstring.

    ``strategies`` run in the COMPACT and BLOCK zones, ``mask_strategies`` in the MASK zone;
    hard mode appends the ``hard_extras`` the chain lacks (``DropOldest``, ``ShrinkToFit``).
    ``restart`` is the restart policy of the ``"restart"`` preset (``None`` otherwise): the engine
    reads it to restart sessions instead of compacting in place. ``restore_files``, when set,
    follows a summary written by a (not hard) compaction with the files the agent was working
    on, in the same edit, when they fit the target.
    """

    strategies: Sequence[Strategy]
    _: KW_ONLY
    mask_strategies: Sequence[Strategy] = ()
    min_progress: float = DEFAULT_MIN_PROGRESS
    restart: RestartPolicy | None = None
    name: PresetName | Literal["custom"] = "custom"
    hard_extras: Sequence[Strategy] = field(default_factory=lambda: (DropOldest(), ShrinkToFit()))
    restore_files: RestoreFiles | None = None

    PRESET_OPTIONS: ClassVar[Mapping[str, float]] = {
        "mask_batch_share": DEFAULT_MASK_BATCH_SHARE,
        "truncate_above_tokens": DEFAULT_TRUNCATE_ABOVE_TOKENS,
        "truncate_keep_tokens": DEFAULT_TRUNCATE_KEEP_TOKENS,
    }

    @classmethod
    def preset(
        cls,
        name: PresetName,
        *,
        min_progress: float = DEFAULT_MIN_PROGRESS,
        restart: RestartPolicy | None = None,
        **options: float,
    ) -> Compactor:
        """The compactor of a named preset (:data:`PRESETS`); ``options`` tune its strategies:
        ``mask_batch_share``, ``truncate_above_tokens``, ``truncate_keep_tokens``."""
        spec = PRESETS[preset_named(name)]  # checked again for callers without a type checker
        unknown = set(options) - set(cls.PRESET_OPTIONS)
        if unknown:
            raise ConfigError(
                f"compaction.{sorted(unknown)[0]}",
                f"not an option of the presets; known: {sorted(cls.PRESET_OPTIONS)}",
            )
        merged = {**cls.PRESET_OPTIONS, **options}
        if spec.restart and restart is None:
            restart = RestartPolicy()
        return cls(
            spec.compact(merged),
            mask_strategies=spec.mask(merged),
            min_progress=min_progress,
            restart=restart if spec.restart else None,
            name=name,
            restore_files=RestoreFiles() if spec.restore_files else None,
        )

    def compact(self, ctx: CompactionContext, *, hard: bool | None = None) -> CompactResult:
        """Compact the view to ``ctx.target_tokens`` (COMPACT / BLOCK zone, or overflow with
        ``hard=True``). Never raises for lack of progress: see ``CompactResult.failed``."""
        if hard is not None:
            ctx = replace(ctx, hard=hard)
        chain = list(self.strategies)
        if ctx.hard:
            chain += [x for x in self.hard_extras if not any(type(x) is type(s) for s in chain)]
        return self._run(ctx, chain, enforce_progress=True)

    def mask(self, ctx: CompactionContext) -> CompactResult:
        """The MASK-zone step: one cheap batch (no minimum-progress rule)."""
        return self._run(ctx, list(self.mask_strategies), enforce_progress=False)

    def _run(
        self, ctx: CompactionContext, chain: Sequence[Strategy], *, enforce_progress: bool
    ) -> CompactResult:
        started = time.thread_time()
        events: list[Event] = []
        run_ctx = replace(ctx, emit=events.append)
        view: list[Message] = list(ctx.view)
        before = run_ctx.tokens()
        current = before
        edits: list[ContextEdit] = []
        ran: list[str] = []
        position = 0
        while position < len(chain):
            strategy = chain[position]
            position += 1
            if enforce_progress and current <= ctx.target_tokens:
                break
            step = run_ctx.with_view(view, current)
            following = chain[position] if position < len(chain) else None
            planned: list[tuple[Strategy, list[ContextEdit]]] | None = None
            if (
                enforce_progress
                and isinstance(strategy, MaskObservations)
                and not strategy.riders
                and isinstance(following, Summarize)
            ):
                planned = _summary_instead_of_mask(step, strategy, following, events)
                if planned is not None:
                    position += 1
            if planned is None:
                planned = [(strategy, strategy.plan(step))]
            for planner, planned_edits in planned:
                kept = 0
                for edit in planned_edits:
                    after = apply_edit(view, edit)
                    freed = freed_by(ctx.counter, view, after)
                    if freed > 0:  # never an edit that frees nothing
                        # What the view costs now, without counting it again: the edit changed
                        # only the messages freed_by counted (messages are immutable).
                        view, current = after, current - freed
                        edits.append(edit)
                        kept += 1
                if kept:
                    ran.append(planner.name)
        if enforce_progress and self.restore_files is not None and not ctx.hard:
            restored = _with_files_restored(self.restore_files, run_ctx, edits, view, current)
            if restored is not None:
                edits, view, current = restored
                ran.append(self.restore_files.name)
        failed, reason = self._verdict(ctx, before, current, enforce_progress)
        return CompactResult.of_run(
            ctx,
            before_tokens=before,
            after_tokens=current,
            view=view,
            edits=edits,
            strategies_run=ran,
            failed=failed,
            reason=reason,
            cpu_seconds=time.thread_time() - started,
            summary=_last_summary(edits, events),
            events=events,
        )

    def _verdict(
        self, ctx: CompactionContext, before: int, after: int, enforce_progress: bool
    ) -> tuple[bool, str]:
        if after <= ctx.target_tokens or not enforce_progress:
            return False, ""
        freed = before - after
        if freed <= 0:
            return True, NOTHING_TO_REMOVE
        least = int(self.min_progress * ctx.window_tokens)
        if freed < least:
            return True, (
                f"freed {freed} tokens, less than the minimum progress of {least} "
                f"({self.min_progress:.0%} of a {ctx.window_tokens}-token window); the view "
                f"stays {after - ctx.target_tokens} tokens over its target of {ctx.target_tokens}"
            )
        return False, f"stopped {after - ctx.target_tokens} tokens above the target"


def _with_files_restored(
    restore: RestoreFiles,
    ctx: CompactionContext,
    edits: list[ContextEdit],
    after: Sequence[Message],
    current: int,
) -> tuple[list[ContextEdit], list[Message], int] | None:
    """The run's edits with the files worked on following its last summary, the view they give
    and its size; ``None`` without a summary or when no file fits under the target. ``after``
    is the view the run's edits gave ``ctx.view``, and ``current`` its size.

    The files join the summary's own edit, so the compaction stays one cache break."""
    last = next(
        (
            i
            for i in range(len(edits) - 1, -1, -1)
            if isinstance(edits[i], SummarizeEdit) and edits[i].summary.meta.kind == "summary"  # type: ignore[union-attr]
        ),
        None,
    )
    if last is None:
        return None
    summarized = edits[last]
    assert isinstance(summarized, SummarizeEdit)
    before = list(ctx.view)
    note = restore.note(ctx, before, after, ctx.target_tokens - current)
    if note is None:
        return None
    changed = [*edits[:last], replace(summarized, follow=(note,)), *edits[last + 1 :]]
    view = functools.reduce(apply_edit, changed, before)
    tokens = ctx.with_view(view).tokens()
    if tokens > ctx.target_tokens or note not in view:
        return None
    return changed, view, tokens


def _summary_instead_of_mask(
    ctx: CompactionContext, mask: MaskObservations, summarize: Summarize, events: list[Event]
) -> list[tuple[Strategy, list[ContextEdit]]] | None:
    """The edits of ``mask`` then ``summarize`` without the part of the batch the summary
    takes out of the view again, when that is certain; else ``None`` (both are planned as
    usual).

    A compaction whose batch cannot reach the target alone goes on to summarize everything
    between the task and the recent window: most of the batch's placeholders, stashed outputs
    and edit would be thrown away there and then. Only the outputs the recent window takes in
    once they are masked (it is capped in tokens) stay masked in the view; the batch is cut
    to those, and the view, the summary and what it costs are the same, provided that

    - every output the batch could mask lies in the summary's range (none before it);
    - the batch cannot reach the target even if it freed the whole of every message it could
      change (then the summary follows it, and the batch masks every output it can);
    - the summary reads the same texts: a masked output is read back from its ref, cut to
      head and tail past ``SUMMARY_INPUT_*_CHARS``, an unmasked one as the view shows it; so
      no output the batch could mask shows more than that;
    - the summary edit is made either way: it costs less than the messages of its range the
      batch would leave alone (after the batch, the range costs at least those), and the last
      user message is outside the range (its split of the range weighs each side).

    Each output the summary replaces is stashed by it and cited by ref, as after a batch.
    When the summary turns out not to meet the last condition, its events are taken back
    and ``None`` returned: the batch and the summary are then planned as before (the
    summarizer is asked again; rare, a summary being far smaller than what it replaces).
    """
    view = ctx.view
    lo, hi = summarize.span(ctx)
    last_user = last_user_index(view)
    if hi <= lo or (last_user is not None and lo <= last_user < hi):
        return None
    longest = SUMMARY_INPUT_HEAD_CHARS + SUMMARY_INPUT_TAIL_CHARS
    slots = [slot for slot in result_slots(view, 0, hi) if maskable(ctx, slot)]
    if any(slot.index < lo or len(slot.result.content) > longest for slot in slots):
        return None
    changing = {slot.index for slot in slots}  # the messages a batch could change
    count = ctx.counter.count_message
    if ctx.tokens() - sum(count(view[i]) for i in changing) <= ctx.target_tokens:
        return None
    # The window as the batch leaves it: a unit its token cap refused may fit once masked,
    # and then stays in the view masked, with every unit the window takes in after it. The
    # window depends only on the units from the one it refuses on: mask every output from
    # there to the summary's end and look again, until it refuses a unit the batch leaves as
    # it is, or none.
    masked_view: Sequence[Message] = view
    masked_from = hi
    window = ctx.recent_window()
    while window.refused is not None and window.refused.start < masked_from:
        items = [
            found[0]
            for slot in slots
            if window.refused.start <= slot.index < masked_from
            and (found := masked_result(ctx, slot)) is not None
        ]
        masked_from = window.refused.start
        if not items:
            break  # the batch leaves the unit as it is: the window stays where it is
        masked_view = apply_edit(masked_view, MaskEdit(tuple(items), reason="mask"))
        window = ctx.with_view(masked_view).recent_window()
    start = window.start
    batch = tuple(
        found[0]
        for slot in slots
        if start <= slot.index and (found := masked_result(ctx, slot)) is not None
    )
    left_alone = sum(count(view[i]) for i in range(lo, start) if i not in changing)
    emitted = len(events)
    planned = summarize.plan(ctx.with_view(masked_view))
    summaries = [e.summary for e in planned if isinstance(e, SummarizeEdit)]
    if not summaries or any(count(m) >= left_alone for m in summaries):
        del events[emitted:]
        return None
    masking: list[ContextEdit] = [MaskEdit(batch, reason="mask")] if batch else []
    return [(mask, masking), (summarize, planned)]


def freed_by(counter: TokenCounter, before: Sequence[Message], after: Sequence[Message]) -> int:
    """Tokens an edit that turned ``before`` into ``after`` freed (negative when it added).

    Only the messages it replaced are counted: an edit keeps every other message as it was.
    """
    old = set(map(id, before))
    new = [m for m in after if id(m) not in old]
    return counter.count_messages(replaced_by(before, after)) - counter.count_messages(new)


def replaced_by(before: Sequence[Message], after: Sequence[Message]) -> list[Message]:
    """The messages of ``before`` that an edit turning it into ``after`` removed or rewrote
    (messages are immutable: one kept as it was is the same object)."""
    kept = set(map(id, after))
    return [m for m in before if id(m) not in kept]


def _last_summary(
    edits: Sequence[ContextEdit], events: Sequence[Event]
) -> StructuredSummary | None:
    """The summary the last summary edit wrote, with the fallback reason its summarizer gave
    (the stored part keeps the sections, not how they were written)."""
    fell_back = [e.error for e in events if isinstance(e, SummarizerFellBack)]
    for edit in reversed(edits):
        if isinstance(edit, SummarizeEdit) and edit.summary.meta.kind == "summary":
            for part in edit.summary.parts_of(SummaryPart):
                summary = StructuredSummary.from_part(part)
                return replace(summary, fallback_reason=fell_back[-1] if fell_back else None)
    return None
