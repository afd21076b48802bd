"""Ctrl-C for a child process, as a terminal delivers it."""

from __future__ import annotations

import signal


def sigint_by_default() -> None:
    """A ``preexec_fn`` that gives the child SIGINT at its default action.

    A shell without job control starts a command run in the background with SIGINT ignored
    (``setsid nohup … &``, a CI runner's background step), and every child inherits that: a
    server sent SIGINT would then never stop, and a Python program would install no
    ``KeyboardInterrupt`` handler. A terminal's Ctrl-C reaches a program at SIGINT's default.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
