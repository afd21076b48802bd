"""Tool outputs: kept, cut to head and tail, or offloaded to a blob store, and read back.

- :mod:`~contextfold.outputs.intake` — :func:`prepare_tool_output`, an output on its way into
  the transcript;
- :mod:`~contextfold.outputs.truncate` — head-and-tail truncation by lines, bytes and tokens;
- :mod:`~contextfold.outputs.placeholders` — one-line stand-ins for masked outputs;
- :mod:`~contextfold.outputs.error_lines` — the error lines an output holds, verbatim;
- :mod:`~contextfold.outputs.blobs` and :mod:`~contextfold.outputs.blob_store` — refs, and the
  one :class:`BlobStore` protocol with its in-memory and file implementations;
- :mod:`~contextfold.outputs.read_result` — the ``read_result`` tool;
- :mod:`~contextfold.outputs.graphemes` — cut points that never split a character.
"""

from __future__ import annotations

from contextfold.outputs.blobs import (
    BlobInfo,
    blob_info,
)
from contextfold.outputs.intake import (
    DEFAULT_HEAD_RATIO,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    DEFAULT_MAX_TOKENS,
    DEFAULT_OFFLOAD_ABOVE_BYTES,
    DEFAULT_PREVIEW_CHARS,
    PLACEHOLDER_MAX_CHARS,
    PREVIEW_MAX_LINES,
    BlobStore,
    FileBlobStore,
    InMemoryBlobStore,
    OutputAction,
    OutputLimits,
    OutputPolicy,
    PreparedOutput,
    TextCounter,
    ToolKind,
    TruncatedOutput,
    estimate_tokens,
    exit_code,
    is_ref,
    placeholder_for,
    prepare_tool_output,
    tool_kind,
    truncate_head_tail,
)
from contextfold.outputs.read_result import (
    read_result,
)

__all__ = [
    "DEFAULT_HEAD_RATIO",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_LINES",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_OFFLOAD_ABOVE_BYTES",
    "DEFAULT_PREVIEW_CHARS",
    "PLACEHOLDER_MAX_CHARS",
    "PREVIEW_MAX_LINES",
    "BlobInfo",
    "BlobStore",
    "FileBlobStore",
    "InMemoryBlobStore",
    "OutputAction",
    "OutputLimits",
    "OutputPolicy",
    "PreparedOutput",
    "TextCounter",
    "ToolKind",
    "TruncatedOutput",
    "blob_info",
    "estimate_tokens",
    "exit_code",
    "is_ref",
    "placeholder_for",
    "prepare_tool_output",
    "read_result",
    "tool_kind",
    "truncate_head_tail",
]
