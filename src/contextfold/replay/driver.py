"""Replay a recorded agent session through a :class:`~contextfold.engine.ContextEngine`.

The transcript's user messages and tool results go into a fresh session in order; at each
recorded assistant turn the driver asks the engine for the request it would send
(``session.prepare``), measures it, and answers it with the recorded assistant message through a
:class:`~contextfold.providers.recorded.ReplayModel`. The model's behaviour is the recorded one, so
the replay shows what contextfold does to the *context* of a real session: how big each request
is, when it masks, summarizes or drops, what a prompt cache could reuse, what it costs, and which
facts the final view still holds.

Choices that shape the figures:

- **Recorded usage is not used to anchor our estimates.** It measured the *original* context
  (which, for Claude Code and Codex logs, also held a system prompt and tool definitions the
  transcript leaves out); once our view differs, anchoring on it would mix two different
  requests. Every figure is our counter's count of exactly what we would send; the recorded
  prompt size is kept beside it (:attr:`TurnRecord.recorded_prompt_tokens`).
- **The same figures on every run.** Compaction runs in the foreground
  (``ContextPolicy(background=False)``): a replay has no model latency to hide background work
  behind, and its results must not depend on thread timing. The ids the session makes (tool
  results, summaries, notes) come from :func:`~contextfold.messages.reproducible_ids`: summaries
  cite their sources by id, and fresh ids hold the clock and a random part, which changed how many
  tokens a summary was from one run to the next.
- **The original agent's own summaries are not input** (Claude Code's ``isCompactSummary``
  message): the replay sees the full history and compacts it its own way; where the original
  compacted is recorded on the request axis (:class:`OriginalCompaction`). A summary the session
  *begins* with is input: the session continues an earlier one, whose history is in no other
  message (without it, the first request would hold no message at all).
- Subagent transcripts are not replayed (they ran in their own context windows).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from contextfold.budget import Zone
from contextfold.chat import ChatRequest
from contextfold.compaction.pipeline import PresetName
from contextfold.compaction.summary import ExtractiveSummarizer, StructuredSummary
from contextfold.edits import ContextEdit, MaskEdit, apply_edit, edit_action
from contextfold.engine import ContextEngine, ContextPolicy, PreparedRequest, Session
from contextfold.errors import ContextOverflowError, RefNotFoundError, UnknownModelError
from contextfold.events import Event, LossReported
from contextfold.messages import Message, reproducible_ids
from contextfold.model_registry import ModelInfo, ModelRegistry, default_registry, model_for_window
from contextfold.providers.recorded import ReplayModel
from contextfold.replay.cache import PrefixMeter, input_cost, price_models
from contextfold.replay.grounding import (
    FailedApproach,
    GroundingPlan,
    check_failed_approaches,
    failed_approaches,
)
from contextfold.replay.probes import (
    SUMMARY_KINDS,
    Probe,
    ViewText,
    check_retention,
    original_view,
    probes_for,
)
from contextfold.replay.records import (
    EditKind,
    EditMark,
    LossMark,
    OriginalAgent,
    OriginalCompaction,
    ReplayRun,
    TranscriptReplay,
    TurnRecord,
)
from contextfold.retention.loss import stored_where
from contextfold.store import SQLiteVersionWarning
from contextfold.tokens.counters import TokenCounter, counter_for
from contextfold.transcripts.transcript import Transcript

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_PRESETS",
    "REPLAY_POLICY",
    "MeteredSummarizer",
    "original_agent",
    "replay",
    "replay_transcript",
    "resolve_model",
]

DEFAULT_PRESETS: tuple[PresetName, ...] = ("mask-first", "summarize", "window")
"""Presets compared when none is named: the default, the Claude Code / Codex style, and the plain
sliding window."""
DEFAULT_MODEL = "gpt-4o"
"""The model replayed for when neither the caller nor the transcript names one the registry knows
(its 128k window is the size most agent models share; o200k counts exactly)."""
REPLAY_POLICY = ContextPolicy(background=False)
"""The engine policy of a replay: the defaults, with compaction in the foreground."""


def resolve_model(
    transcript: Transcript,
    model: str | ModelInfo | None = None,
    window: int | None = None,
    registry: ModelRegistry | None = None,
) -> ModelInfo:
    """The model a transcript is replayed for: ``model``, else the one it recorded, else
    :data:`DEFAULT_MODEL`; with ``window`` as its context window when given.

    A ``model`` the registry does not know needs ``window`` (:class:`UnknownModelError`
    otherwise); it is then counted with the default (heuristic) counter."""
    registry = registry or default_registry()
    if isinstance(model, ModelInfo):
        info = model
    elif model:
        found = registry.find(model)
        if found is not None:
            info = found
        elif window is not None:
            info = model_for_window(window, name=model)
        else:
            raise UnknownModelError(model, registry.suggest(model))
    else:
        found = registry.find(transcript.model) if transcript.model else None
        info = found or registry.get(DEFAULT_MODEL)
    if window is not None and window != info.context_window:
        info = replace(info, context_window=window)
    return info


class MeteredSummarizer:
    """The default extractive summarizer, counting the tokens it reads.

    A summary written by a model would be a model call reading the same messages (and the
    summary it extends); replays price the requests the agent sends, so this is how they show
    what summarizing would add on top.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.inner = ExtractiveSummarizer()
        self.read = 0
        """Tokens read so far, over every summary."""

    def summarize(
        self,
        messages: Sequence[Message],
        previous: StructuredSummary | None = None,
        focus: str | None = None,
    ) -> StructuredSummary:
        """:meth:`ExtractiveSummarizer.summarize`, with what it reads counted."""
        self.read += self.counter.count_messages(messages)
        if previous is not None:
            self.read += self.counter.count_text(previous.render())
        return self.inner.summarize(messages, previous, focus)


