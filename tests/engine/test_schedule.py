"""The cache-aware schedule: edits timed by their expected dollar effect (issue 19).

The arithmetic (:mod:`contextfold.engine._economics`) is checked as arithmetic; the engine is
checked on a long session in a roomy window, where only the schedule can compact before the
compact threshold, and each compaction's expected saving is settled with what came after.
"""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold import ContextPolicy, ModelInfo
from contextfold.budget import Thresholds
from contextfold.config import Settings
from contextfold.engine import _core, _economics, _schedule
from contextfold.engine._economics import (
    MAX_HORIZON_TURNS,
    MIN_HORIZON_TURNS,
    TRIGGER_CANDIDATES,
    CachePrices,
    EarlyQuestion,
    Pace,
    PaceTracker,
    Plan,
    Settlement,
    _play,
    early_compaction_pays,
    early_compaction_saving,
    edit_saving,
)
from contextfold.engine._schedule import EARLY_MARGIN
from contextfold.errors import ConfigError
from contextfold.events import CompactionFinished, CompactionSettled
from contextfold.transcripts import iter_transcripts
from tests.conftest import shared_path
from tests.engine.helpers import EngineFactory, start

SONNET_LIKE = ModelInfo(
    "sonnet-like",
    100_000,
    provider="anthropic",
    max_output_tokens=2_000,
    input_price=3.0,
    output_price=15.0,
    cache_write_price=3.75,
    cache_read_price=0.30,
    min_cacheable_tokens=1_024,
)
PRICES = CachePrices.for_model(SONNET_LIKE)
PLAN = Plan(upper=0.8 * 96_000, floor=6_000)


def _saving(tokens: float, turns: int, *, warm: bool = True, summary: bool = True) -> float:
    return edit_saving(
        tokens=tokens,
        after=6_000,
        kept_prefix=2_000,
        summary_tokens=tokens - 6_000 if summary else 0,
        warm=warm,
        pace=Pace(turns, 1_500),
        plan=PLAN,
        prices=PRICES,
    )


def test_prices_follow_the_provider_rule_when_the_model_states_none() -> None:
    bare = ModelInfo("local", 8_000, provider="anthropic", input_price=3.0)
    prices = CachePrices.for_model(bare)
    assert prices.read == pytest.approx(prices.input * 0.1)
    assert prices.write == pytest.approx(prices.input * 1.25)
    assert not prices.nominal
    unknown = CachePrices.for_model(ModelInfo("x", 8_000, provider="openai"))
    assert unknown.nominal and unknown.write == unknown.input  # no write surcharge there


def test_a_big_view_with_many_turns_left_is_worth_compacting_early() -> None:
    assert _saving(50_000, turns=40) > 0
    # A session expected to end soon would pay for the summary and the re-write for nothing.
    assert _saving(50_000, turns=4) < 0
    # The more turns are left, the more each smaller request saves.
    assert _saving(50_000, turns=40) > _saving(50_000, turns=10)


def test_an_expired_cache_makes_the_edit_cheaper() -> None:
    """After the cache's life the next request re-writes everything anyway: editing then costs
    only the summary."""
    for tokens in (20_000, 40_000, 60_000):
        assert _saving(tokens, turns=10, warm=False) > _saving(tokens, turns=10, warm=True)


def test_a_mask_batch_deep_in_the_view_with_little_freed_does_not_pay() -> None:
    """A batch that frees 1k tokens but re-writes the 40k after its first masked output costs
    more than it saves over a few turns; one that frees most of the view, early in it, pays."""
    small = edit_saving(
        tokens=50_000,
        after=49_000,
        kept_prefix=10_000,
        summary_tokens=0,
        warm=True,
        pace=Pace(6, 1_500),
        plan=PLAN,
        prices=PRICES,
    )
    big = edit_saving(
        tokens=30_000,
        after=12_000,
        kept_prefix=10_000,
        summary_tokens=0,
        warm=True,
        pace=Pace(20, 1_500),
        plan=PLAN,
        prices=PRICES,
    )
    assert small < 0 < big


