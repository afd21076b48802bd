"""Settings from TOML files, ``CONTEXTFOLD_*`` environment variables and arguments.

Precedence, lowest to highest: built-in defaults, the user file (``<config dir>/config.toml``),
the project file (``./contextfold.toml``, found in the working directory or a parent), environment
variables, then explicit arguments. Every value remembers where it came from, so
``contextfold config show`` can say why a setting has the value it has.

This module only collects and type-checks *overrides*. The defaults themselves live with the
classes that own them (``Thresholds``, ``OutputLimits``, ...), so each number is defined once;
:data:`SETTINGS` lists every known key with its type and a one-line description.

Environment variables: ``CONTEXTFOLD_MODEL``, ``CONTEXTFOLD_BASE_URL``, ``CONTEXTFOLD_WINDOW``,
``CONTEXTFOLD_PRESET``, ``CONTEXTFOLD_APPROVAL``, ``CONTEXTFOLD_DATABASE_URL`` (the store), and
for any nested key a double underscore: ``CONTEXTFOLD_THRESHOLDS__MASK_AT=0.5``. A list setting
(``tools.env_allow``) is a TOML array in a file and comma-separated elsewhere. API keys are read
from each provider's usual variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ...).
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextfold.errors import ConfigError
from contextfold.paths import config_dir

__all__ = [
    "API_KEY_ENV_VARS",
    "PROJECT_FILE_NAME",
    "SETTINGS",
    "SettingSpec",
    "Settings",
    "load_settings",
]

PROJECT_FILE_NAME = "contextfold.toml"
USER_FILE_NAME = "config.toml"
ENV_PREFIX = "CONTEXTFOLD_"

API_KEY_ENV_VARS: Mapping[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "gemini": "GEMINI_API_KEY",
}
"""The environment variable each provider's API key is read from."""


@dataclass(frozen=True, slots=True)
class SettingSpec:
    """A known setting: its type and what it is for."""

    type: type
    help: str
    choices: tuple[str, ...] = ()


SETTINGS: Mapping[str, SettingSpec] = {
    "model": SettingSpec(str, "model as provider/name, e.g. anthropic/claude-sonnet-4-5"),
    "base_url": SettingSpec(str, "OpenAI-compatible server URL (Ollama, vLLM, llama.cpp, ...)"),
    "api_key": SettingSpec(str, "API key (prefer the provider's environment variable)"),
    "window": SettingSpec(int, "context window in tokens, overriding the model registry"),
    "max_output_tokens": SettingSpec(int, "tokens reserved for the reply"),
    "preset": SettingSpec(
        str, "compaction preset", ("mask-first", "summarize", "window", "restart")
    ),
    "approval": SettingSpec(
        str, "approval for writes and shell commands", ("ask", "auto", "read-only")
    ),
    "store": SettingSpec(str, "session store: a SQLite path or a postgresql:// URL"),
    "redact": SettingSpec(bool, "redact secrets in everything persisted"),
    "sqlite_synchronous": SettingSpec(str, "SQLite durability", ("NORMAL", "FULL")),
    "sqlite.warn_wal_reset": SettingSpec(
        bool,
        "say, when a SQLite store is created, that this SQLite has the WAL-reset bug "
        "(`contextfold doctor` reports it regardless)",
    ),
    "events_log": SettingSpec(str, "append engine events as JSON lines to this file"),
    "background_compaction": SettingSpec(bool, "prepare compactions in a worker thread"),
    "summarizer": SettingSpec(str, "summarizer", ("extractive", "llm")),
    "thresholds.mask_at": SettingSpec(float, "share of the window where masking starts"),
    "thresholds.compact_at": SettingSpec(float, "share of the window where compaction starts"),
    "thresholds.compact_target": SettingSpec(float, "share of the window compaction aims for"),
    "thresholds.block_at": SettingSpec(float, "share where compaction is forced before a call"),
    "thresholds.awareness_at": SettingSpec(float, "share where the model is told usage"),
    "thresholds.min_progress": SettingSpec(float, "least share a compaction must free"),
    "schedule.cost": SettingSpec(
        bool,
        "time edits by their expected dollar effect on the prompt cache (the thresholds become "
        "bounds); off: the thresholds alone decide",
    ),
    "schedule.compact_from": SettingSpec(
        float, "share of the window below which no compaction is timed early for cost"
    ),
    "schedule.cache_ttl": SettingSpec(float, "seconds the provider keeps a prompt cached"),
    "outputs.max_lines": SettingSpec(int, "tool output lines kept inline"),
    "outputs.max_bytes": SettingSpec(int, "tool output bytes kept inline"),
    "outputs.max_tokens": SettingSpec(int, "tool output tokens kept inline"),
    "outputs.head_ratio": SettingSpec(float, "share of a cut output kept from its head"),
    "outputs.offload_above_bytes": SettingSpec(int, "outputs above this go to the store"),
    "outputs.preview_chars": SettingSpec(int, "characters previewed for an offloaded output"),
    "recent.turns": SettingSpec(int, "complete turns always kept verbatim"),
    "recent.max_share": SettingSpec(float, "most of the window the recent turns may take"),
    "tools.description_budget": SettingSpec(float, "share of the window for tool descriptions"),
    "instructions.max_bytes": SettingSpec(int, "cap on merged AGENTS.md instructions"),
    "instructions.enabled": SettingSpec(bool, "load AGENTS.md instructions"),
    "restart.max_restarts": SettingSpec(int, "most session restarts (restart preset)"),
    "restart.carry_turns": SettingSpec(int, "complete turns carried into a restarted session"),
    "shell.timeout": SettingSpec(float, "seconds before a shell command is stopped"),
    "tools.env_allow": SettingSpec(
        list,
        "environment variables tool commands may see although they look like a credential "
        "(*_KEY, *_TOKEN, *SECRET*, *PASSWORD*, AWS_*, DATABASE_URL...; comma-separated in "
        "the environment)",
    ),
}

