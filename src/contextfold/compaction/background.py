"""Background compaction: prepare the next compaction in a worker thread, take it when ready.

The engine calls :meth:`BackgroundCompactor.maybe_start` once the view passes a soft mark (below
the COMPACT zone), and :meth:`BackgroundCompactor.take` when it wants the result. ``take`` never
blocks unless asked (``wait=True``, for the BLOCK zone), so the agent's turn does not wait for a
compaction it does not need yet. A result prepared on an older view stays usable: its edits name
message ids, so they are re-applied to the current view, and only what is still over the target
afterwards (the newer tail) is compacted further, in the caller's thread. An exception in the
worker is never lost: ``take`` returns it as a failed :class:`CompactResult`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import replace

from contextfold.compaction._context import CompactionContext
from contextfold.compaction.pipeline import Compactor, CompactResult, failed_result
from contextfold.edits import apply_edit
from contextfold.messages import Message

__all__ = ["BackgroundCompactor"]


class BackgroundCompactor:
    """One compaction at a time, prepared off the caller's thread. Use as a context manager."""

    def __init__(
        self, compactor: Compactor, *, thread_name: str = "contextfold-compaction"
    ) -> None:
        self.compactor = compactor
        self.thread_name = thread_name
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._ctx: CompactionContext | None = None
        self._result: CompactResult | None = None
        self._closed = False
        self.last_error: BaseException | None = None
        """The exception of the last failed job (also reported in its result's ``reason``)."""

    # -- state -----------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """True while a job is being prepared."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    @property
    def ready(self) -> bool:
        """True when a prepared result waits to be taken."""
        with self._lock:
            return self._result is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the running job (if any) ends; False when ``timeout`` ran out first."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    # -- starting --------------------------------------------------------------------------------

    def maybe_start(self, ctx: CompactionContext) -> bool:
        """Start preparing a compaction of ``ctx`` unless one is running or waiting to be taken.

        Returns True when a job started. The context is used as given: the caller passes a
        snapshot of its view (messages are immutable, so a tuple of them is a safe snapshot).
        """
        with self._lock:
            if self._closed or self._result is not None or self.running:
                return False
            snapshot = replace(ctx, view=tuple(ctx.view))
            self._ctx = snapshot
            self._thread = threading.Thread(
                target=self._work, args=(snapshot,), name=self.thread_name, daemon=True
            )
            self._thread.start()
            return True

    def _work(self, ctx: CompactionContext) -> None:
        try:
            result = self.compactor.compact(ctx)
        except BaseException as exc:  # surfaced through take(), never swallowed
            self.last_error = exc
            result = failed_result(
                ctx, f"background compaction failed: {type(exc).__name__}: {exc}"
            )
        with self._lock:
            self._result = result

    # -- taking ----------------------------------------------------------------------------------

    def take(
        self, current_view: Sequence[Message], *, wait: bool = False, timeout: float | None = None
    ) -> CompactResult | None:
        """The prepared result made valid for ``current_view``, or ``None`` when none is ready.

        If the view is still the one the job started from, the result comes back as it is.
        Otherwise its edits are re-applied to ``current_view`` and, if that is still over the
        target, the result is compacted further; the figures then describe ``current_view``.
        ``wait=True`` blocks until the running job ends (at most ``timeout`` seconds).
        """
        if wait:
            self.wait(timeout)
        with self._lock:
            result, ctx = self._result, self._ctx
            if result is None or ctx is None:
                return None
            self._result, self._ctx = None, None
        if result.failed and not result.edits:
            return result
        if tuple(current_view) == tuple(ctx.view):
            return result
        return self._rebase(ctx, result, current_view)

    def _rebase(
        self, ctx: CompactionContext, prepared: CompactResult, current_view: Sequence[Message]
    ) -> CompactResult:
        started = time.thread_time()
        view = [m for m in current_view if m.meta.agent_visible]
        before = ctx.with_view(view).tokens()
        for edit in prepared.edits:
            view = apply_edit(view, edit)
        rebased = ctx.with_view(view)
        edits, ran, events = (
            list(prepared.edits),
            list(prepared.strategies_run),
            list(prepared.events),
        )
        summary, failed, reason = prepared.summary, prepared.failed, prepared.reason
        if rebased.tokens() > ctx.target_tokens:
            more = self.compactor.compact(rebased)
            view = list(more.view)
            edits.extend(more.edits)
            ran.extend(more.strategies_run)
            events.extend(more.events)
            summary = more.summary or summary
            failed, reason = more.failed, more.reason
        return CompactResult.of_run(
            ctx,
            before_tokens=before,
            after_tokens=ctx.with_view(view).tokens(),
            view=view,
            before_view=current_view,
            edits=edits,
            strategies_run=ran,
            failed=failed,
            reason=reason,
            cpu_seconds=prepared.cpu_seconds + time.thread_time() - started,
            summary=summary,
            events=events,
        )

    # -- stopping --------------------------------------------------------------------------------

    def close(self, timeout: float | None = None) -> None:
        """Refuse new jobs and wait for the running one to end (a result left is discarded)."""
        with self._lock:
            self._closed = True
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        with self._lock:
            self._result, self._ctx = None, None

    def __enter__(self) -> BackgroundCompactor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