def test_compacting_early_pays_in_a_roomy_window_and_not_in_a_tight_one() -> None:
    """Compacting at a size from now on, against the best later size: with 96k of room and a
    small floor the cached view is worth shrinking long before the threshold; with a 24k window
    whose floor (recent turns, summary) is already half the threshold, compacting more often
    costs more in summaries and re-written caches than the smaller view saves (the replay
    corpus showed the same)."""
    roomy = Plan(upper=0.8 * 96_000, floor=8_000, summary=1_500)
    tight = Plan(upper=0.8 * 24_000, floor=10_500, summary=1_800)
    pace = Pace(40, 470)

    def saving(tokens: float, plan: Plan) -> float:
        return early_compaction_saving(EarlyQuestion(tokens, 1_500, True, pace, plan, PRICES))

    assert saving(40_000, roomy) > 0
    assert saving(16_000, tight) < 0
    # Past the upper threshold there is nothing later to compare with.
    assert saving(80_000, roomy) == 0


def _played_turns(
    start_tokens: float, first_cost: float, pace: Pace, plan: Plan, prices: CachePrices
) -> float:
    """The play-forward's definition, one turn at a time (see ``_economics._play``)."""
    total = first_cost
    size = start_tokens
    growth = max(pace.growth, 1.0)
    ran = max(MIN_HORIZON_TURNS, pace.turns)
    for k in range(1, MAX_HORIZON_TURNS):
        grown = size + growth
        if grown >= plan.upper:
            cost = prices.summary(grown - plan.floor + plan.summary)
            cost += prices.request(plan.floor, 0)
            size = plan.floor
        else:
            cost = prices.request(grown, size)
            size = grown
        total += ran / (ran + k) * cost
    return total


def test_the_play_forward_by_stretches_equals_the_turn_by_turn_sum() -> None:
    """The play-forward sums a stretch between compactions at once; over floors above and below
    the threshold, paces from none to one compaction a turn and first requests past the
    threshold, it comes to the turn-by-turn sum."""
    rng = random.Random(28)
    cases = [(PLAN, Pace(40, 1_500), 50_000.0), (Plan(10_000, 9_999, 500), Pace(0, 0), 9_000.0)]
    for _ in range(3_000):
        upper = rng.uniform(1_000, 200_000)
        plan = Plan(upper, rng.uniform(0, 1.2 * upper), rng.uniform(0, 5_000))
        growth = rng.choice([0.0, 0.5, rng.uniform(1, 20_000), upper / rng.randint(1, 300)])
        cases.append((plan, Pace(rng.randint(0, 500), growth), rng.uniform(0, 1.1 * upper)))
    for plan, pace, start_tokens in cases:
        played = _play(start_tokens, 0.01, pace, plan, PRICES)
        assert played == pytest.approx(_played_turns(start_tokens, 0.01, pace, plan, PRICES))


def test_the_pace_counts_growth_between_requests_not_edits() -> None:
    tracker = PaceTracker()
    for size in (1_000, 2_000, 3_000):
        tracker.observe(size)
        tracker.sent(size, at=0.0)
    tracker.observe(1_500)  # an edit made the view smaller: no growth, no negative growth
    tracker.sent(1_500, at=0.0)
    assert tracker.pace == Pace(4, 2_000 / 4)
    assert tracker.warm(100.0, ttl_seconds=300.0) and not tracker.warm(301.0, ttl_seconds=300.0)
    again = PaceTracker.from_state(tracker.state())
    assert again.pace == tracker.pace and again.last_at is None  # the clock is not kept


