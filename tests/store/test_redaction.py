"""Secrets never reach the database: the redactor, and the stores that apply it."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextfold.edits import SummarizeEdit
from contextfold.messages import (
    Message,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from contextfold.store import SessionStore, redact_json, redact_text

from .conftest import StoreTarget

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n"
    "-----END RSA PRIVATE KEY-----"
)
SECRETS = {
    "openai": "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH",
    "openai-project": "sk-proj-Ab3_dEf-GhIjKlMnOpQrStUvWx-yz0123456789",
    "anthropic": "sk-ant-api03-AbCdEf0123456789_GhIjKlMnOpQr-stuvwx",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "aws-session": "ASIAY34FZKBOKMUTVV7A",
    "github": "ghp_1234567890abcdefghijklmnopqrstuvwxyz",
    "github-oauth": "gho_1234567890abcdefghijklmnopqrstuvwxyz",
    "github-pat": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "slack": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "google": "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "pem": PEM,
}


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_each_known_secret_shape_is_redacted(kind: str) -> None:
    secret = SECRETS[kind]
    redacted = redact_text(f"config: {secret} (do not share)")

    assert secret not in redacted
    assert "[REDACTED:" in redacted
    assert redacted.startswith("config: ") and redacted.endswith(" (do not share)")


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc123", "Authorization: Bearer "),
        ("curl -H 'authorization: token 0123456789abcdef'", "authorization: token "),
        ('{"Authorization": "Basic dXNlcjpwYXNzd29yZA=="}', '{"Authorization": "Basic '),
        ("export TOKEN=x; curl -H 'Bearer abcdef0123456789xyz'", "Bearer "),
    ],
)
def test_header_credentials_are_redacted_and_the_header_kept(text: str, kept: str) -> None:
    redacted = redact_text(text)
    assert kept in redacted
    assert "[REDACTED:" in redacted
    assert not any(token in redacted for token in ("abc123", "0123456789abcdef", "dXNlcjp"))


def test_a_truncated_private_key_is_still_redacted() -> None:
    head = PEM[:80]
    assert "MIIEow" not in redact_text(f"$ cat id_rsa\n{head}")


@pytest.mark.parametrize(
    "text",
    [
        "pip install scikit-learn; sk-learn-model-selection-utilities-ok",
        "disk-usage-report-2024-with-numbers-1234567",
        "task-0123456789abcdefghijklmnop",
        "the bearer of bad news, the bearer instruments",
        "authorization: required before deploy",
        "AKIA is the prefix of AWS access key ids",
        "ref_0123456789ab and msg_660d1ca9a44f6cfd63e1d70",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_text(text) == text


def test_json_inside_a_string_stays_valid_json() -> None:
    arguments = json.dumps(
        {"cmd": f"curl -H \"Authorization: Bearer {SECRETS['github']}\" -d '{SECRETS['openai']}'"}
    )
    redacted = redact_text(arguments)

    assert SECRETS["github"] not in redacted
    assert SECRETS["openai"] not in redacted
    assert json.loads(redacted)["cmd"].startswith("curl -H")


@given(st.text())
def test_redaction_is_idempotent(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
        max_leaves=10,
    )
)
def test_redacting_json_keeps_its_shape(value: object) -> None:
    redacted = redact_json(value)
    assert json.loads(json.dumps(redacted)) == redacted
    if not isinstance(value, dict | list | str):
        assert redacted == value


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text()
    | st.sampled_from([*SECRETS.values(), f"TOKEN={SECRETS['github']}", "x" * 1_200 + PEM]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.text() | st.sampled_from(["api_key", "DB_PASSWORD", "note"]), inner, max_size=3
        )
    ),
    max_leaves=10,
)


def _redacted_copy(value: object, key_kind: str | None = None) -> object:
    """The walk as it was before it kept unchanged values: a copy of everything."""
    from contextfold.redaction.redactor import marker
    from contextfold.redaction.rules import name_kind, value_is_secret

    if isinstance(value, str):
        if key_kind is not None and value_is_secret(value, key_kind, quoted=True, env_style=False):
            return marker(key_kind)
        return redact_text(value)
    if isinstance(value, dict):
        return {
            (redact_text(k) if isinstance(k, str) else k): _redacted_copy(
                v, name_kind(k) if isinstance(k, str) else None
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_redacted_copy(v) for v in value]
    return value


@given(_JSON_VALUES)
def test_redacting_json_keeps_what_holds_no_secret_and_copies_the_rest_as_before(
    value: object,
) -> None:
    redacted = redact_json(value)
    assert json.dumps(redacted) == json.dumps(_redacted_copy(value))
    if redacted is value:  # kept as it was only when redaction changes nothing in it
        assert json.dumps(_redacted_copy(value)) == json.dumps(value)


@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["ledger", "facts", "turn", "api_key", "ñote"]),
            _JSON_VALUES,
            max_size=5,
        ),
        min_size=1,
        max_size=4,
    )
)
def test_a_state_encoded_part_by_part_is_the_whole_state_encoded(
    states: list[dict[str, object]],
) -> None:
    from contextfold.store._codec import EncodedStates, encode_json, state_text

    encoded = EncodedStates(redact=True)
    for state in states:  # one save after another: unchanged parts come from the memory
        text = state_text(encoded.encode("s1", state).items())
        assert json.loads(text) == json.loads(encode_json(state, redact=True))
        assert text == encode_json(state, redact=True) or "\\ud" in text


def test_a_list_part_saved_again_redacts_only_its_new_items_and_stores_the_same() -> None:
    from contextfold.store._codec import EncodedStates, encode_json, state_text

    def encode(state: dict[str, object]) -> str:
        return state_text(encoded.encode("s1", state).items())

    encoded = EncodedStates(redact=True)
    facts = [["path", f"src/module_{i}.py"] for i in range(50)]
    ledger = [{"kind": "command", "text": f"pytest tests/t{i}.py", "ref": None} for i in range(9)]
    first = {"facts": facts, "ledger": ledger, "turn": 1}
    assert encode(first) == encode_json(first, redact=True)
    secret = f"export GITHUB_TOKEN={SECRETS['github']}"
    # Reordered and grown, with items holding a secret, one of them nested (redacted whole
    # every time, not remembered).
    later = {
        "facts": [["command", secret], *reversed(facts), ["kind", "path"], [["nested", secret]]],
        "ledger": [*ledger[3:], {"kind": "command", "text": secret, "ref": None}],
        "turn": 2,
    }
    text = encode(later)
    assert text == encode_json(later, redact=True)
    assert SECRETS["github"] not in text
    assert encode(first) == encode_json(first, redact=True)


def test_a_tuple_part_given_again_is_not_encoded_again_and_a_list_part_always_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from contextfold.store import _codec
    from contextfold.store._codec import EncodedStates, encode_json, state_text

    encoded = EncodedStates(redact=True)
    secret = f"export GITHUB_TOKEN={SECRETS['github']}"
    facts = (*(("path", f"src/module_{i}.py") for i in range(50)), ("command", secret))
    ledger = [{"kind": "command", "text": "pytest", "ref": None}]
    state: dict[str, object] = {"facts": facts, "ledger": ledger, "fixed_text": "system " * 99}
    as_lists = {**state, "facts": [list(fact) for fact in facts]}
    assert state_text(encoded.encode("s1", state).items()) == encode_json(as_lists, redact=True)

    dumped: list[object] = []
    real_dumps = _codec.dumps
    monkeypatch.setattr(_codec, "dumps", lambda value: dumped.append(value) or real_dumps(value))
    ledger.append({"kind": "command", "text": secret, "ref": None})  # changed in place
    text = state_text(encoded.encode("s1", state).items())
    # The tuple and the string, the very objects encoded before, are not encoded again; the
    # list is, and its change is stored (redacted).
    assert not any(value is facts or value is state["fixed_text"] for value in dumped)
    assert dumped[0] is ledger
    assert text == encode_json({**as_lists, "ledger": ledger}, redact=True)
    assert SECRETS["github"] not in text
    # An equal tuple that is another object is encoded and compared, and gives the same text.
    dumped.clear()
    again = state_text(encoded.encode("s1", {**state, "facts": tuple(facts)}).items())
    assert again == text


def test_tuple_items_of_a_part_are_remembered_as_clean_like_list_items(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The state's facts are a tuple of ``(kind, text)`` tuples, a new tuple at each
    compaction: only the items it did not hold before are redacted again."""
    from contextfold.store import _codec
    from contextfold.store._codec import EncodedStates, encode_json, state_text

    encoded = EncodedStates(redact=True)
    secret = f"export GITHUB_TOKEN={SECRETS['github']}"
    facts = tuple(("path", f"src/module_{i}.py") for i in range(50))
    state_text(encoded.encode("s1", {"facts": facts}).items())
    walked: list[object] = []
    real = _codec.redact_json
    monkeypatch.setattr(
        _codec, "redact_json", lambda value, *a: walked.append(value) or real(value, *a)
    )
    grown = (("command", secret), *reversed(facts), ("path", "src/new.py"))
    text = state_text(encoded.encode("s1", {"facts": grown}).items())
    assert walked == [("command", secret), ("path", "src/new.py")]
    assert text == encode_json({"facts": grown}, redact=True)
    assert SECRETS["github"] not in text


