"""HistorySync: a framework's whole history in, only what is new appended to the session."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextfold import ContextEngine, ContextPolicy, Message, model_for_window
from contextfold.hosts.digests import message_digest
from contextfold.hosts.sync import HistorySync
from contextfold.messages import TextPart, ThinkingPart, ToolCallPart, ToolResultPart

BIG = "\n".join(f"line {i}" for i in range(20_000))


def _history() -> list[Message]:
    return [
        Message.system("You are terse."),
        Message.user("Count the lines."),
        Message.assistant("Running it.", [ToolCallPart("c1", "bash", '{"cmd": "seq"}')]),
        Message.tool(ToolResultPart("c1", "bash", BIG)),
    ]


@pytest.fixture
def engine(tmp_path: Path) -> ContextEngine:
    return ContextEngine(
        model_for_window(8_000, max_output_tokens=1_000),
        store=tmp_path / "sync.db",
        policy=ContextPolicy(background=False),
    )


@pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")
def test_only_new_messages_are_appended_and_the_view_fits(engine: ContextEngine) -> None:
    sync = HistorySync(engine, title="t")
    history = _history()
    prepared = sync.prepare(history, system="You are terse.")
    assert prepared.tokens <= engine.effective_window
    assert BIG not in "".join(m.text for m in prepared.messages)  # offloaded, not sent whole
    # The framework calls again with one more message: one message is appended, not four.
    history.append(Message.assistant("Done: 20,000 lines."))
    assert sync.update(history) == 1
    assert sync.update(history) == 0
    stored = [m for _, m in engine.store.iter_messages(sync.session.id)]  # type: ignore[attr-defined]
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")
def test_a_rewritten_history_continues_in_a_child_session(engine: ContextEngine) -> None:
    sync = HistorySync(engine)
    history = _history()
    sync.update(history)
    first = sync.session.id
    summarized = [Message.user("Summary: the lines were counted."), Message.user("And now?")]
    assert sync.update(summarized) == 2
    assert sync.session.id != first
    assert engine.store.get_session(sync.session.id).parent_id == first


def test_a_resent_history_appends_nothing_and_a_trimmed_one_starts_a_child(
    engine: ContextEngine,
) -> None:
    sync = HistorySync(engine)
    history = _history()
    sync.update(history)
    first = sync.session.id
    assert sync.update(history) == 0 and sync.session.id == first
    trimmed = history[:-1]
    kept = [m for m in trimmed if m.role != "system"]
    assert sync.update(trimmed) == len(kept)  # the framework dropped a message: a child
    assert sync.session.id != first
    assert engine.store.get_session(sync.session.id).parent_id == first


@pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")
def test_a_resumed_session_recognises_its_history(engine: ContextEngine, tmp_path: Path) -> None:
    sync = HistorySync(engine)
    history = _history()
    sync.update(history)
    session_id = sync.session.id
    again = ContextEngine(model_for_window(8_000), store=tmp_path / "sync.db")
    resumed = HistorySync(again, again.resume(session_id))
    # The stored output was offloaded; it is recognised by its full text all the same.
    assert resumed.update([*history, Message.user("next")]) == 1
    assert resumed.session.id == session_id


def test_digests_ignore_what_frameworks_change_on_resend() -> None:
    said = Message.assistant("Done. ", [ToolCallPart("c1", "bash", '{"a": 1, "b": 2}')])
    resent = Message(
        "assistant",
        (
            ThinkingPart("reasoning", "sig"),
            TextPart("Done."),
            TextPart("  "),
            ToolCallPart("c1", "bash", '{"b":2,"a":1}'),
        ),
    )
    assert message_digest(said) == message_digest(resent)
    assert message_digest(said) != message_digest(Message.assistant("Done."))


@pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")
def test_the_remembered_digests_are_those_of_the_history_given(engine: ContextEngine) -> None:
    """Digests are taken again only past the messages that are the very objects of the last
    history; a history of equal but new objects, or with a message changed, is recognised as
    from scratch."""
    from contextfold.hosts.prefixes import chain_heads

    sync = HistorySync(engine)
    history = _history()
    assert sync.update(history) == 3
    first = sync.session.id
    again = [Message.from_json(m.to_json()) for m in history]  # equal, not the same objects
    again.append(Message.user("Thanks."))
    assert sync.update(again) == 1 and sync.session.id == first
    changed = [*again[:2], Message.user("Something else."), *again[3:]]
    assert sync.update(changed) == len(changed) - 1  # rewritten: a child session holds it all
    assert sync.session.id != first
    given = [m for m in changed if m.role != "system"]
    assert sync._last.heads == chain_heads([message_digest(m) for m in given])