_ENV_SHORTCUTS: Mapping[str, str] = {
    "DATABASE_URL": "store",
}


@dataclass
class Settings:
    """Effective overrides with their sources. Keys are dotted (``thresholds.mask_at``)."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per-model overrides from ``[models."name"]`` tables (window, prices, thresholds...)."""
    files: list[Path] = field(default_factory=list)

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key``, or ``default`` when nothing set it."""
        _check_known(key, "settings.get")
        return self.values.get(key, default)

    def source(self, key: str) -> str:
        """Where ``key``'s value came from (``"default"`` when nothing set it)."""
        return self.sources.get(key, "default")

    def section(self, name: str) -> dict[str, Any]:
        """The overrides under ``name.`` as a plain dict (``section("thresholds")``)."""
        prefix = name + "."
        return {k[len(prefix) :]: v for k, v in self.values.items() if k.startswith(prefix)}

    def items(self) -> Iterator[tuple[str, Any, str]]:
        """Every override as ``(key, value, source)``, sorted by key."""
        for key in sorted(self.values):
            yield key, self.values[key], self.sources[key]

    def api_key(self, provider: str) -> str | None:
        """The API key for ``provider``: the ``api_key`` setting, else its usual env variable."""
        explicit = self.values.get("api_key")
        if explicit:
            return str(explicit)
        env_var = API_KEY_ENV_VARS.get(provider)
        return os.environ.get(env_var) if env_var else None

    def set(self, key: str, value: Any, source: str) -> None:
        """Set ``key`` from ``source``, converting and checking the value's type."""
        spec = _check_known(key, source)
        self.values[key] = _convert(key, value, spec, source)
        self.sources[key] = source


def load_settings(
    arguments: Mapping[str, Any] | None = None,
    *,
    cwd: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    user_file: str | Path | None = None,
) -> Settings:
    """Collect settings from files, environment and ``arguments`` (``None`` values are ignored).

    ``arguments`` use dotted keys (``{"model": ..., "thresholds.mask_at": ...}``).
    """
    settings = Settings()
    env = os.environ if environ is None else environ
    user_path = Path(user_file) if user_file else config_dir() / USER_FILE_NAME
    project_path = _find_project_file(Path(cwd) if cwd else Path.cwd())
    for path in (user_path, project_path):
        if path is not None and path.is_file():
            _apply_file(settings, path)
    _apply_env(settings, env)
    for key, value in (arguments or {}).items():
        if value is not None:
            settings.set(key, value, f"argument {key}")
    return settings


def _find_project_file(start: Path) -> Path | None:
    for folder in (start, *start.resolve().parents):
        candidate = folder / PROJECT_FILE_NAME
        if candidate.is_file():
            return candidate
    return None


def _apply_file(settings: Settings, path: Path) -> None:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), f"not valid TOML: {exc}") from None
    settings.files.append(path)
    models = data.pop("models", {})
    if not isinstance(models, dict):
        raise ConfigError(f"{path}: models", "must be a table of model names")
    for name, table in models.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: models.{name}", "must be a table")
        settings.models.setdefault(name, {}).update(table)
    for key, value in _flatten(data):
        settings.set(key, value, str(path))


def _flatten(data: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _flatten(value, dotted + ".")
        else:
            yield dotted, value


def _apply_env(settings: Settings, env: Mapping[str, str]) -> None:
    for name, raw in sorted(env.items()):
        if not name.startswith(ENV_PREFIX) or name == "CONTEXTFOLD_HOME":
            continue
        suffix = name[len(ENV_PREFIX) :]
        if suffix in ("RAISE", "TEST_POSTGRES_URL"):
            continue
        key = _ENV_SHORTCUTS.get(suffix) or suffix.lower().replace("__", ".")
        if key not in SETTINGS:
            continue  # other tools may share the prefix; unknown names are not ours to reject
        settings.set(key, raw, f"env {name}")


def _check_known(key: str, source: str) -> SettingSpec:
    spec = SETTINGS.get(key)
    if spec is None:
        close = difflib.get_close_matches(key, list(SETTINGS), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(key, f"unknown setting (from {source}){hint}")
    return spec


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _convert(key: str, value: Any, spec: SettingSpec, source: str) -> Any:
    kind = spec.type
    try:
        if kind is bool:
            if isinstance(value, bool):
                result: Any = value
            elif str(value).strip().lower() in _TRUE | _FALSE:
                result = str(value).strip().lower() in _TRUE
            else:
                raise ValueError(value)
        elif kind is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            result = int(str(value).replace("_", "")) if isinstance(value, str) else int(value)
        elif kind is float:
            if isinstance(value, bool):
                raise ValueError(value)
            result = float(value)
        elif kind is list:  # the one list setting so far holds variable names
            result = _names(value)
        else:
            result = str(value)
    except (TypeError, ValueError):
        expected = _LIST_EXPECTED if kind is list else kind.__name__
        raise ConfigError(key, f"expected {expected}, got {value!r} (from {source})") from None
    if spec.choices and result not in spec.choices:
        raise ConfigError(
            key, f"must be one of {', '.join(spec.choices)}; got {result!r} (from {source})"
        )
    return result


_LIST_EXPECTED = 'a list of environment variable names (["A", "B"] in TOML, A,B elsewhere)'
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _names(value: Any) -> list[str]:
    """A list of environment variable names from a TOML array or a comma-separated string."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ValueError(value)
    names = [item.strip() for item in items if item.strip()]
    if not all(_VARIABLE_NAME.fullmatch(name) for name in names):
        raise ValueError(value)
    return names
