"""The chat's busy indicator: a spinner saying the model is working, on a terminal only.

A model call can take many seconds before the first word arrives; without a sign of life the
chat looks hung. The spinner is rich's status line, drawn in place and erased when it stops, and
it stops before anything else is printed (streamed text, a tool call, a notice, an approval
question), so it never mixes with the transcript or with prompt_toolkit's prompt. In a pipe
there is no indicator at all: a log gets no spinner frames.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.status import Status

__all__ = ["BUSY_SPINNER", "BUSY_TEXT", "BusyIndicator"]

BUSY_TEXT = "working…"
"""What the indicator says beside its spinner."""
BUSY_SPINNER = "dots"
"""The rich spinner it turns (``python -m rich.spinner`` lists them)."""


class BusyIndicator:
    """A spinner on ``console`` between :meth:`start` and :meth:`stop` (see the module
    docstring); it draws nothing when the console is not a terminal."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._status: Status | None = None

    @property
    def running(self) -> bool:
        """True while the spinner is on the screen."""
        return self._status is not None

    def start(self) -> None:
        """Show the spinner (again); nothing when it is running or the output is no terminal."""
        if self._status is None and self.console.is_terminal:
            self._status = Status(BUSY_TEXT, console=self.console, spinner=BUSY_SPINNER)
            self._status.start()

    def stop(self) -> None:
        """Erase the spinner; its refresh thread has stopped writing when this returns."""
        if self._status is not None:
            status, self._status = self._status, None
            status.stop()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Stop the spinner while the block prints, and bring it back if it was running."""
        running = self.running
        self.stop()
        try:
            yield
        finally:
            if running:
                self.start()
