"""What an edit to the view is worth in dollars, given the provider's prompt cache.

A provider that caches prompts bills the part of a request identical to the start of the last
one (while its cache lives) at a fraction of the input price, and may bill writing the rest at a
surcharge. So every edit to the view has a price and a payoff:

- the price: the request after the edit re-writes everything from the first changed message on,
  instead of reading it from the cache; a summary written by a model is a call of its own;
- the payoff: every later request is smaller by what the edit freed, and a session that does not
  shrink its view will have to compact anyway when it reaches the upper threshold.

:func:`early_compaction_saving` decides when to compact: it plays the session forward under
"compact whenever the view reaches this size" for the current size and for later ones up to the
upper threshold, each turn growing the view as it has grown so far, and finds whether now is
the cheapest. :func:`edit_saving` prices one edit against not making it (what a compaction
event expects), and the same play-forward, fed what actually happened, gives the realized
effect (:class:`Settlement`). They are plain functions of a few numbers, so the decisions are
tested as arithmetic.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import cast

from contextfold.events import Trigger
from contextfold.model_registry import ModelInfo

__all__ = [
    "ANTHROPIC_READ_SHARE",
    "ANTHROPIC_WRITE_SHARE",
    "NOMINAL_INPUT_PRICE",
    "CachePrices",
    "EarlyQuestion",
    "Pace",
    "PaceTracker",
    "Plan",
    "Settlement",
    "early_compaction_pays",
    "early_compaction_saving",
    "edit_saving",
]

ANTHROPIC_READ_SHARE = 0.10
"""Anthropic bills a cache read at a tenth of the input price..."""
ANTHROPIC_WRITE_SHARE = 1.25
"""...and a cache write (five-minute cache) at a quarter more than it."""
OPENAI_READ_SHARE = 0.10
"""OpenAI's cached input on current models (gpt-5, gpt-4.1 family: a tenth; older ones a half).
Caching is automatic there and writing costs nothing extra."""
NOMINAL_INPUT_PRICE = 3.0
"""USD per million input tokens assumed for a model with no known price: the decisions only
compare costs, so any positive price gives the same choices; the dollar figures are then
nominal."""
DEFAULT_CACHE_TTL_SECONDS = 300.0
"""How long a provider keeps a prompt prefix cached after its last use (both providers'
default: five minutes)."""
MIN_HORIZON_TURNS = 4
"""Fewest further turns a session is expected to have (a session just started has some left)."""
MAX_HORIZON_TURNS = 200
"""Most further turns the play-forward looks at (a fraction of a microsecond each)."""


@dataclass(frozen=True, slots=True)
class CachePrices:
    """USD per token for uncached input, a cache read and a cache write, and the cache's life.

    ``summary_share`` prices what a summary reads, as a share of the input price: 1.0 for a
    summary a model writes from the text it is given (the conservative default), 0 for a
    summarizer that calls no model.
    """

    input: float
    read: float
    write: float
    ttl_seconds: float = DEFAULT_CACHE_TTL_SECONDS
    summary_share: float = 1.0
    nominal: bool = False
    """True when the model has no known price (the figures are then relative)."""

    @classmethod
    def for_model(
        cls,
        model: ModelInfo,
        *,
        ttl_seconds: float = DEFAULT_CACHE_TTL_SECONDS,
        summary_share: float = 1.0,
    ) -> CachePrices:
        """The model's own prices, per token; a price it does not state follows its
        provider's rule (Anthropic: reads 0.1x, writes 1.25x; others: reads 0.1x, writes at
        the input price). A local server (llama.cpp, Ollama) reuses its KV cache for a shared
        prefix the same way: there the "dollars" measure the prompt work saved."""
        nominal = model.input_price is None
        price = NOMINAL_INPUT_PRICE if model.input_price is None else model.input_price
        anthropic = model.provider == "anthropic"
        read_share = ANTHROPIC_READ_SHARE if anthropic else OPENAI_READ_SHARE
        write_share = ANTHROPIC_WRITE_SHARE if anthropic else 1.0
        read = model.cache_read_price if model.cache_read_price is not None else price * read_share
        write = (
            model.cache_write_price if model.cache_write_price is not None else price * write_share
        )
        million = 1_000_000
        return cls(
            input=price / million,
            read=read / million,
            write=write / million,
            ttl_seconds=ttl_seconds,
            summary_share=summary_share,
            nominal=nominal,
        )

    def request(self, tokens: float, cached: float) -> float:
        """One request of ``tokens`` whose first ``cached`` tokens are read from the cache."""
        cached = min(cached, tokens)
        return cached * self.read + (tokens - cached) * self.write

    def summary(self, tokens: float) -> float:
        """A summary call reading ``tokens``."""
        return tokens * self.input * self.summary_share


@dataclass(frozen=True, slots=True)
class Pace:
    """How the session has been going: how many requests, and how fast its view grows.

    ``remaining`` expects a session to go on about as long again as it has so far (bounded):
    a session's length is not known in advance, and one that has run long is likely to run on.
    It is how many requests a settlement waits for.
    """

    turns: int
    growth: float
    """Tokens the view grows by per request, on average (edits aside)."""

    @property
    def remaining(self) -> int:
        """Further requests the session is expected to make."""
        return max(MIN_HORIZON_TURNS, min(MAX_HORIZON_TURNS, self.turns))


@dataclass(frozen=True, slots=True)
class Plan:
    """Where the play-forward compacts: from ``upper`` tokens down to ``floor`` tokens, each
    summary reading what it takes out plus the ``summary`` it extends."""

    upper: float
    floor: float
    summary: float = 0.0


def _play(
    start_tokens: float,
    first_cost: float,
    pace: Pace,
    plan: Plan,
    prices: CachePrices,
    odds: _Odds | _OddsForm | None = None,
) -> float:
    """Expected cost of the turns after a first request of ``start_tokens`` costing
    ``first_cost``: each later request grows by the session's pace, reads the last request
    from the cache and writes its growth, and compacts to the floor when it passes the upper
    threshold (paying a summary of what it takes out and re-writing the compacted view).

    A later turn counts as much as the session is likely to reach it: having run ``n`` turns,
    it reaches ``k`` more with odds ``n / (n + k)`` (the longer a session has run, the longer
    it tends to go on). Weighing every turn that way, rather than stopping at a fixed count,
    keeps a compaction that lands just past a cut-off from tipping the comparison.

    Summed a stretch between compactions at a time: between two compactions a turn's cost is
    a straight line in its number, so a stretch costs two lookups in the running sums of the
    odds (tests/engine/test_schedule.py holds it to the turn-by-turn sum). The schedule plays
    seven policies forward each time it asks: turn by turn, that made the slowest steady turns
    of a long session.

    ``odds``: the exact table by default; :class:`_OddsForm` sums the stretches in closed form
    and bounds how far that total may be from the table's (:func:`early_compaction_pays`).
    """
    growth = max(pace.growth, 1.0)
    if odds is None:
        odds = _Odds.of(_ran(pace))
    last = MAX_HORIZON_TURNS - 1
    rewrite = prices.request(plan.floor, 0)
    total = odds.start(first_cost)
    size = start_tokens
    # Every stretch after the first starts from the floor: its length is found once.
    from_floor = _steps_to(plan.floor, growth, plan.upper)
    k = 1  # the first turn of the stretch
    while k <= last:
        # The stretch's compaction is its last turn.
        steps = _steps_to(size, growth, plan.upper) if k == 1 else from_floor
        grown_until = min(k + steps - 1, last + 1)  # turns k .. grown_until - 1 only grow
        if grown_until > k:
            # Turn i reads size + (i - k) * growth from the cache and writes the growth.
            base = (size - k * growth) * prices.read + growth * prices.write
            slope = growth * prices.read
            total += odds.stretch(base, slope, k, grown_until)
        if grown_until > last:
            break
        grown = size + steps * growth
        cost = prices.summary(grown - plan.floor + plan.summary) + rewrite
        total += odds.compaction(grown_until, cost)
        size = plan.floor
        k = grown_until + 1
    return total


def _steps_to(size: float, growth: float, upper: float) -> int:
    """Turns of ``growth`` from ``size`` until the view reaches ``upper`` (at least one)."""
    steps = max(1, math.ceil((upper - size) / growth))
    # The division may round across the boundary: settle it on the sizes themselves.
    while steps > 1 and size + (steps - 1) * growth >= upper:
        steps -= 1
    while size + steps * growth < upper:
        steps += 1
    return steps


@dataclass(frozen=True, slots=True)
class _Odds:
    """The odds of reaching each later turn (``ran / (ran + k)`` for turn ``k``) with their
    running sums, plain and times ``k``, so that a stretch of turns sums in two lookups."""

    ran: int
    sums: tuple[float, ...]
    """``sums[k]``: the odds of turns 1 to ``k`` added up (``sums[0]`` is 0)."""
    moments: tuple[float, ...]
    """``moments[k]``: the same, each turn's odds times its number."""

    @classmethod
    def of(cls, ran: int) -> _Odds:
        """The odds for a session that has run ``ran`` turns (the latest remembered: the plays
        of one decision share them)."""
        latest = _LATEST_ODDS.get(ran)
        if latest is not None:
            return latest
        # Turn k's odds ran / (ran + k) and its moment odds * k, in C loops (a new turn count
        # at every decision: building the table in Python took half of one).
        turns = range(1, MAX_HORIZON_TURNS)
        each = list(
            map(operator.truediv, itertools.repeat(ran), range(ran + 1, ran + MAX_HORIZON_TURNS))
        )
        made = cls(
            ran,
            tuple(itertools.accumulate(each, initial=0.0)),
            tuple(itertools.accumulate(map(operator.mul, each, turns), initial=0.0)),
        )
        _LATEST_ODDS.clear()
        _LATEST_ODDS[ran] = made
        return made

    def at(self, k: int) -> float:
        """The odds of turn ``k``."""
        return self.ran / (self.ran + k)

    def between(self, first: int, end: int) -> float:
        """The odds of turns ``first`` to ``end - 1`` added up."""
        return self.sums[end - 1] - self.sums[first - 1]

    def moment(self, first: int, end: int) -> float:
        """The same, each turn's odds times its number."""
        return self.moments[end - 1] - self.moments[first - 1]

    @staticmethod
    def start(first_cost: float) -> float:
        """A play's first term (:meth:`_OddsForm.start` notes its size)."""
        return first_cost

    def stretch(self, base: float, slope: float, first: int, end: int) -> float:
        """What turns ``first`` to ``end - 1`` cost, turn ``i`` costing ``base + slope * i``,
        weighed by their odds."""
        return base * self.between(first, end) + slope * self.moment(first, end)

    def compaction(self, k: int, cost: float) -> float:
        """A compaction at turn ``k`` costing ``cost``, weighed by its odds."""
        return self.at(k) * cost


