"""HistorySync: a framework's whole history in, only what is new appended to the session."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from contextfold import ContextEngine, ContextPolicy, Message, model_for_window
from contextfold.engine.session import Session
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


def _refusing(refused: Callable[[Message], bool]) -> Callable[[Session, Message], None]:
    """``Session.add`` that raises for the messages ``refused`` picks and adds the others."""
    add = Session.add

    def failing(self: Session, message: Message) -> None:
        if refused(message):
            raise RuntimeError("tool output refused")
        add(self, message)

    return failing


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


def _turns(count: int) -> list[Message]:
    """A history of ``count`` calls, each a reply with a tool call and its result."""
    history = [Message.system("You are terse."), Message.user("Look around.")]
    for i in range(count):
        call = ToolCallPart(f"c{i}", "bash", f'{{"cmd": "ls {i}"}}')
        history.append(Message.assistant(f"Step {i}.", [call]))
        output = BIG if i % 3 == 0 else f"file{i}.py\nfile{i}.txt"
        history.append(Message.tool(ToolResultPart(f"c{i}", "bash", output)))
    return history


def _shown(message: Message) -> tuple[object, ...]:
    """A message as stored or sent, but for when it was made."""
    return message.id, message.role, message.parts, message.meta.turn, message.meta.kind


def _stored(engine: ContextEngine, sync: HistorySync) -> list[tuple[object, ...]]:
    rows = engine.store.iter_messages(sync.session.id)  # type: ignore[attr-defined]
    return [(seq, *_shown(m)) for seq, m in rows]


@pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")
def test_an_update_written_together_stores_what_one_commit_per_message_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One commit per call instead of one per message changes nothing stored or seen."""
    from contextfold.messages import reproducible_ids

    def replay(name: str) -> tuple[list[tuple[object, ...]], list[object], list[object]]:
        engine = ContextEngine(
            model_for_window(8_000, max_output_tokens=1_000),
            store=tmp_path / f"{name}.db",
            policy=ContextPolicy(background=False),
        )
        requests = []
        with reproducible_ids():
            history = _turns(12)
            sync = HistorySync(engine, title="t")
            for end in range(4, len(history) + 1, 2):
                sent = sync.prepare(history[:end], system="You are terse.").messages
                requests.append([_shown(m) for m in sent])
            view = [_shown(m) for m in sync.session.view]
        return _stored(engine, sync), requests, view

    together = replay("together")
    monkeypatch.setattr(Session, "writes_together", lambda self: contextlib.nullcontext())
    assert replay("one-by-one") == together


@pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")
def test_a_failed_add_keeps_the_messages_added_before_it(
    engine: ContextEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An add that raises inside an update's block: what was added before it is committed (as
    with one commit per message), and the error reaches the framework."""

    sync = HistorySync(engine)
    history = _turns(2)
    sync.update(history[:4])
    first = sync.session.id
    failing = _refusing(lambda message: message.role == "tool")
    monkeypatch.setattr(Session, "add", failing)
    with pytest.raises(RuntimeError, match="refused"):
        sync.update(history)
    assert [row[2] for row in _stored(engine, sync)] == ["user", "assistant", "tool", "assistant"]
    assert sync.session.persisted and sync.session.id == first
    sync.session.add_user("Go on.")  # the writer and the store still agree on the head
    assert sync.session.persisted
    assert [row[2] for row in _stored(engine, sync)][-1] == "user"


@pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")
def test_the_call_after_a_failed_add_appends_only_what_is_missing(
    engine: ContextEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The messages added before a failed add are held: the framework's next call (the same
    history) appends the one that failed, not those again."""

    sync = HistorySync(engine)
    history = _turns(2)
    sync.update(history[:4])
    failing = _refusing(lambda message: message.role == "tool")
    with monkeypatch.context() as patched:
        patched.setattr(Session, "add", failing)
        with pytest.raises(RuntimeError, match="refused"):
            sync.update(history)
    assert sync.update(history) == 1
    roles = [row[2] for row in _stored(engine, sync)]
    assert roles == ["user", "assistant", "tool", "assistant", "tool"]
    assert sync.update(history) == 0


@pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")
def test_a_tool_message_added_in_part_is_completed_not_added_again(
    engine: ContextEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A framework message with several tool results is one session message per result: when
    the second one fails, the first stays stored, and the next call (the same history) adds
    the second only; each result is stored once."""

    sync = HistorySync(engine)
    calls = [ToolCallPart(f"c{i}", "bash", f'{{"cmd": "echo {i}"}}') for i in range(3)]
    history = [
        Message.user("Run the three."),
        Message.assistant("Running them.", calls),
        Message.tool(*(ToolResultPart(f"c{i}", "bash", f"out {i}") for i in range(3))),
    ]
    failing = _refusing(lambda message: [r.call_id for r in message.tool_results] == ["c1"])
    with monkeypatch.context() as patched:
        patched.setattr(Session, "add", failing)
        with pytest.raises(RuntimeError, match="refused"):
            sync.update(history)
    assert [r.call_id for m in sync.session.view for r in m.tool_results] == ["c0"]
    assert sync.update(history) == 1
    stored = [r.call_id for m in sync.session.view for r in m.tool_results]
    assert stored == ["c0", "c1", "c2"]
    assert sync.update(history) == 0
    assert [row[2] for row in _stored(engine, sync)] == ["user", "assistant", *["tool"] * 3]
