"""Tool outputs: head+tail truncation, offloading to blob stores, masking placeholders."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold import ConfigError, RefNotFoundError
from contextfold.events import ComponentDegraded, OutputOffloaded, OutputTruncated
from contextfold.messages import ToolCallPart, ToolResultPart
from contextfold.outputs.blobs import REF_PATTERN
from contextfold.outputs.error_lines import MAX_ERROR_CHARS
from contextfold.outputs.intake import (
    PLACEHOLDER_MAX_CHARS,
    BlobStore,
    FileBlobStore,
    InMemoryBlobStore,
    OutputLimits,
    OutputPolicy,
    exit_code,
    placeholder_for,
    prepare_tool_output,
    tool_kind,
    truncate_head_tail,
)
from contextfold.outputs.placeholders import PLACEHOLDER_ERROR_CHARS
from contextfold.tokens.counters import TiktokenCounter

MARKER = re.compile(r"\[… (\d+) of (\d+) lines \((\d+) bytes\) omitted …\]")
CLUSTER = regex.compile(r"\X", regex.DOTALL)
LINE_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\n")


class WordCounter:
    """A token counter that is not additive: words and punctuation, roughly as tokenizers do."""

    def count_text(self, text: str) -> int:
        return len(re.findall(r"\w+|[^\w\s]", text)) + text.count("\n")


def utf8(text: str) -> int:
    return len(text.encode("utf-8"))


def lines_of(text: str) -> int:
    return text.count("\n") + (0 if not text or text.endswith("\n") else 1)


def boundaries(text: str) -> set[int]:
    return {0, *(m.end() for m in CLUSTER.finditer(text))}


def split_result(result: str) -> tuple[str, str, re.Match[str]]:
    """The kept head and tail of a cut output, and its marker."""
    marker = MARKER.search(result)
    assert marker is not None, result
    header_end = result.index("\n\n") + 2
    head = result[header_end : marker.start()]
    tail = result[marker.end() + 1 :] if marker.end() < len(result) else ""
    return head, tail, marker


def assert_fits(text: str, limits: OutputLimits, counter: object = None) -> None:
    assert utf8(text) <= limits.max_bytes
    assert lines_of(text) <= limits.max_lines
    tokens = counter.count_text(text) if counter is not None else -(-utf8(text) // 4)  # type: ignore[attr-defined]
    assert tokens <= limits.max_tokens


# --------------------------------------------------------------------------------------------------
# Truncation
# --------------------------------------------------------------------------------------------------

pieces = st.sampled_from(
    ["a", "word ", "\n", "\r\n", "é", "e\u0301", "日本", "👨\u200d👩\u200d👧", "🇫🇷", "\t", "x" * 40]
)
outputs = st.lists(pieces, max_size=3000).map("".join) | st.text(max_size=3000)
limit_sets = st.builds(
    OutputLimits,
    max_lines=st.integers(6, 300),
    max_bytes=st.integers(256, 12_000),
    max_tokens=st.integers(64, 3_000),
    head_ratio=st.floats(0.05, 0.95),
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(text=outputs, limits=limit_sets, word_counter=st.booleans())
def test_a_cut_output_fits_every_limit_and_its_counts_are_exact(
    text: str, limits: OutputLimits, word_counter: bool
) -> None:
    counter = WordCounter() if word_counter else None
    result = truncate_head_tail(text, limits, counter=counter)
    assert_fits(result.text, limits, counter)
    assert result.kept_bytes == utf8(result.text)
    if not result.truncated:
        assert result.text == text
        return
    head, tail, marker = split_result(result.text)
    if not text.startswith(head):  # a partial first line gets a newline before the marker
        head = head[:-1]
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) + len(tail) <= len(text)
    # Never a split code point or grapheme cluster.
    cuts = boundaries(text)
    assert len(head) in cuts and len(text) - len(tail) in cuts
    omitted, total, omitted_bytes = (int(g) for g in marker.groups())
    assert total == lines_of(text) == result.total_lines
    assert omitted_bytes == utf8(text) - utf8(head) - utf8(tail) == result.omitted_bytes
    touched = lines_of(head) + lines_of(tail)
    if total == 1 and head and tail:
        touched = 1
    assert omitted == total - touched == result.omitted_lines
    assert result.text.startswith(f"Total output lines: {total}\n")


@settings(max_examples=200, deadline=None)
@given(
    first=st.text(LINE_CHARS, min_size=1, max_size=300),
    middle=st.lists(st.text(LINE_CHARS, max_size=200), min_size=1),
    last=st.text(LINE_CHARS, min_size=1, max_size=300),
    max_bytes=st.integers(1_200, 6_000),
    max_lines=st.integers(6, 100),
)
def test_the_first_and_last_lines_are_kept_whole_when_they_fit(
    first: str, middle: list[str], last: str, max_bytes: int, max_lines: int
) -> None:
    text = "\n".join([first, *middle, last]) + "\n"
    limits = OutputLimits(max_lines=max_lines, max_bytes=max_bytes, max_tokens=10_000)
    result = truncate_head_tail(text, limits)
    if result.truncated:
        head, tail, _ = split_result(result.text)
        assert head.startswith(first + "\n")
        assert tail.endswith(last + "\n")


def test_the_marker_and_header_are_exact() -> None:
    text = "".join(f"{i:03}\n" for i in range(100))
    result = truncate_head_tail(text, OutputLimits(max_lines=10))
    assert result.text == (
        "Total output lines: 100\n\n000\n001\n002\n"
        "[… 93 of 100 lines (372 bytes) omitted …]\n096\n097\n098\n099\n"
    )
    assert result.exceeded == ("lines",)
    assert (result.omitted_lines, result.omitted_bytes) == (93, 372)


def test_output_within_the_limits_is_returned_unchanged() -> None:
    text = "ok\n" * 200
    result = truncate_head_tail(text)
    assert not result.truncated and result.text == text and result.kept_bytes == 600


def test_a_single_huge_line_is_cut_in_its_middle_with_40_percent_head() -> None:
    text = "<" + "x" * 100_000 + ">"
    result = truncate_head_tail(text)
    head, tail, marker = split_result(result.text)
    head = head.rstrip("\n")
    assert head.startswith("<x") and tail.endswith("x>")
    assert marker.group(0).startswith("[… 0 of 1 lines (")
    assert 0.35 < len(head) / (len(head) + len(tail)) < 0.45
    assert utf8(result.text) <= 10 * 1024


def test_the_tail_gets_the_larger_share_because_errors_come_last() -> None:
    text = "".join(f"step {i}\n" for i in range(5000)) + "Error: disk full\n"
    result = truncate_head_tail(text)
    head, tail, _ = split_result(result.text)
    assert tail.endswith("Error: disk full\n")
    assert len(tail) > len(head)


def test_emoji_flags_and_crlf_are_never_split() -> None:
    family = "👨\u200d👩\u200d👧"
    for unit in (family, "🇫🇷", "\r\n", "e\u0301"):
        text = unit * 20_000
        result = truncate_head_tail(text)
        head, tail, _ = split_result(result.text)
        if not text.startswith(head):
            head = head[:-1]
        assert len(head) % len(unit) == 0 and len(tail) % len(unit) == 0


def test_invalid_utf8_is_replaced_and_reported() -> None:
    result = truncate_head_tail(b"ok \xff\xfe bytes\n" * 3)
    assert result.invalid_utf8 and not result.truncated
    assert result.text == "ok \ufffd\ufffd bytes\n" * 3
    big = truncate_head_tail(b"\xc3(" * 20_000)
    assert big.invalid_utf8 and big.truncated and utf8(big.text) <= 10 * 1024


def test_lone_surrogates_from_surrogateescape_are_replaced() -> None:
    raw = b"caf\xe9 au lait"
    result = truncate_head_tail(raw.decode("utf-8", "surrogateescape"))
    assert result.invalid_utf8 and result.text == "caf\ufffd au lait"


def test_the_token_limit_binds_with_a_real_tokenizer() -> None:
    counter = TiktokenCounter()
    # Within 256 lines and 10 KiB, but numbers cost far more tokens than four bytes each.
    text = "".join(
        ",".join(f"{(i * 31 + j) * 7919 % 100_003}" for j in range(8)) + "\n" for i in range(200)
    )
    limits = OutputLimits()
    result = truncate_head_tail(text, limits, counter=counter)
    assert result.exceeded == ("tokens",)
    assert counter.count_text(result.text) <= limits.max_tokens


def test_a_note_line_is_placed_under_the_header_and_counted() -> None:
    text = "row\n" * 1000
    result = truncate_head_tail(
        text, OutputLimits(max_lines=20), note="Full output: ref_0123456789ab"
    )
    lines = result.text.split("\n")
    assert lines[:3] == ["Total output lines: 1000", "Full output: ref_0123456789ab", ""]
    assert lines_of(result.text) <= 20


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_lines", 2), ("max_bytes", 10), ("max_tokens", 5), ("head_ratio", 1.0)],
)
def test_limits_too_small_for_the_marker_are_refused(field: str, value: float) -> None:
    with pytest.raises(ConfigError, match=f"outputs.{field}"):
        OutputLimits(**{field: value})  # type: ignore[arg-type]


def test_defaults_are_the_design_numbers() -> None:
    limits = OutputLimits()
    assert (limits.max_lines, limits.max_bytes, limits.max_tokens) == (256, 10 * 1024, 2_500)
    assert (limits.head_ratio, limits.offload_above_bytes, limits.preview_chars) == (
        0.4,
        16 * 1024,
        500,
    )


# --------------------------------------------------------------------------------------------------
# Blob stores
# --------------------------------------------------------------------------------------------------


class FailingStore:
    def put_blob(self, session_id: str, content: str, *, tool_name: str | None = None) -> object:
        raise OSError(28, "No space left on device")

    def get_blob(self, session_id: str, ref: str) -> str:
        raise RefNotFoundError(ref, session_id)


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> BlobStore:
    return InMemoryBlobStore() if request.param == "memory" else FileBlobStore(tmp_path / "blobs")


def test_stores_round_trip_and_share_identical_outputs(store: BlobStore) -> None:
    assert isinstance(store, BlobStore)
    first = store.put_blob("s1", "héllo\n" * 10, tool_name="bash")
    again = store.put_blob("s1", "héllo\n" * 10)
    assert first.ref == again.ref and REF_PATTERN.fullmatch(first.ref)
    assert first.size_bytes == len(("héllo\n" * 10).encode())
    assert store.get_blob("s1", first.ref) == "héllo\n" * 10


def test_a_ref_belongs_to_one_session(store: BlobStore) -> None:
    info = store.put_blob("s1", "secret output")
    with pytest.raises(RefNotFoundError):
        store.get_blob("s2", info.ref)
    with pytest.raises(RefNotFoundError):
        store.get_blob("s1", "ref_000000000000")


def test_file_store_writes_private_files_atomically(tmp_path: Path) -> None:
    store = FileBlobStore(tmp_path)
    info = store.put_blob("session-1", "data")
    store.put_blob("session-1", "data")
    files = list((tmp_path / "session-1").iterdir())
    assert [f.name for f in files] == [info.ref]  # one copy, no temporary files left
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600


def test_file_store_keeps_odd_session_ids_and_refs_inside_its_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = FileBlobStore(root)
    info = store.put_blob("../../escape", "x")
    assert store.get_blob("../../escape", info.ref) == "x"
    assert all(root in p.parents for p in root.rglob("*"))
    with pytest.raises(RefNotFoundError):
        store.get_blob("../../escape", "../../../etc/passwd")


# --------------------------------------------------------------------------------------------------
# prepare_tool_output: the engine's one call per tool result
# --------------------------------------------------------------------------------------------------


def result_of(content: str, name: str = "bash") -> ToolResultPart:
    return ToolResultPart("call_1", name, content)


def test_a_small_output_is_kept_as_it_is() -> None:
    part = result_of("3 passed\n")
    prepared = prepare_tool_output(part, session_id="s", blobs=InMemoryBlobStore())
    assert prepared.action == "kept" and prepared.part is part and prepared.events == ()


def test_a_medium_output_is_cut_and_its_full_text_stays_readable() -> None:
    blobs = InMemoryBlobStore()
    content = "".join(f"test_{i} ... ok\n" for i in range(800)) + "FAILED test_x\n"
    assert 10 * 1024 < utf8(content) < 16 * 1024
    prepared = prepare_tool_output(result_of(content), session_id="s", blobs=blobs)
    assert prepared.action == "truncated" and prepared.ref is not None
    assert prepared.part.ref == prepared.ref
    assert f'read_result ref="{prepared.ref}"' in prepared.part.content
    assert prepared.part.content.endswith("FAILED test_x\n")
    assert blobs.get_blob("s", prepared.ref) == content
    assert_fits(prepared.part.content, OutputLimits())
    [event] = prepared.events
    assert isinstance(event, OutputTruncated)
    assert (event.original_bytes, event.ref, event.call_id) == (
        utf8(content),
        prepared.ref,
        "call_1",
    )


def test_a_large_output_is_offloaded_with_a_preview() -> None:
    blobs = InMemoryBlobStore()
    content = "".join(f"line {i}\n" for i in range(20_000)) + "Traceback: boom\n"
    prepared = prepare_tool_output(result_of(content, "shell_exec"), session_id="s", blobs=blobs)
    assert prepared.action == "offloaded"
    text = prepared.part.content
    assert "shell_exec" in text and f"{utf8(content)} bytes" in text and prepared.ref in text
    assert text.splitlines()[1] == "line 0"  # head of the output
    assert "Traceback: boom" in text  # and its end, where errors are
    assert "read_result" in text
    assert len(text) < 1_500
    assert blobs.get_blob("s", prepared.ref) == content
    [event] = prepared.events
    assert isinstance(event, OutputOffloaded) and event.size_bytes == utf8(content)


def test_identical_large_outputs_share_one_blob() -> None:
    blobs = InMemoryBlobStore()
    content = "same\n" * 10_000
    first = prepare_tool_output(result_of(content), session_id="s", blobs=blobs)
    second = prepare_tool_output(
        ToolResultPart("call_2", "bash", content), session_id="s", blobs=blobs
    )
    assert first.ref == second.ref and len(blobs) == 1


@pytest.mark.parametrize("size", [12_000, 200_000])
def test_a_failing_blob_store_degrades_to_an_inline_cut_and_says_so(size: int) -> None:
    content = "x" * (size - 1) + "\n"
    prepared = prepare_tool_output(
        result_of(content),
        session_id="s",
        blobs=FailingStore(),  # type: ignore[arg-type]
    )
    assert prepared.action == "truncated" and prepared.ref is None
    assert prepared.degraded is not None and "No space left" in prepared.degraded
    assert "could not be stored" in prepared.part.content
    assert_fits(prepared.part.content, OutputLimits())
    kinds = [type(e) for e in prepared.events]
    assert kinds == [ComponentDegraded, OutputTruncated]


def test_an_output_kept_whole_after_a_failed_offload_still_reports_the_store_once() -> None:
    # Inline limits above the offload size: the output fits once the store has refused it.
    limits = OutputLimits(max_lines=10_000, max_bytes=64 * 1024, max_tokens=64 * 1024)
    content = "z" * 20_000
    prepared = prepare_tool_output(
        result_of(content),
        session_id="s",
        blobs=FailingStore(),  # type: ignore[arg-type]
        limits=limits,
    )
    assert prepared.action == "kept" and prepared.part.content == content
    assert prepared.degraded is not None and "No space left" in prepared.degraded
    [event] = prepared.events
    assert isinstance(event, ComponentDegraded)
    assert (event.component, event.fallback) == ("blob_store", "kept inline, not stored")


def test_without_a_blob_store_outputs_are_only_cut() -> None:
    prepared = prepare_tool_output(result_of("y\n" * 100_000), session_id="s")
    assert prepared.action == "truncated" and prepared.part.ref is None


def test_policy_can_turn_off_offloading_and_storing() -> None:
    blobs = InMemoryBlobStore()
    policy = OutputPolicy(offload=False, store_truncated=False)
    prepared = prepare_tool_output(
        result_of("z\n" * 100_000), session_id="s", blobs=blobs, policy=policy
    )
    assert prepared.action == "truncated" and prepared.ref is None and len(blobs) == 0


@settings(max_examples=60, deadline=None)
@given(content=outputs, limits=limit_sets)
def test_prepared_output_always_fits_and_loses_nothing(content: str, limits: OutputLimits) -> None:
    blobs = InMemoryBlobStore()
    prepared = prepare_tool_output(result_of(content), session_id="s", blobs=blobs, limits=limits)
    assert_fits(prepared.part.content, limits)
    if prepared.action == "kept":
        assert prepared.part.content == content
    else:
        assert prepared.ref is not None and blobs.get_blob("s", prepared.ref) == content


# --------------------------------------------------------------------------------------------------
# Placeholders
# --------------------------------------------------------------------------------------------------

REF = "ref_0123abcd4567"


def call(name: str, **args: object) -> ToolCallPart:
    return ToolCallPart.from_args("c1", name, args)


def test_shell_placeholder_names_command_exit_code_and_last_line() -> None:
    output = "<returncode>1</returncode>\n<output>\ncollecting\nFAILED test_a.py::t\n</output>"
    line = placeholder_for(
        ToolResultPart("c1", "bash", output), call("bash", command="pytest"), REF
    )
    assert line == (
        '[masked] bash `pytest`: exit 1, 2 lines, last: "FAILED test_a.py::t" → read_result ' + REF
    )


def test_a_json_envelope_is_looked_into() -> None:
    output = (
        '{"output": "Compiling\\nerror[E0425]: cannot find value", "metadata": {"exit_code": 101}}'
    )
    line = placeholder_for(
        ToolResultPart("c1", "shell", output), call("shell", command=["cargo", "build"]), REF
    )
    assert '`cargo build`: exit 101, 2 lines, last: "error[E0425]: cannot find value"' in line


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ("<returncode>2</returncode>", 2),
        ('{"exit_code": 127, "stdout": ""}', 127),
        ("Exit code 1\nnpm ERR!", 1),
        ("Process exited with code 0", 0),
        ("returned non-zero exit status 3", 3),
        ("all good", None),
    ],
)
def test_exit_codes_are_read_from_common_conventions(content: str, code: int | None) -> None:
    assert exit_code(content) == code


def test_file_read_placeholder_has_path_lines_and_first_line_without_numbers() -> None:
    output = "     1\timport os\n     2\timport sys\n     3\t\n"
    line = placeholder_for(
        ToolResultPart("c1", "Read", output), call("Read", file_path="/src/app.py"), REF
    )
    assert line.startswith('[masked] Read /src/app.py: 3 lines, first: "import os"')
    assert line.endswith(REF)


def test_search_placeholders_count_hits() -> None:
    found = placeholder_for(
        ToolResultPart("c1", "Grep", "Found 12 files\na.py\nb.py"),
        call("Grep", pattern="TODO"),
        REF,
    )
    assert '"TODO": 12 hits' in found
    none = placeholder_for(
        ToolResultPart("c1", "grep", "No matches found"), call("grep", pattern="zzz"), REF
    )
    assert '"zzz": 0 hits' in none
    globbed = placeholder_for(
        ToolResultPart("c1", "Glob", "a.py\nb.py\nc.py\n"), call("Glob", pattern="*.py"), REF
    )
    assert '"*.py": 3 hits' in globbed


def test_unknown_tools_get_size_and_first_line() -> None:
    line = placeholder_for(ToolResultPart("c1", "mcp__weather__forecast", "Sunny\nWarm"), None, REF)
    assert (
        line
        == f'[masked] mcp__weather__forecast: 10 B, 2 lines, first: "Sunny" → read_result {REF}'
    )


@pytest.mark.parametrize(
    ("name", "args", "kind"),
    [
        ("read_file", {}, "read"),
        ("Read", {}, "read"),
        ("view", {}, "read"),
        ("str_replace_editor", {"command": "view"}, "read"),
        ("str_replace_editor", {"command": "str_replace"}, "edit"),
        ("Bash", {}, "shell"),
        ("shell_exec", {}, "shell"),
        ("run_shell_command", {}, "shell"),
        ("Grep", {}, "search"),
        ("Glob", {}, "search"),
        ("mcp__github__search_code", {}, "search"),
        ("Edit", {}, "edit"),
        ("write_file", {}, "edit"),
        ("apply_patch", {}, "edit"),
        ("LS", {}, "list"),
        ("get_weather", {}, "other"),
    ],
)
def test_tool_names_from_common_agents_are_recognised(
    name: str, args: dict[str, object], kind: str
) -> None:
    assert tool_kind(name, args) == kind


@settings(max_examples=200)
@given(
    name=st.text(max_size=80),
    content=st.text(max_size=2_000),
    args=st.dictionaries(
        st.sampled_from(["command", "file_path", "pattern", "path"]), st.text(max_size=500)
    ),
    is_error=st.booleans(),
)
def test_placeholders_are_one_short_line_ending_with_the_ref(
    name: str, content: str, args: dict[str, str], is_error: bool
) -> None:
    result = ToolResultPart("c1", name, content, is_error)
    line = placeholder_for(result, ToolCallPart.from_args("c1", name, args), REF)
    assert line.endswith(REF)
    # A failed call may add its error line verbatim after the short description.
    bound = PLACEHOLDER_MAX_CHARS + MAX_ERROR_CHARS + PLACEHOLDER_ERROR_CHARS + 40
    assert len(line) <= bound
    assert "\n" not in line


def test_a_failed_output_keeps_its_error_line_verbatim() -> None:
    output = (
        "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n"
        "  File \"a.py\", line 3, in <module>\nKeyError: 'save10'\ncleanup done\n</output>"
    )
    line = placeholder_for(
        ToolResultPart("c1", "bash", output), call("bash", command="python a.py"), REF
    )
    assert "error: \"KeyError: 'save10'\"" in line
    assert line.endswith(REF)


def test_a_failed_output_keeps_its_last_distinct_error_lines() -> None:
    output = (
        "<returncode>1</returncode>\n<output>\n"
        "E   AssertionError: assert 2 == 3\nE   AssertionError: assert 5 == 6\n"
        "ERROR: 2 tests failed\n</output>"
    )
    line = placeholder_for(
        ToolResultPart("c1", "bash", output), call("bash", command="pytest"), REF
    )
    assert (
        '"E   AssertionError: assert 5 == 6"' in line or '"AssertionError: assert 5 == 6"' in line
    )
    assert "errors:" in line and line.endswith(REF)


def test_a_traceback_in_an_output_that_exited_zero_is_kept_too() -> None:
    # A script that catches nothing but whose runner exits 0 still printed why it broke.
    output = (
        "<returncode>0</returncode>\n<output>\nrunning checks\nTraceback (most recent call "
        'last):\n  File "check.py", line 9, in <module>\nValueError: empty input\ndone\n</output>'
    )
    line = placeholder_for(
        ToolResultPart("c1", "bash", output), call("bash", command="python check.py"), REF
    )
    assert 'error: "ValueError: empty input"' in line and line.endswith(REF)
    quiet = placeholder_for(
        ToolResultPart("c2", "bash", "<returncode>0</returncode>\n<output>\nall good\n</output>"),
        call("bash", command="python check.py"),
        REF,
    )
    assert "error" not in quiet  # nothing is invented for an output without one


def test_a_cut_output_names_the_errors_of_its_omitted_middle() -> None:
    lines = [f"test_{i} PASSED" for i in range(1_000)]
    lines[500] = "E   KeyError: 'save10'"
    lines[600:603] = [
        "Traceback (most recent call last):",
        '  File "x.py", line 1',
        "ValueError: bad",
    ]
    text = "<returncode>1</returncode>\n<output>\n" + "\n".join(lines) + "\n</output>"
    blobs = InMemoryBlobStore()
    prepared = prepare_tool_output(ToolResultPart("c", "bash", text), session_id="s", blobs=blobs)
    assert prepared.action == "truncated"
    header = "\n".join(prepared.part.content.splitlines()[:2])
    assert "Errors in the omitted part:" in header
    assert "E   KeyError: 'save10'" in header and "ValueError: bad" in header
    assert OutputLimits().fits(prepared.part.content)  # the note counts against the limits


def test_a_cut_output_without_errors_gets_no_error_note() -> None:
    text = "\n".join(f"line {i}" for i in range(1_000))
    prepared = prepare_tool_output(ToolResultPart("c", "cat", text), session_id="s")
    assert "Errors in the omitted part" not in prepared.part.content