_LATEST_ODDS: dict[int, _Odds] = {}
"""The odds last made, by ``ran`` (one entry; a thread that finds none makes its own)."""


def _ran(pace: Pace) -> int:
    """The turn count the odds are reckoned from."""
    return max(MIN_HORIZON_TURNS, pace.turns)


_UNIT = 2.0**-53
"""The unit roundoff of a float: every operation is off by at most this share of its result."""
_TABLE_SUM_ERROR = 1e-10
"""How far a difference of two of :class:`_Odds`'s running sums may be from the exact sum of
the odds: at most 199 terms under 1 each, accumulated, each sum off by at most 200 units of
roundoff of its at most 199 (2 * 200 * 199 * 2**-53 = 9e-12, taken tenfold)."""
_TABLE_MOMENT_ERROR = 1e-8
"""The same for the moments: terms under 199, their sum under 19,900 (2 * 201 * 19,900 *
2**-53 = 9e-10, taken tenfold)."""


class _OddsForm:
    """:class:`_Odds`'s stretch sums in closed form, with a bound on how far a play summed with
    them may be from one summed with the table (the total is then known to that bound).

    A stretch's odds add up to ``ran * (psi(ran + end) - psi(ran + first))`` (digamma: the
    harmonic numbers), its moments to ``ran * count`` less ``ran`` times that. A play of a few
    stretches costs a few logarithms, where the table costs 400 divisions and two accumulations
    for every new turn count (the schedule's every question has one).

    The bound, per unit of a stretch's coefficients and the same for every stretch of a play:
    digamma's asymptotic series to its ``x**-6`` term is off by less than ``x**-8 / 240`` for
    ``x >= ran + 1 >= 5`` (twice: two values), and evaluating it by less than 16 units of
    roundoff of its largest terms (the logarithm, at most ``count / x``, and ``1 / x``: with
    ``ran`` times it, at most ``16 * 201`` units); the table's own sums are off by
    :data:`_TABLE_SUM_ERROR` and :data:`_TABLE_MOMENT_ERROR`. Weighing a stretch and adding up a
    play's terms round differently for the two, by a few units of their sizes.
    """

    __slots__ = ("bases", "magnitude", "ran", "slopes", "terms")

    def __init__(self, ran: int) -> None:
        self.ran = ran
        self.bases = 0.0
        """The stretches' ``base`` coefficients' sizes, summed."""
        self.slopes = 0.0
        """The same for their ``slope``."""
        self.magnitude = 0.0
        """The sizes of the play's terms (its first cost, weighed stretches and compactions),
        summed."""
        self.terms = 0

    def start(self, first_cost: float) -> float:
        """A play's first term, noted for the roundoff of the sum."""
        self.magnitude += abs(first_cost)
        self.terms += 1
        return first_cost

    def stretch(self, base: float, slope: float, first: int, end: int) -> float:
        """:meth:`_Odds.stretch` in closed form; its coefficients noted for the bound."""
        ran = self.ran
        x = ran + first
        ix = 1.0 / x
        iy = 1.0 / (ran + end)
        ix2 = ix * ix
        iy2 = iy * iy
        # psi(ran + end) - psi(ran + first): the difference of ln t - 1/(2t) - 1/(12t^2)
        # + 1/(120t^4) - 1/(252t^6) at the two, the powers' differences factored.
        digamma = (
            math.log1p((end - first) / x)
            + 0.5 * (ix - iy)
            + (ix2 - iy2) * (1 / 12 - (ix2 + iy2) / 120 + (ix2 * ix2 + ix2 * iy2 + iy2 * iy2) / 252)
        )
        between = ran * digamma
        weighed_base = base * between
        weighed_slope = slope * (ran * (end - first) - ran * between)
        self.bases += abs(base)
        self.slopes += abs(slope)
        self.magnitude += abs(weighed_base) + abs(weighed_slope)
        self.terms += 1
        return weighed_base + weighed_slope

    def compaction(self, k: int, cost: float) -> float:
        """:meth:`_Odds.compaction`: the same division and product."""
        term = self.ran / (self.ran + k) * cost
        self.magnitude += abs(term)
        self.terms += 1
        return term

    def bound(self) -> float:
        """How far the play's total may be from the table's."""
        ran = self.ran
        # A stretch's odds summed, off from the exact sum (see the class) by at most:
        # evaluating the series, the remainder, and multiplying by ran (a sum under 199).
        off_exact = (16 * 201 + 2 * 199) * _UNIT + ran / (120 * (ran + 1.0) ** 8)
        between = off_exact + _TABLE_SUM_ERROR
        # The moments: ran * count less ran times the sum (two products and a difference,
        # each under ran * 199).
        moment = ran * off_exact + 6 * 199 * _UNIT * ran + _TABLE_MOMENT_ERROR
        weighed = self.bases * between + self.slopes * moment
        # Each term rounds differently in the two (three operations), and so does each sum.
        return weighed + (6 + 2 * self.terms) * _UNIT * self.magnitude


