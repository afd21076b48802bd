"""Secret redaction for everything contextfold writes: the store, the events log, exports,
the chat history, blob files and tool-output previews.

- :mod:`~contextfold.redaction.redactor` — :func:`redact_text`, :func:`redact_json`;
- :mod:`~contextfold.redaction.rules` — the secret shapes recognised.
"""

from __future__ import annotations

from contextfold.redaction.redactor import (
    MARKER_PREFIX,
    might_hold_secret,
    redact_json,
    redact_text,
)

__all__ = [
    "MARKER_PREFIX",
    "might_hold_secret",
    "redact_json",
    "redact_text",
]
