"""The redactor on the generated corpus: every secret format goes, ordinary text stays, JSON
inside strings stays valid, and redacting twice changes nothing."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.ordinary_texts import ORDINARY_COUNT, ordinary_texts
from benchmarks.secret_corpus import FORMATS, SecretSample, leaks, secret_samples
from contextfold.redaction import redactor
from contextfold.redaction.redactor import (
    might_hold_secret,
    numbers_only,
    redact_json,
    redact_text,
)
from contextfold.redaction.rules import name_kind, value_is_secret

PER_FORMAT = 4
SAMPLES = secret_samples(seed=1414, per_format=PER_FORMAT)
BY_FORMAT = {name: [s for s in SAMPLES if s.format == name] for name in FORMATS}


def _leaked(sample: SecretSample, redacted: str) -> list[str]:
    return [piece for s in sample.secrets if (piece := leaks(s, redacted)) is not None]


def test_the_corpus_has_the_formats_the_issue_lists() -> None:
    assert len(FORMATS) >= 60
    for name in (
        "aws-credentials-file",
        "postgresql-url",
        "mysql-url",
        "mongodb-url",
        "basic-auth-url",
        "env-password",
        "env-secret",
        "env-token",
        "env-key",
        "stripe-secret-key",
        "stripe-restricted-key",
        "gitlab-pat",
        "huggingface-token",
        "npm-token",
        "sendgrid-key",
        "twilio-api-key",
        "azure-storage-connection-string",
        "slack-bot-token",
        "github-fine-grained-pat",
        "openai-project-key",
        "anthropic-api-key",
        "google-api-key",
        "jwt",
        "pem-rsa-private-key",
        "pem-begin-line-cut",
        "gcp-service-account-json",
    ):
        assert name in FORMATS
    for prefix in ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"):
        assert any(prefix in s.text for s in SAMPLES)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_secret_format_is_redacted(name: str) -> None:
    for sample in BY_FORMAT[name]:
        redacted = redact_text(sample.text)
        assert _leaked(sample, redacted) == [], redacted
        assert "[REDACTED:" in redacted


def test_ordinary_texts_are_left_alone() -> None:
    texts = ordinary_texts(seed=1414)
    assert len(texts) == ORDINARY_COUNT
    changed = [text for text in texts if redact_text(text) != text]
    assert changed == []


@pytest.mark.parametrize(
    "text",
    [
        "SECRET_KEY='test-secret-key',",  # Django test settings, everywhere in SWE-bench runs
        "PASS: 127.0.0.1:8000 -> 127.0.0.1:8000",
        'TIMESTAMP="$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)"',
        "many=False, pass_original=False):",
        "Key type: Const, Key: Const.str(value='C',",
        "password = (sensitive value)",
        "API_TOKEN = settings.API_TOKEN",
        "PWD=/home/dev/project",
        "cache hit key=user:178:profile ttl=300",
        "send it as `Authorization: Bearer <token>`",
        "postgresql://user:password@localhost:5432/mydb",
        "GITHUB_TOKEN=${GITHUB_TOKEN}",
        "user = authenticate(username=name, password=password)",
        "if user.password_hash and check_password(raw, user.password_hash):",
        "max_tokens: 4096, prompt_tokens=1234",
    ],
)
def test_placeholders_code_and_prose_are_left_alone(text: str) -> None:
    assert redact_text(text) == text


def test_redaction_is_idempotent_on_the_corpus() -> None:
    for sample in SAMPLES:
        once = redact_text(sample.text)
        assert redact_text(once) == once


def test_json_inside_a_string_stays_valid_json_without_the_secret() -> None:
    for sample in SAMPLES:
        arguments = json.dumps({"command": f"echo start\n{sample.text}\necho end"})
        redacted = redact_text(arguments)
        decoded = json.loads(redacted)["command"]  # still JSON
        assert _leaked(sample, decoded) == [], (sample.format, decoded)


def test_the_prefilter_on_json_text_never_hides_a_secret() -> None:
    # The store checks a message's JSON text before walking it: every secret must show there.
    for sample in SAMPLES:
        assert might_hold_secret(json.dumps(sample.text)), sample.format
        assert might_hold_secret(json.dumps(sample.text, ensure_ascii=True)), sample.format


def test_a_json_value_whose_key_names_a_credential_is_redacted_whole() -> None:
    value = {
        "env": {"DB_PASSWORD": "hunter2 horse", "API_TOKEN": "k3J9sQ2mX8pL4vN7rT1wZ5yB"},
        "token_count": "12",
        "name": "hunter2 horse",
    }
    redacted = redact_json(value, json.dumps(value))
    assert redacted["env"] == {
        "DB_PASSWORD": "[REDACTED:password]",
        "API_TOKEN": "[REDACTED:token]",
    }
    assert redacted["token_count"] == "12" and redacted["name"] == "hunter2 horse"


def test_keys_are_redacted_too() -> None:
    token = BY_FORMAT["github-pat-classic"][0].secrets[0].value
    assert token not in json.dumps(redact_json({token: 1}))


_PIECES = [s.text for s in SAMPLES[:: PER_FORMAT * 3]] + ordinary_texts(seed=7)[:10]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(_PIECES)
        | st.text(alphabet=st.sampled_from(" \n\\\"'=:-_/.aA0[]"), max_size=8),
        max_size=6,
    )
)
def test_redaction_is_idempotent_on_secrets_mixed_with_noise(parts: list[str]) -> None:
    text = "".join(parts)
    once = redact_text(text)
    assert redact_text(once) == once


_FILLER = "ordinary build output line, nothing to see here\n" * 30  # past CACHED_TEXT_CHARS


def test_long_texts_remembered_redact_as_the_full_scan_does() -> None:
    # Long texts are redacted once and remembered by content: a second redaction of the same
    # text (the same object, or an equal one built again) gives what the full scan gives, and a
    # secret never comes back out of the memory.
    for sample in SAMPLES:
        text = _FILLER + sample.text + "\n" + _FILLER
        assert len(text) > redactor.CACHED_TEXT_CHARS
        full = redactor._redact(text)
        assert redact_text(text) == full
        assert redact_text(text) == full
        again = "".join([_FILLER, sample.text, "\n", _FILLER])
        assert again is not text
        assert redact_text(again) == full
        assert _leaked(sample, redact_text(again)) == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=4), st.integers(0, 3))
def test_remembered_long_texts_equal_the_full_scan(parts: list[str], repeat: int) -> None:
    text = _FILLER * (1 + repeat) + "".join(parts)
    full = redactor._redact(text)
    assert redact_text(text) == full
    assert redact_text("".join([_FILLER * (1 + repeat), *parts])) == full


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(_PIECES)
        | st.text(alphabet=st.sampled_from(" \n\\\"'=:-_/.aAkKeEyYtTo0[]"), max_size=12)
        | st.text(max_size=12),
        max_size=4,
    )
)
def test_short_texts_redact_as_the_full_scan_does(parts: list[str]) -> None:
    # A short text no rule can start in is returned without the scan: the same text.
    text = "".join(parts)[: redactor.CACHED_TEXT_CHARS]
    assert redact_text(text) == (redactor._redact(text) if len(text) >= 8 else text)


def _plain_redact_json(value: Any, key_kind: str | None = None) -> Any:
    """What :func:`redact_json` means, spelled out without its shortcuts: every string and key
    redacted, a string under a key naming a credential replaced whole when it is one."""
    if isinstance(value, str):
        if key_kind is not None and value_is_secret(value, key_kind, quoted=True, env_style=False):
            return redactor.marker(key_kind)
        return redact_text(value)
    if isinstance(value, list | tuple):
        return [_plain_redact_json(item) for item in value]
    if isinstance(value, Mapping):
        return {
            (redact_text(k) if isinstance(k, str) else k): _plain_redact_json(
                v, name_kind(k) if isinstance(k, str) else None
            )
            for k, v in value.items()
        }
    return value


_KEYS = st.sampled_from(
    ["content", "text", "api_key", "DB_PASSWORD", "token", "max_tokens", "auth", "id", "k"]
) | st.sampled_from(_PIECES)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.sampled_from(_PIECES)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(_KEYS, inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(_JSON, _KEYS)
def test_redact_json_equals_the_plain_walk_and_keeps_what_it_leaves_alone(
    value: Any, key: str
) -> None:
    # The walk takes shortcuts for speed (exact types first, cached keys, scalars passed over):
    # it must give what the plain walk gives, and the value itself (not a copy) when that is
    # the same JSON, which the store relies on to keep the JSON text it has already.
    for given_value in (value, {key: value}):
        redacted = redact_json(given_value)
        plain = _plain_redact_json(given_value)
        assert json.dumps(redacted) == json.dumps(plain)
        assert (redacted is given_value) == (json.dumps(plain) == json.dumps(given_value))


_NUMBERS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(_KEYS, inner, max_size=4)
    ),
    max_leaves=12,
)


def _keys(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [*value, *(k for item in value.values() for k in _keys(item))]
    if isinstance(value, list | tuple):
        return [k for item in value for k in _keys(item)]
    return []


@settings(max_examples=300, deadline=None)
@given(_NUMBERS | _JSON)
def test_numbers_only_is_what_redaction_leaves_alone_without_reading_text(value: Any) -> None:
    # The store skips redaction of a value this check passes (a state's usage figures, a token
    # report): redaction must give the value itself, as the plain walk does. Values of numbers
    # pass it exactly when redaction changes none of their keys (some keys here are secrets).
    numbers = numbers_only(value)
    if numbers:
        assert redact_json(value) is value
        assert json.dumps(_plain_redact_json(value)) == json.dumps(value)
    keys = _keys(value)
    if any(isinstance(leaf, str) for leaf in _leaves(value)):
        assert not numbers
    elif all(len(key) <= redactor.CACHED_TEXT_CHARS for key in keys):  # longer: not checked
        assert numbers == all(redact_text(key) == key for key in keys)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list | tuple):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def test_numbers_only_on_the_values_the_store_sees() -> None:
    usage = {"calls": 3, "total": {"input_tokens": 900, "cost": 0.25}, "growth": [1, 2, 3]}
    assert numbers_only(usage) and numbers_only(7) and numbers_only(None) and numbers_only([])
    assert not numbers_only({"anchor": {"ids_digest": "1e89c8"}})  # text
    assert not numbers_only({1: 2})  # a key JSON writes as text
    secret_key = next(p for p in _PIECES if redact_text(p) != p and len(p) < 1_000)
    assert not numbers_only({"last_used": {secret_key: 1}})  # a key redaction changes