def edit_saving(
    *,
    tokens: float,
    after: float,
    kept_prefix: float,
    summary_tokens: float,
    warm: bool,
    pace: Pace,
    plan: Plan,
    prices: CachePrices,
) -> float:
    """Dollars saved by editing the view now, from ``tokens`` down to ``after``, rather than
    sending it as it is (negative: the edit costs more than it saves).

    ``kept_prefix`` is how many tokens at the start of the request the edit leaves unchanged
    (still cached when ``warm``); ``summary_tokens`` what a summary the edit writes reads
    (0 for an edit with no summary). ``warm`` is whether the cache still holds the last request:
    a request after the cache expired re-writes everything anyway, which makes this the cheap
    moment to edit.
    """
    cached = tokens if warm else 0.0
    wait = _play(tokens, prices.request(tokens, cached), pace, plan, prices)
    first = prices.summary(summary_tokens) + prices.request(after, kept_prefix if warm else 0.0)
    edit = _play(after, first, pace, plan, prices)
    return wait - edit


TRIGGER_CANDIDATES = 6
"""How many later triggers, spread up to the upper threshold, compacting now is weighed
against."""


@dataclass(frozen=True, slots=True)
class EarlyQuestion:
    """What the schedule asks before compacting early: the view is ``tokens`` now, its first
    ``kept_prefix`` tokens survive a compaction (still cached when ``warm``), it grows at
    ``pace`` toward ``plan``, at the session model's ``prices``."""

    tokens: float
    kept_prefix: float
    warm: bool
    pace: Pace
    plan: Plan
    prices: CachePrices


