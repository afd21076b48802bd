"""The typer application and its single error boundary."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from contextfold._exceptions import ContextfoldError
from contextfold._version import __version__

app = typer.Typer(
    name="contextfold",
    help="Keep an LLM agent's context window healthy: count, compact, replay and run sessions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"contextfold {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, metavar="", help="Print the version."
        ),
    ] = False,
) -> None:
    """contextfold: context-window management for LLM agents."""


def main() -> None:
    """Console-script entry point: the CLI's one error boundary.

    Our own errors become a one-line message and exit status 1; set ``CONTEXTFOLD_RAISE=1`` to
    get the traceback instead. Usage errors are typer's to report.
    """
    try:
        app()
    except ContextfoldError as exc:
        if os.environ.get("CONTEXTFOLD_RAISE"):
            raise
        typer.secho(f"error: {exc}", err=True, fg=typer.colors.RED)
        sys.exit(1)
