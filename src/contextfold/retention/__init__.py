"""What a compaction must not lose, and what it did: pins, the artifact ledger and the loss
report.

- :mod:`~contextfold.retention.pins` — standing constraints the model keeps seeing;
- :mod:`~contextfold.retention.ledger` — files, commands, errors and identifiers that left the
  view, each with its ref;
- :mod:`~contextfold.retention.loss` — where each fact a compaction took out can still be read.
"""

from __future__ import annotations

from contextfold.retention.ledger import (
    Ledger,
    LedgerItem,
    LedgerKind,
)
from contextfold.retention.loss import (
    LossItem,
    LossReport,
    Where,
    loss_report,
)
from contextfold.retention.pins import (
    Pin,
    PinSet,
    PinSource,
    extract_pins,
)

__all__ = [
    "Ledger",
    "LedgerItem",
    "LedgerKind",
    "LossItem",
    "LossReport",
    "Pin",
    "PinSet",
    "PinSource",
    "Where",
    "extract_pins",
    "loss_report",
]
