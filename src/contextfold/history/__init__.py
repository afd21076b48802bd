"""The conversation's structure: turns, the providers' history rules and their repair, and
the facts a history holds (files, commands, errors).

- :mod:`~contextfold.history.turns` — atomic units, turns and the recent window;
- :mod:`~contextfold.history.rules` — the rules a view must meet, checked fast or explained;
- :mod:`~contextfold.history.repair` — a valid tool-call history in one linear pass;
- :mod:`~contextfold.history.facts` — what a history did, fact by fact;
- :mod:`~contextfold.history.shell` — what a shell command reads and writes;
- :mod:`~contextfold.history.harness_notes` — user-role text an agent harness wrote;
- :mod:`~contextfold.history.texts` — every text of a part a model reads.
"""

from __future__ import annotations

from contextfold.history.repair import (
    ABORTED_RESULT_TEXT,
    LEADING_USER_TEXT,
    HistoryRules,
    RepairChange,
    RepairKind,
    RepairReport,
    history_rules_for,
    repair,
    synthesized_result,
    validate,
)
from contextfold.history.rules import (
    Problem,
    first_problem,
    valid_prefix,
)
from contextfold.history.turns import (
    RecentWindow,
    atomic_units,
    recent_window_start,
    turn_starts,
)

__all__ = [
    "ABORTED_RESULT_TEXT",
    "LEADING_USER_TEXT",
    "HistoryRules",
    "Problem",
    "RecentWindow",
    "RepairChange",
    "RepairKind",
    "RepairReport",
    "atomic_units",
    "first_problem",
    "history_rules_for",
    "recent_window_start",
    "repair",
    "synthesized_result",
    "turn_starts",
    "valid_prefix",
    "validate",
]
