"""The ``contextfold`` command line.

Each command (or command group) lives in its own module under ``cli/`` and is registered on the
one typer ``app`` below. To add a command: write ``cli/<name>.py`` holding a function (typer reads
its parameters and docstring for the help) or a ``typer.Typer`` group named ``app``, then add one
registration line here. Shared output helpers are in ``cli/_render.py``.
"""

from __future__ import annotations

from contextfold.cli import (
    chat,
    config_cmd,
    count,
    demo,
    doctor,
    inspect_cmd,
    proxy_cmd,
    run,
    serve_local,
    sessions,
)
from contextfold.cli._app import app, main
from contextfold.cli.replay import replay as replay_command

# The coding agent.
app.command("chat")(chat.chat)
app.command("run")(run.run)
app.command("demo")(demo.demo)
# Analysis of transcripts and of this installation.
app.command("count")(count.count)
app.command("doctor")(doctor.doctor)
app.command("replay")(replay_command)
app.add_typer(config_cmd.app, name="config")
# Stored sessions.
app.add_typer(sessions.app, name="sessions")
app.command("inspect")(inspect_cmd.inspect)
# Context management for agents not written on contextfold.
app.command("proxy")(proxy_cmd.proxy)
# A real model on this machine, for trying all of it offline.
app.command("serve-local")(serve_local.serve_local)

__all__ = ["app", "main"]
