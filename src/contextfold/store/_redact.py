"""The store's name for :mod:`contextfold.redaction` (kept for code that imports it here)."""

from __future__ import annotations

from contextfold.redaction import redact_json, redact_text

__all__ = ["redact_json", "redact_text"]
