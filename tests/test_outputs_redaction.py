"""No cut of a tool output leaves part of a secret in clear: every cut offset is tried.

A cut that drops the ``BEGIN`` line of a PEM key, or keeps half a token, leaves text that no
redactor recognises any more. These tests sweep the limits so that the cut falls at every
position of an output holding a PEM key and a GitHub token, and look for any piece of
:data:`FRAGMENT_CHARS` characters of a key body in what the model sees inline, in the preview of
an offloaded output, in masking placeholders, and in the raw SQLite file.
"""

from __future__ import annotations

import base64
import random
import re
import string
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import Message, ToolCallPart, ToolResultPart
from contextfold.outputs import intake as outputs
from contextfold.outputs.intake import (
    InMemoryBlobStore,
    OutputLimits,
    placeholder_for,
    prepare_tool_output,
    truncate_head_tail,
)
from contextfold.outputs.placeholders import SNIPPET_CHARS
from contextfold.outputs.truncate import MIN_BYTES
from contextfold.store import SQLiteStore, redact_text

FRAGMENT_CHARS = 12
"""Shortest piece of a key body that counts as leaked."""
PEM_BODY_BYTES = 600
"""Random bytes in the fake key (about 13 lines of base64: room for many cut offsets)."""
NO_LIMIT = 10_000_000
"""A line or token limit that never binds, so that only the byte limit places the cut."""

KEY_CHARS_RUN = re.compile(f"[A-Za-z0-9+/]{{{FRAGMENT_CHARS},}}")
"""A run of characters long enough to hold a piece of a key body (base64) or token."""
FILLER_CHARS = string.ascii_lowercase + " .:=-_/"
"""What the lines around the secrets are made of (never a whole key body by chance)."""


@dataclass(frozen=True)
class SecretOutput:
    """A tool output with a PEM key and a GitHub token in it, and the pieces that would leak."""

    text: str
    pieces: dict[str, frozenset[str]]
    """Per secret kind, every run of :data:`FRAGMENT_CHARS` characters of its body."""

    def leaked(self, shown: str) -> set[str]:
        """The secret kinds of which ``shown`` holds a piece."""
        found: set[str] = set()
        for run in KEY_CHARS_RUN.finditer(shown):  # only where a piece could be
            text = run.group()
            for kind, pieces in self.pieces.items():
                if any(text[i : i + FRAGMENT_CHARS] in pieces for i in range(len(text))):
                    found.add(kind)
        return found


def _runs(body_lines: list[str]) -> frozenset[str]:
    return frozenset(
        line[i : i + FRAGMENT_CHARS]
        for line in body_lines
        for i in range(len(line) - FRAGMENT_CHARS + 1)
    )


def secret_output(
    seed: int, filler: list[str], pem_at: int, token_at: int, one_line: bool
) -> SecretOutput:
    """An output made of ``filler`` lines with a fresh fake PEM key and GitHub token inserted
    (random, generated here: no real secret is ever committed). ``one_line`` writes it as one
    JSON line, as a GCP service-account file prints, so that a cut falls inside the line."""
    rng = random.Random(seed)
    body = base64.b64encode(rng.randbytes(PEM_BODY_BYTES)).decode()
    body_lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    token_body = "".join(rng.choices(string.ascii_letters + string.digits, k=36))
    token = "ghp_" + token_body
    begin, end = "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----"
    if one_line:
        key = "\\n".join([begin, *body_lines, end, ""])
        fields = [f'"note{i}": "{line}"' for i, line in enumerate(filler)]
        fields.insert(min(pem_at, len(fields)), f'"private_key": "{key}"')
        fields.insert(min(token_at, len(fields)), f'"token": "{token}"')
        text = "{" + ", ".join(fields) + "}"
    else:
        lines = list(filler)
        lines[min(pem_at, len(lines)) : min(pem_at, len(lines))] = [begin, *body_lines, end]
        lines.insert(min(token_at, len(lines)), f"export GITHUB_TOKEN={token}")
        text = "\n".join([*lines, "exit code: 0"]) + "\n"
    # A run that the filler happens to hold as well proves nothing: leave it out.
    clean = text.replace(token_body, "")
    for line in body_lines:
        clean = clean.replace(line, "")
    pieces = {
        "pem": frozenset(p for p in _runs(body_lines) if p not in clean),
        "github": frozenset(p for p in _runs([token_body]) if p not in clean),
    }
    return SecretOutput(text, pieces)


def result_of(text: str) -> ToolResultPart:
    return ToolResultPart("call_1", "bash", text)


