"""Everything a session remembers between turns, in one object: :class:`TurnState`.

Each step of a turn reads and writes this one object instead of attributes spread over a class
and its mixins, so a step can never see a figure another step already replaced (the stale-state
bugs of earlier versions were of that kind). Part of it is saved after every turn and read back
on resume (:meth:`TurnState.saved`, :meth:`TurnState.restore`); the rest lives only as long as
the process, because it describes a request or a worker of this process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextfold.compaction import CompactResult, StructuredSummary
from contextfold.engine._economics import PaceTracker
from contextfold.engine._recovery import RefusedRequest
from contextfold.engine.learned_window import SessionWindow
from contextfold.engine.request import PreparedRequest
from contextfold.events import LossReported, Trigger
from contextfold.messages import Message
from contextfold.retention.ledger import Ledger, ledger_items, stored_refs, token_budget
from contextfold.retention.loss import left_the_view, loss_report
from contextfold.retention.pins import PinSet
from contextfold.retention.probes import Probe, probe_of
from contextfold.tokens.estimator import ContextSizeEstimator
from contextfold.tools.deferral import ToolDeferral
from contextfold.usage import UsageTracker

__all__ = ["TurnState"]


@dataclass(eq=False)
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
    turn: int = 0
    """User turns so far (saved)."""
    restarts: int = 0
    """Times this conversation continued in a child session (saved)."""
    wind_down_sent: bool = False
    """The latest request told the model a restart is near (saved)."""
    previous_tail: int | None = None
    """The last message breakpoint of the latest request, kept so the cache plan moves forward
    rather than jumping (saved)."""
    fixed_text: str = ""
    """The system text (and note) of the latest request, what its usage report covered (saved)."""
    pins: PinSet = field(default_factory=PinSet)
    """Standing constraints every request carries verbatim (saved)."""
    ledger: Ledger = field(default_factory=Ledger)
    """The files, commands, errors and identifiers the session touched, as of its latest
    compaction; every request carries it verbatim (saved). Empty until a compaction."""
    pace: PaceTracker = field(default_factory=PaceTracker)
    """Requests so far, how the view grew, the cache's clock and the edit being settled, for the
    cache-aware schedule (saved, the settlement aside)."""
    facts: tuple[Probe, ...] = ()
    """The facts the loss reports so far probed (saved): the next report probes them too, so a
    fact a summary carried and the next one leaves out is reported."""

    last: PreparedRequest | None = None
    """The latest prepared request."""
    last_unrepaired: list[Message] | None = None
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

    def saved(self) -> dict[str, Any]:
        """The part kept in the store, as JSON values (the keys are the stored format)."""
        return {
            "estimator": self.estimator.state(),
            "usage": self.usage.state(),
            "previous_tail": self.previous_tail,
            "turn": self.turn,
            "restarts": self.restarts,
            "wind_down_sent": self.wind_down_sent,
            "fixed_text": self.fixed_text,
            "tool_deferral": self.deferral.state(),
            "pins": self.pins.state(),
            "ledger": self.ledger.state(),
            "pace": self.pace.state(),
            "facts": [[p.kind, p.text] for p in self.facts],
            **self.window.state(),
        }

    def restore(self, saved: Mapping[str, Any], view: Sequence[Message]) -> None:
        """Continue from a saved state (``view``: the session's view it was saved with)."""
        self.estimator.restore(saved.get("estimator", {}), view)
        self.usage.restore(saved.get("usage", {}))
        tail = saved.get("previous_tail")
        self.previous_tail = int(tail) if tail is not None else None
        self.turn = int(saved.get("turn", 0))
        self.restarts = int(saved.get("restarts", 0))
        self.wind_down_sent = bool(saved.get("wind_down_sent", False))
        self.fixed_text = str(saved.get("fixed_text", ""))
        self.window.restore(saved)
        # A state saved before pins existed has none: the session starts with an empty set.
        self.pins = PinSet.from_state(saved.get("pins", []))
        self.ledger = Ledger.from_state(saved.get("ledger", []))
        self.pace = PaceTracker.from_state(saved.get("pace"))
        self.facts = tuple(_saved_facts(saved.get("facts")))
        deferral = saved.get("tool_deferral")
        if isinstance(deferral, Mapping):
            self.deferral.restore(deferral)

    def account_for(
        self,
        result: CompactResult,
        trigger: Trigger,
        session_id: str,
        read_ref: Callable[[str], str | None] | None = None,
    ) -> LossReported:
        """Refresh the ledger for the view ``result`` gives, and report what left the view.

        Called only when a compaction or mask batch changed the view: the request's prefix is
        broken then anyway, so the ledger (a system prompt section) costs no extra cache break.
        Its new items are those of the view the compaction started from that the new view no
        longer shows (what is still in view needs no entry), with the refs of the outputs the
        new view stands for (or the ledger named already): only those lead to a stored output.
        The ledger names a ref a drop note kept without showing it. ``read_ref`` reads a stored
        output (what it holds is recoverable, not lost).
        """
        readable = stored_refs(result.view) | self.ledger.refs
        previous = self.ledger
        shown = previous.render()
        self.ledger = self.ledger.merged(
            left_the_view(ledger_items(result.before_view, readable_refs=readable), result.view),
            max_tokens=token_budget(self.window.context_window),
        )
        self._expect_ledger(shown, self.ledger.render())
        report = loss_report(
            result.before_view,
            result.view,
            pins=[pin.text for pin in self.pins.pins],
            ledger=self.ledger,
            previous_ledger=previous,
            read_ref=read_ref,
            known=self.facts,
        )
        self.facts = report.facts
        return LossReported(
            session_id=session_id,
            trigger=trigger,
            out_of_view=report.count(),
            in_summary=report.count("summary"),
            pinned=report.count("pinned"),
            in_ledger=report.count("ledger"),
            behind_ref=report.count("recoverable"),
            lost=report.count("lost"),
            items=tuple(item.to_dict() for item in report.listed()),
            ledger_items=len(self.ledger),
            messages_in_summary=report.count_messages("summary"),
            messages_recoverable=report.count_messages("recoverable"),
            messages_facts_kept=report.count_messages("facts_kept"),
            messages_lost=report.count_messages("lost"),
            messages=tuple(m.to_dict() for m in report.listed_messages()),
        )

    def _expect_ledger(self, shown: str, renewed: str) -> None:
        """Count the renewed ledger in :attr:`fixed_text`, which the session is measured with
        until its next request: a compaction outside a turn (``recover``, ``/compact``) reports
        the size of the request that will carry the new ledger, not of the last one."""
        if not self.fixed_text or shown == renewed:
            return
        if shown and shown in self.fixed_text:
            self.fixed_text = self.fixed_text.replace(shown, renewed, 1)
        else:
            self.fixed_text = f"{self.fixed_text}\n\n{renewed}"

    def last_view(self) -> list[Message]:
        """The view the latest request was made from (without its note for the model)."""
        if self.last_unrepaired is not None:
            return self.last_unrepaired
        view = list(self.last.messages) if self.last is not None else []
        if view and view[-1].meta.kind == "context_note":  # the note is always last
            view.pop()
        return view


def _saved_facts(saved: object) -> Iterator[Probe]:
    """The facts of a saved state (none in a state saved before they were kept)."""
    for entry in saved if isinstance(saved, list) else ():
        if isinstance(entry, list) and len(entry) == 2:
            probe = probe_of(str(entry[0]), str(entry[1]))
            if probe is not None:
                yield probe
