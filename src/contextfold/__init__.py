"""contextfold: keep an LLM agent's context window healthy.

The model always gets a request that fits, is valid and cache-friendly, and nothing taken out of
the window is lost: it stays retrievable from the session store. Start with
:class:`~contextfold.engine.ContextEngine`; the README shows the per-turn loop.

The top level holds what an agent built on the library needs: the engine, its session, policy
and request; messages; the errors; the stores; the chat models; the model registry; the
compactor and its summarizers. The rest is public in its subpackage: the strategies and the
compaction context in :mod:`contextfold.compaction`, the edits in :mod:`contextfold.edits`,
transcript formats in :mod:`contextfold.transcripts`, tool-output handling and blob stores in
:mod:`contextfold.outputs.intake`, the prompt builder in :mod:`contextfold.prompt.sections`, events
and sinks in
:mod:`contextfold.events`, budgets and zones in :mod:`contextfold.budget`, counters in
:mod:`contextfold.tokens.counters` and :mod:`contextfold.tokens.estimator`, tool deferral in
:mod:`contextfold.tools.deferral`, settings in :mod:`contextfold.config`, repair reports in
:mod:`contextfold.history.repair`, and the replay model and system blocks in
:mod:`contextfold.providers`.
"""

from __future__ import annotations

from contextfold._version import (
    __version__,
)
from contextfold.budget import (
    Thresholds,
)
from contextfold.compaction import (
    Compactor,
    CompactResult,
    ExtractiveSummarizer,
    LLMSummarizer,
    RestartPolicy,
    Strategy,
    StructuredSummary,
    Summarizer,
)
from contextfold.engine import (
    ContextEngine,
    ContextPolicy,
    PreparedRequest,
    Session,
)
from contextfold.errors import (
    AuthenticationError,
    ConcurrentWriteError,
    ConfigError,
    ContextfoldError,
    ContextOverflowError,
    FormatError,
    HistoryError,
    MessageNotFoundError,
    MissingDependencyError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitError,
    RefNotFoundError,
    SchemaVersionError,
    SessionNotFoundError,
    StoreCorruptError,
    StoreError,
    UnknownFormatError,
    UnknownModelError,
    UsageError,
)
from contextfold.events import (
    Event,
)
from contextfold.history.repair import (
    repair,
    validate,
)
from contextfold.messages import (
    ImagePart,
    Message,
    Meta,
    Part,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from contextfold.model_registry import (
    ModelInfo,
    ModelRegistry,
    default_registry,
    model_for_window,
)
from contextfold.outputs.intake import (
    OutputLimits,
)
from contextfold.prompt.instructions import (
    InstructionsLoader,
)
from contextfold.providers import (
    BaseChatModel,
    ChatModel,
    ChatRequest,
    ChatResponse,
    ScriptedModel,
    model_from_name,
)
from contextfold.store import (
    SessionInfo,
    SessionStore,
    open_store,
)
from contextfold.tokens.counter import (
    TokenCounter,
)
from contextfold.tokens.counters import (
    counter_for,
)
from contextfold.tool_spec import (
    ToolSpec,
)
from contextfold.usage import (
    SessionUsage,
)

__all__ = [
    "AnthropicChat",
    "AuthenticationError",
    "BaseChatModel",
    "ChatModel",
    "ChatRequest",
    "ChatResponse",
    "CompactResult",
    "Compactor",
    "ConcurrentWriteError",
    "ConfigError",
    "ContextEngine",
    "ContextOverflowError",
    "ContextPolicy",
    "ContextfoldError",
    "Event",
    "ExtractiveSummarizer",
    "FormatError",
    "HistoryError",
    "ImagePart",
    "InstructionsLoader",
    "LLMSummarizer",
    "Message",
    "MessageNotFoundError",
    "Meta",
    "MissingDependencyError",
    "ModelInfo",
    "ModelRegistry",
    "OpenAIChat",
    "OutputLimits",
    "Part",
    "PreparedRequest",
    "ProviderError",
    "ProviderUnavailableError",
    "RateLimitError",
    "RefNotFoundError",
    "RestartPolicy",
    "SchemaVersionError",
    "ScriptedModel",
    "Session",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionStore",
    "SessionUsage",
    "StoreCorruptError",
    "StoreError",
    "Strategy",
    "StructuredSummary",
    "Summarizer",
    "SummaryPart",
    "TextPart",
    "ThinkingPart",
    "Thresholds",
    "TokenCounter",
    "ToolCallPart",
    "ToolResultPart",
    "ToolSpec",
    "UnknownFormatError",
    "UnknownModelError",
    "Usage",
    "UsageError",
    "__version__",
    "counter_for",
    "default_registry",
    "model_for_window",
    "model_from_name",
    "open_store",
    "repair",
    "validate",
]

_LAZY = {
    "AnthropicChat": "contextfold.providers",
    "OpenAIChat": "contextfold.providers",
}


def __getattr__(name: str) -> object:
    # SDK-backed adapters load on first use, so a missing optional extra costs nothing until then.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'contextfold' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