def replay(
    transcript: Transcript,
    preset: PresetName = "mask-first",
    *,
    model: str | ModelInfo | None = None,
    window: int | None = None,
    policy: ContextPolicy = REPLAY_POLICY,
    registry: ModelRegistry | None = None,
    probes: Sequence[Probe] | None = None,
    grounding: GroundingPlan | None = None,
    failed: Sequence[FailedApproach] | None = None,
) -> ReplayRun:
    """Replay ``transcript`` with one compaction preset and return what each request was.

    ``probes`` are the retention probes checked against the final view (default: those of the
    transcript, :func:`~contextfold.replay.probes.probes_for`). ``grounding`` and ``failed`` are
    the grounding and failed-approach probes (:mod:`contextfold.replay.grounding`; default: the
    transcript's own): pass them to share one plan between several replays of a transcript.
    """
    info = resolve_model(transcript, model, window, registry)
    if grounding is None:
        grounding = GroundingPlan(transcript.messages)
    if failed is None:
        failed = failed_approaches(transcript.messages)
    with reproducible_ids():
        return _replay_once(transcript, preset, info, policy, probes, grounding, failed)


def _replay_once(
    transcript: Transcript,
    preset: PresetName,
    info: ModelInfo,
    policy: ContextPolicy,
    probes: Sequence[Probe] | None,
    grounding: GroundingPlan,
    failed: Sequence[FailedApproach],
) -> ReplayRun:
    with warnings.catch_warnings():
        # The store lives in memory: no WAL file and no other writer, so the old-SQLite warning
        # (about several processes writing one database file) does not apply.
        warnings.simplefilter("ignore", SQLiteVersionWarning)
        summarizer = MeteredSummarizer(counter_for(info))
        losses = _LossLog()
        engine = ContextEngine(
            info,
            store=":memory:",
            compactor=preset,
            policy=policy,
            summarizer=summarizer,
            sinks=[losses],
        )
    try:
        session = engine.new_session(title=transcript.title or transcript.session_id)
        run = ReplayRun(preset, info.name, info.context_window, engine.effective_window)
        losses.run = run
        _Replayer(engine, session, transcript, run, summarizer, grounding).run()
        if probes is None:
            probes = probes_for(transcript.messages)
        read_ref = _ref_reader(engine, session)
        # What the model last read: the view and the system prompt it came with (the pins are a
        # section of it), as the peers' final views carry theirs, and the ledger, which rides
        # in the system prompt or, after a summary, with the latest summary.
        last = session.last_request
        system = [Message.system(last.system_text)] if last is not None else []
        ledger = [Message.system(session.ledger.render())] if len(session.ledger) else []
        final = [*system, *ledger, *session.view]
        run.retention = check_retention(probes, final, read_ref)
        run.failed_approaches = check_failed_approaches(failed, final, read_ref)
        run.final_tokens = engine.counter.count_messages(session.view)
        run.restarts = session.restarts
        return run
    finally:
        engine.close()