def utf8(text: str) -> int:
    return len(text.encode("utf-8"))


def byte_limits(output: SecretOutput, head_ratio: float) -> Iterator[OutputLimits]:
    """Every byte limit that cuts the output: the cut moves through every line boundary (every
    character of a one-line output)."""
    for max_bytes in range(MIN_BYTES, utf8(output.text)):
        yield OutputLimits(
            max_bytes=max_bytes, max_lines=NO_LIMIT, max_tokens=NO_LIMIT, head_ratio=head_ratio
        )


def inline_cuts(output: SecretOutput, head_ratio: float) -> Iterator[str]:
    """What the model sees inline, for every byte limit, when the engine prepares the output."""
    for limits in byte_limits(output, head_ratio):
        yield prepare_tool_output(
            result_of(output.text), session_id="s", limits=limits
        ).part.content


def head_tail_cuts(output: SecretOutput, head_ratio: float) -> Iterator[str]:
    """What :func:`truncate_head_tail` (which compaction calls too) gives for every byte limit."""
    for limits in byte_limits(output, head_ratio):
        yield truncate_head_tail(output.text, limits).text


def previews(output: SecretOutput, head_ratio: float) -> Iterator[str]:
    """The preview of the offloaded output for every preview size: its head ends, and its tail
    starts, at every character."""
    blobs = InMemoryBlobStore()
    for chars in range(1, len(output.text)):
        limits = OutputLimits(offload_above_bytes=0, preview_chars=chars, head_ratio=head_ratio)
        prepared = prepare_tool_output(
            result_of(output.text), session_id="s", blobs=blobs, limits=limits
        )
        assert prepared.action == "offloaded"
        yield prepared.part.content


def leaking_cuts(output: SecretOutput, cuts: Iterator[str]) -> tuple[Counter[str], int]:
    """How many of ``cuts`` leak each kind of secret, and how many cuts there were."""
    leaks: Counter[str] = Counter()
    total = 0
    for shown in cuts:
        total += 1
        leaks.update(output.leaked(shown))
    return leaks, total


FILLER = st.lists(st.text(FILLER_CHARS, max_size=60), min_size=3, max_size=14)


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    filler=FILLER,
    pem_at=st.integers(0, 14),
    token_at=st.integers(0, 16),
    one_line=st.booleans(),
    head_ratio=st.floats(0.1, 0.9),
)
def test_no_inline_cut_or_preview_leaks_a_piece_of_a_secret(
    seed: int,
    filler: list[str],
    pem_at: int,
    token_at: int,
    one_line: bool,
    head_ratio: float,
) -> None:
    output = secret_output(seed, filler, pem_at, token_at, one_line)
    for sweep in (inline_cuts, head_tail_cuts, previews):
        for shown in sweep(output, head_ratio):
            assert not output.leaked(shown), shown


def test_the_fixed_sweep_leaks_at_no_offset() -> None:
    """The sweep the report counts: one log and one JSON line, every cut and preview size."""
    filler = [f"step {i}: compiling module_{i} ok" for i in range(10)]
    for one_line in (False, True):
        output = secret_output(14, filler, 6, 9, one_line)
        for sweep in (inline_cuts, head_tail_cuts, previews):
            leaks, total = leaking_cuts(output, sweep(output, 0.4))
            assert total > 400
            assert leaks == Counter(), f"{dict(leaks)} of {total} cuts leaked"


@pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")
def test_the_store_holds_no_piece_of_a_secret_after_every_cut(tmp_path: Path) -> None:
    """Every cut and preview of the sweep persisted through a real SQLite store (which redacts
    what it is given): the raw database file holds no piece of either secret."""
    output = secret_output(7, [f"line {i} of the build log" for i in range(8)], 4, 7, False)
    path = tmp_path / "sessions.db"
    store = SQLiteStore(path)
    session = store.create_session().id
    for max_bytes in range(MIN_BYTES, utf8(output.text)):
        limits = OutputLimits(max_bytes=max_bytes, max_lines=NO_LIMIT, max_tokens=NO_LIMIT)
        prepared = prepare_tool_output(
            result_of(output.text), session_id=session, blobs=store, limits=limits
        )
        store.append_messages(session, [Message.tool(prepared.part)])
    for chars in range(1, len(output.text)):
        limits = OutputLimits(offload_above_bytes=0, preview_chars=chars)
        prepared = prepare_tool_output(
            result_of(output.text), session_id=session, blobs=store, limits=limits
        )
        store.append_messages(session, [Message.tool(prepared.part)])
    store.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir()).decode("latin-1")
    assert "bash" in raw  # the messages are there
    for kind, pieces in output.pieces.items():
        assert not any(piece in raw for piece in pieces), kind


