"""The read_result tool: the model pages, greps and line-reads stored outputs, within bounds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import ToolResultPart
from contextfold.outputs.intake import InMemoryBlobStore, prepare_tool_output
from contextfold.store import open_store
from contextfold.tools.deferral import READ_RESULT_TOOL, read_result
from contextfold.wire.anthropic import tools_to_anthropic
from contextfold.wire.chat_completions import tools_to_openai

MAX_PAGE_BYTES = 8 * 1024 + 400  # a page plus its header and footer


@pytest.fixture
def stored() -> tuple[InMemoryBlobStore, str, str]:
    blobs = InMemoryBlobStore()
    text = "".join(f"line {i}: {'ERROR disk' if i % 100 == 7 else 'ok'}\n" for i in range(1, 3001))
    return blobs, blobs.put_blob("s1", text, tool_name="bash").ref, text


def call(blobs: InMemoryBlobStore, **arguments: object) -> ToolResultPart:
    return read_result(blobs, "s1", arguments, call_id="call_9")


def body(answer: ToolResultPart) -> str:
    """The page without its header line and footer line."""
    return answer.content.split("\n", 1)[1].rsplit("\n", 1)[0]


def test_the_tool_is_an_engine_tool_with_ref_required() -> None:
    assert READ_RESULT_TOOL.name == "read_result" and READ_RESULT_TOOL.source == "engine"
    assert READ_RESULT_TOOL.parameters["required"] == ["ref"]
    assert tools_to_openai([READ_RESULT_TOOL])[0]["function"]["name"] == "read_result"
    assert "ref" in tools_to_anthropic([READ_RESULT_TOOL])[0]["input_schema"]["properties"]


def test_the_first_page_comes_with_where_to_continue(
    stored: tuple[InMemoryBlobStore, str, str],
) -> None:
    blobs, ref, text = stored
    answer = call(blobs, ref=ref)
    assert not answer.is_error and answer.call_id == "call_9" and answer.name == "read_result"
    assert answer.content.startswith(f"[{ref}: characters 0-")
    assert text.startswith(body(answer) + "\n")
    next_offset = int(re.search(r"\[more: use offset=(\d+)", answer.content).group(1))  # type: ignore[union-attr]
    assert text[:next_offset] == body(answer) + "\n"


def test_following_the_hints_reads_the_whole_output_in_bounded_pages() -> None:
    blobs = InMemoryBlobStore()
    text = "".join(f"{i} é 👨\u200d👩\u200d👧 {'x' * (i % 50)}\r\n" for i in range(2000))
    ref = blobs.put_blob("s1", text).ref
    pages, offset = [], 0
    while True:
        answer = call(blobs, ref=ref, offset=offset, limit=7_000)
        assert len(answer.content.encode()) <= MAX_PAGE_BYTES
        assert answer.content.count("\n") <= 205
        header, rest = answer.content.split("\n", 1)
        assert header.startswith(f"[{ref}: characters {offset}-")
        page, footer = rest.rsplit("\n", 1)
        if not footer.startswith("[end"):
            # The page body is exact: it ends where the next page starts.
            offset_next = int(footer.split("offset=")[1].split("]")[0].split(" ")[0])
            pages.append(text[offset:offset_next])
            assert page + "\n" == pages[-1] or page == pages[-1]
            offset = offset_next
            continue
        pages.append(text[offset:])
        break
    assert "".join(pages) == text


@settings(max_examples=60, deadline=None)
@given(text=st.text(min_size=1, max_size=30_000), limit=st.integers(50, 9_000))
def test_pages_never_split_a_character_and_cover_everything(text: str, limit: int) -> None:
    blobs = InMemoryBlobStore()
    ref = blobs.put_blob("s1", text).ref
    clusters = {0, *(m.end() for m in regex.finditer(r"\X", text, flags=regex.DOTALL))}
    offset, seen = 0, 0
    while offset < len(text):
        answer = call(blobs, ref=ref, offset=offset, limit=limit)
        assert not answer.is_error
        assert len(answer.content.encode("utf-8", "surrogatepass")) <= MAX_PAGE_BYTES
        found = re.search(r"\[more: use offset=(\d+)", answer.content)
        following = int(found.group(1)) if found else len(text)
        assert following > offset and following in clusters
        seen += following - offset
        offset = following
    assert seen == len(text)


def test_line_ranges_are_numbered_and_bounded(stored: tuple[InMemoryBlobStore, str, str]) -> None:
    blobs, ref, _ = stored
    answer = call(blobs, ref=ref, start_line=7, end_line=9)
    assert answer.content.split("\n") == [
        f"[{ref}: lines 7-9 of 3000]",
        "     7\tline 7: ERROR disk",
        "     8\tline 8: ok",
        "     9\tline 9: ok",
        "[more: use start_line=10]",
    ]
    wide = call(blobs, ref=ref, start_line=1, end_line=3000)
    assert wide.content.count("\n") <= 202
    assert wide.content.endswith("[more: use start_line=201 (pages are capped)]")
    last = call(blobs, ref=ref, start_line=2999)
    assert last.content.endswith("  3000\tline 3000: ok\n[end of output]")


def test_a_line_longer_than_a_page_says_where_it_continues() -> None:
    blobs = InMemoryBlobStore()
    ref = blobs.put_blob("s1", "short\n" + "z" * 50_000 + "\n").ref
    answer = call(blobs, ref=ref, start_line=2, end_line=2)
    assert re.search(r"\[line 2 continues: use offset=\d+ to read on\]$", answer.content)
    assert len(answer.content.encode()) <= MAX_PAGE_BYTES


def test_pattern_search_lists_matching_lines_with_numbers(
    stored: tuple[InMemoryBlobStore, str, str],
) -> None:
    blobs, ref, _ = stored
    answer = call(blobs, ref=ref, pattern=r"ERROR \w+", start_line=1, end_line=300)
    assert answer.content.split("\n") == [
        f"[{ref}: 3 lines match /ERROR \\w+/ in lines 1-300]",
        "     7: line 7: ERROR disk",
        "   107: line 107: ERROR disk",
        "   207: line 207: ERROR disk",
    ]


def test_pattern_search_is_capped_and_says_how_to_narrow(
    stored: tuple[InMemoryBlobStore, str, str],
) -> None:
    blobs, ref, _ = stored
    answer = call(blobs, ref=ref, pattern="ok")
    lines = answer.content.split("\n")
    assert lines[0] == f"[{ref}: 2970 lines match /ok/ in all lines]"
    assert len(lines) == 52
    assert lines[-1].startswith("[showing the first 50: narrow the pattern")


def test_an_invalid_regex_is_searched_literally_and_no_match_is_not_an_error(
    stored: tuple[InMemoryBlobStore, str, str],
) -> None:
    blobs, ref, _ = stored
    answer = call(blobs, ref=ref, pattern="disk (")
    assert not answer.is_error
    assert "not a valid regular expression" in answer.content
    assert "no line matches" in answer.content


def test_a_matching_line_longer_than_the_cap_shows_the_match() -> None:
    blobs = InMemoryBlobStore()
    ref = blobs.put_blob("s1", "a" * 5_000 + "NEEDLE" + "b" * 5_000).ref
    answer = call(blobs, ref=ref, pattern="NEEDLE")
    assert "NEEDLE" in answer.content and len(answer.content) < 600


def test_an_unknown_ref_tells_the_model_what_refs_look_like(
    stored: tuple[InMemoryBlobStore, str, str],
) -> None:
    blobs, _, _ = stored
    answer = call(blobs, ref="ref_ffffffffffff")
    assert answer.is_error
    assert "ref_0123abcd4567" in answer.content and "Copy one exactly" in answer.content
    malformed = call(blobs, ref="output-3")
    assert malformed.is_error and "is not a ref" in malformed.content
    missing = call(blobs)
    assert missing.is_error and "needs a ref" in missing.content


def test_refs_of_another_session_cannot_be_read(
    stored: tuple[InMemoryBlobStore, str, str],
) -> None:
    blobs, ref, _ = stored
    answer = read_result(blobs, "s2", {"ref": ref})
    assert answer.is_error and "No stored output" in answer.content


def test_a_ref_quoted_inside_text_is_understood(
    stored: tuple[InMemoryBlobStore, str, str],
) -> None:
    blobs, ref, _ = stored
    answer = call(blobs, ref=f"read_result {ref}", offset="0", limit="20")
    assert not answer.is_error and answer.content.startswith(f"[{ref}: characters 0-19 ")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"offset": -1}, "offset must be at least 0"),
        ({"limit": "many"}, "limit must be a whole number"),
        ({"offset": 10, "start_line": 3}, "not both"),
        ({"start_line": 9, "end_line": 2}, "end_line (2) is before start_line (9)"),
        ({"offset": 10**9}, "past the end"),
        ({"start_line": 10**6}, "past the end"),
        ({"pattern": ["x"]}, "pattern must be a string"),
    ],
)
def test_bad_arguments_come_back_as_actionable_errors(
    stored: tuple[InMemoryBlobStore, str, str], arguments: dict[str, object], message: str
) -> None:
    blobs, ref, _ = stored
    answer = call(blobs, ref=ref, **arguments)
    assert answer.is_error and message in answer.content


def test_a_broken_store_is_reported_not_raised() -> None:
    class Broken:
        def put_blob(self, session_id: str, content: str, *, tool_name: str | None = None) -> None:
            raise NotImplementedError

        def get_blob(self, session_id: str, ref: str) -> str:
            raise OSError("database is locked")

    answer = read_result(Broken(), "s1", {"ref": "ref_0123abcd4567"})  # type: ignore[arg-type]
    assert answer.is_error and "database is locked" in answer.content


@pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")
def test_the_sqlite_session_store_serves_offloaded_outputs(tmp_path: Path) -> None:
    store = open_store(tmp_path / "sessions.db")
    session = store.create_session()
    content = "".join(f"row {i}\n" for i in range(5_000))
    prepared = prepare_tool_output(
        ToolResultPart("c1", "bash", content), session_id=session.id, blobs=store
    )
    assert prepared.action == "offloaded" and prepared.ref is not None
    answer = read_result(store, session.id, {"ref": prepared.ref, "start_line": 4999})
    assert answer.content.endswith("  4999\trow 4998\n  5000\trow 4999\n[end of output]")
    other = read_result(store, "ses_unknown", {"ref": prepared.ref})
    assert other.is_error and "No stored output" in other.content
    store.close()


def test_pages_shrink_to_the_byte_cap_the_engine_gives() -> None:
    from contextfold.outputs.intake import InMemoryBlobStore
    from contextfold.outputs.read_result import read_result as read

    blobs = InMemoryBlobStore()
    text = "\n".join(f"line {i}: " + "x" * 60 for i in range(500))
    ref = blobs.put_blob("s", text).ref
    small = read(blobs, "s", {"ref": ref}, max_bytes=1_000)
    assert len(small.content.encode()) < 1_300  # the page plus its header and footer
    assert "[more: use offset=" in small.content
    floor = read(blobs, "s", {"ref": ref}, max_bytes=10)
    assert len(floor.content.encode()) >= 256  # never below the useful minimum