def early_compaction_saving(question: EarlyQuestion) -> float:
    """Dollars saved by making the current size (``question.tokens``) the one at which the
    session compacts, starting now, rather than the best later size up to the upper threshold
    (negative: a later one is cheaper).

    Each candidate is a policy played forward consistently: compact whenever the view reaches
    that size, down to the floor. Weighing one early compaction against compactions at the
    threshold afterwards would be wrong, because the schedule decides again after it and would
    compact early again: a smaller view costs less per request, but the compactions that keep
    it small come more often, each paying its summary and a re-written cache.
    """
    policies = _policy_costs(question, _Odds.of)
    now, _ = next(policies)
    if (question.plan.upper - question.tokens) / TRIGGER_CANDIDATES <= 0:
        return 0.0
    return min(cost for cost, _ in policies) - now


FORM_STRETCH_TURNS = 8
""":func:`early_compaction_pays` sums the plays in closed form when the view takes at least this
many turns to grow from the floor to the current size (a play then has at most 25 stretches,
each a logarithm: fewer operations than the odds table)."""


def early_compaction_pays(question: EarlyQuestion, needed: float) -> bool:
    """Whether :func:`early_compaction_saving` with these figures is above ``needed``.

    The same decision, reached sooner: the saving is the cheapest later policy's cost less
    now's, and a floating-point subtraction never rounds a smaller cost to a larger difference,
    so it is above ``needed`` only if every later policy's difference is. The later triggers are
    played nearest first (the nearest is the cheapest on the corpus's sessions: the schedule
    wants to compact as early as the margin allows) and the first one whose difference is not
    above ``needed`` settles a "no" — the answer of nearly every turn that asks, which then
    plays two policies, not seven (tests/engine/test_schedule.py holds the two to each other).

    The plays are first summed in closed form (:class:`_OddsForm`), each known to a bound of
    the table's total: a difference farther from ``needed`` than the bounds settles that
    policy's answer as the table would; one within them (or a question whose plays would have
    many short stretches) is answered with the table.
    """
    plan = question.plan
    if (plan.upper - question.tokens) / TRIGGER_CANDIDATES <= 0:
        return needed < 0.0
    if (question.tokens - plan.floor) >= FORM_STRETCH_TURNS * max(question.pace.growth, 1.0):
        answer = _pays_in_form(question, needed)
        if answer is not None:
            return answer
    policies = _policy_costs(question, _Odds.of)
    now, _ = next(policies)
    return all(later - now > needed for later, _ in policies)


