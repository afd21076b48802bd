"""The engine against a real llama.cpp server (Gemma 3 270M): overflow learned and recovered,
estimates anchored on the server's own counts, the LLM summarizer through the real model.

What the model says does not matter; the plumbing does. Replies are kept to a few tokens."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from contextfold import (
    ContextEngine,
    ContextOverflowError,
    ContextPolicy,
    Message,
    ModelInfo,
    ToolCallPart,
)
from contextfold.compaction import LLMSummarizer
from contextfold.compaction.summary import SECTION_NAMES
from contextfold.engine._recovery import RefusedRequest
from contextfold.events import MemorySink, OverflowRecovered, SummarizerFellBack
from contextfold.providers import ChatRequest, ChatResponse, OpenAIChat, RetryPolicy
from contextfold.tools.deferral import ToolSpec
from tests.real_model.conftest import LlamaServerFactory

REPLY_TOKENS = 8
"""The reply reserve of every engine here: the model's words are noise, and cost time."""

SYSTEM = "You are a careful coding agent. Use the tools to inspect the project."
BASH = ToolSpec(
    "bash",
    "Run a shell command in the project and return its output.",
    {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
)


class RecordingModel:
    """The real model, keeping every request it was sent (and the error, if it refused it)."""

    def __init__(self, base_url: str) -> None:
        self.inner = OpenAIChat(
            "gemma-3-270m",
            base_url=base_url,
            provider="llamacpp",
            retry=RetryPolicy(sleep=lambda _: None),
        )
        self.name = self.inner.name
        self.provider = self.inner.provider
        self.sent: list[ChatRequest] = []

    def complete(self, request: ChatRequest) -> ChatResponse:
        self.sent.append(request)
        return self.inner.complete(request)


@contextmanager
def engine_for(
    window: int, tmp_path: Path, sink: MemorySink, **kwargs: Any
) -> Iterator[ContextEngine]:
    """An engine for the real model with a ``window`` the registry would give it."""
    info = ModelInfo(
        "gemma-3-270m",
        window,
        provider="llamacpp",
        max_output_tokens=REPLY_TOKENS,
        tokenizer="o200k_base",
    )
    engine = ContextEngine(
        info,
        store=tmp_path / "sessions.db",
        sinks=[sink],
        policy=ContextPolicy(background=False),
        **kwargs,
    )
    try:
        yield engine
    finally:
        engine.close()


def tool_turn(session: Any, index: int, output: str) -> None:
    """One recorded agent step: a bash call and its output (the model's own reply is noise)."""
    call = ToolCallPart.from_args(f"call_{index}", "bash", {"command": f"cat notes_{index}.txt"})
    session.add_assistant(Message.assistant(f"Reading notes {index}.", [call]))
    session.add_tool_result(f"call_{index}", output, name="bash")


def notes(index: int, lines: int) -> str:
    return "\n".join(
        f"notes_{index}.txt:{n}: the parser rejects token {n * 7 + index} at column {n}"
        for n in range(lines)
    )


def test_an_overflow_at_a_smaller_server_is_learned_and_recovered(
    llama_server: LlamaServerFactory, tmp_path: Path
) -> None:
    """The registry says 16k; the server was started with 2k. The first overflow teaches the
    session the server's limit; the retry is a different, smaller request that the server
    accepts; every later request and a resumed session stay under the limit."""
    server = llama_server(2048)
    sink = MemorySink()
    model = RecordingModel(server.base_url)
    with engine_for(16_384, tmp_path, sink) as engine:
        session = engine.new_session()
        session.add_user("The parser fails on some tokens. Find out which from the notes.")
        for index in range(6):
            tool_turn(session, index, notes(index, 40))
        refused = session.prepare(system=SYSTEM, tools=[BASH])
        with pytest.raises(ContextOverflowError) as caught:
            model.complete(refused.to_chat_request())
        error = caught.value
        assert error.limit == 2048 and error.prompt_tokens is not None
        assert error.prompt_tokens > 2048

        session.recover(error)
        retry = session.prepare(system=SYSTEM, tools=[BASH])
        assert (
            RefusedRequest.of(refused, error).signature != RefusedRequest.of(retry, error).signature
        )
        response = model.complete(retry.to_chat_request())
        session.add_assistant(response)

        assert response.usage is not None
        sent = response.usage.input_tokens
        assert sent + retry.max_tokens <= 2048
        assert session.learned_window == 2048
        event = sink.of_type(OverflowRecovered)[-1]
        assert event.learned_window and event.window == 2048
        assert event.before_tokens == error.prompt_tokens
        print(
            f"\noverflow: refused {error.prompt_tokens:,} tokens (server n_ctx {error.limit:,}), "
            f"retry estimated {retry.tokens:,}, server counted {sent:,}"
        )
        # Later turns, and a resumed session, are planned against the server's limit.
        for index in range(6, 10):
            tool_turn(session, index, notes(index, 40))
            request = session.prepare(system=SYSTEM, tools=[BASH])
            session.add_assistant(model.complete(request.to_chat_request()))
        session_id = session.id
    with engine_for(16_384, tmp_path, sink) as engine:
        resumed = engine.resume(session_id)
        assert resumed.learned_window == 2048
        tool_turn(resumed, 10, notes(10, 40))
        request = resumed.prepare(system=SYSTEM, tools=[BASH])
        model.complete(request.to_chat_request())
    bodies = [repr(r) for r in model.sent]
    assert len(bodies) == len(set(bodies))  # no request was ever sent twice


def test_anchored_estimates_track_the_servers_prompt_tokens(
    llama_server: LlamaServerFactory, tmp_path: Path
) -> None:
    """Once the server has reported a call, the estimate of the next request is within a few
    percent of what the server counts, although its template renders neither the tools nor
    the tool calls and frames every message with six-token markers."""
    server = llama_server(8192)
    sink = MemorySink()
    model = RecordingModel(server.base_url)
    errors = []
    with engine_for(8192, tmp_path, sink) as engine:
        session = engine.new_session()
        session.add_user("The parser fails on some tokens. Find out which from the notes.")
        for index in range(12):
            request = session.prepare(system=SYSTEM, tools=[BASH])
            response = model.complete(request.to_chat_request())
            assert response.usage is not None
            real = response.usage.input_tokens
            errors.append((request.tokens - real) / real)
            session.add_assistant(response)
            tool_turn(session, index, notes(index, 5 + 9 * (index % 4)))
    print("\nestimate errors:", ", ".join(f"{e:+.1%}" for e in errors))
    # Before any report the estimate is the counter's alone: the server leaves the tools and
    # tool calls out of its template, so it counts far less. The first reports teach the
    # session the server's overhead and scale; from then on the estimate is close, and never
    # much under what the server counts (an underestimate is what would overflow).
    settled = errors[3:]
    assert statistics.median(abs(e) for e in settled) < 0.03
    assert max(abs(e) for e in settled) < 0.10
    assert min(errors[1:]) > -0.10


# A grammar that makes even a base model write the eight sections (llama.cpp's GBNF).
SECTIONS_GRAMMAR = (
    "root ::= "
    + " ".join(f'"## {name}\\n- " line' for name in SECTION_NAMES)
    + '\nline ::= [a-z ]{3,30} "\\n"'
)


class GrammarModel(RecordingModel):
    """The real model, told by a grammar to answer in the summary's eight sections."""

    def complete(self, request: ChatRequest) -> ChatResponse:
        return super().complete(
            replace(request, extra={**request.extra, "grammar": SECTIONS_GRAMMAR})
        )


def summarizer_session(engine: ContextEngine) -> Any:
    session = engine.new_session()
    session.add_user("The parser fails on some tokens. Find out which from the notes.")
    for index in range(8):
        tool_turn(session, index, notes(index, 30))
    return session


def test_the_llm_summarizer_writes_a_summary_through_the_real_model(
    llama_server: LlamaServerFactory, tmp_path: Path
) -> None:
    server = llama_server(2048)
    model = GrammarModel(server.base_url)
    summarizer = LLMSummarizer(model, context_window=2048, max_tokens=200)
    sink = MemorySink()
    with engine_for(16_384, tmp_path, sink, compactor="summarize", summarizer=summarizer) as engine:
        session = summarizer_session(engine)
        result = session.compact()
        assert result.summary is not None and result.summary.fallback_reason is None
    # The summary came from the server, in requests that all fitted its 2k window (a refusal
    # would have been a fallback).
    assert model.sent
    assert any(result.summary.sections.values())
    assert not sink.of_type(SummarizerFellBack)


def test_the_llm_summarizer_falls_back_when_the_real_model_writes_noise(
    llama_server: LlamaServerFactory, tmp_path: Path
) -> None:
    server = llama_server(2048)
    model = RecordingModel(server.base_url)
    sink = MemorySink()
    summarizer = LLMSummarizer(model, context_window=2048, max_tokens=32)
    with engine_for(16_384, tmp_path, sink, compactor="summarize", summarizer=summarizer) as engine:
        session = summarizer_session(engine)
        result = session.compact()
        assert result.changed
        assert result.summary is not None and result.summary.fallback_reason
    assert model.sent  # the model was asked, and its answer was not a summary
    fell_back = sink.of_type(SummarizerFellBack)
    # It fell back because the reply was no summary, not because a request did not fit.
    assert fell_back and "lacks the section" in fell_back[0].error
