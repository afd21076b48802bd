"""The model-backed summarizer: the request it sends, parsing, extension, graceful fallback."""

from __future__ import annotations

import re

import pytest

from contextfold.chat import ChatRequest
from contextfold.compaction import (
    Compactor,
    ExtractiveSummarizer,
    LLMSummarizer,
    StructuredSummary,
    Summarize,
    SummaryItem,
)
from contextfold.compaction._llm import (
    _MESSAGES_HEADER,
    DEFAULT_LLM_MAX_CALLS,
    DEFAULT_SUMMARIZER_WINDOW,
)
from contextfold.errors import ContextOverflowError, ProviderUnavailableError
from contextfold.events import SummarizerFellBack
from contextfold.messages import Message
from contextfold.providers.scripted import ScriptedModel, estimate_tokens

from .conftest import chat, make_ctx, tool_round

GOOD_REPLY = """\
## Session Intent
- Refactor the parser module [src: u0]
## Current Task
- Splitting tokenizer out of parser.py [src: a3]
## Files Modified
- parser.py: moved tokenize() out [src: a2]
## Files Read
- (none)
## Key Decisions
- Keep the public API because plugins import it [src: a1]
## Failed Approaches
- (none)
## Errors Encountered
- ImportError: cannot import name 'tokenize' [src: t2]
## Next Steps
- Run the test suite
"""


def test_reply_is_parsed_and_extends_the_previous_summary() -> None:
    model = ScriptedModel([GOOD_REPLY])
    previous = StructuredSummary({"Files Read": (SummaryItem("README.md", ("u0",)),)})
    summarizer = LLMSummarizer(model, instructions="Use tabs.")
    summary = summarizer.summarize(chat(turns=2), previous, "the tokenizer")
    assert summary.fallback_reason is None
    assert [i.text for i in summary.items("Files Read")] == ["README.md"]  # kept, not rewritten
    assert summary.items("Files Modified") == (
        SummaryItem("parser.py: moved tokenize() out", ("a2",)),
    )
    assert (
        summary.items("Errors Encountered")[0].text == "ImportError: cannot import name 'tokenize'"
    )
    # What the model was asked.
    (request,) = model.requests
    sent = request.messages[0].text
    assert "## Files Read\n- README.md [src: u0]" in sent  # the summary so far
    assert "Focus on: the tokenizer" in sent
    assert "[a0] assistant:" in sent and "[t0] tool:" in sent  # messages cited by id
    assert "Use tabs." in request.system_text and "## Failed Approaches" in request.system_text


def test_missing_sections_fall_back_to_the_extractive_summary() -> None:
    events: list[SummarizerFellBack] = []
    model = ScriptedModel(["## Session Intent\n- something\n## Next Steps\n- more"])
    view = chat(turns=2)
    summary = LLMSummarizer(model, on_event=events.append).summarize(view, None, None)
    assert summary.fallback_reason is not None and "Current Task" in summary.fallback_reason
    assert summary.sections == ExtractiveSummarizer().summarize(view, None, None).sections
    assert [e.error for e in events] == [summary.fallback_reason]


def test_provider_errors_fall_back_too() -> None:
    model = ScriptedModel([ProviderUnavailableError("timed out", provider="test")])
    summary = LLMSummarizer(model).summarize(chat(turns=2), None, None)
    assert summary.fallback_reason == "ProviderUnavailableError: timed out"
    assert summary.items("Session Intent")


def test_a_fallback_during_compaction_is_reported_as_an_event() -> None:
    model = ScriptedModel([RuntimeError("boom")])
    ctx = make_ctx(
        chat(turns=6, rounds_per_turn=3), target=10, window=10**6, summarizer=LLMSummarizer(model)
    )
    result = Compactor([Summarize()]).compact(ctx)
    assert result.summary is not None and result.edits
    assert [(type(e), e.error) for e in result.events] == [
        (SummarizerFellBack, "RuntimeError: boom")
    ]


# -- the summarizing model's window ----------------------------------------------------------------


class Server:
    """A llama.cpp-like server holding ``n_ctx`` tokens: it counts a request with the scripted
    model's rule (four characters a token), refuses one whose prompt and reply budget exceed
    ``n_ctx`` as llama.cpp does (with both figures), and answers the others with a summary."""

    def __init__(self, n_ctx: int, reply: str = GOOD_REPLY) -> None:
        self.n_ctx = n_ctx
        self.reply = reply
        self.model = ScriptedModel(default=self.respond, name="local-summarizer")
        self.sent: list[int] = []
        """Prompt plus reply budget of every request it accepted."""
        self.refused = 0

    def respond(self, request: ChatRequest) -> str:
        prompt = estimate_tokens(request)
        if prompt + (request.max_tokens or 0) > self.n_ctx:
            self.refused += 1
            raise ContextOverflowError(
                f"request ({prompt} tokens) exceeds the available context size "
                f"({self.n_ctx} tokens), try increasing it",
                provider="openai",
                status=400,
                prompt_tokens=prompt,
                limit=self.n_ctx,
            )
        self.sent.append(prompt + (request.max_tokens or 0))
        return self.reply