def test_a_settlement_prices_what_happened_against_the_view_without_the_edit() -> None:
    settlement = Settlement(
        expected=0.1, before=50_000, plan=PLAN, warm=True, horizon=3, summary_tokens=44_000
    )
    tracker = PaceTracker(settlement=settlement)
    assert tracker.sent(6_000, at=0.0) is None
    assert tracker.sent(7_500, at=1.0) is None
    due = tracker.sent(9_000, at=2.0)
    assert due is settlement and tracker.settlement is None
    # Without the edit: 50k read from the cache, then 51.5k and 53k (the same growth).
    without = PRICES.request(50_000, 50_000) + PRICES.request(51_500, 50_000)
    without += PRICES.request(53_000, 51_500)
    actual = PRICES.summary(44_000) + PRICES.request(6_000, 0)
    actual += PRICES.request(7_500, 6_000) + PRICES.request(9_000, 7_500)
    assert settlement.realized(PRICES) == pytest.approx(without - actual)


def _long_session(
    make_engine: EngineFactory, policy: ContextPolicy, turns: int = 150
) -> tuple[list[object], int]:
    engine, sink = make_engine(SONNET_LIKE, policy=policy, compactor="summarize")
    driver = start(engine)
    for _ in range(turns):
        driver.turn()
    for request in driver.requests:
        assert request.tokens <= engine.effective_window
    return list(sink.events), engine.effective_window


def test_the_schedule_compacts_before_the_threshold_and_settles_what_it_expected(
    make_engine: EngineFactory,
) -> None:
    events, window = _long_session(make_engine, ContextPolicy(background=False), turns=250)
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    early = [e for e in finished if e.trigger == "cost"]
    assert early, [e.trigger for e in finished]
    compact_at = Thresholds().compact_at * window
    assert all(e.before_tokens < compact_at for e in early)
    assert all(e.expected_saving_usd is not None and e.expected_saving_usd > 0 for e in early)
    settled = {e.edit_ids: e for e in events if isinstance(e, CompactionSettled)}
    assert settled
    for edit_ids, settlement in settled.items():
        (done,) = [e for e in finished if e.edit_ids == edit_ids]
        assert settlement.expected_saving_usd == done.expected_saving_usd
        assert settlement.requests >= 1
        assert not settlement.nominal


def test_with_the_schedule_off_the_thresholds_alone_compact(make_engine: EngineFactory) -> None:
    policy = ContextPolicy(background=False, cost_schedule=False)
    events, window = _long_session(make_engine, policy, turns=250)
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    assert finished and all(e.trigger != "cost" for e in finished)
    assert all(e.before_tokens >= Thresholds().compact_at * window * 0.95 for e in finished)


