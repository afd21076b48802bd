"""contextfold: keep an LLM agent's context window healthy.

The model always gets a request that fits, is valid and cache-friendly, and nothing taken out of
the window is lost: it stays retrievable from the session store. Start with
:class:`~contextfold.engine.ContextEngine`; the README shows the per-turn loop.
"""

from __future__ import annotations

from contextfold._exceptions import (
    AuthenticationError,
    CompactionError,
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
from contextfold._usage import (
    SessionUsage,
)
from contextfold._version import (
    __version__,
)
from contextfold.budget import (
    BudgetMarks,
    ContextBudget,
    Thresholds,
    Zone,
)
from contextfold.compaction import (
    BackgroundCompactor,
    ClearToolResults,
    CompactionContext,
    Compactor,
    CompactResult,
    DropOldest,
    ExtractiveSummarizer,
    LLMSummarizer,
    MaskObservations,
    RecentWindow,
    RestartPolicy,
    Strategy,
    StructuredSummary,
    Summarize,
    Summarizer,
    ToolResultDigest,
    TruncateToolResults,
)
from contextfold.config import (
    Settings,
    load_settings,
)
from contextfold.edits import (
    ArchiveEdit,
    ContextEdit,
    DropEdit,
    MaskEdit,
    ReplacedResult,
    SummarizeEdit,
    apply_edits,
)
from contextfold.engine import (
    ContextEngine,
    ContextPolicy,
    PreparedRequest,
    Session,
)
from contextfold.estimator import ContextSizeEstimator
from contextfold.events import (
    Event,
    EventBus,
    JsonlSink,
    MemorySink,
)
from contextfold.formats import (
    RecordedCompaction,
    Transcript,
    detect_format,
    iter_transcripts,
    load_transcript,
    load_transcripts,
)
from contextfold.instructions import (
    InstructionsLoader,
    LoadedInstructions,
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
from contextfold.models import (
    ModelInfo,
    ModelRegistry,
    default_registry,
    model_for_window,
)
from contextfold.normalize import (
    RepairReport,
    repair,
    validate,
)
from contextfold.outputs import (
    BlobStore,
    FileBlobStore,
    InMemoryBlobStore,
    OutputLimits,
    OutputPolicy,
    placeholder_for,
    prepare_tool_output,
    truncate_head_tail,
)
from contextfold.prompt import (
    PromptBuilder,
    PromptSection,
)
from contextfold.providers import (
    ChatModel,
    ChatRequest,
    ChatResponse,
    ReplayModel,
    ScriptedModel,
    SystemBlock,
    model_from_name,
)
from contextfold.store import (
    SessionInfo,
    SessionStore,
    open_store,
)
from contextfold.token_counter import TokenCounter
from contextfold.tokens import (
    HeuristicCounter,
    TiktokenCounter,
    counter_for,
)
from contextfold.tool_spec import ToolSpec
from contextfold.tools import (
    ToolDeferral,
    ToolSelection,
)

__all__ = [
    "AnthropicChat",
    "ArchiveEdit",
    "AuthenticationError",
    "BackgroundCompactor",
    "BlobStore",
    "BudgetMarks",
    "ChatModel",
    "ChatRequest",
    "ChatResponse",
    "ClearToolResults",
    "CompactResult",
    "CompactionContext",
    "CompactionError",
    "Compactor",
    "ConcurrentWriteError",
    "ConfigError",
    "ContextBudget",
    "ContextEdit",
    "ContextEngine",
    "ContextOverflowError",
    "ContextPolicy",
    "ContextSizeEstimator",
    "ContextfoldError",
    "DropEdit",
    "DropOldest",
    "Event",
    "EventBus",
    "ExtractiveSummarizer",
    "FileBlobStore",
    "FormatError",
    "HeuristicCounter",
    "HistoryError",
    "ImagePart",
    "InMemoryBlobStore",
    "InstructionsLoader",
    "JsonlSink",
    "LLMSummarizer",
    "LoadedInstructions",
    "MaskEdit",
    "MaskObservations",
    "MemorySink",
    "Message",
    "MessageNotFoundError",
    "Meta",
    "MissingDependencyError",
    "ModelInfo",
    "ModelRegistry",
    "OpenAIChat",
    "OutputLimits",
    "OutputPolicy",
    "Part",
    "PreparedRequest",
    "PromptBuilder",
    "PromptSection",
    "ProviderError",
    "ProviderUnavailableError",
    "RateLimitError",
    "RecentWindow",
    "RecordedCompaction",
    "RefNotFoundError",
    "RepairReport",
    "ReplacedResult",
    "ReplayModel",
    "RestartPolicy",
    "SchemaVersionError",
    "ScriptedModel",
    "Session",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionStore",
    "SessionUsage",
    "Settings",
    "StoreCorruptError",
    "StoreError",
    "Strategy",
    "StructuredSummary",
    "Summarize",
    "SummarizeEdit",
    "Summarizer",
    "SummaryPart",
    "SystemBlock",
    "TextPart",
    "ThinkingPart",
    "Thresholds",
    "TiktokenCounter",
    "TokenCounter",
    "ToolCallPart",
    "ToolDeferral",
    "ToolResultDigest",
    "ToolResultPart",
    "ToolSelection",
    "ToolSpec",
    "Transcript",
    "TruncateToolResults",
    "UnknownFormatError",
    "UnknownModelError",
    "Usage",
    "UsageError",
    "Zone",
    "__version__",
    "apply_edits",
    "counter_for",
    "default_registry",
    "detect_format",
    "iter_transcripts",
    "load_settings",
    "load_transcript",
    "load_transcripts",
    "model_for_window",
    "model_from_name",
    "open_store",
    "placeholder_for",
    "prepare_tool_output",
    "repair",
    "truncate_head_tail",
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
