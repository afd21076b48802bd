"""What ``chat`` and ``run`` share: their options, and the agent those options describe.

The options are the highest layer of the settings (:func:`contextfold.config.load_settings`), so
``contextfold config show --set model=...`` explains any value a command ends up with. From the
settings come the model (``model``, ``base_url``, the provider's API key), its window (``window``,
or the model registry with the ``[models."name"]`` overrides), the engine (``preset``,
``thresholds.*``, ``outputs.*``, ``recent.*``, ``restart.*``, ``summarizer``, ``store``,
``events_log``) and the tools (``approval``, ``shell.timeout``, ``tools.env_allow``).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import typer

from contextfold.agent import (
    DEFAULT_MAX_STEPS,
    DEFAULT_SYSTEM_PROMPT,
    ApprovalCallback,
    ApprovalPolicy,
    Toolbox,
    coding_toolbox,
)
from contextfold.cli._render import print_error
from contextfold.cli._store import (
    StoreOption,
    browsable,
    print_store_warnings,
    resolve_session_id,
    warn_wal_reset,
)
from contextfold.compaction import (
    Compactor,
    LLMSummarizer,
    PresetName,
    RestartPolicy,
    Summarizer,
    preset_named,
)
from contextfold.config import Settings, load_settings
from contextfold.engine import ContextEngine, ContextPolicy, Session
from contextfold.errors import ConfigError
from contextfold.events import EventSink
from contextfold.model_registry import ModelInfo, default_registry, model_for_window, provider_named
from contextfold.prompt.instructions import DEFAULT_MAX_BYTES, InstructionsLoader
from contextfold.providers import ChatModel, check_provider, model_from_name, served_window
from contextfold.store import SessionStore, open_store

__all__ = [
    "DEFAULT_PRESET",
    "SCRIPTED_WINDOW",
    "Agent",
    "ApprovalOption",
    "BaseUrlOption",
    "MaxStepsOption",
    "ModelOption",
    "PresetOption",
    "ResumeOption",
    "StoreOption",
    "WindowOption",
    "agent_settings",
    "build_agent",
    "model_info",
]

DEFAULT_PRESET: PresetName = "mask-first"
"""The compaction preset when no setting names one (the engine's own default)."""

SCRIPTED_WINDOW = 16_000
"""Window of the ``scripted`` test model when ``--window`` does not say (no registry entry)."""

ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        metavar="PROVIDER/NAME",
        help="Model as provider/name: anthropic/claude-sonnet-4-5, openai/gpt-4.1, "
        "ollama/qwen3:8b, vllm/NAME, llamacpp/NAME, openrouter/ORG/NAME. Default: the `model` "
        "setting (contextfold.toml, CONTEXTFOLD_MODEL).",
        show_default=False,
    ),
]
BaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        metavar="URL",
        help="URL of an OpenAI-compatible server (Ollama, vLLM, llama.cpp, a proxy).",
        show_default=False,
    ),
]
WindowOption = Annotated[
    int | None,
    typer.Option(
        "--window",
        min=256,
        metavar="TOKENS",
        help="Context window in tokens; needed for models the registry does not know "
        "(local models), and to try a smaller window than the model's.",
        show_default=False,
    ),
]
PresetOption = Annotated[
    str | None,
    typer.Option(
        "--preset",
        metavar="PRESET",
        help="Compaction preset: mask-first (default), summarize, window, or restart "
        "(continue in a fresh session with a summary when the window fills).",
        show_default=False,
    ),
]
ApprovalOption = Annotated[
    str | None,
    typer.Option(
        "--approval",
        metavar="MODE",
        help="Writes and shell commands: ask (default: you confirm each one), auto, or read-only.",
        show_default=False,
    ),
]
ResumeOption = Annotated[
    str | None,
    typer.Option(
        "--resume",
        metavar="SESSION",
        help="Continue a stored session by id, or any unique start of it (see "
        "`contextfold sessions list`).",
        show_default=False,
    ),
]
MaxStepsOption = Annotated[
    int,
    typer.Option(
        "--max-steps",
        min=1,
        metavar="N",
        help="Most model calls for one task before control comes back to you.",
    ),
]


