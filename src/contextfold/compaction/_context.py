"""What a compaction works on: the view, how to count it, how far to shrink it, where to stash."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from contextfold.compaction.summary import ExtractiveSummarizer, Summarizer
from contextfold.events import Event
from contextfold.history.turns import FoundWindow, RecentWindow
from contextfold.messages import Message, ToolResultPart
from contextfold.outputs.blob_store import BlobStore
from contextfold.tokens.counter import TokenCounter

__all__ = ["CompactionContext"]


_FOUND_WINDOWS_KEPT = 4
"""Windows a compaction remembers (the last few views: a strategy's edits build on them)."""


def _ignore(event: Event) -> None:
    del event


@dataclass(frozen=True)
class CompactionContext:
    """Everything a strategy needs; strategies read it and return edits, never mutate it.

    ``target_tokens`` counts the conversation only: the engine subtracts the system prompt and
    tool descriptions before it builds the context. ``window_tokens`` is the window shares are
    taken of (the minimum progress, a mask batch, the recent window's cap). ``room_tokens`` is
    the most the conversation can take in a request at all, the window less the system prompt
    and tools (``None``: ``window_tokens``); a target at or near zero means the fixed part took
    it all, and compaction keeps the task and the minimum rather than cut it. ``hard`` asks for the
    overflow-recovery behaviour (protections shrunk so the result always fits; see
    ``keep_latest_turn``). ``emit`` receives
    events strategies raise (batches masked, summarizer fallbacks); the pipeline collects them
    into :attr:`CompactResult.events <contextfold.compaction.CompactResult.events>`.
    """

    view: Sequence[Message]
    counter: TokenCounter
    target_tokens: int
    window_tokens: int
    blobs: BlobStore
    session_id: str = ""
    summarizer: Summarizer = field(default_factory=ExtractiveSummarizer)
    focus: str | None = None
    instructions: str | None = None
    hard: bool = False
    room_tokens: int | None = None
    recent: RecentWindow = field(default_factory=RecentWindow)
    emit: Callable[[Event], None] = _ignore
    keep_latest_turn: bool = False
    """Hard mode leaves the latest turn (the last assistant message, the newest results and
    the user's latest words) whole when it fits ``room()`` beside the least of the rest, even
    above the target: for a caller that must send it whole or not at all (the proxy)."""
    found_windows: list[tuple[TokenCounter, FoundWindow]] = field(
        default_factory=list, compare=False, repr=False
    )
    """The recent windows found so far, shared by the contexts :meth:`with_view` makes: the
    views one compaction's strategies see differ by an edit or two, which mostly leave the
    window where it was (see :meth:`window_start`). Only a cache: it changes no answer."""

    known_tokens: int | None = field(default=None, init=False, compare=False, repr=False)
    """What :meth:`tokens` answers when the context was made knowing it (:meth:`with_view`'s
    ``tokens``); not an argument, and not carried over by ``replace``, so it always belongs to
    this view."""

    def tokens(self) -> int:
        """Tokens the view costs now."""
        if self.known_tokens is not None:
            return self.known_tokens
        return self.counter.count_messages(self.view)

    def excess(self) -> int:
        """Tokens above the target (0 when at or under it)."""
        return max(0, self.tokens() - self.target_tokens)

    def room(self) -> int:
        """The most the conversation can take in a request (see ``room_tokens``)."""
        return self.window_tokens if self.room_tokens is None else self.room_tokens

    def with_view(self, view: Sequence[Message], tokens: int | None = None) -> CompactionContext:
        """The same context over another view; ``tokens``, when the caller knows what ``view``
        costs (:meth:`tokens`), spares each strategy asking for it a pass over the view."""
        moved = replace(self, view=view)
        if tokens is not None:
            object.__setattr__(moved, "known_tokens", tokens)
        return moved

    def window_start(self) -> int:
        """Index where the protected recent window begins (only the last unit in hard mode).

        Found once per compaction and reused for each later view it still holds for
        (:meth:`FoundWindow.holds_for <contextfold.history.turns.FoundWindow.holds_for>`)."""
        return self.recent_window().start

    def recent_window(self) -> FoundWindow:
        """The protected recent window of the view, and why it begins where it does (see
        :meth:`window_start`)."""
        turns = 0 if self.hard else self.recent.turns
        max_tokens = None if self.hard else self.recent.max_tokens(self.window_tokens)
        for counter, found in reversed(self.found_windows):
            if counter is self.counter and found.holds_for(self.view, counter, turns, max_tokens):
                return found
        found = FoundWindow.of(self.view, self.counter, turns=turns, max_tokens=max_tokens)
        if len(self.found_windows) >= _FOUND_WINDOWS_KEPT:
            del self.found_windows[0]
        self.found_windows.append((self.counter, found))
        return found

    def stash(self, content: str, tool_name: str | None = None) -> str:
        """Put ``content`` in the blob store (idempotent) and return its ref."""
        return self.blobs.put_blob(self.session_id, content, tool_name=tool_name).ref

    def stash_result(self, result: ToolResultPart) -> str:
        """The ref under which ``result``'s full output is recoverable.

        A result that already carries a ref the store knows (it was truncated or offloaded
        before) keeps it: that ref points at the fuller output. Otherwise its content is stored.
        """
        if result.ref is not None:
            try:
                self.blobs.get_blob(self.session_id, result.ref)
            except LookupError:
                pass
            else:
                return result.ref
        return self.stash(result.content, result.name)