def test_a_tuple_without_a_secret_is_returned_itself_and_one_with_a_secret_as_a_list() -> None:
    clean = ("path", "src/module.py", ("nested", "x" * 40))
    assert redact_json(clean) is clean
    leaky = ("command", f"export GITHUB_TOKEN={SECRETS['github']}")
    redacted = redact_json(leaky)
    assert isinstance(redacted, list) and SECRETS["github"] not in redacted[1]


# -- in the stores (both backends) -----------------------------------------------------------------


def _leaky_session(store: SessionStore) -> tuple[str, list[Message]]:
    sid = store.create_session(
        title=f"debug {SECRETS['openai']}", metadata={"env": {"KEY": SECRETS["aws"]}}
    ).id
    arguments = json.dumps({"cmd": f"curl -H 'Authorization: Bearer {SECRETS['github']}' x"})
    messages = [
        Message.user(f"my key is {SECRETS['anthropic']}", id="u1"),
        Message(
            "assistant",
            (ThinkingPart(f"they pasted {SECRETS['slack']}"), ToolCallPart("c1", "sh", arguments)),
            id="a1",
        ),
        Message.tool(ToolResultPart("c1", "sh", f"$ cat key.pem\n{PEM}"), id="t1"),
    ]
    store.append_messages(sid, messages)
    summary = Message("user", (SummaryPart(f"user key {SECRETS['google']}"),), id="s1")
    store.append_edit(sid, SummarizeEdit("u1", "a1", summary))
    store.append_event(sid, "note", {"env": [f"TOKEN={SECRETS['github-pat']}"]})
    store.put_blob(sid, f"AWS_SESSION={SECRETS['aws-session']}")
    live = store.load_view(sid)
    store.save_snapshot(sid, [*messages, summary], 9, last_seq=live.last_seq, last_edit=1)
    return sid, messages