def _pays_in_form(question: EarlyQuestion, needed: float) -> bool | None:
    """:func:`early_compaction_pays` with the plays in closed form, or ``None`` when a
    difference lies too near ``needed`` for their bounds to settle it."""
    policies = _policy_costs(question, _OddsForm)
    now, now_odds = next(policies)
    now_bound = cast(_OddsForm, now_odds).bound()
    # A real difference above needed * (1 + 2 units) rounds to a float above ``needed``; one
    # below it, to one not above.
    above = needed + 2 * _UNIT * abs(needed)
    for later, odds in policies:
        difference = later - now
        off = now_bound + cast(_OddsForm, odds).bound() + 2 * _UNIT * abs(difference)
        if difference - off > above:
            continue
        if difference + off < needed:
            return False
        return None  # too near to tell (or not a number): the table decides
    return True


def _policy_costs(
    question: EarlyQuestion, odds: Callable[[int], _Odds | _OddsForm]
) -> Iterator[tuple[float, _Odds | _OddsForm]]:
    """The play-forward cost of compacting at ``tokens`` from now on, then of each later
    trigger, spread up to the upper threshold nearest first, played as they are asked for;
    each with the odds it was summed with (``odds``: made for each play)."""
    tokens, plan, pace, prices = question.tokens, question.plan, question.pace, question.prices
    kept = question.kept_prefix if question.warm else 0.0
    ran = _ran(pace)

    def policy(trigger: float) -> tuple[float, _Odds | _OddsForm]:
        at = Plan(upper=trigger, floor=plan.floor, summary=plan.summary)
        summed = odds(ran)
        if tokens >= trigger:
            first = prices.summary(tokens - plan.floor + plan.summary)
            first += prices.request(plan.floor, kept)
            return _play(plan.floor, first, pace, at, prices, summed), summed
        first = prices.request(tokens, tokens if question.warm else 0.0)
        return _play(tokens, first, pace, at, prices, summed), summed

    yield policy(tokens)
    step = (plan.upper - tokens) / TRIGGER_CANDIDATES
    for i in range(1, TRIGGER_CANDIDATES + 1):
        yield policy(tokens + step * i)


