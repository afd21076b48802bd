"""How much two sequences share from their start, found at C speed.

The proxy, the wire encoders and the framework integrations all take up work where the previous
request of a conversation left it: the history a client resends is the last one plus a few new
messages, so what the two share from the start (the very objects, or equal keys) is what was
done already. Each asks the same question; this is its one answer.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence

__all__ = ["common_prefix", "same_objects"]


def common_prefix(
    a: Sequence[object], b: Sequence[object], same: Callable[[object, object], bool] = operator.is_
) -> int:
    """How many of the first items ``a`` and ``b`` share: compared by ``same``, the very
    objects unless told otherwise (``operator.eq`` for values such as digests)."""
    if all(map(same, a, b)):
        return min(len(a), len(b))  # the usual case: one pass in C, nothing allocated
    return list(map(same, a, b)).index(False)


def same_objects(a: Sequence[object], b: Sequence[object]) -> bool:
    """Whether ``a`` and ``b`` hold the very same objects, in order."""
    return len(a) == len(b) and all(map(operator.is_, a, b))