def long_session() -> list[Message]:
    """About 60,000 characters of agent log: a task and 36 rounds reading source files."""
    view = [Message.user("Fix the crash in parser.py on empty input.", id="task")]
    for n in range(36):
        source = "\n".join(f"def f{n}_{i}(x):\n    return parse(x) * {i}" for i in range(36))
        view += tool_round(n, f"cat src/mod{n}.py", source, text=f"Reading src/mod{n}.py.")
    return view


@pytest.mark.parametrize("window", [2_048, 4_096, 8_192])
def test_every_summary_request_fits_the_summarizing_models_window(window: int) -> None:
    server = Server(window)
    summarizer = LLMSummarizer(server.model, context_window=window)

    summary = summarizer.summarize(long_session(), None, None)

    assert summary.fallback_reason is None
    assert server.refused == 0 and server.sent and max(server.sent) <= window
    assert len(server.sent) <= DEFAULT_LLM_MAX_CALLS
    assert summary.items("Files Modified")  # what the model wrote


def test_chunks_are_folded_in_order_each_request_extending_the_summary_so_far() -> None:
    server = Server(16_384)
    LLMSummarizer(server.model, context_window=16_384).summarize(long_session(), None, None)
    requests = server.model.requests
    assert 1 < len(requests) <= DEFAULT_LLM_MAX_CALLS
    assert "Summary so far" not in requests[0].messages[0].text
    assert all("Summary so far (extend it):" in r.messages[0].text for r in requests[1:])
    # Each request carries the messages that follow those of the one before.
    firsts = [re.search(r"\[a(\d+)\] assistant", r.messages[0].text) for r in requests]
    numbers = [int(m.group(1)) for m in firsts if m]
    assert numbers[0] == 0 and numbers == sorted(set(numbers)) and len(numbers) == len(requests)


def test_what_the_calls_cannot_take_is_folded_in_extractively_first() -> None:
    server = Server(2_048)
    summary = LLMSummarizer(server.model, context_window=2_048).summarize(
        long_session(), None, None
    )
    first = server.model.requests[0].messages[0].text
    assert len(server.model.requests) == DEFAULT_LLM_MAX_CALLS
    assert "Task: Fix the crash in parser.py" in first  # the oldest messages, in the summary so far
    assert "[a0] assistant" not in first
    assert summary.items("Files Modified")  # and the model's summary of the newest


def test_a_model_the_registry_does_not_know_gets_the_conservative_default_window() -> None:
    server = Server(DEFAULT_SUMMARIZER_WINDOW)
    summarizer = LLMSummarizer(server.model)
    assert summarizer.context_window == DEFAULT_SUMMARIZER_WINDOW
    summary = summarizer.summarize(long_session(), None, None)
    assert summary.fallback_reason is None and server.refused == 0


def test_an_overflow_is_learned_and_the_request_shrunk_and_retried_once() -> None:
    # Told 16k, the server holds 2k: the first request is refused with llama.cpp's figures.
    server = Server(2_048)
    summarizer = LLMSummarizer(server.model, context_window=16_384)

    summary = summarizer.summarize(long_session(), None, None)

    assert summary.fallback_reason is None
    assert server.refused == 1 and server.sent and max(server.sent) <= 2_048
    assert summarizer.context_window == 2_048  # kept for the next summaries
    server.model.requests.clear()
    summarizer.summarize(long_session(), None, None)
    assert server.refused == 1


def test_a_second_overflow_falls_back_with_its_reason() -> None:
    events: list[SummarizerFellBack] = []
    refusals = [ContextOverflowError("prompt is too long", provider="anthropic")] * 2
    model = ScriptedModel(refusals)
    summarizer = LLMSummarizer(model, context_window=8_192, on_event=events.append)

    summary = summarizer.summarize(long_session(), None, None)

    assert len(model.requests) == 2  # the request, then one smaller retry
    first, second = (estimate_tokens(r) for r in model.requests)
    assert second < first
    assert summary.fallback_reason == "ContextOverflowError: prompt is too long"
    assert [e.error for e in events] == [summary.fallback_reason]
    assert summary.items("Session Intent")  # the extractive summary


def test_a_window_too_small_to_summarize_in_falls_back_and_says_why() -> None:
    model = ScriptedModel([GOOD_REPLY])
    summary = LLMSummarizer(model, context_window=600).summarize(chat(turns=2), None, None)
    assert model.requests == []
    assert summary.fallback_reason is not None and "window of 600 tokens" in summary.fallback_reason


def test_the_compaction_result_keeps_the_fallback_reason() -> None:
    model = ScriptedModel([RuntimeError("boom")])
    ctx = make_ctx(
        chat(turns=6, rounds_per_turn=3), target=10, window=10**6, summarizer=LLMSummarizer(model)
    )
    result = Compactor([Summarize()]).compact(ctx)
    assert result.summary is not None
    assert result.summary.fallback_reason == "RuntimeError: boom"


def test_messages_beyond_the_input_cap_are_folded_in_extractively() -> None:
    server = Server(16_384)
    LLMSummarizer(server.model, context_window=16_384, max_input_chars=8_000).summarize(
        long_session(), None, None
    )
    [request] = server.model.requests
    text = request.messages[0].text
    assert "Task: Fix the crash in parser.py" in text  # from the extractive summary so far
    assert "[a35] assistant" in text and "[a0] assistant" not in text
    assert len(text.partition(_MESSAGES_HEADER)[2]) <= 8_000