def replay_transcript(
    transcript: Transcript,
    presets: Iterable[PresetName] = DEFAULT_PRESETS,
    *,
    label: str | None = None,
    model: str | ModelInfo | None = None,
    window: int | None = None,
    policy: ContextPolicy = REPLAY_POLICY,
    registry: ModelRegistry | None = None,
) -> TranscriptReplay:
    """Replay ``transcript`` once per preset, beside what the original agent recorded."""
    info = resolve_model(transcript, model, window, registry)
    probes = probes_for(transcript.messages)
    grounding = GroundingPlan(transcript.messages)
    failed = failed_approaches(transcript.messages)
    counter = counter_for(info)
    result = TranscriptReplay(
        label=label or transcript.path or transcript.session_id or "transcript",
        path=transcript.path,
        format=transcript.format,
        messages=len(transcript.messages),
        full_tokens=_full_tokens(transcript, counter),
        original=original_agent(transcript, probes),
    )
    for preset in dict.fromkeys(presets):
        result.runs[preset] = replay(
            transcript,
            preset,
            model=info,
            policy=policy,
            registry=registry,
            probes=probes,
            grounding=grounding,
            failed=failed,
        )
    first = next(iter(result.runs.values()), None)
    if first and first.turns and not _system_text(transcript):
        recorded = first.turns[0].recorded_prompt_tokens
        if recorded is not None and recorded > first.turns[0].tokens:
            result.unrecorded_prompt_tokens = recorded - first.turns[0].tokens
    return result


def original_agent(transcript: Transcript, probes: Sequence[Probe] | None = None) -> OriginalAgent:
    """The original agent's compactions on the request axis, its recorded usage, and the
    retention of its post-compaction view."""
    by_index = {c.index: c for c in transcript.compactions}
    out = OriginalAgent()
    turn = 0
    for index, message in enumerate(transcript.messages):
        recorded = by_index.get(index)
        if recorded is not None:
            out.compactions.append(
                OriginalCompaction(
                    turn, recorded.trigger, recorded.pre_tokens, recorded.summary_text
                )
            )
        if _is_turn(message):
            turn += 1
            usage = message.meta.usage
            if usage is not None:
                out.recorded_calls += 1
                out.recorded_prompt_tokens += usage.input_tokens
                out.recorded_peak_tokens = max(out.recorded_peak_tokens, usage.input_tokens)
                out.recorded_cache_read_tokens += usage.cache_read_tokens
    view = original_view(transcript)
    if view is not None:
        out.retention = check_retention(
            probes if probes is not None else probes_for(transcript.messages), view
        )
    return out


# --------------------------------------------------------------------------------------------------
# The turn loop
# --------------------------------------------------------------------------------------------------


class _LossLog:
    """An event sink keeping each loss report on the run, marked with the request it came
    before (overflow recoveries included, which happen outside a prepared request)."""

    def __init__(self) -> None:
        self.run: ReplayRun | None = None

    def emit(self, event: Event) -> None:
        run = self.run
        if run is None or not isinstance(event, LossReported):
            return
        items = tuple(
            (str(i.get("kind", "")), str(i.get("text", "")), stored_where(i)) for i in event.items
        )
        lost = tuple(text for _, text, where in items if where == "lost")
        run.losses.append(
            LossMark(
                turn=len(run.turns),  # the record of the request being prepared comes next
                trigger=event.trigger,
                in_summary=event.in_summary,
                pinned=event.pinned,
                in_ledger=event.in_ledger,
                behind_ref=event.behind_ref,
                lost=event.lost,
                lost_items=lost,
                items=items,
                messages=event.message_counts(),
            )
        )