def test_nothing_persisted_holds_a_secret(target: StoreTarget) -> None:
    store = target.open()
    sid, messages = _leaky_session(store)
    before = [m.to_dict() for m in messages]

    out = io.StringIO()
    store.export_jsonl(sid, out)
    snapshot = store.load_snapshot(sid)
    assert snapshot is not None
    persisted = out.getvalue() + json.dumps([m.to_dict() for m in snapshot.view])

    for secret in SECRETS.values():
        assert secret not in persisted
        assert secret.splitlines()[1 if "\n" in secret else 0] not in persisted
    assert [m.to_dict() for m in messages] == before  # the caller's objects are untouched
    stored_call = store.get_message(sid, "a1").tool_calls[0]
    assert stored_call.arguments_valid  # still JSON after redaction
    assert "[REDACTED:" in stored_call.arguments


def test_redaction_can_be_turned_off(target: StoreTarget) -> None:
    store = target.open(redact=False)
    sid, messages = _leaky_session(store)

    assert [m for _, m in store.iter_messages(sid)] == messages
    assert SECRETS["aws-session"] in store.get_blob(
        sid, next(iter(target.raw("SELECT ref FROM blobs")))[0]
    )


def test_text_without_secrets_is_stored_unchanged(store: SessionStore) -> None:
    sid = store.create_session().id
    sent = [Message.user("please run the tests", id="u1"), Message("assistant", (TextPart("ok"),))]
    store.append_messages(sid, sent)
    assert [m for _, m in store.iter_messages(sid)] == sent