def agent_settings(
    *,
    model: str | None = None,
    base_url: str | None = None,
    window: int | None = None,
    preset: str | None = None,
    approval: str | None = None,
    store: str | None = None,
) -> Settings:
    """The settings with the command's options as the highest layer (unset options ignored)."""
    return load_settings(
        {
            "model": model,
            "base_url": base_url,
            "window": window,
            "preset": preset,
            "approval": approval,
            "store": store,
        }
    )


def model_info(name: str, settings: Settings) -> ModelInfo:
    """The registry entry for ``name`` (with config overrides), its window replaced by the
    ``window`` setting, else (unless the config sets it) by what a local server states
    (llama.cpp's ``/props``, vLLM's ``/v1/models``); a model neither the registry nor its
    server knows needs that setting."""
    check_provider(name)  # a wrong provider is the first thing to say, not a missing window
    registry = default_registry().copy()
    if settings.models:
        registry.update_from_mapping(settings.models)
    window: int | None = settings.get("window")
    if window is not None and window <= 0:
        where = settings.source("window")
        raise ConfigError(
            "window", f"must be a positive number of tokens, got {window} (from {where})"
        )
    if window is None and "context_window" not in settings.models.get(name, {}):
        served = served_window(name, base_url=settings.get("base_url"))
        window = served.window if served is not None else None
    provider, _, bare = name.partition("/")
    info = registry.find(name)
    if info is None:
        if window is None and provider != "scripted":
            raise ConfigError(
                "window",
                f"the model registry does not know {name!r}, so its context window is unknown: "
                f"pass --window N (e.g. the num_ctx of an Ollama model), or add "
                f'[models."{name}"] context_window = N to contextfold.toml',
            )
        base = model_for_window(window or SCRIPTED_WINDOW, name=bare or name)
        return replace(base, provider=provider_named(provider))
    if window is not None:
        # The reply reserve belongs to the window: never more than it.
        return replace(
            info, context_window=window, max_output_tokens=min(info.max_output_tokens, window)
        )
    return info


def _chat_model(name: str, settings: Settings, info: ModelInfo) -> ChatModel:
    provider = name.partition("/")[0].strip().lower()
    # A local server is asked whether it holds this window; it warns when not, or when unsure.
    options: dict[str, Any] = {"context_window": info.context_window}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = model_from_name(
            name, base_url=settings.get("base_url"), api_key=settings.api_key(provider), **options
        )
    for warning in caught:
        print_error(str(warning.message), warning=True)
    return model


def _summarizer(settings: Settings, model: ChatModel, info: ModelInfo) -> Summarizer | None:
    if settings.get("summarizer") == "llm":
        return LLMSummarizer(model, context_window=info.context_window)  # its requests fit it
    return None  # the engine's default, the extractive summarizer


def _compactor(settings: Settings) -> Compactor:
    options: dict[str, Any] = {}
    min_progress = settings.get("thresholds.min_progress")
    if min_progress is not None:
        options["min_progress"] = min_progress
    return Compactor.preset(
        preset_named(settings.get("preset") or DEFAULT_PRESET),
        restart=RestartPolicy(**settings.section("restart")),
        **options,
    )


def _open_store(settings: Settings, *, quiet_sqlite_warning: bool) -> SessionStore:
    options: dict[str, Any] = {}
    if settings.get("redact") is not None:
        options["redact"] = settings.get("redact")
    target = settings.get("store")
    if not str(target or "").startswith(("postgres://", "postgresql://")):
        if settings.get("sqlite_synchronous") is not None:
            options["synchronous"] = settings.get("sqlite_synchronous")
        options["warn_wal_reset"] = warn_wal_reset(settings) and not quiet_sqlite_warning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = open_store(target, **options)
    print_store_warnings(caught, getattr(store, "location", target))
    return store


