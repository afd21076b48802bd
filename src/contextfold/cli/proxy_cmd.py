"""``contextfold proxy``: the context-managing server any agent can point its base URL at."""

from __future__ import annotations

import ipaddress
import os
import warnings
from pathlib import Path
from typing import Annotated

import typer

from contextfold.cli._render import print_error
from contextfold.cli._store import StoreLocation, print_store_warnings, store_location
from contextfold.errors import ConfigError, UnknownModelError, UsageError, install_hint
from contextfold.model_registry import default_registry
from contextfold.store import SQLiteVersionWarning, open_store

__all__ = ["proxy"]

_LOOPBACK_NAMES = ("localhost",)


def _is_loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _create_store(location: StoreLocation) -> None:
    """Open (and so create or migrate) the store once before serving: its notices are printed
    as the CLI prints them, and a store that cannot be opened stops the command here."""
    options = {"warn_wal_reset": location.warn_wal_reset} if location.file is not None else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SQLiteVersionWarning)
        open_store(location.target, **options).close()
    print_store_warnings(caught, location)


def _check_model(model: str | None, window: int | None) -> None:
    """Refuse at start a ``--model`` the registry does not know, unless ``--window`` gives its
    window: otherwise every request would fail later, one by one, with the same error."""
    if model is None or window is not None:
        return
    try:
        default_registry().get(model)
    except UnknownModelError as exc:
        hint = f" (did you mean {', '.join(exc.suggestions)}?)" if exc.suggestions else ""
        raise UsageError(
            f"unknown model {model!r}{hint}: give its context window with --window TOKENS"
        ) from None


def proxy(
    upstream: Annotated[
        str,
        typer.Option(
            "--upstream",
            "-u",
            metavar="URL",
            help="The provider to forward to: https://api.anthropic.com, "
            "https://api.openai.com/v1, "
            "or a local server such as http://127.0.0.1:11434/v1.",
        ),
    ],
    window: Annotated[
        int | None,
        typer.Option(
            "--window",
            "-w",
            min=1024,
            metavar="TOKENS",
            help="Plan every request against this context window (needed for models contextfold "
            "does not know).",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            metavar="MODEL",
            help="The upstream's model: every request goes to it, planned against its window and "
            "tokenizer, whatever model the client names (e.g. qwen3-coder with --window).",
        ),
    ] = None,
    upstream_protocol: Annotated[
        str | None,
        typer.Option(
            "--upstream-protocol",
            metavar="API",
            help="The API the upstream speaks: anthropic, chat or responses (default: detected, "
            "the client's own first). Any client then works in front of it.",
        ),
    ] = None,
    host: Annotated[
        str, typer.Option("--host", metavar="ADDRESS", help="Address to listen on.")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", "-p", min=1, max=65535, metavar="PORT", help="Port.")
    ] = 8787,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            metavar="PATH|URL",
            help="Session store: a SQLite path or a postgresql:// URL (default: the user store).",
        ),
    ] = None,
    workers: Annotated[
        int,
        typer.Option("--workers", min=1, metavar="N", help="uvicorn worker processes."),
    ] = 1,
    preset: Annotated[
        str,
        typer.Option(
            "--preset", metavar="PRESET", help="mask-first, summarize, window or restart."
        ),
    ] = "mask-first",
    compactor: Annotated[
        str | None,
        typer.Option("--compactor", metavar="PRESET", hidden=True, help="Deprecated: --preset."),
    ] = None,
    auth_key: Annotated[
        str | None,
        typer.Option(
            "--auth-key",
            envvar="CONTEXTFOLD_PROXY_KEY",
            show_envvar=True,
            metavar="KEY",
            help="Require clients to send this key in the X-Contextfold-Key header.",
        ),
    ] = None,
    max_request_mb: Annotated[
        float,
        typer.Option("--max-request-mb", min=0.01, metavar="MB", help="Largest request body."),
    ] = 32.0,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            metavar="",
            help="Forward every request untouched; record what the engine would have sent.",
        ),
    ] = False,
    defer_tools: Annotated[
        bool,
        typer.Option(
            "--defer-tools",
            metavar="",
            help="Let the engine defer the client's tools behind tool_search in a small window.",
        ),
    ] = False,
    access_log: Annotated[
        Path | None,
        typer.Option(
            "--access-log",
            metavar="PATH",
            help="Write the JSON access log here (default: standard error).",
        ),
    ] = None,
) -> None:
    """Serve context management to any agent: point its base URL here.

    Every request continues a stored session; the upstream receives the engine's view (large
    outputs offloaded, old ones masked, summaries, a valid history, cache breakpoints), and the
    engine's read_result tool is answered here, unseen by the client.

    ANTHROPIC_BASE_URL=http://127.0.0.1:8787 claude

    OPENAI_BASE_URL=http://127.0.0.1:8787/v1 aider ...
    """
    try:
        import uvicorn

        from contextfold.proxy import config as proxy_config
        from contextfold.proxy.app import create_app, log_to
    except ImportError as exc:  # the proxy extra is not installed
        raise UsageError(
            f"contextfold proxy needs the proxy extra ({exc.name} is missing): "
            f"{install_hint('proxy')}"
        ) from None
    if compactor is not None:
        print_error(
            "--compactor is deprecated; use --preset (the name every command takes)", warning=True
        )
        preset = compactor
    _check_model(model, window)
    location = store_location(store)
    _create_store(location)
    config = proxy_config.ProxyConfig(
        upstream=upstream,
        upstream_protocol=upstream_protocol,
        window=window,
        model=model,
        store=location.target,
        compactor=preset,
        auth_key=auth_key,
        max_request_bytes=int(max_request_mb * 1024 * 1024),
        dry_run=dry_run,
        defer_tools=defer_tools,
        access_log=str(access_log) if access_log is not None else None,
    )
    if workers > 1 and location.target == ":memory:":
        raise ConfigError("--store", "an in-memory store cannot be shared by several workers")
    if not _is_loopback(host) and auth_key is None:
        typer.secho(
            f"warning: listening on {host} without --auth-key: anyone who can reach this port "
            "can use the upstream with their key and read their sessions",
            err=True,
            fg=typer.colors.YELLOW,
        )
    log_to(config.access_log)
    mode = " (dry run: requests go up untouched)" if dry_run else ""
    typer.echo(f"contextfold proxy on http://{host}:{port} -> {upstream}{mode}", err=True)
    if workers == 1:
        uvicorn.run(create_app(config), host=host, port=port, log_level="warning")
        return
    os.environ[proxy_config.CONFIG_ENV] = config.to_environment()
    # Every worker must hash keys alike: they share one salt, made here once.
    os.environ.setdefault(proxy_config.SALT_ENV, config.salt().decode())
    uvicorn.run(
        "contextfold.proxy.app:app_from_environment",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="warning",
    )
