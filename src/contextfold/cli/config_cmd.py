"""``contextfold config show``: the effective settings and where each one came from."""

from __future__ import annotations

import inspect
from dataclasses import fields
from typing import Annotated, Any

import typer

from contextfold.budget import MAX_OUTPUT_RESERVE_SHARE, Thresholds
from contextfold.cli import _render
from contextfold.cli._app import CommandGroup
from contextfold.cli._render import JsonFlag
from contextfold.compaction import ExtractiveSummarizer
from contextfold.compaction.restart import RestartPolicy
from contextfold.config import API_KEY_ENV_VARS, SETTINGS, Settings, load_settings
from contextfold.engine import ContextEngine, ContextPolicy
from contextfold.errors import UsageError
from contextfold.history.turns import RecentWindow
from contextfold.outputs.intake import OutputLimits
from contextfold.paths import default_store_path
from contextfold.prompt.instructions import DEFAULT_MAX_BYTES as INSTRUCTIONS_MAX_BYTES
from contextfold.store.postgres import redact_url
from contextfold.store.sqlite import SQLiteStore

__all__ = ["app", "setting_defaults"]

app = CommandGroup(help="Show contextfold's settings.")

_SECRET_KEYS = frozenset({"api_key"})


def setting_defaults() -> dict[str, Any]:
    """The built-in value of every setting that has one, read from the class that owns it (so
    each number is defined once, where it is used)."""
    defaults: dict[str, Any] = {}
    owners: tuple[tuple[str, Any], ...] = (
        ("thresholds", Thresholds()),
        ("outputs", OutputLimits()),
        ("recent", RecentWindow()),
        ("restart", RestartPolicy()),
    )
    for prefix, owner in owners:
        for f in fields(owner):
            key = f"{prefix}.{f.name}"
            if key in SETTINGS:
                defaults[key] = getattr(owner, f.name)
    store = inspect.signature(SQLiteStore.__init__).parameters
    defaults["redact"] = store["redact"].default
    defaults["sqlite_synchronous"] = store["synchronous"].default
    defaults["sqlite.warn_wal_reset"] = store["warn_wal_reset"].default
    defaults["store"] = str(default_store_path())
    defaults["instructions.max_bytes"] = INSTRUCTIONS_MAX_BYTES
    policy = ContextPolicy()
    defaults["tools.description_budget"] = policy.tool_budget_share
    defaults["background_compaction"] = policy.background
    defaults["preset"] = inspect.signature(ContextEngine.__init__).parameters["compactor"].default
    defaults["summarizer"] = ExtractiveSummarizer.name
    return defaults


def _derived_defaults() -> dict[str, str]:
    """Settings whose default depends on something else, described rather than given."""
    return {
        "window": "the model's context window (model registry)",
        "max_output_tokens": (
            f"the model's max output, at most {MAX_OUTPUT_RESERVE_SHARE:.0%} of the window"
        ),
        "api_key": "the provider's environment variable (e.g. "
        + next(iter(API_KEY_ENV_VARS.values()))
        + ")",
    }


@app.command("show")
def show(
    assignments: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="KEY=VALUE",
            help="Preview a setting given as an argument (repeatable): it wins over files and "
            "environment, as it would on any command.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Show every setting's effective value and where it came from.

    Sources, lowest to highest precedence: the built-in default, the user config file, the
    project's contextfold.toml (in this folder or above), CONTEXTFOLD_* environment variables,
    then arguments. API keys are never printed.

    Examples:

        contextfold config show

        CONTEXTFOLD_THRESHOLDS__MASK_AT=0.5 contextfold config show --set preset=window --json
    """
    settings = load_settings(_parse_assignments(assignments or []))
    rows = _rows(settings)
    if as_json:
        _render.print_json(
            {
                "settings": rows,
                "files": [str(p) for p in settings.files],
                "models": settings.models,
            }
        )
        return
    out = _render.console()
    table = _render.table("setting", "value", "source")
    table.columns[2].overflow = "fold"
    for row in rows:
        source = row["source"]
        style = "dim" if source in ("default", "not set") else "bold"
        value = row["value"] if row["value"] is not None else row.get("note") or "—"
        table.add_row(
            _render.escape(row["key"]),
            _render.escape(_display(value)),
            f"[{style}]{_render.escape(source)}[/{style}]",
        )
    out.print(table)
    files = ", ".join(str(p) for p in settings.files) or "none"
    out.print(f"config files read: {_render.escape(files)}")
    for name, overrides in settings.models.items():
        pairs = ", ".join(f"{k}={v}" for k, v in overrides.items())
        out.print(_render.escape(f'[models."{name}"] {pairs}'))


def _parse_assignments(assignments: list[str]) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    for item in assignments:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set takes KEY=VALUE, got {item!r}")
        arguments[key.strip()] = value
    return arguments


def _rows(settings: Settings) -> list[dict[str, Any]]:
    """One row per known setting: key, effective value, default, source and help."""
    defaults = setting_defaults()
    derived = _derived_defaults()
    rows: list[dict[str, Any]] = []
    for key, spec in SETTINGS.items():
        if key in settings.values:
            value, source = settings.values[key], settings.source(key)
        elif key in defaults:
            value, source = defaults[key], "default"
        else:
            value, source = None, "default" if key in derived else "not set"
        if key in _SECRET_KEYS and value is not None:
            value = "(set, hidden)"
        elif key == "store" and isinstance(value, str):
            value = redact_url(value)
        row: dict[str, Any] = {
            "key": key,
            "value": value,
            "default": defaults.get(key),
            "source": source,
            "help": spec.help,
        }
        if value is None and key in derived:
            row["note"] = derived[key]
        rows.append(row)
    return rows


def _display(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