class _Replayer:
    """Feeds one transcript into one session and records every request."""

    def __init__(
        self,
        engine: ContextEngine,
        session: Session,
        transcript: Transcript,
        run: ReplayRun,
        summarizer: MeteredSummarizer,
        grounding: GroundingPlan,
    ) -> None:
        self.engine = engine
        self.grounding = grounding
        self.summarizer = summarizer
        self.summary_read = 0  # the summarizer's reading already put on a turn
        self.session = session
        self.transcript = transcript
        self.run_record = run
        self.system = _system_text(transcript)
        self.tools = list(transcript.tools)
        self.model = ReplayModel(transcript)
        self.meter = PrefixMeter(engine.counter, engine.provider)
        self.anthropic, self.openai = price_models()

    def run(self) -> None:
        session = self.session
        original_compacted = False
        left_out = _left_out(self.transcript.messages)
        for index, message in enumerate(self.transcript.messages):
            # Where the original agent's summary was is marked, whether or not it is our input.
            original_compacted = original_compacted or message.meta.kind == "summary"
            if index in left_out:
                continue
            if message.role == "user" and message.meta.agent_visible:
                session.add_user(message)
            elif message.role == "user":
                session.add_message(message)  # kept in the transcript, never sent
            elif message.role == "tool":
                session.add_tool_results(message.tool_results)
            elif _is_turn(message):
                self._turn(index, message, original_compacted)
                original_compacted = False

    def _turn(self, index: int, recorded: Message, original_compacted: bool) -> None:
        session = self.session
        before = session.view
        restarts = session.restarts
        request, needed = self._prepare()
        usage = recorded.meta.usage
        base = TurnRecord(
            turn=len(self.run_record.turns),
            message_index=index,
            tokens=needed,
            zone=Zone.OVERFLOW.value,
            fits=False,
            recorded_prompt_tokens=usage.input_tokens if usage is not None else None,
            original_compacted=original_compacted,
        )
        if request is None:
            self.meter.reset()  # nothing was sent: the next request has nothing to reuse
            record = base
        else:
            record = self._measured(base, request, before, restarts)
            self._track_peak(request, record)
            if record.edits:
                self._probe_grounding(index, request)
        self.run_record.turns.append(record)
        chat = request.to_chat_request() if request else ChatRequest(messages=session.view)
        answer = self.model.complete(chat)
        # The recorded usage measured the original context, not ours: never anchor on it. The
        # recorded id is kept (the store is this replay's own), so summaries cite the transcript's.
        session.add_assistant(replace(answer.message.with_meta(usage=None), id=recorded.id))

    def _prepare(self) -> tuple[PreparedRequest | None, int]:
        """The request, or ``None`` and its size when even a hard compaction cannot fit it."""
        session = self.session
        try:
            return session.prepare(system=self.system, tools=self.tools), 0
        except ContextOverflowError as error:
            try:
                session.recover(error)
                return session.prepare(system=self.system, tools=self.tools), 0
            except ContextOverflowError as again:
                return None, again.prompt_tokens or 0

    def _measured(
        self,
        base: TurnRecord,
        request: PreparedRequest,
        before: Sequence[Message],
        restarts: int,
    ) -> TurnRecord:
        counter = self.engine.counter
        edits: list[EditMark] = []
        compaction = request.compaction
        if compaction is not None and compaction.changed:
            edits = _edit_marks(before, compaction.edits, request.zone, counter)
        if self.session.restarts > restarts:
            freed = counter.count_messages(before) - counter.count_messages(self.session.view)
            edits.append(EditMark("restart", 1, freed))
            self.meter.reset()
        if compaction is not None and compaction.summary is not None:
            self.run_record.summaries.append((base.turn, compaction.summary.render()))
        view = self.session.view
        reuse = self.meter.measure(request, view[-1].meta.created_at if view else None)
        summary_read = self.summarizer.read - self.summary_read
        self.summary_read = self.summarizer.read
        return replace(
            base,
            summary_input_tokens=summary_read,
            tokens=request.tokens,
            messages=len(request.messages),
            zone=request.zone.value,
            fits=request.tokens <= self.engine.effective_window,
            edits=tuple(edits),
            compaction_failed=bool(compaction is not None and compaction.failed),
            compaction_cpu_seconds=compaction.cpu_seconds if compaction is not None else 0.0,
            reused_tokens=reuse.reused_tokens,
            cost_anthropic=input_cost(self.anthropic, reuse),
            cost_openai=input_cost(self.openai, reuse),
        )

    def _probe_grounding(self, index: int, request: PreparedRequest) -> None:
        """A compaction point (anything taken out of the view, a mask batch too): look what the
        agent uses next up in the messages sent, and in what their refs point to."""
        items = self.grounding.items_at(index)
        if not items:
            return
        # The whole request: the system prompt carries the pins and the ledger (the peers' views
        # are probed with their system prompt too).
        system = [Message.system(request.system_text)] if request.system_text else []
        view = [*system, *(m for m in request.messages if m.role != "system")]
        read_ref = _ref_reader(self.engine, self.session)
        self.run_record.grounding.add(items, ViewText.of(view, read_ref))

    def _track_peak(self, request: PreparedRequest, record: TurnRecord) -> None:
        run = self.run_record
        if run.turns and record.tokens <= run.peak_tokens:
            return
        budget = request.budget
        run.peak_budget = {
            "system": budget.system,
            "instructions": budget.instructions,
            "tools": budget.tools,
            "conversation": budget.conversation,
            "reserved_output": budget.reserved_output,
            "effective_window": budget.effective_window,
        }