@dataclass
class Settlement:
    """One edit's expected effect, and what it came to as the session went on.

    The realized effect replays the same comparison with what happened: the requests actually
    sent after the edit, against the same requests as they would have been without it (the
    view before the edit plus what was added since, compacting at the upper threshold as the
    play-forward does). It is settled after the turns the decision looked ahead, or at the next
    edit, whichever comes first.
    """

    expected: float
    before: float
    plan: Plan
    warm: bool
    horizon: int
    summary_tokens: float
    sizes: list[float] = field(default_factory=list)
    """Sizes of the requests sent since the edit, the first one included."""
    first_kept: float = 0.0
    """Tokens at the start of the first request after the edit that it left unchanged."""
    trigger: Trigger = "threshold"
    edit_ids: tuple[str, ...] = ()
    """The edits of the ``CompactionFinished`` event whose effect this is."""

    def realized(self, prices: CachePrices) -> float:
        """Dollars the edit saved over the requests sent since (negative: it cost more)."""
        if not self.sizes:
            return 0.0
        actual = prices.summary(self.summary_tokens) + prices.request(
            self.sizes[0], self.first_kept if self.warm else 0.0
        )
        for previous, size in zip(self.sizes, self.sizes[1:], strict=False):
            actual += prices.request(size, previous)
        # Without the edit: the same growth on top of the old view.
        size = self.before
        without = prices.request(size, size if self.warm else 0.0)
        for previous, now in zip(self.sizes, self.sizes[1:], strict=False):
            grown = size + max(0.0, now - previous)
            if grown >= self.plan.upper:
                without += prices.summary(grown - self.plan.floor + self.plan.summary)
                without += prices.request(self.plan.floor, 0)
                size = self.plan.floor
            else:
                without += prices.request(grown, size)
                size = grown
        return without - actual

    @property
    def due(self) -> bool:
        """Whether the turns the decision looked ahead have all been sent."""
        return len(self.sizes) >= self.horizon


@dataclass
class PaceTracker:
    """The figures the decisions read, kept from request to request: how many were sent, how
    much the view grew between them, when the last one went out (for the cache's life), and the
    edit whose effect is being settled."""

    requests: int = 0
    grown: float = 0.0
    last_tokens: int | None = None
    """Size of the latest request as sent."""
    last_at: float | None = None
    """When the latest request was prepared (the clock of its newest message, when it has one)."""
    recheck_at: int | None = None
    """Below this size (and while the cache is warm), compacting early was last found not to
    pay: the schedule does not ask again."""
    settlement: Settlement | None = None

    @property
    def pace(self) -> Pace:
        """The session's pace so far."""
        growth = self.grown / self.requests if self.requests else 0.0
        return Pace(self.requests, growth)

    def observe(self, tokens: int) -> None:
        """A new request measures ``tokens`` before any edit: what it grew by since the last."""
        if self.last_tokens is not None and tokens > self.last_tokens:
            self.grown += tokens - self.last_tokens

    def warm(self, at: float, ttl_seconds: float) -> bool:
        """Whether the provider still caches the latest request at time ``at``."""
        return self.last_at is not None and at - self.last_at <= ttl_seconds

    def sent(self, tokens: int, at: float) -> Settlement | None:
        """Record a request of ``tokens`` prepared at ``at``; the settlement that came due with
        it, if any (taken off the tracker)."""
        self.requests += 1
        self.last_tokens = tokens
        self.last_at = at
        settlement = self.settlement
        if settlement is None:
            return None
        settlement.sizes.append(tokens)
        if not settlement.due:
            return None
        self.settlement = None
        return settlement

    def state(self) -> dict[str, float | int | None]:
        """The part kept with the session (the pending settlement is not: it ends with the
        process)."""
        return {
            "requests": self.requests,
            "grown": self.grown,
            "last_tokens": self.last_tokens,
        }

    @classmethod
    def from_state(cls, saved: object) -> PaceTracker:
        """A tracker from :meth:`state`'s output (anything else: a fresh one)."""
        if not isinstance(saved, dict):
            return cls()
        last = saved.get("last_tokens")
        return cls(
            requests=int(saved.get("requests", 0)),
            grown=float(saved.get("grown", 0.0)),
            last_tokens=int(last) if last is not None else None,
        )
