"""Pins (issue 19): standing user constraints are found in what the user writes, or pinned by
hand, and every request carries every pin verbatim, however often the conversation is compacted.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextfold import ContextEngine, ContextPolicy, UsageError, model_for_window
from contextfold.cli import app
from contextfold.events import CompactionFinished, PinAdded, event_from_dict
from contextfold.retention.pins import (
    MAX_PIN_CHARS,
    MAX_PINS,
    PINS_HEADER,
    Pin,
    PinSet,
    extract_pins,
)
from contextfold.store import open_store
from tests.engine.helpers import SYSTEM, TASK, Driver, EngineFactory, listing

# -- extraction --------------------------------------------------------------------------------

CONSTRAINTS = [
    ("Always run the tests with -x before you commit.", None),
    ("never touch the migrations folder", None),
    ("Don't change the public API of src/parser.py.", None),
    ("Don’t rename the CLI flags.", None),
    ("Do not push to main.", None),
    ("You must keep Python 3.11 support.", None),
    ("We must not break the wire format.", None),
    ("Must use tabs in the Makefile.", None),
    ("Please, never print secrets.", None),
    ("Also: always add type hints.", None),
    ("Make sure to always log the request id.", None),
    ("You should never call the network in tests.", None),
    ("- do not edit vendored code", "do not edit vendored code"),
    ("2) Never  use\tprint for logging.", "Never use print for logging."),
]
"""A message stating a standing constraint, and the pin it gives when that is not the message
itself (a list marker taken off, whitespace collapsed)."""

ORDINARY = [
    "Fix the bug in src/parser.py.",
    "Can you always use tabs?",  # a question is a request, not a rule
    "Don't worry about the docs.",
    "Never mind, it works now.",
    "It must be the parser that fails.",
    "The tests always fail on CI.",
    "I never liked that function.",
    "Run the tests and tell me what fails.",
    "Add a flag so that it does not crash.",
    "```python\n# never do this\nx = 1\n```",  # code the user pasted
    "",
]
"""Messages with no standing constraint in them."""


@pytest.mark.parametrize(("message", "pin"), CONSTRAINTS)
def test_a_standing_constraint_is_extracted_as_it_was_written(
    message: str, pin: str | None
) -> None:
    assert extract_pins(message) == (pin or message,)


@pytest.mark.parametrize("message", ORDINARY)
def test_an_ordinary_request_gives_no_pin(message: str) -> None:
    assert extract_pins(message) == ()


def test_extraction_is_deterministic_and_keeps_each_constraint_of_a_long_message_in_order() -> None:
    # Ordinary sentences and constraints in turn, in one message.
    pairs = list(zip(ORDINARY, CONSTRAINTS, strict=False))
    message = "\n".join(part for ordinary, (rule, _) in pairs for part in (ordinary, rule))
    expected = tuple(pin or rule for _, (rule, pin) in pairs)
    assert len(expected) == len(ORDINARY)
    assert extract_pins(message) == expected
    assert all(extract_pins(message) == expected for _ in range(5))


def test_a_long_constraint_is_cut_to_the_bound() -> None:
    (pin,) = extract_pins("Never " + "touch the generated files " * 40)
    assert len(pin) == MAX_PIN_CHARS and pin.endswith("…")


def test_the_pin_set_drops_the_oldest_extracted_pin_and_keeps_explicit_ones() -> None:
    pins = PinSet()
    assert pins.add("keep the API", "explicit") is not None
    for i in range(MAX_PINS + 5):
        pins.add(f"never touch file {i}", "extracted")
    texts = [p.text for p in pins.pins]
    assert len(texts) == MAX_PINS
    assert texts[0] == "keep the API"
    assert texts[1] == "never touch file 6"  # 0..5 made room, oldest first
    assert pins.add("NEVER touch file 24", "extracted") is None  # already pinned (any case)
    # Pinning an extracted text explicitly keeps it from then on.
    pins.add("never touch file 6", "explicit")
    for i in range(100, 100 + MAX_PINS):
        pins.add(f"always run step {i}", "extracted")
    assert {p.text for p in pins.pins if p.source == "explicit"} == {
        "keep the API",
        "never touch file 6",
    }
    full = PinSet(Pin(f"rule {i}", "explicit") for i in range(MAX_PINS))
    assert full.add("never again", "extracted") is None
    with pytest.raises(ValueError, match="unpin one"):
        full.add("one more", "explicit")


def test_pins_round_trip_through_the_saved_state_and_an_old_state_loads() -> None:
    pins = PinSet([Pin("Always use tabs.", "extracted"), Pin("keep the API", "explicit")])
    assert PinSet.from_state(pins.state()).pins == pins.pins
    assert PinSet.from_state(None).pins == ()  # a state saved before pins existed
    assert PinSet.from_state([{"text": 3}, "junk", {"text": "ok", "source": "?"}]).pins == (
        Pin("ok", "extracted"),
    )


# -- in a session ------------------------------------------------------------------------------

PINNED_BY_USER = [
    "Never change the public API of src/parser.py.",
    "Always run the tests with pytest -x.",
    "Don't touch the migrations folder.",
    "You must keep Python 3.11 support.",
]


def test_pins_survive_ten_compactions(make_engine: EngineFactory) -> None:
    engine, sink = make_engine(window=8_000)
    session = engine.new_session(title="pins")
    session.add_user(TASK)
    driver = Driver(session, output=lambda turn: listing(turn, lines=60))
    explicit = session.pin("The release branch is release/2.x; keep it buildable.")
    assert explicit is not None

    checked = 0
    for turn in range(200):
        if turn % 15 == 5 and turn // 15 < len(PINNED_BY_USER):
            session.add_user(f"Thanks. {PINNED_BY_USER[turn // 15]} Carry on.")
        request = driver.turn()
        if any(isinstance(e, CompactionFinished) for e in request.events):
            checked += 1
            pins = [p.text for p in session.pins]
            assert len(pins) == 1 + min(len(PINNED_BY_USER), turn // 15 + (turn % 15 >= 5))
            for text in pins:
                assert text in request.system_text  # verbatim, in the request that is sent
            # ... and nowhere in the conversation, which is what compaction edits.
            assert all(PINS_HEADER not in m.text for m in request.messages)
        if checked >= 10 and len(session.pins) == 1 + len(PINNED_BY_USER):
            break

    assert len(sink.of_type(CompactionFinished)) >= 10
    assert checked >= 10
    assert [p.text for p in session.pins] == [explicit.text, *PINNED_BY_USER]
    added = sink.of_type(PinAdded)
    assert [(e.text, e.source) for e in added] == [
        (explicit.text, "explicit"),
        *((text, "extracted") for text in PINNED_BY_USER),
    ]
    assert event_from_dict(added[0].to_dict()) == added[0]


def test_pins_are_counted_in_the_budget(make_engine: EngineFactory) -> None:
    engine, _ = make_engine()
    plain, pinned = engine.new_session(), engine.new_session()
    for session in (plain, pinned):
        session.add_user(TASK)
    pinned.pin("Never edit files outside src/; every change goes through a pull request.")
    before = plain.prepare(system=SYSTEM)
    after = pinned.prepare(system=SYSTEM)
    assert after.budget.system > before.budget.system
    assert after.tokens > before.tokens
    assert after.system_text.startswith(SYSTEM)  # the agent's own prompt still leads


def test_session_pin_persists_across_a_resume_in_a_new_engine(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"

    def engine() -> ContextEngine:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # this machine's SQLite warns about the WAL bug
            return ContextEngine(
                model_for_window(8_000), store=path, policy=ContextPolicy(background=False)
            )

    first = engine()
    session = first.new_session()
    session.add_user("Fix the crash. Never change the wire format.")
    session.pin("keep the changelog up to date")
    session.pin("drop me")
    assert session.unpin("drop me") == Pin("drop me", "explicit")
    with pytest.raises(UsageError):
        session.pin("   ")
    session_id = session.id
    first.close()

    second = engine()
    try:
        resumed = second.resume(session_id)
        assert resumed.pins == (
            Pin("Never change the wire format.", "extracted"),
            Pin("keep the changelog up to date", "explicit"),
        )
        request = resumed.prepare(system=SYSTEM)
        assert "- keep the changelog up to date" in request.system_text
    finally:
        second.close()


def test_a_state_saved_before_pins_existed_still_loads(make_engine: EngineFactory) -> None:
    engine, _ = make_engine()
    session = engine.new_session()
    session.add_user("Never break the build.")
    session.prepare(system=SYSTEM)
    old = engine.store.load_engine_state(session.id)
    assert old is not None and old.pop("pins")  # as a version before pins saved it
    engine.store.save_engine_state(session.id, old)

    resumed = engine.resume(session.id)
    assert resumed.pins == ()
    assert resumed.usage().calls == session.usage().calls
    assert PINS_HEADER not in resumed.prepare(system=SYSTEM).system_text


# -- the chat's /pin -----------------------------------------------------------------------------


def test_the_chat_pins_lists_and_unpins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / ".git").mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.setenv("CONTEXTFOLD_HOME", str(tmp_path / "home"))
    store = tmp_path / "sessions.db"
    lines = [
        "/pin",
        "/pin keep the API stable",
        "Please never touch the vendored code.",
        "/pin",
        "/unpin 9",
        "/quit",
    ]
    result = CliRunner().invoke(
        app,
        ["chat", "--model", "scripted", "--store", str(store)],
        input="".join(line + "\n" for line in lines),
        env={"NO_COLOR": "1"},
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "No pins." in out
    assert "Pinned: keep the API stable" in out
    listing_ = out.split("you: /pin\n")[-1]
    assert "1. keep the API stable  (explicit)" in listing_
    assert "2. Please never touch the vendored code.  (extracted)" in listing_
    assert "No pin number 9" in out
    with open_store(store) as opened:
        (info,) = opened.list_sessions()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = ContextEngine(model_for_window(8_000), store=store)
    try:
        assert [p.text for p in engine.resume(info.id).pins] == [
            "keep the API stable",
            "Please never touch the vendored code.",
        ]
    finally:
        engine.close()