def test_an_expired_cache_brings_the_compaction_earlier(
    make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same session with ten minutes between requests (each one finds the cache expired)
    compacts for cost sooner than the one whose requests follow each other closely."""

    def first_cost_compaction(seconds_apart: float) -> int:
        clock = FakeClock(seconds_apart)
        monkeypatch.setattr(_core, "time", clock)  # the clock messages are stamped with
        engine, sink = make_engine(
            SONNET_LIKE, policy=ContextPolicy(background=False), compactor="summarize"
        )
        driver = start(engine)
        for turn in range(150):
            driver.turn()
            if any(isinstance(e, CompactionFinished) and e.trigger == "cost" for e in sink.events):
                return turn
        return 150

    cold, warm = first_cost_compaction(600), first_cost_compaction(1)
    assert cold < warm


class FakeClock:
    """Stands in for the ``time`` module where messages get their time: each reading is a step
    later (the schedule reads a request's time from its newest message)."""

    def __init__(self, step: float) -> None:
        self.now = 1_700_000_000.0
        self.step = step

    def time(self) -> float:
        self.now += self.step
        return self.now


def test_schedule_settings_are_read_and_checked() -> None:
    settings = Settings(values={"schedule.cost": False, "schedule.compact_from": 0.4})
    policy = ContextPolicy.from_settings(settings)
    assert not policy.cost_schedule and policy.compact_from == 0.4
    with pytest.raises(ConfigError, match=r"schedule\.compact_from"):
        ContextPolicy(compact_from=0.9)
    with pytest.raises(ConfigError, match=r"schedule\.cache_ttl"):
        ContextPolicy(cache_ttl_seconds=0)


# --------------------------------------------------------------------------------------------------
# the decision asked for quickly (early_compaction_pays) against the full computation
# --------------------------------------------------------------------------------------------------


def _reference_odds(ran: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The odds' running sums as first written: turn by turn in Python."""
    each = [ran / (ran + k) for k in range(1, MAX_HORIZON_TURNS)]
    moments = itertools.accumulate(w * k for k, w in enumerate(each, start=1))
    return (0.0, *itertools.accumulate(each)), (0.0, *moments)


def _reference_saving(question: EarlyQuestion) -> float:
    """``early_compaction_saving`` as first written: every later policy played, the cheapest
    taken."""
    tokens, kept_prefix, warm = question.tokens, question.kept_prefix, question.warm
    pace, plan, prices = question.pace, question.plan, question.prices

    def policy(trigger: float) -> float:
        at = Plan(upper=trigger, floor=plan.floor, summary=plan.summary)
        if tokens >= trigger:
            first = prices.summary(tokens - plan.floor + plan.summary)
            first += prices.request(plan.floor, kept_prefix if warm else 0.0)
            return _play(plan.floor, first, pace, at, prices)
        return _play(tokens, prices.request(tokens, tokens if warm else 0.0), pace, at, prices)

    now = policy(tokens)
    step = (plan.upper - tokens) / TRIGGER_CANDIDATES
    if step <= 0:
        return 0.0
    return min(policy(tokens + step * i) for i in range(1, TRIGGER_CANDIDATES + 1)) - now


def _needed(tokens: float, plan: Plan, prices: CachePrices) -> float:
    """The margin the schedule asks of an early compaction (``_schedule.compacts_early``)."""
    one = prices.summary(tokens - plan.floor + plan.summary) + prices.request(plan.floor, 0)
    return EARLY_MARGIN * one


def test_the_odds_table_is_the_turn_by_turn_one() -> None:
    for ran in [*range(MIN_HORIZON_TURNS, 3_000), 10**5, 10**7, 2**40]:
        odds = _economics._Odds.of(ran)
        assert (odds.sums, odds.moments) == _reference_odds(ran)


_TOKENS = st.floats(0, 400_000, allow_nan=False)


@st.composite
def _schedule_questions(draw: st.DrawFn) -> EarlyQuestion:
    """What the schedule asks: a size under or past the threshold, a floor above or below it,
    paces from none to one compaction a turn, prices with and without a write surcharge, and a
    margin near the saving (the case an early exit could get wrong)."""
    upper = draw(st.floats(1_000, 400_000))
    plan = Plan(upper, draw(st.floats(0, 1.2 * upper)), draw(st.floats(0, 20_000)))
    growth = draw(st.one_of(st.just(0.0), st.floats(0, 30_000), st.just(upper / 7)))
    prices = draw(st.sampled_from([PRICES, CachePrices.for_model(ModelInfo("x", 8_000))]))
    return EarlyQuestion(
        tokens=draw(st.one_of(st.floats(0, 1.1 * upper), st.just(plan.floor))),
        kept_prefix=draw(_TOKENS),
        warm=draw(st.booleans()),
        pace=Pace(draw(st.integers(0, 100_000)), growth),
        plan=plan,
        prices=prices,
    )


@settings(max_examples=400, deadline=None)
@given(_schedule_questions(), st.floats(-2, 2), st.booleans())
def test_the_quick_decision_is_the_full_computations(
    question: EarlyQuestion, scale: float, at_the_saving: bool
) -> None:
    """``early_compaction_pays`` stops at the first later policy that says no: it answers as
    the saving computed in full compared with the margin, for margins at the saving itself,
    around it and at the schedule's own; and the saving is the reference's to the last bit."""
    saving = early_compaction_saving(question)
    assert saving == _reference_saving(question)
    margins = [_needed(question.tokens, question.plan, question.prices), saving]
    margins.append(saving * (1 + scale * 1e-12) if at_the_saving else saving + scale * 1e-3)
    for needed in margins:
        assert early_compaction_pays(question, needed) == (saving > needed)


@settings(max_examples=300, deadline=None)
@given(_schedule_questions(), st.floats(-2, 2), st.booleans())
def test_the_decision_in_closed_form_is_the_tables_or_none(
    question: EarlyQuestion, scale: float, at_the_saving: bool
) -> None:
    """The plays summed in closed form answer as the table does, or leave it to the table when
    a difference lies within their bounds; the schedule's own margin is answered."""
    saving = early_compaction_saving(question)
    if (question.plan.upper - question.tokens) / TRIGGER_CANDIDATES <= 0:
        return
    margins = [_needed(question.tokens, question.plan, question.prices), saving]
    margins.append(saving * (1 + scale * 1e-12) if at_the_saving else saving + scale * 1e-3)
    for needed in margins:
        answer = _economics._pays_in_form(question, needed)
        assert answer is None or answer == (saving > needed)


def test_a_stretch_in_closed_form_is_within_its_bound_of_the_tables() -> None:
    """Every stretch a play can ask for, for turn counts from the least to 2**40: the closed
    form's stretch is the table's within the error it notes, and for a session's turn counts
    that error is small."""
    rng = random.Random(28)
    for ran in [*range(MIN_HORIZON_TURNS, 60), 199, 200, 1_000, 12_345, 10**5, 10**7, 2**40]:
        table = _economics._Odds.of(ran)
        for _ in range(300):
            first = rng.randrange(1, MAX_HORIZON_TURNS - 1)
            end = rng.randrange(first + 1, MAX_HORIZON_TURNS + 1)
            base, slope = rng.uniform(-1, 1), rng.uniform(-1e-3, 1e-3)
            form = _economics._OddsForm(ran)
            exact = table.stretch(base, slope, first, end)
            assert abs(form.stretch(base, slope, first, end) - exact) <= form.bound()
            if ran <= 10**5:  # a session's turns: the bound is tight enough to settle
                size = abs(base) * (end - first) + abs(slope) * 4e4
                assert form.bound() <= 1e-7 * max(1.0, size)


def test_the_closed_form_settles_the_schedules_questions_on_a_long_session() -> None:
    """On the questions of a long session (big view, slow growth, the schedule's margin) the
    closed form answers without the table, both ways."""
    answers = set()
    for turns, tokens in itertools.product([40, 400, 4_000, 40_000], [30_000, 50_000, 70_000]):
        question = EarlyQuestion(tokens, 2_000.0, True, Pace(turns, 400.0), PLAN, PRICES)
        needed = _needed(tokens, PLAN, PRICES)
        answer = _economics._pays_in_form(question, needed)
        assert answer is not None
        assert answer == (early_compaction_saving(question) > needed)
        answers.add(answer)
    assert answers == {True, False}


def test_the_schedule_decides_as_the_full_computation_on_a_real_transcript(
    make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long session whose tool outputs are those of real agent transcripts: every time the
    schedule asks, the quick answer is the full computation's; and it answered both ways."""
    outputs = []
    for item in iter_transcripts(shared_path("trajectories", "mini-swe-agent-deepseek")):
        if isinstance(item, Exception):
            continue
        outputs += [r.content for m in item.messages for r in m.tool_results]
        if len(outputs) >= 400:
            break
    answers: list[bool] = []

    def checked(question: EarlyQuestion, needed: float) -> bool:
        answer = early_compaction_pays(question, needed)
        assert answer == (_reference_saving(question) > needed)
        answers.append(answer)
        return answer

    monkeypatch.setattr(_schedule, "early_compaction_pays", checked)
    engine, _ = make_engine(
        SONNET_LIKE, policy=ContextPolicy(background=False), compactor="summarize"
    )
    driver = start(engine, output=lambda turn: outputs[turn % len(outputs)])
    for _ in range(300):
        driver.turn()
    assert True in answers and False in answers, answers
