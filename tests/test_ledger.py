"""The artifact ledger (issue 19): files, commands, errors and identifiers read from messages,
verbatim, bounded, newest kept, each with the ref its output can be read back with."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import Message, Meta, SummaryPart, ToolCallPart, ToolResultPart
from contextfold.outputs.blobs import blob_info
from contextfold.retention.ledger import (
    LEDGER_HEADER,
    MAX_ITEM_CHARS,
    MAX_ITEMS_PER_KIND,
    MAX_LEDGER_TOKENS,
    Ledger,
    LedgerItem,
    ledger_items,
    output_ref,
    token_budget,
    visible_refs,
)
from contextfold.transcripts import iter_transcripts
from tests.conftest import shared_path


def _call(call_id: str, name: str, **args: object) -> Message:
    return Message.assistant("", [ToolCallPart.from_args(call_id, name, args)])


def _result(call_id: str, name: str, content: str, *, error: bool = False) -> Message:
    return Message.tool(ToolResultPart(call_id, name, content, is_error=error))


def _session() -> list[Message]:
    return [
        Message.user(
            "Fix the crash in from_iso8601; the API runs on localhost:8080 "
            "(session ses_01hx9cabc12)."
        ),
        _call("c1", "Read", file_path="src/parser.py"),
        _result("c1", "Read", "def parse(text):\n    return text.split()\n"),
        _call("c2", "Edit", file_path="src/parser.py", old_string="a", new_string="b"),
        _result("c2", "Edit", "The file src/parser.py has been updated."),
        _call("c3", "Bash", command="pytest -x tests/test_parser.py\necho done"),
        _result(
            "c3",
            "Bash",
            "Traceback (most recent call last):\n"
            '  File "src/parser.py", line 2, in parse\n'
            "IndexError: list index out of range\nexit code 1",
            error=True,
        ),
        _call("c4", "Bash", command="git log -1"),
        _result("c4", "Bash", "commit 3f2a9c1d7e\nSee https://github.com/acme/parser/pull/42."),
    ]


def test_items_are_read_from_tool_calls_outputs_and_text_in_order() -> None:
    items = ledger_items(_session())
    kinds = {(i.kind, i.text) for i in items}
    assert ("file", "src/parser.py") in kinds
    # A command is its first line only.
    assert ("command", "pytest -x tests/test_parser.py") in kinds
    assert ("command", "git log -1") in kinds
    assert any(k == "error" and "IndexError: list index out of range" in t for k, t in kinds)
    assert ("identifier", "localhost:8080") in kinds
    assert ("identifier", "https://github.com/acme/parser/pull/42") in kinds  # no final dot
    assert ("identifier", "3f2a9c1d7e") in kinds
    assert ("identifier", "ses_01hx9cabc12") in kinds
    assert not any(t == "from_iso8601" for _, t in kinds)  # a function name, not an id
    # The same input always gives the same items.
    assert ledger_items(_session()) == items


def test_errors_come_only_from_failed_outputs_and_file_lines_are_not_hosts() -> None:
    messages = [
        _call("c1", "Bash", command="grep -rn TODO src"),
        _result("c1", "Bash", "src/app.py:12: # TODO: error handling is missing\nexit code 0"),
    ]
    items = ledger_items(messages)
    assert [i for i in items if i.kind == "error"] == []
    assert all(i.text != "app.py:12" for i in items)
    texts = [
        i.text
        for i in ledger_items(
            [Message.user("lists.erl:2385 failed; the collector: http://localhost:4318\\")]
        )
    ]
    assert texts == ["http://localhost:4318"]  # a file and line is not a host; no stray backslash


def test_engine_refs_and_secrets_are_never_identifiers() -> None:
    secret = "sk-ant-api03-" + "A" * 90
    messages = [Message.user(f"Key {secret}; an old output is ref_0123456789ab.")]
    texts = [i.text for i in ledger_items(messages) if i.kind == "identifier"]
    assert all("ref_0123456789ab" not in t and "sk-ant" not in t for t in texts)


def test_an_item_has_a_ref_only_when_its_output_is_readable() -> None:
    messages = _session()
    read_ref = blob_info("def parse(text):\n    return text.split()\n", "Read").ref
    unreadable = ledger_items(messages)
    assert all(i.ref is None for i in unreadable)
    readable = ledger_items(messages, readable_refs={read_ref})
    files = [i for i in readable if i.kind == "file" and i.ref is not None]
    assert files and all(i.ref == read_ref for i in files)
    # An output that already carries a ref (offloaded on its way in) keeps it.
    offloaded = [
        _call("c9", "Bash", command="make build"),
        Message.tool(ToolResultPart("c9", "Bash", "preview", ref="ref_aaaaaaaaaaaa")),
    ]
    (command,) = [i for i in ledger_items(offloaded) if i.kind == "command"]
    assert command.ref == "ref_aaaaaaaaaaaa"


def test_visible_refs_are_those_a_view_names() -> None:
    view = [
        Message.tool(ToolResultPart("c1", "Read", "[masked] → read_result ref_111111111111")),
        Message.tool(ToolResultPart("c2", "Bash", "cut", ref="ref_222222222222")),
        Message("user", (SummaryPart("earlier: ref_333333333333"),), meta=Meta(kind="summary")),
    ]
    assert visible_refs(view) == {"ref_111111111111", "ref_222222222222", "ref_333333333333"}


def test_each_kind_keeps_its_newest_items() -> None:
    limit = MAX_ITEMS_PER_KIND["command"]
    ledger = Ledger().merged(LedgerItem("command", f"make step{i}") for i in range(limit + 7))
    commands = [i.text for i in ledger.of_kind("command")]
    assert len(commands) == limit
    assert commands[0] == "make step7" and commands[-1] == f"make step{limit + 6}"


def test_the_whole_ledger_stays_within_its_token_cap() -> None:
    items = [LedgerItem("file", f"src/package_{i}/module_{i}.py") for i in range(40)]
    items += [
        LedgerItem("error", f"ValueError: bad value number {i} " + "x" * 100) for i in range(12)
    ]
    big = Ledger().merged(items)
    assert big.tokens() <= MAX_LEDGER_TOKENS
    small = Ledger().merged(items, max_tokens=token_budget(8_000))
    assert small.tokens() <= token_budget(8_000) < MAX_LEDGER_TOKENS
    # The newest survive the cut.
    assert small.items[-1] == items[-1]
    assert token_budget(0) == MAX_LEDGER_TOKENS


def test_an_item_seen_again_moves_to_the_end_and_keeps_its_ref() -> None:
    first = Ledger().merged(
        [LedgerItem("file", "a.py", "ref_aaaaaaaaaaaa"), LedgerItem("file", "b.py")]
    )
    again = first.merged([LedgerItem("file", "A.py")])
    assert [(i.text, i.ref) for i in again.items] == [("b.py", None), ("A.py", "ref_aaaaaaaaaaaa")]


def test_a_long_item_is_cut_and_the_rendering_groups_by_kind() -> None:
    (item,) = [
        i
        for i in ledger_items([_call("c1", "Bash", command="echo " + "y" * 400)])
        if i.kind == "command"
    ]
    assert len(item.text) == MAX_ITEM_CHARS and item.text.endswith("…")
    ledger = Ledger().merged(
        [LedgerItem("command", "make"), LedgerItem("file", "a.py", "ref_aaaaaaaaaaaa")]
    )
    assert ledger.render().splitlines() == [
        LEDGER_HEADER,
        "Files:",
        "- a.py (ref_aaaaaaaaaaaa)",
        "Commands:",
        "- make",
    ]
    assert Ledger().render() == ""


def test_the_ledger_round_trips_through_its_stored_form() -> None:
    ledger = Ledger().merged(ledger_items(_session()))
    assert Ledger.from_state(ledger.state()) == ledger
    assert Ledger.from_state(None) == Ledger()  # a state saved before ledgers existed
    junk = [
        {"kind": "nope", "text": "x"},
        "junk",
        {"kind": "file", "text": 3},
        {"kind": "file", "text": "ok"},
    ]
    assert Ledger.from_state(junk).items == (LedgerItem("file", "ok"),)


# --------------------------------------------------------------------------------------------------
# The identifier scan reads only the words that can hold one, and finds what the pattern finds
# --------------------------------------------------------------------------------------------------

_PIECES = [
    "http://localhost:8080/x",
    "https://ex.com/a?b=1",
    "localhost:80",
    "10.0.0.1:5432",
    "db.internal:6379",
    "parser.py:35",
    "conf.YML:8080",
    "page.htm:443:",
    "mod.pyx:80",
    "a.b.c.py:12:x:34",
    "1.2.3.4:99",
    ".ts:22",
    "3f2a9c1d7e",
    "deadbeefcafe1234",
    "1234567",
    "abcdefa",
    "123e4567-e89b-12d3-a456-426614174000",
    "ses_01hx9cabc12",
    "cus_NffrFeUfNV2Hib",
    "from_iso8601",
    "x_" + "a1" * 6,
    "word",
    "(",
    ")",
    "'",
    ":",
    "_",
    ":12",
    "é",
    "\u212a",  # the Kelvin sign: a k to a case-insensitive pattern
    "ſ",
    "\u00a0",
    "\t",
    "\n",
    " ",
    "",
]


@pytest.mark.parametrize("ascii_only", [False, True])
def test_identifier_scan_finds_what_the_whole_pattern_finds(ascii_only: bool) -> None:
    from contextfold.retention.ledger import _IDENTIFIER, _identifier_matches

    rng = random.Random(5)
    pieces = [p for p in _PIECES if p.isascii() or not ascii_only]
    for _ in range(3_000):
        # Pieces glued to each other as often as spaced: features straddle word edges.
        text = "".join(rng.choice(pieces) + rng.choice(["", " ", "", "\n"]) for _ in range(12))
        expected = [m.group(0) for m in _IDENTIFIER.finditer(text)]
        assert list(_identifier_matches(text)) == expected, text


@pytest.mark.shared_data
def test_identifier_scan_agrees_on_real_tool_outputs() -> None:
    from contextfold.retention.ledger import _IDENTIFIER, _identifier_matches

    texts = 0
    for item in iter_transcripts(shared_path("trajectories")):
        for transcript in item.walk():
            for message in transcript.messages[:200]:
                for result in message.tool_results:
                    expected = [m.group(0) for m in _IDENTIFIER.finditer(result.content)]
                    assert list(_identifier_matches(result.content)) == expected
                    texts += 1
        if texts > 4_000:
            break
    assert texts > 0


@settings(max_examples=200, deadline=None)
@given(
    contents=st.lists(st.text(max_size=40), min_size=1, max_size=12),
    refs=st.lists(st.sampled_from([None, "ref_0123456789ab"]), min_size=1, max_size=12),
)
def test_an_output_ref_is_its_content_digest_however_often_asked(
    contents: list[str], refs: list[str | None]
) -> None:
    # The digest is kept by the output's text (issue 28): asked again, for the same text or an
    # equal copy, it is what a new digest gives.
    for round_ in range(2):
        for i, content in enumerate(contents):
            ref = refs[i % len(refs)]
            copy = "".join(list(content)) if round_ else content
            result = ToolResultPart(f"c{i}", "bash", copy, ref=ref)
            assert output_ref(result) == (ref or blob_info(content).ref)


def test_identifiers_are_those_read_after_a_scan_for_secrets() -> None:
    """The ledger reads a text's identifiers from ``redact_text(text)``; it first asked
    ``might_hold_secret`` and read a text no rule can match as it was (issue 28: the redactor
    remembers what it redacted, the scan cost two passes). Same identifiers: the redactor gives
    such a text back unchanged."""
    from benchmarks.ordinary_texts import ordinary_texts
    from benchmarks.secret_corpus import secret_samples
    from contextfold.redaction.redactor import might_hold_secret, redact_text

    rng = random.Random(28)
    texts = [s.text for s in secret_samples(seed=28, per_format=3)]
    texts += ordinary_texts()
    texts += [
        "".join(rng.choice(_PIECES) + rng.choice(["", " ", "\n"]) for _ in range(16))
        for _ in range(2_000)
    ]
    # Secrets among identifiers, as a tool output shows them (the whole text is redacted).
    texts += [f"host db.internal:5432 {t} ses_01hx9c7kq2zv8b {t}" for t in texts[:40]]
    clean = [text for text in texts if not might_hold_secret(text)]
    assert len(clean) > 500  # the case the scan short-cut (788 of 2,429)
    for text in clean:
        assert redact_text(text) == text, text
