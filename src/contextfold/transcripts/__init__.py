"""Recorded agent sessions, imported into one neutral shape.

- :mod:`contextfold.transcripts.transcript` — :class:`Transcript`, what every importer returns;
- importers: :mod:`~contextfold.transcripts.claude_code`, :mod:`~contextfold.transcripts.codex`,
  :mod:`~contextfold.transcripts.mini_swe_agent`, :mod:`~contextfold.transcripts.tau_bench`, and
  :mod:`~contextfold.transcripts.generic` (plain OpenAI / Anthropic lists, contextfold's export);
- :mod:`contextfold.transcripts.detect` — :func:`load_transcripts` and friends, which recognise the
  format from the content.
"""

from __future__ import annotations

from contextfold.transcripts.claude_code import load_claude_code
from contextfold.transcripts.codex import load_codex
from contextfold.transcripts.detect import (
    SUPPORTED_FORMATS,
    detect_format,
    iter_transcripts,
    load_transcript,
    load_transcripts,
)
from contextfold.transcripts.generic import load_chat
from contextfold.transcripts.mini_swe_agent import load_mini_swe_agent
from contextfold.transcripts.tau_bench import load_tau_bench
from contextfold.transcripts.transcript import RecordedCompaction, Transcript

__all__ = [
    "SUPPORTED_FORMATS",
    "RecordedCompaction",
    "Transcript",
    "detect_format",
    "iter_transcripts",
    "load_chat",
    "load_claude_code",
    "load_codex",
    "load_mini_swe_agent",
    "load_tau_bench",
    "load_transcript",
    "load_transcripts",
]
