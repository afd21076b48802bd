"""Everything a session remembers between turns, in one value: :class:`TurnState`.

A turn's pass (:mod:`._turn`) takes the session's state, hands it from step to step (each step
that changes it returns a new one, made with :func:`dataclasses.replace`), and gives the session
the state it ends with in one place, at its end. No step can see a figure another step already
replaced, and none changes what an earlier one read (the stale-state bugs of earlier versions
were of that kind). Outside a pass, the one public method that owns a field changes it the same
way (``add_user`` the turn, ``add_assistant`` the refusal).

Seven objects keep their own running counts and change through their own methods: the estimator,
usage, tool deferral, window, pace, pins and the loss reports' memory (``losses``). Everything
else is a plain value.

Part of the state is saved after every turn and read back on resume (:meth:`TurnState.saved`,
:meth:`TurnState.restored`); the rest lives only as long as the process, because it describes a
request or a worker of this process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from contextfold.compaction import CompactResult, StructuredSummary
from contextfold.engine._economics import PaceTracker
from contextfold.engine._recovery import RefusedRequest
from contextfold.engine.learned_window import SessionWindow
from contextfold.engine.request import PreparedRequest
from contextfold.events import LossReported, Trigger
from contextfold.lru import LRU
from contextfold.messages import Message
from contextfold.retention.ledger import Ledger, ledger_items, token_budget
from contextfold.retention.loss import LossTracker
from contextfold.retention.pins import PinSet
from contextfold.retention.probes import Probe, probe_of
from contextfold.tokens.estimator import ContextSizeEstimator
from contextfold.tools.deferral import ToolDeferral
from contextfold.usage import UsageTracker

__all__ = ["TurnState"]


@dataclass(frozen=True, eq=False)
class TurnState:
    """A session's state between turns (see the module docstring)."""

    estimator: ContextSizeEstimator
    """Token estimates anchored on the provider's reports (saved)."""
    usage: UsageTracker
    """Calls, tokens and cost so far (saved)."""
    deferral: ToolDeferral
    """Which tools are held back and which the model used (saved)."""
    window: SessionWindow
    """The window requests are planned against, with a limit a provider stated (saved)."""
    pins: PinSet = field(default_factory=PinSet)
    """Standing constraints every request carries verbatim (saved)."""
    pace: PaceTracker = field(default_factory=PaceTracker)
    """Requests so far, how the view grew, the cache's clock and the edit being settled, for the
    cache-aware schedule (saved, the settlement aside)."""

    turn: int = 0
    """User turns so far (saved)."""
    restarts: int = 0
    """Times this conversation continued in a child session (saved)."""
    wind_down_sent: bool = False
    """The latest request told the model a restart is near (saved)."""
    previous_tail: int | None = None
    """The last message breakpoint of the latest request, kept so the cache plan moves forward
    rather than jumping (saved)."""
    fixed_prompt: str = ""
    """The system text of the latest request, with the ledger when it rode with the summary:
    with :attr:`fixed_note`, what its usage report covered (saved)."""
    fixed_note: str = ""
    """The latest request's note for the model (saved apart: it changes from turn to turn, the
    system text rarely, and an unchanged part of the state is not written again)."""
    ledger: Ledger = field(default_factory=Ledger)
    """The files, commands, errors and identifiers the session touched, as of its latest
    compaction; every request carries it verbatim (saved). Empty until a compaction."""
    facts: tuple[Probe, ...] = ()
    """The facts the loss reports so far probed (saved): the next report probes them too, so a
    fact a summary carried and the next one leaves out is reported."""
    losses: LossTracker = field(default_factory=LossTracker)
    """What the loss reports read that never changes (messages' texts, stored outputs, which
    facts each text shows), so each report reads only what is new (not saved: a resumed session
    reads it again at its first report)."""

    last: PreparedRequest | None = None
    """The latest prepared request."""
    last_unrepaired: tuple[Message, ...] | None = None
    """The view the latest request was made from, when what was sent differs from it (repairs
    changed it on the way, or the ledger rode with its summary)."""
    refused: RefusedRequest | None = None
    """The request a provider refused, until a reply comes: it is never sent again, and a second
    refusal before a reply is not recovered from."""
    mask_retry_at: int | None = None
    """Raw tokens of tool outputs in the view below which a declined mask batch is not planned
    again."""
    compact_retry_at: int | None = None
    """Estimated tokens below which a failed threshold compaction is not tried again."""
    summary: StructuredSummary | None = None
    """The latest compaction's summary (a restart seeds the child with it)."""
    background_started: bool = False
    """A background compaction was announced (CompactionStarted) and not taken yet."""

    @property
    def fixed_text(self) -> str:
        """What the latest request's usage report covered besides the view: the system text,
        the ledger when it rode with the summary, and the note."""
        return f"{self.fixed_prompt}\n\n{self.fixed_note}" if self.fixed_note else self.fixed_prompt

    def saved(self) -> dict[str, Any]:
        """The part kept in the store, as JSON values (the keys are the stored format)."""
        return {
            "estimator": self.estimator.state(),
            "usage": self.usage.state(),
            "previous_tail": self.previous_tail,
            "turn": self.turn,
            "restarts": self.restarts,
            "wind_down_sent": self.wind_down_sent,
            "fixed_text": self.fixed_prompt,
            "fixed_note": self.fixed_note,
            "tool_deferral": self.deferral.state(),
            "pins": self.pins.state(),
            "ledger": self.ledger.stored,
            "pace": self.pace.state(),
            "facts": _stored_facts(self.facts),
            **self.window.state(),
        }

    def restored(self, saved: Mapping[str, Any], view: Sequence[Message]) -> TurnState:
        """This state continued from a saved one (``view``: the session's view it was saved
        with). The turn is at least the latest message's: the state is saved once per turn, after
        the reply, so a user message can be newer than it."""
        self.estimator.restore(saved.get("estimator", {}), view)
        self.usage.restore(saved.get("usage", {}))
        self.window.restore(saved)
        deferral = saved.get("tool_deferral")
        if isinstance(deferral, Mapping):
            self.deferral.restore(deferral)
        tail = saved.get("previous_tail")
        latest = max((m.meta.turn or 0 for m in view[-1:]), default=0)
        return replace(
            self,
            previous_tail=int(tail) if tail is not None else None,
            turn=max(int(saved.get("turn", 0)), latest),
            restarts=int(saved.get("restarts", 0)),
            wind_down_sent=bool(saved.get("wind_down_sent", False)),
            # A state saved before the note was kept apart has it in ``fixed_text``.
            fixed_prompt=str(saved.get("fixed_text", "")),
            fixed_note=str(saved.get("fixed_note", "")),
            # A state saved before pins existed has none: the session starts with an empty set.
            pins=PinSet.from_state(saved.get("pins", [])),
            ledger=Ledger.from_state(saved.get("ledger", [])),
            pace=PaceTracker.from_state(saved.get("pace")),
            facts=tuple(_saved_facts(saved.get("facts"))),
        )

    def accounted(
        self,
        result: CompactResult,
        trigger: Trigger,
        session_id: str,
        read_ref: Callable[[str], str | None] | None = None,
    ) -> tuple[TurnState, LossReported]:
        """This state with the ledger refreshed for the view ``result`` gives, and the report of
        what left the view.

        Called only when a compaction or mask batch changed the view: the request's prefix is
        broken then anyway, so the ledger (a system prompt section) costs no extra cache break.
        Its new items are those of the messages that left the view (the ones the new view does
        not hold as they were) that the new view no longer shows, with the refs of the outputs
        the new view stands for (or the ledger named already): only those lead to a stored
        output. The ledger names a ref a drop note kept without showing it. ``read_ref`` reads a
        stored output (what it holds is recoverable, not lost).
        """
        previous = self.ledger
        readable = self.losses.stored_refs(result.view) | previous.refs
        items = ledger_items(
            result.before_view,
            readable_refs=readable,
            only=departed(result.before_view, result.view),
            identifiers=self.losses.identifiers,
        )
        ledger = previous.merged(
            self.losses.left_the_view(items, result.view),
            max_tokens=token_budget(self.window.context_window),
        )
        report = self.losses.report(
            result.before_view,
            result.view,
            pins=[pin.text for pin in self.pins.pins],
            ledger=ledger,
            previous_ledger=previous,
            read_ref=read_ref,
            known=self.facts,
        )
        event = LossReported(
            session_id=session_id,
            trigger=trigger,
            out_of_view=report.count(),
            in_summary=report.count("summary"),
            pinned=report.count("pinned"),
            in_ledger=report.count("ledger"),
            behind_ref=report.count("recoverable"),
            lost=report.count("lost"),
            items=tuple(item.to_dict() for item in report.listed()),
            ledger_items=len(ledger),
            messages_in_summary=report.count_messages("summary"),
            messages_recoverable=report.count_messages("recoverable"),
            messages_facts_kept=report.count_messages("facts_kept"),
            messages_lost=report.count_messages("lost"),
            messages=tuple(m.to_dict() for m in report.listed_messages()),
        )
        state = replace(
            self,
            ledger=ledger,
            facts=report.facts,
            fixed_prompt=self._expected_prompt(previous, ledger),
        )
        return state, event

    def _expected_prompt(self, previous: Ledger, renewed: Ledger) -> str:
        """:attr:`fixed_prompt` with the renewed ledger counted in: the session is measured
        with it until its next request, so a compaction outside a turn (``recover``,
        ``/compact``) reports the size of the request that will carry the new ledger, not of the
        last one."""
        shown, text = previous.render(), renewed.render()
        if not self.fixed_prompt or shown == text:
            return self.fixed_prompt
        if shown and shown in self.fixed_prompt:
            return self.fixed_prompt.replace(shown, text, 1)
        return f"{self.fixed_prompt}\n\n{text}"

    def last_view(self) -> list[Message]:
        """The view the latest request was made from (without its note for the model)."""
        if self.last_unrepaired is not None:
            return list(self.last_unrepaired)
        view = list(self.last.messages) if self.last is not None else []
        if view and view[-1].meta.kind == "context_note":  # the note is always last
            view.pop()
        return view


