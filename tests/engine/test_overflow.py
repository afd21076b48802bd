"""A provider's context-overflow error: one hard compaction and a retry, never a loop."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextfold import ConfigError, ContextOverflowError, Message, ScriptedModel, ToolCallPart
from contextfold.events import CompactionStarted, OverflowRecovered
from contextfold.providers import ChatRequest
from tests.engine.helpers import EngineFactory, coding_model, start


def _overflow(prompt_tokens: int = 9_000, limit: int = 8_000) -> ContextOverflowError:
    return ContextOverflowError(
        f"prompt is too long: {prompt_tokens} tokens > {limit} maximum",
        provider="anthropic",
        status=400,
        prompt_tokens=prompt_tokens,
        limit=limit,
    )


def test_recover_compacts_hard_and_the_retry_is_smaller(make_engine: EngineFactory) -> None:
    engine, sink = make_engine()
    driver = start(engine)
    driver.until(lambda r: r.budget.fraction > 0.5)
    rejected = driver.prepare()

    result = driver.session.recover(_overflow(rejected.tokens + 300, 8_000))
    retry = driver.prepare()

    assert result.changed and result.hard
    assert retry.tokens < rejected.tokens
    started = sink.of_type(CompactionStarted)[-1]
    assert started.trigger == "overflow"
    recovered = sink.of_type(OverflowRecovered)
    assert len(recovered) == 1
    assert recovered[0].before_tokens == rejected.tokens + 300  # the provider's count
    assert recovered[0].before_tokens > recovered[0].after_tokens
    # What the notice says the retry takes is what was measured for it (its notes aside).
    assert 0 <= retry.tokens - recovered[0].after_tokens < 100
    assert not recovered[0].learned_window  # 8,000 is the model's own window
    assert "prompt is too long" in recovered[0].provider_message


def test_a_second_overflow_before_a_reply_raises_with_the_figures(
    make_engine: EngineFactory,
) -> None:
    engine, _ = make_engine()
    driver = start(engine)
    driver.until(lambda r: r.budget.fraction > 0.5)
    driver.session.recover(_overflow())
    driver.prepare()

    with pytest.raises(ContextOverflowError) as raised:
        driver.session.recover(_overflow(8_500, 8_000))
    assert raised.value.prompt_tokens == 8_500 and raised.value.limit == 8_000
    assert "still rejects" in str(raised.value)
    # A reply in between means the retry worked: the next overflow is recovered again.
    driver.turn()
    driver.session.recover(_overflow())


def test_an_agent_loop_survives_one_overflow(make_engine: EngineFactory) -> None:
    """The loop from the engine's docstring, against a model that rejects the first call."""
    engine, _ = make_engine()
    driver = start(engine)
    driver.until(lambda r: r.budget.fraction > 0.5)

    def answer(request: ChatRequest) -> Message:
        return Message.assistant("Found it: the empty-input check is missing.")

    model = ScriptedModel([_overflow(), answer])
    session = driver.session
    replies = []
    for _ in range(3):
        request = session.prepare(system=driver.system)
        try:
            response = model.complete(request.to_chat_request())
        except ContextOverflowError as error:
            session.recover(error)
            continue
        replies.append(session.add_assistant(response))
        break
    assert [m.text for m in replies] == ["Found it: the empty-input check is missing."]
    first, second = model.requests
    assert len(second.messages) < len(first.messages)
    assert session.view[-1].text == replies[0].text


def test_recover_with_a_tool_call_pending_keeps_the_history_valid(
    make_engine: EngineFactory,
) -> None:
    engine, _ = make_engine()
    driver = start(engine, model=coding_model())
    driver.until(lambda r: r.budget.fraction > 0.5)
    call = ToolCallPart.from_args("late", "bash", {"command": "pytest"})
    driver.session.add_assistant(Message.assistant("Running the tests.", [call]))
    driver.session.add_tool_result("late", "1 failed: test_empty_input")
    driver.session.recover(_overflow())
    retry = driver.prepare()
    assert retry.messages[-1].tool_results[0].content == "1 failed: test_empty_input"


