"""The ``contextfold`` console script's entry point, outside the ``contextfold`` package.

Importing the command line takes a moment (``import contextfold`` loads the library), and a
Ctrl-C pressed meanwhile would end in a traceback of whichever import it interrupted. This
module imports nothing of contextfold until :func:`main` runs, so the interrupt is caught here:
the command ends with status 130, as after a Ctrl-C once it runs.
"""

from __future__ import annotations

import sys

__all__ = ["INTERRUPTED_STATUS", "main"]

INTERRUPTED_STATUS = 130
"""Exit status after Ctrl-C (128 + SIGINT, as shells report it)."""


def main() -> None:
    """Run the ``contextfold`` command line; a Ctrl-C at any moment ends it with status 130."""
    try:
        from contextfold.cli import main as run
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        sys.exit(INTERRUPTED_STATUS)
    try:
        run()
    except KeyboardInterrupt:  # outside the command (typer answers it inside with 130 too)
        sys.stderr.write("\n")
        sys.exit(INTERRUPTED_STATUS)