@dataclass
class Agent:
    """Everything a command needs to run the coding agent, built from settings."""

    settings: Settings
    engine: ContextEngine
    model: ChatModel
    toolbox: Toolbox
    approval: ApprovalPolicy
    root: Path
    system: str = DEFAULT_SYSTEM_PROMPT
    max_steps: int = DEFAULT_MAX_STEPS

    def open_session(self, resume: str | None = None, *, title: str | None = None) -> Session:
        """The session to work in: ``resume`` continued from the store, else a new one."""
        if resume:
            return self.engine.resume(resolve_session_id(browsable(self.engine.store), resume))
        return self.engine.new_session(title=title, metadata={"cwd": str(self.root)})

    def close(self) -> None:
        """Close the engine, the store (opened here, so not the engine's to close) and the
        model's connections."""
        self.engine.close()
        self.engine.store.close()
        close = getattr(self.model, "close", None)
        if callable(close):
            close()


def build_agent(
    settings: Settings,
    *,
    root: Path,
    approve: ApprovalCallback | None,
    sinks: Iterable[EventSink] = (),
    model: ChatModel | None = None,
    info: ModelInfo | None = None,
    include_global_instructions: bool = True,
    quiet_sqlite_warning: bool = False,
) -> Agent:
    """The agent the settings describe, working in ``root``.

    ``approve`` answers the ``ask`` approval mode (``None``: every write is refused, as in a
    pipe with nobody to ask). ``model`` and ``info`` replace the ones the settings name (the
    demo's scripted model).
    """
    if model is None:
        name = settings.get("model")
        if not name:
            raise ConfigError(
                "model",
                "no model is set: pass --model provider/name (e.g. anthropic/claude-sonnet-4-5, "
                "openai/gpt-4.1-mini, ollama/qwen3:8b), or set `model` in contextfold.toml or "
                "CONTEXTFOLD_MODEL. `contextfold demo` runs without one.",
            )
        info = info or model_info(name, settings)
        model = _chat_model(name, settings, info)
    elif info is None:
        info = model_info(f"scripted/{model.name}", settings)
    mode = settings.get("approval") or "ask"
    approval = ApprovalPolicy.from_setting(mode, approve or _refuse)
    toolbox = coding_toolbox(
        root,
        approval,
        shell_timeout=settings.get("shell.timeout"),
        env_allow=settings.get("tools.env_allow", ()),
    )
    instructions = None
    if settings.get("instructions.enabled", True):
        instructions = InstructionsLoader(
            root,
            include_global=include_global_instructions,
            max_bytes=settings.get("instructions.max_bytes", DEFAULT_MAX_BYTES),
        )
        # Loaded now (the engine reloads only what changes) so that a file refused for leading
        # outside the project (an AGENTS.md linked to ~/.aws/credentials) is told up front.
        for refusal in instructions.load().refused:
            print_error(f"instructions: {refusal}", warning=True)
    store = _open_store(settings, quiet_sqlite_warning=quiet_sqlite_warning)
    engine = ContextEngine(
        info,
        store=store,
        compactor=_compactor(settings),
        policy=ContextPolicy.from_settings(settings),
        summarizer=_summarizer(settings, model, info),
        instructions=instructions,
        sinks=sinks,
        events_log=settings.get("events_log"),
    )
    try:  # a window too small for the prompt and tools is refused before any session is stored
        engine.require_room(system=DEFAULT_SYSTEM_PROMPT, tools=toolbox.specs())
    except ConfigError:
        engine.close()
        raise
    return Agent(settings, engine, model, toolbox, approval, root)


def _refuse(tool_name: str, summary: str) -> bool:
    return False


@contextmanager
def running_agent(agent: Agent) -> Iterator[Agent]:
    """``agent``, closed on the way out whatever happens."""
    try:
        yield agent
    finally:
        agent.close()