def _edit_marks(
    before: Sequence[Message], edits: Sequence[ContextEdit], zone: Zone, counter: TokenCounter
) -> list[EditMark]:
    """What each edit did to the view it was applied to, merged by kind (in first-seen order)."""
    marks: dict[EditKind, EditMark] = {}
    view = list(before)
    for edit in edits:
        after = apply_edit(view, edit)
        # apply_edit keeps untouched messages as the same objects: count only what changed.
        kept = {id(m) for m in after}
        new = {id(m) for m in view}
        removed = [m for m in view if id(m) not in kept]
        added = [m for m in after if id(m) not in new]
        freed = counter.count_messages(removed) - counter.count_messages(added)
        kind, count = _edit_kind(edit, zone, removed)
        previous = marks.get(kind)
        if previous is not None:
            count += previous.count
            freed += previous.freed_tokens
        marks[kind] = EditMark(kind, count, freed)
        view = after
    return list(marks.values())


def _edit_kind(edit: ContextEdit, zone: Zone, removed: Sequence[Message]) -> tuple[EditKind, int]:
    action = edit_action(edit)
    if isinstance(edit, MaskEdit):
        # Hygiene rides on a mask batch: its shortened arguments and cleared thinking are items
        # too, and a batch whose outputs a summary in the same run takes may hold only them.
        items = len(edit.items) + len(edit.arguments) + len(edit.thinking)
        if action == "truncate":
            return "truncate", items
        return ("mask_batch" if zone is Zone.MASK else "mask"), items
    if action in ("drop", "archive"):
        return "drop", len(removed)  # a drop note with the refs may stand in their place
    if action in ("summary", "digest"):
        return "summary", len(removed)
    return "truncate", len(removed)  # one message rewritten shorter (hard compaction)


# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------


def _is_turn(message: Message) -> bool:
    """A recorded assistant turn (one model call); summaries are not turns."""
    return message.role == "assistant" and message.meta.kind not in SUMMARY_KINDS


def _system_text(transcript: Transcript) -> str:
    return "\n\n".join(m.text for m in transcript.messages if m.role == "system" and m.text)


def _left_out(messages: Sequence[Message]) -> set[int]:
    """Indexes of the transcript's messages a replay does not feed to its session: system
    messages (they are the system prompt) and the original agent's summaries (and digests) of
    history the replay has too. A summary the session begins with is fed: it carries the history
    of the session this one continues, which no other message holds (the task among it)."""
    out: set[int] = set()
    started = False  # a message of the conversation has been fed
    for index, message in enumerate(messages):
        if message.role == "system" or (started and message.meta.kind in SUMMARY_KINDS):
            out.add(index)
        elif message.meta.agent_visible:
            started = True
    return out


def _full_tokens(transcript: Transcript, counter: TokenCounter) -> int:
    left_out = _left_out(transcript.messages)
    messages = [
        m for i, m in enumerate(transcript.messages) if i not in left_out and m.meta.agent_visible
    ]
    return counter.count_request(messages, system=_system_text(transcript), tools=transcript.tools)


def _ref_reader(engine: ContextEngine, session: Session) -> Callable[[str], str | None]:
    """Reads a stored output by ref from the session or, after restarts, its ancestors."""
    store = engine.store
    lineage: list[str] = []
    current: str | None = session.id
    while current is not None and current not in lineage:
        lineage.append(current)
        current = store.get_session(current).parent_id

    def read(ref: str) -> str | None:
        for session_id in lineage:
            try:
                return store.get_blob(session_id, ref)
            except RefNotFoundError:
                continue
        return None

    return read