def departed(before: Sequence[Message], after: Sequence[Message]) -> frozenset[str]:
    """Ids of the messages of ``before`` that ``after`` does not hold as they were (dropped,
    summarized, or with their outputs replaced): what left the view."""
    kept = {m.id: m for m in after}
    return frozenset(m.id for m in before if (k := kept.get(m.id)) is not m and k != m)


def _saved_facts(saved: object) -> Iterator[Probe]:
    """The facts of a saved state (none in a state saved before they were kept)."""
    # Tuples: :func:`_stored_facts` handed over unencoded (a restart's child gets ``saved()``).
    for entry in saved if isinstance(saved, list | tuple) else ():
        if isinstance(entry, list | tuple) and len(entry) == 2:
            probe = probe_of(str(entry[0]), str(entry[1]))
            if probe is not None:
                yield probe


_STORED_FACTS: LRU[int, tuple[tuple[Probe, ...], tuple[tuple[str, str], ...]]] = LRU(64)
"""The stored form of each session's facts, by the identity of the tuple it was made from (kept
in the entry, so the identity cannot be reused while it is there)."""


def _stored_facts(facts: tuple[Probe, ...]) -> tuple[tuple[str, str], ...]:
    """``facts`` as stored, ``[kind, text]`` each: the same tuple at every save until a loss
    report gives the session new facts, so the store need not encode the unchanged ones (about
    40 KB at 10,000 messages) to find them unchanged. Nobody may change it."""
    kept = _STORED_FACTS.get(id(facts))
    if kept is not None and kept[0] is facts:
        return kept[1]
    stored = tuple((p.kind, p.text) for p in facts)
    _STORED_FACTS.put(id(facts), (facts, stored))
    return stored
