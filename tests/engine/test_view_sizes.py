"""The counts :class:`~contextfold.engine._sizes.ViewSizes` keeps as the view changes are the ones
a pass over the view gives."""

from __future__ import annotations

from contextfold import Message, ScriptedModel, Session, ToolCallPart
from contextfold.providers import ChatRequest
from tests.engine.helpers import EngineFactory, start


def _largest_reply(session: Session) -> int:
    """What :attr:`Session.largest_reply` is: the largest assistant message of the view."""
    core = session._core
    counts = [core.deps.counter.count_message(m) for m in core.view]
    return max(
        (n for m, n in zip(core.view, counts, strict=True) if m.role == "assistant"), default=0
    )


def test_the_largest_reply_kept_as_messages_arrive_and_leave_is_the_views(
    make_engine: EngineFactory,
) -> None:
    def respond(request: ChatRequest) -> Message:
        turn = len(model.requests)
        call = ToolCallPart.from_args(f"call_{turn}", "bash", {"command": f"cat src/m{turn}.py"})
        # One long early reply: the largest until a compaction takes it out of the view.
        words = 300 if turn == 3 else 5 + turn % 7
        return Message.assistant(" ".join(["step"] * words), [call])

    model = ScriptedModel(default=respond)
    engine, _ = make_engine()
    driver = start(engine, model=model)
    assert driver.session.largest_reply == 0  # no reply yet
    compactions = 0
    largest: list[int] = []
    for turn in range(80):
        compactions += bool(driver.turn().compaction)
        assert driver.session.largest_reply == _largest_reply(driver.session) > 0
        largest.append(driver.session.largest_reply)
        if turn == 40:
            driver.session = engine.resume(driver.session.id)
            assert driver.session.largest_reply == _largest_reply(driver.session)
    assert compactions >= 2
    assert largest[-1] < max(largest)  # the long reply left the view, and its count with it