def test_a_masking_placeholder_never_quotes_part_of_a_secret() -> None:
    """Placeholders quote a line cut to a few dozen characters: a token anywhere along that
    line, and the last line of ``head -5 id_rsa``, must not leave a piece behind."""
    output = secret_output(3, ["ok"], 1, 0, False)
    token = next(line for line in output.text.splitlines() if "ghp_" in line).split("=")[1]
    key_lines = output.text.splitlines()[2:8]  # BEGIN and the first body lines
    shown: list[str] = []
    for offset in range(SNIPPET_CHARS + len(token)):  # the token slides across the cut
        line = "x" * offset + " " + token
        read = ToolResultPart("c", "read_file", line + "\nmore\n")
        shown.append(placeholder_for(read, ToolCallPart.from_args("c", "read_file", {}), "r"))
        run = ToolResultPart("c", "bash", "building\n" + line + "\n")
        call = ToolCallPart.from_args("c", "bash", {"command": "x" * offset + "; echo " + token})
        shown.append(placeholder_for(run, call, "r"))
    head = ToolResultPart("c", "bash", "\n".join(key_lines) + "\n")
    shown.append(placeholder_for(head, ToolCallPart.from_args("c", "bash", {"command": "x"}), "r"))
    for text in shown:
        assert not output.leaked(text), text


def test_an_output_kept_whole_reaches_the_model_as_it_is() -> None:
    """Only a cut needs redacting first: a whole output is redacted by the store as it is
    persisted, and the model may need what it printed (the in-memory view is untouched)."""
    output = secret_output(5, ["ok"], 1, 0, False)
    prepared = prepare_tool_output(result_of(output.text), session_id="s")
    assert prepared.action == "kept" and prepared.part.content == output.text


def test_the_full_output_goes_to_the_blob_store_as_it_is() -> None:
    """The blob store gets the full text (a persistent one redacts it whole); the ref's
    preview is made from the redacted text."""
    output = secret_output(6, [f"row {i}" for i in range(5)], 2, 4, False)
    blobs = InMemoryBlobStore()
    limits = OutputLimits(offload_above_bytes=0)
    prepared = prepare_tool_output(
        result_of(output.text), session_id="s", blobs=blobs, limits=limits
    )
    assert prepared.ref is not None and blobs.get_blob("s", prepared.ref) == output.text
    assert "[REDACTED:private-key]" in prepared.part.content
    assert not output.leaked(prepared.part.content)


def test_a_cut_whose_redacted_text_fits_comes_back_whole_and_says_so() -> None:
    """An output over the limits only because of a key is not cut at all once it is redacted."""
    output = secret_output(8, ["make: ok"], 1, 0, False)
    limits = OutputLimits(max_bytes=MIN_BYTES, max_lines=NO_LIMIT, max_tokens=NO_LIMIT)
    assert utf8(output.text) > limits.max_bytes
    cut = truncate_head_tail(output.text, limits)
    assert (cut.truncated, cut.redacted, cut.exceeded) == (False, True, ("bytes",))
    assert "[REDACTED:private-key]" in cut.text and "make: ok" in cut.text
    assert not output.leaked(cut.text)


SMALL_MARGIN = 2048
"""A redaction margin small enough that a short test output is 'long' for its preview."""


def test_a_long_output_previews_from_redacted_ends_at_every_offset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only the two ends of a long output are redacted for its preview: with the secrets at
    both ends, no preview size leaves a piece of them (the margin covers the whole key)."""
    redacted_sizes: list[int] = []

    def redact_and_record(text: str) -> str:
        redacted_sizes.append(len(text))
        return redact_text(text)

    monkeypatch.setattr(outputs, "PREVIEW_REDACTION_MARGIN", SMALL_MARGIN)
    monkeypatch.setattr(outputs, "redact_text", redact_and_record)
    output = secret_output(9, ["start"], 1, 0, False)
    middle = "".join(f"middle line {i}\n" for i in range(800))
    text = output.text + middle + output.text
    blobs = InMemoryBlobStore()
    for chars in range(1, len(output.text) + 1):
        limits = OutputLimits(offload_above_bytes=0, preview_chars=chars)
        preview = prepare_tool_output(result_of(text), session_id="s", blobs=blobs, limits=limits)
        assert not output.leaked(preview.part.content), preview.part.content
    assert max(redacted_sizes) < len(text) / 2  # only the ends were redacted, every time
