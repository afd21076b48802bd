"""The typer application and its single error boundary."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption
from typer.models import CommandFunctionType as CommandFunction

from contextfold._version import __version__
from contextfold.errors import ContextfoldError


def _listed_as_flag(option: TyperOption | None) -> TyperOption | None:
    # typer shows a value type beside every option, "<bool>" for --help; flags here show none.
    if option is not None:
        option.metavar = ""
    return option


class _Command(TyperCommand):
    """A command whose ``--help`` is listed like the other flags (no value column)."""

    def get_help_option(self, ctx: Any) -> TyperOption | None:
        return _listed_as_flag(super().get_help_option(ctx))


class _Group(TyperGroup):
    """A command group whose ``--help`` is listed like the other flags."""

    def get_help_option(self, ctx: Any) -> TyperOption | None:
        return _listed_as_flag(super().get_help_option(ctx))


class CommandGroup(typer.Typer):
    """The CLI's typer apps: help paragraphs flow to the terminal's width (markdown), and every
    command shows ``--help`` like the other flags."""

    def __init__(self, **settings: Any) -> None:
        settings.setdefault("cls", _Group)
        settings.setdefault("rich_markup_mode", "markdown")
        settings.setdefault("no_args_is_help", True)
        super().__init__(**settings)

    def command(self, *args: Any, **settings: Any) -> Callable[[CommandFunction], CommandFunction]:
        """Register a command (see :meth:`typer.Typer.command`)."""
        settings.setdefault("cls", _Command)
        return super().command(*args, **settings)


app = CommandGroup(
    name="contextfold",
    help="Keep an LLM agent's context window healthy: count, compact, replay and run sessions.",
    add_completion=False,
    pretty_exceptions_enable=False,
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