def test_a_snapshot_reuses_what_was_encoded_and_still_redacts_what_is_new(
    target: StoreTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = target.open()
    sid = store.create_session().id
    messages = [Message.user(f"step {i}", id=f"u{i}") for i in range(50)]
    store.append_messages(sid, messages)
    summary = Message("user", (SummaryPart(f"the key was {SECRETS['openai']}"),), id="s1")
    store.append_edit(sid, SummarizeEdit("u0", "u9", summary))

    encoded: list[str] = []
    to_dict = Message.to_dict

    def counting(message: Message) -> dict[str, object]:
        encoded.append(message.id)
        return to_dict(message)

    monkeypatch.setattr(Message, "to_dict", counting)
    view = [summary, *messages[10:]]
    snapshot = store.save_snapshot(sid, view, 40, last_seq=50, last_edit=1)

    # The 40 messages appended before were not encoded again, nor the summary its edit holds.
    assert encoded == []
    assert SECRETS["openai"] not in snapshot.view[0].text  # what is returned is what is stored
    stored = store.load_snapshot(sid)
    assert stored is not None and stored.view == snapshot.view
    assert list(stored.view[1:]) == messages[10:]
    assert SECRETS["openai"] not in json.dumps([m.to_dict() for m in stored.view])


@pytest.mark.parametrize("follow", [0, 2])
@pytest.mark.parametrize("odd", ["", "\ud800", "é"])
def test_a_summary_edit_is_stored_as_its_whole_json_redacted(follow: int, odd: str) -> None:
    """The edit's messages are encoded one by one (and remembered for the snapshot), their
    texts put in place in the edit's: what is stored is the whole edit's JSON, redacted
    (character for character unless a lone surrogate made either escape non-ASCII text)."""
    from contextfold.edits import edit_to_dict
    from contextfold.store._codec import EncodedMessages, encode_json

    summary = Message("user", (SummaryPart(f"the key {SECRETS['openai']} {odd}"),), id="s1")
    restored = tuple(
        Message.user(f"file {i}: password={SECRETS['github']}{odd}", id=f"f{i}")
        for i in range(follow)
    )
    edit = SummarizeEdit("u0", "u9", summary, follow=restored)
    memory = EncodedMessages(redact=True)

    text = memory.encode_edit("s1", edit)

    whole = encode_json(edit_to_dict(edit), redact=True)
    assert json.loads(text) == json.loads(whole)
    if "\ud800" not in odd:
        assert text == whole
    assert SECRETS["openai"] not in text and SECRETS["github"] not in text
    assert memory.encode("s1", summary)[0] in text  # the snapshot finds it encoded


def test_the_encoding_memory_follows_the_view_and_is_bounded() -> None:
    from contextfold.store._codec import EncodedMessages

    memory = EncodedMessages(redact=True, max_chars_per_session=2_000, max_chars=4_000)
    messages = [Message.user("x" * 300, id=f"u{i}") for i in range(20)]
    for message in messages:
        text, redacted = memory.encode("s1", message)
        assert json.loads(text) == message.to_dict() and not redacted
    entries = memory._sessions["s1"]
    assert entries.chars <= 2_000 and len(entries.items) < len(messages)  # a session that
    # never compacts is capped; after a snapshot only the view it saved is remembered:
    memory.keep_only("s1", messages[-2:])
    assert [m for m, _, _ in entries.items.values()] == messages[-2:]
    for session in ("s2", "s3"):
        for message in messages[:6]:
            memory.encode(session, message)
    assert memory._chars <= 4_000
    assert list(memory._sessions) == ["s2", "s3"]  # the least recently used session went
    memory.forget("s2")
    assert list(memory._sessions) == ["s3"]
    assert memory._chars == memory._sessions["s3"].chars


def test_the_model_name_a_blob_tool_name_and_an_event_type_are_redacted(
    target: StoreTarget,
) -> None:
    store = target.open()
    sid = store.create_session(model=f"proxy/gpt-4o?key {SECRETS['google']}").id
    store.put_blob(sid, "output", tool_name=f"fetch {SECRETS['github']}")
    store.append_event(sid, f"custom {SECRETS['github']}", {})

    stored = [
        *target.raw("SELECT model FROM sessions"),
        *target.raw("SELECT tool_name FROM blobs"),
        *target.raw("SELECT event_type FROM events"),
    ]
    assert len(stored) == 3
    for (value,) in stored:
        assert "[REDACTED:" in value
        assert SECRETS["google"] not in value and SECRETS["github"] not in value


def test_an_export_redacts_rows_written_without_redaction(target: StoreTarget) -> None:
    # Rows an older version wrote (or a store opened with redact=False) still hold secrets;
    # an export from a redacting store does not pass them on.
    sid, _ = _leaky_session(target.open(redact=False))
    out = io.StringIO()
    lines = target.open().export_jsonl(sid, out)

    exported = out.getvalue()
    assert lines == len(exported.splitlines()) > 5
    for line in exported.splitlines():
        json.loads(line)
    for secret in SECRETS.values():
        assert secret not in exported
        assert secret.splitlines()[1 if "\n" in secret else 0] not in exported
