"""Every file contextfold writes outside its store is redacted and readable only by its owner:
the events log and blob files (the CLI's export and chat history: tests/cli)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextfold import RefNotFoundError
from contextfold.events import JsonlSink, OverflowRecovered, SummarizerFellBack
from contextfold.outputs.intake import FileBlobStore
from contextfold.private_files import open_private

KEY = "sk-proj-Xq3vT8mN2pL5rW9yZ1aB4cD7eF0gH6jK"
PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "-----END OPENSSH PRIVATE KEY-----"
)


def file_mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def wide_umask() -> Iterator[None]:
    """A umask that lets files be created world-readable, as many systems have."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


# -- the events log --------------------------------------------------------------------------------


def test_the_events_log_is_redacted_and_private(tmp_path: Path, wide_umask: None) -> None:
    log = tmp_path / "logs" / "events.jsonl"
    sink = JsonlSink(log)
    sink.emit(
        OverflowRecovered(
            session_id="s1",
            before_tokens=9,
            after_tokens=5,
            provider_message=f"Incorrect API key provided: {KEY}",
        )
    )
    sink.emit(SummarizerFellBack(session_id="s1", error=f"model echoed {PEM}"))

    text = log.read_text(encoding="utf-8")
    assert KEY not in text and "b3BlbnNzaC1rZXktdjEAAAAABG5v" not in text
    events = [json.loads(line) for line in text.splitlines()]
    assert events[0]["provider_message"] == "Incorrect API key provided: [REDACTED:api-key]"
    assert events[1]["error"] == "model echoed [REDACTED:private-key]"
    assert file_mode(log) == 0o600 and file_mode(log.parent) == 0o700


def test_an_events_log_with_nothing_secret_is_written_as_it_was(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    event = SummarizerFellBack(session_id="s1", error="the model wrote noise")
    JsonlSink(log).emit(event)
    assert json.loads(log.read_text(encoding="utf-8")) == event.to_dict()


def test_the_events_log_can_keep_secrets_when_asked(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    JsonlSink(log, redact=False).emit(SummarizerFellBack(error=KEY))
    assert KEY in log.read_text(encoding="utf-8")


def test_a_log_an_older_version_left_world_readable_is_narrowed_before_writing(
    tmp_path: Path,
) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text('{"type":"old"}\n', encoding="utf-8")
    log.chmod(0o644)
    JsonlSink(log).emit(SummarizerFellBack(error="x"))
    assert file_mode(log) == 0o600
    assert len(log.read_text(encoding="utf-8").splitlines()) == 2  # appended, not replaced


def test_open_private_leaves_devices_alone(tmp_path: Path) -> None:
    before = file_mode(Path(os.devnull))
    with open_private(os.devnull, append=False) as fh:
        fh.write("x")
    assert file_mode(Path(os.devnull)) == before


# -- blob files ------------------------------------------------------------------------------------


def test_blob_files_are_redacted_and_private(tmp_path: Path, wide_umask: None) -> None:
    store = FileBlobStore(tmp_path / "blobs")
    content = f"$ cat ~/.ssh/id_ed25519\n{PEM}\n$ env\nOPENAI_API_KEY={KEY}\n"
    info = store.put_blob("ses_1", content, tool_name="bash")

    files = [p for p in (tmp_path / "blobs").rglob("*") if p.is_file()]
    assert len(files) == 1 and file_mode(files[0]) == 0o600 and file_mode(files[0].parent) == 0o700
    raw = files[0].read_bytes()
    assert KEY.encode() not in raw and b"b3BlbnNzaC1rZXktdjEAAAAABG5v" not in raw
    assert store.get_blob("ses_1", info.ref) == raw.decode()
    assert info.size_bytes == len(content.encode())  # the ref and size are the original's
    store.put_blob("ses_1", content)  # the same output again: no collision with its redaction


def test_blob_files_can_keep_secrets_when_asked(tmp_path: Path) -> None:
    store = FileBlobStore(tmp_path, redact=False)
    info = store.put_blob("ses_1", KEY)
    assert store.get_blob("ses_1", info.ref) == KEY


def test_no_session_id_reads_another_sessions_blobs(tmp_path: Path) -> None:
    store = FileBlobStore(tmp_path)
    victim = "../victim session"  # not a plain folder name: hashed
    info = store.put_blob(victim, "the victim's output")
    digest = hashlib.sha256(victim.encode()).hexdigest()
    for attacker in (f"h_{digest}", f"H_{digest}", "h_" + digest.upper()):
        with pytest.raises(RefNotFoundError):
            store.get_blob(attacker, info.ref)
    assert store.get_blob(victim, info.ref) == "the victim's output"


def test_ids_differing_only_in_case_get_separate_folders(tmp_path: Path) -> None:
    # On a case-insensitive file system (macOS, Windows) "Ses_A" and "ses_a" named as they are
    # would be one folder: only lower-case ids name their own.
    store = FileBlobStore(tmp_path)
    info = store.put_blob("ses_a", "lower")
    store.put_blob("Ses_A", "upper")
    with pytest.raises(RefNotFoundError):
        store.get_blob("Ses_A", info.ref)
    digest = hashlib.sha256(b"Ses_A").hexdigest()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["ses_a", f"h_{digest}"])
