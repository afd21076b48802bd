"""Every request passes the provider's history rules, whatever the agent appended."""

from __future__ import annotations

import pytest

from contextfold import ContextPolicy, Message, ToolCallPart, repair, validate
from contextfold.history.repair import SYNTHESIZED_FLAG
from contextfold.tokens.estimator import ContextSizeEstimator
from tests.engine.helpers import EngineFactory, start


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_broken_additions_are_repaired_in_the_next_request(
    make_engine: EngineFactory, provider: str
) -> None:
    engine, _ = make_engine(provider=provider)
    driver = start(engine)
    for _ in range(4):
        assert not driver.turn().repairs  # a clean history is sent as it is
    session = driver.session

    # A call id the agent already used earlier in the session (Anthropic rejects duplicates).
    driver.turn()
    reused = ToolCallPart.from_args("call_1", "bash", {"command": "pytest -q"})
    session.add_assistant(Message.assistant("Running the tests again.", [reused]))
    session.add_tool_result("call_1", "3 passed")
    request = driver.prepare()
    validate(list(request.messages), provider=provider)  # type: ignore[arg-type]
    about_reuse = [c for c in request.repairs.changes if c.call_id == "call_1"]
    assert bool(about_reuse) is (provider == "anthropic")
    assert list(request.messages) == repair(list(session.view), provider=provider)[0]  # type: ignore[arg-type]

    # An output for a call that was never made.
    session.add_tool_result("ghost", "output of nothing")
    request = driver.prepare()
    validate(list(request.messages), provider=provider)  # type: ignore[arg-type]
    assert request.repairs
    assert "output of nothing" not in [p.content for m in request.messages for p in m.tool_results]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_an_old_defect_is_repaired_in_full_once_then_kept(
    make_engine: EngineFactory, provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import contextfold.engine._repair as engine_repair

    full_repairs: list[int] = []

    def counting(view: list[Message], *, provider: str) -> object:
        full_repairs.append(len(view))
        return repair(view, provider=provider)  # type: ignore[arg-type]

    monkeypatch.setattr(engine_repair, "repair", counting)
    counted: list[int] = []  # how many messages each size estimate counted
    raw_messages = ContextSizeEstimator._raw_messages

    def spying(self: ContextSizeEstimator, messages: list[Message]) -> int:
        messages = list(messages)
        counted.append(len(messages))
        return raw_messages(self, messages)

    monkeypatch.setattr(ContextSizeEstimator, "_raw_messages", spying)
    engine, _ = make_engine(provider=provider, window=200_000, max_output=4_000)
    driver = start(engine)
    driver.turn()
    session = driver.session
    session.add_tool_result("ghost", "an output for a call the view does not hold")
    session.add_user("Carry on with the parser.")
    first = driver.prepare()
    assert first.repairs
    repaired_once = len(full_repairs)
    driver.turn()  # the provider reports the usage of a repaired request
    counted.clear()

    for _ in range(12):
        driver.turn()
        request = driver.prepare()
        messages = list(request.messages)
        validate(messages, provider=provider)  # type: ignore[arg-type]
        # The kept repair plus the new turns is what a full repair would send, message for
        # message (a note may follow)...
        full = repair(list(session.view), provider=provider)[0]  # type: ignore[arg-type]
        assert messages[: len(full)] == full
        assert request.repairs.changes == first.repairs.changes  # ...and it says what it fixed
    assert len(full_repairs) == repaired_once  # no full repair after the first
    # Estimates stay anchored on the reported usage: only the new messages are counted.
    assert counted and max(counted) <= 3


# --------------------------------------------------------------------------------------------------
# A call that never got its result is closed in the transcript
# --------------------------------------------------------------------------------------------------

LOST = ToolCallPart.from_args("lost_1", "bash", {"command": "make"})


def _closing(messages: list[Message]) -> list[Message]:
    return [m for m in messages if SYNTHESIZED_FLAG in m.meta.flags]


def test_a_call_without_result_is_closed_before_the_next_turn(make_engine: EngineFactory) -> None:
    engine, _ = make_engine()
    driver = start(engine)
    driver.turn()
    session = driver.session
    session.add_assistant(Message.assistant("Building.", [LOST]))
    session.add_user("Never mind the build; look at the parser.")

    view = list(session.view)
    validate(view, provider="anthropic")  # the view itself is valid, not only the request
    [closing] = _closing(view)
    assert view.index(closing) == len(view) - 2  # right after its call, before the user turn
    assert closing.tool_results[0].call_id == "lost_1" and closing.tool_results[0].is_error
    assert not driver.prepare().repairs
    stored = [m.id for _, m in engine.store.iter_messages(session.id)]
    assert closing.id in stored  # persisted: a resume and a replay see it too
    assert [m.id for m in engine.resume(session.id).view] == [m.id for m in view]


def test_a_call_killed_mid_tool_is_closed_when_the_resumed_loop_goes_on(
    make_engine: EngineFactory,
) -> None:
    engine, _ = make_engine()
    driver = start(engine)
    driver.turn()
    driver.session.add_assistant(Message.assistant("Building.", [LOST]))
    resumed = engine.resume(driver.session.id)
    assert not _closing(list(resumed.view))  # on resume the result may still come

    request = resumed.prepare()

    [closing] = _closing(list(request.messages))
    assert list(request.messages).index(closing) == len(resumed.view) - 1
    assert not request.repairs
    assert [m.id for m in engine.resume(resumed.id).view] == [m.id for m in resumed.view]


def test_a_result_delivered_after_the_resume_is_kept(make_engine: EngineFactory) -> None:
    engine, _ = make_engine()
    driver = start(engine)
    driver.turn()
    driver.session.add_assistant(Message.assistant("Building.", [LOST]))
    resumed = engine.resume(driver.session.id)

    resumed.add_tool_result("lost_1", "build ok")
    request = resumed.prepare()

    assert not _closing(list(request.messages))
    assert request.messages[-1].tool_results[0].content == "build ok"


def test_no_result_is_synthesized_when_repair_is_off(make_engine: EngineFactory) -> None:
    engine, _ = make_engine(policy=ContextPolicy(background=False, repair=False))
    driver = start(engine)
    driver.session.add_assistant(Message.assistant("Building.", [LOST]))
    driver.session.add_user("Go on.")
    assert not _closing(list(driver.prepare().messages))


@pytest.mark.parametrize(
    ("provider", "opens_with"),
    [("openai", "assistant"), ("ollama", "user"), ("vllm", "user"), ("llamacpp", "user")],
)
def test_the_view_is_repaired_to_the_providers_history_rules(
    make_engine: EngineFactory, provider: str, opens_with: str
) -> None:
    # A view that opens with the model's message (a carried-over greeting, say): OpenAI's API
    # takes it; a local server's chat template wants a user turn first.
    engine, _ = make_engine(provider=provider)
    session = engine.new_session()
    session.add_message(Message.assistant("Hello, what shall we work on?"))

    request = session.prepare(system="You are terse.")

    assert request.messages[0].role == opens_with
    assert bool(request.repairs) == (opens_with == "user")