def test_a_provider_limit_below_the_window_is_learned_kept_and_planned_against(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    """A server started with a smaller context than the registry says (llama.cpp's n_ctx): the
    retry must fit the server's limit, not the registry's window, and the limit must last."""
    engine, sink = make_engine(store=tmp_path / "s.db")
    driver = start(engine)
    driver.until(lambda r: r.budget.fraction > 0.5)
    refused = driver.prepare()
    limit = 3_000  # the server's n_ctx, far below the registry's 8,000

    driver.session.recover(_overflow(refused.tokens + 50, limit))
    retry = driver.prepare()

    session = driver.session
    assert session.context_window == limit and session.learned_window == limit
    assert retry.budget.context_window == limit
    assert retry.tokens + retry.max_tokens <= limit
    assert [m.id for m in retry.messages] != [m.id for m in refused.messages]
    event = sink.of_type(OverflowRecovered)[-1]
    assert event.learned_window and event.window == limit and event.limit == limit
    # Every later request is planned against the limit, in this process and after a resume.
    for _ in range(10):
        assert driver.turn().tokens + driver.requests[-1].max_tokens <= limit
    session_id = session.id
    engine.close()
    resumed_engine, _ = make_engine(store=tmp_path / "s.db")
    resumed = resumed_engine.resume(session_id)
    assert resumed.learned_window == limit
    request = resumed.prepare(system=driver.system)
    assert request.tokens + request.max_tokens <= limit


def test_a_limit_larger_than_the_window_teaches_nothing(make_engine: EngineFactory) -> None:
    engine, _ = make_engine()
    driver = start(engine)
    driver.until(lambda r: r.budget.fraction > 0.5)
    driver.session.recover(_overflow(9_000, 200_000))
    assert driver.session.learned_window is None
    assert driver.session.context_window == engine.model.context_window


def test_the_refused_request_is_never_sent_again(make_engine: EngineFactory) -> None:
    """When a hard compaction can remove nothing (the view is only the task), the retry would
    be byte-identical: prepare raises with the provider's figures instead."""
    engine, _ = make_engine()
    driver = start(engine)
    refused = driver.prepare()  # just the task: nothing to compact

    driver.session.recover(_overflow(refused.tokens + 5_000, 8_000))
    with pytest.raises(ContextOverflowError) as raised:
        driver.prepare()
    assert "same request" in str(raised.value)
    assert raised.value.prompt_tokens == refused.tokens + 5_000
    assert raised.value.limit == 8_000


def test_nothing_fits_a_learned_limit_smaller_than_the_fixed_part(
    make_engine: EngineFactory,
) -> None:
    engine, _ = make_engine()
    driver = start(engine, system="You are a careful agent. " * 200)
    driver.until(lambda r: r.budget.fraction > 0.3)
    with pytest.raises(ContextOverflowError) as raised:
        driver.session.recover(_overflow(5_000, 800))
    assert "nothing fits the provider's window of 800 tokens" in str(raised.value)
    assert "system prompt takes about" in str(raised.value)


def test_an_overflow_the_engine_raised_is_not_recovered_from(make_engine: EngineFactory) -> None:
    """Nothing was sent: the engine's own overflow is not a provider's refusal, and compacting
    again would not tell the truth about it."""
    engine, sink = make_engine()
    session = start(engine).session
    own = ContextOverflowError("the request needs more", provider="contextfold")
    with pytest.raises(ContextOverflowError) as raised:
        session.recover(own)
    assert raised.value is own
    assert not sink.of_type(OverflowRecovered)


def test_a_window_smaller_than_the_fixed_part_is_refused_with_the_sizes(
    make_engine: EngineFactory,
) -> None:
    engine, _ = make_engine(window=600, max_output=100)
    driver = start(engine, system="You are a careful coding agent. " * 120)
    with pytest.raises(ConfigError) as raised:
        driver.prepare()
    message = str(raised.value)
    assert "window of 600 tokens is too small" in message
    assert "system prompt takes about" in message and "kept for the reply" in message
