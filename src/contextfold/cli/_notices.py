"""One line for every engine event a user should see: compaction, masking, offloads, restarts.

``chat``, ``run`` and ``demo`` print these as they happen, so nothing the engine does to the
context goes unannounced. Token usage and the start of a compaction have no line of their own
(the meter shows usage; the finished compaction reports itself). A compaction the user asked
for (``/compact``, trigger ``"manual"``) has no notice either: the command reports what it did
from the :class:`~contextfold.compaction.CompactResult` it got, so nothing is said twice. Nor
has a background compaction that was never used (the session closed first, or the conversation
moved on): it did nothing to the context, and the compaction that ran instead has its own.
Every other compaction that took facts out of view is followed by its loss report: how many, and
where they can still be read (summary, pins, the artifact ledger, behind a ref) or that they are
lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from contextfold.agent.text import human_size
from contextfold.events import (
    CompactionFailed,
    CompactionFinished,
    CompactionStarted,
    ComponentDegraded,
    Event,
    LossReported,
    ObservationsMasked,
    OutputOffloaded,
    OutputTruncated,
    OverflowRecovered,
    SessionRestarted,
    SummarizerFellBack,
    ToolsDeferred,
    Trigger,
)
from contextfold.retention.loss import event_line

__all__ = [
    "BACKGROUND_TRIGGER",
    "MANUAL_TRIGGER",
    "SHORT_COMPACTION",
    "Notice",
    "NoticeWriter",
    "short_compaction",
]

MANUAL_TRIGGER: Trigger = "manual"
"""The trigger of a compaction the user asked for (``session.compact()``'s default)."""
BACKGROUND_TRIGGER: Trigger = "background"
"""The trigger of a compaction prepared in the engine's worker thread."""
SHORT_COMPACTION = "it freed less than a compaction should"
"""What a notice adds for a compaction that fell short of the minimum progress (its event's
``note`` holds the engine's figures)."""
_WAITS = ", so the next automatic one waits until the context has grown"
_WAITING_TRIGGERS: frozenset[Trigger] = frozenset({"threshold", BACKGROUND_TRIGGER})
"""Triggers after whose short compaction the engine holds back the next automatic one."""


def short_compaction(trigger: str) -> str:
    """The words for a compaction of ``trigger`` that fell short of the minimum progress."""
    return SHORT_COMPACTION + (_WAITS if trigger in _WAITING_TRIGGERS else "")


_TRIGGERS: Mapping[Trigger, str] = {
    "threshold": "the window reached the compact threshold",
    "block": "the window was nearly full",
    "agent": "the model asked for it",
    "overflow": "the provider said the request was too long",
    BACKGROUND_TRIGGER: "prepared in the background",
}


@dataclass(frozen=True, slots=True)
class Notice:
    """A line for the user, and how it should look (``info`` or ``warning``)."""

    text: str
    level: str = "info"


class NoticeWriter:
    """Turns engine events into notices; a repeated deferral of the same tools is said once,
    and the events of a manual compaction are left to the command that asked for it."""

    def __init__(self) -> None:
        self._deferred: tuple[str, ...] = ()
        self._in_manual_compaction = False
        self._overflow_freed_nothing = False

    def notice(self, event: Event) -> Notice | None:
        """The notice for ``event``, or ``None`` when it needs none."""
        if isinstance(event, CompactionStarted):
            self._in_manual_compaction = event.trigger == MANUAL_TRIGGER
            return None
        if isinstance(event, CompactionFinished | CompactionFailed):
            return self._compaction_ended(event)
        if isinstance(event, ObservationsMasked):
            if self._in_manual_compaction:  # a step of the compaction /compact reports
                return None
            return Notice(
                f"masked {_n(event.count, 'old tool output')} (−{event.freed_tokens:,} tokens); "
                "read_result brings any back"
            )
        if isinstance(event, OutputOffloaded):
            return Notice(
                f"offloaded a {human_size(event.size_bytes)} {event.tool_name or 'tool'} output "
                f"to the store as {event.ref}; the model sees a preview"
            )
        if isinstance(event, OutputTruncated):
            where = f"; full text: {event.ref}" if event.ref else ""
            return Notice(
                f"cut a {human_size(event.original_bytes)} {event.tool_name or 'tool'} output to "
                f"its head and tail ({human_size(event.kept_bytes)} kept{where})"
            )
        if isinstance(event, ToolsDeferred):
            if event.names == self._deferred:
                return None
            self._deferred = event.names
            return Notice(
                f"deferred {_n(event.count, 'tool description')} to stay within the tool budget "
                f"({event.description_tokens:,} > {event.budget_tokens:,} tokens); "
                "tool_search finds them"
            )
        if isinstance(event, SessionRestarted):
            why = "on request" if event.reason == "manual" else "the window was full"
            return Notice(
                f"restarted the session ({why}): continuing in {event.child_id} with a summary "
                f"and {_n(event.carried_messages, 'carried message')}"
            )
        if isinstance(event, OverflowRecovered):
            limit = f" (its limit: {event.limit:,})" if event.limit else ""
            if self._overflow_freed_nothing:
                self._overflow_freed_nothing = False
                return Notice(
                    f"the provider refused a request of {event.before_tokens:,} tokens as too "
                    f"long{limit}; nothing more could be removed from the context, so there is "
                    "no smaller request to retry with",
                    "warning",
                )
            learned = (
                f"; planning against {event.window:,} tokens from now on"
                if event.learned_window
                else ""
            )
            return Notice(
                f"the provider refused a request of {event.before_tokens:,} tokens as too long"
                f"{limit}{learned}; compacted to about {event.after_tokens:,} tokens to retry",
                "warning",
            )
        if isinstance(event, ComponentDegraded):
            return Notice(
                f"{event.component} failed ({event.error}); carrying on with {event.fallback}",
                "warning",
            )
        if isinstance(event, LossReported):
            moved = any(event.message_counts().values())
            if not (event.out_of_view or moved) or event.trigger == MANUAL_TRIGGER:
                return None  # nothing to add to the compaction's notice, or to /compact's report
            return Notice(f"compaction: {event_line(event)}", "warning" if event.lost else "info")
        if isinstance(event, SummarizerFellBack):
            return Notice(
                f"the model-written summary failed ({event.error}); used the extractive one",
                "warning",
            )
        return None

    def _compaction_ended(self, event: CompactionFinished | CompactionFailed) -> Notice | None:
        if event.trigger == MANUAL_TRIGGER:
            self._in_manual_compaction = False
            return None  # /compact says what it did itself
        if isinstance(event, CompactionFailed) and event.trigger == BACKGROUND_TRIGGER:
            return None  # prepared work left unused: the context was not touched
        # A failed compaction that left the size as it was changed nothing: it is not reported
        # as one that freed a little, nor is the retry of an overflow said to be smaller.
        freed_nothing = isinstance(event, CompactionFailed) and (
            event.after_tokens >= event.before_tokens
        )
        if event.trigger == "overflow":
            self._overflow_freed_nothing = freed_nothing
        if isinstance(event, CompactionFinished):
            steps = ", ".join(event.strategies_run) or "no strategy"
            why = _TRIGGERS.get(event.trigger, event.trigger)
            short = f"; {short_compaction(event.trigger)}" if event.note else ""
            return Notice(
                f"compacted the context: {event.before_tokens:,} → {event.after_tokens:,} tokens, "
                f"{event.before_messages} → {event.after_messages} messages ({steps}; {why})"
                f"{short}"
            )
        if freed_nothing:
            return Notice(
                f"compaction freed nothing ({event.before_tokens:,} tokens): {event.reason}",
                "warning",
            )
        return Notice(
            f"compaction freed too little ({event.before_tokens:,} → "
            f"{event.after_tokens:,} tokens): {event.reason}",
            "warning",
        )


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
