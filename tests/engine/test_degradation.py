"""Graceful degradation: a failing part costs a feature, never the session.

Each test injects one failure and checks that the agent keeps getting valid requests and that
the failure is reported (``ComponentDegraded`` or ``SummarizerFellBack``). A second writer on the
same session is not a failure to hide: it raises.
"""

from __future__ import annotations

import sqlite3
import warnings
from pathlib import Path
from typing import Any

import pytest

from contextfold import (
    ConcurrentWriteError,
    ContextEngine,
    ContextPolicy,
    InstructionsLoader,
    LLMSummarizer,
    ProviderUnavailableError,
    ScriptedModel,
    SummaryPart,
    model_for_window,
    validate,
)
from contextfold.budget import Zone
from contextfold.events import (
    CompactionFinished,
    ComponentDegraded,
    MemorySink,
    SummarizerFellBack,
)
from contextfold.prompt.sections import PromptBuilder
from contextfold.providers import ChatRequest
from contextfold.store import SessionStore, open_store
from contextfold.tools.deferral import ToolDeferral
from tests.engine.helpers import SYSTEM, TASK, EngineFactory, listing, start
from tests.engine.test_tools import mcp_tools


class FlakyStore:
    """A real store whose ``append_messages`` fails after ``healthy_appends`` calls."""

    def __init__(self, inner: SessionStore, healthy_appends: int) -> None:
        self._inner = inner
        self._left = healthy_appends

    def append_messages(self, *args: Any, **kwargs: Any) -> int:
        if self._left <= 0:
            raise sqlite3.OperationalError("disk I/O error")
        self._left -= 1
        return self._inner.append_messages(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _degraded(events: list[Any], component: str) -> list[ComponentDegraded]:
    return [e for e in events if isinstance(e, ComponentDegraded) and e.component == component]


def test_a_failing_store_leaves_the_session_working_in_memory(make_engine: EngineFactory) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inner = open_store(":memory:")
    engine, sink = make_engine(store=FlakyStore(inner, healthy_appends=5))  # type: ignore[arg-type]
    driver = start(engine, output=lambda turn: listing(turn, lines=2_000 if turn == 6 else 40))
    for _ in range(12):
        request = driver.turn()
        assert request.tokens <= engine.effective_window

    reported = _degraded(sink.events, "store")
    assert len(reported) == 1
    assert "OperationalError" in reported[0].error and "memory" in reported[0].fallback
    assert not driver.session.persisted
    assert len(driver.session.view) == 1 + 2 * 12  # nothing the agent added was lost
    assert inner.last_seq(driver.session.id) == 5  # what the store took before it failed
    # An output offloaded after the failure is kept in memory and stays readable.
    big = next(p for m in driver.session.view for p in m.tool_results if "mod6.py" in p.content)
    assert big.ref is not None
    page = driver.session.read_result(big.ref, start_line=1_999, end_line=2_000)
    assert not page.is_error and "src/mod6.py:1999" in page.content
    inner.close()


def test_a_failing_llm_summarizer_falls_back_to_the_extractive_summary(
    make_engine: EngineFactory,
) -> None:
    def unavailable(request: ChatRequest) -> str:
        raise ProviderUnavailableError("503 from the summarizer model", provider="openai")

    summarizer = LLMSummarizer(ScriptedModel(default=unavailable))
    engine, sink = make_engine(compactor="summarize", summarizer=summarizer)
    driver = start(engine)
    request = driver.until_zone(Zone.COMPACT)

    fell_back = [e for e in sink.events if isinstance(e, SummarizerFellBack)]
    assert len(fell_back) == 1 and "503" in fell_back[0].error
    summary = next(p for m in request.messages for p in m.parts if isinstance(p, SummaryPart))
    assert f"Task: {TASK}" in summary.text and "src/mod3.py" in summary.text  # extractive
    assert request.budget.fraction <= engine.policy.thresholds.compact_target + 0.05
    validate(list(request.messages), provider="anthropic")


def test_a_failing_tool_deferral_sends_every_tool(
    make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: ToolDeferral, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("deferral bug")

    # A bug inside the selection: select() degrades to sending every tool, and says why.
    monkeypatch.setattr(ToolDeferral, "_select", broken)
    engine, sink = make_engine(window=200_000, max_output=8_000)
    driver = start(engine, tools=tuple(mcp_tools()))
    request = driver.prepare()

    names = {t.name for t in request.tools}
    assert len(request.tools) == 200 + 2 and "tool_search" not in names
    assert request.deferred_tools == () and "deferred" not in request.note
    reported = _degraded(sink.events, "tool_deferral")
    assert len(reported) == 1 and "deferral bug" in reported[0].error


def test_a_failing_prompt_builder_falls_back_to_plain_text(
    make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_text("Always run ruff before committing.\n", encoding="utf-8")

    def broken(self: PromptBuilder) -> Any:
        raise ValueError("builder bug")

    monkeypatch.setattr(PromptBuilder, "build", broken)
    loader = InstructionsLoader(tmp_path, include_global=False)
    engine, sink = make_engine(instructions=loader, provider="anthropic")
    driver = start(engine)
    request = driver.turn()

    assert request.system_text.startswith(SYSTEM)
    assert "Always run ruff before committing." in request.system_text
    assert driver.model.requests[-1].system_text == request.system_text
    reported = _degraded(sink.events, "prompt_builder")
    assert reported and "builder bug" in reported[0].error


def test_a_failing_cache_plan_sends_the_prompt_unmarked_and_says_so_once(
    make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import contextfold.engine._render as render_module

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("cache plan bug")

    monkeypatch.setattr(render_module, "render_prompt", broken)
    engine, sink = make_engine(provider="anthropic")
    driver = start(engine)
    request = driver.turn()

    assert request.system_text == SYSTEM  # the whole prompt, as one block
    assert not any(b.cache for b in request.system) and request.message_breakpoints == ()
    assert driver.model.requests[-1].system_text == SYSTEM
    reported = _degraded(sink.events, "prompt_cache")
    assert len(reported) == 1 and "cache plan bug" in reported[0].error
    assert _degraded(list(request.events), "prompt_cache") == reported


def test_a_second_writer_on_the_same_session_raises(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = ContextEngine(model_for_window(8_000), store=path, policy=ContextPolicy())
        second = ContextEngine(model_for_window(8_000), store=path, policy=ContextPolicy())
    try:
        session = first.new_session()
        session.add_user(TASK)
        intruder = second.resume(session.id)
        intruder.add_user("A message from another process.")
        sink = MemorySink()
        first.events.add(sink)
        with pytest.raises(ConcurrentWriteError):
            session.add_user("A message from this process.")
        assert session.persisted  # not silently continued in memory
        assert not sink.of_type(ComponentDegraded)
    finally:
        first.close()
        second.close()


def test_a_failing_summarizer_at_a_restart_is_reported(make_engine: EngineFactory) -> None:
    def unavailable(request: ChatRequest) -> str:
        raise ProviderUnavailableError("503 from the summarizer model", provider="openai")

    summarizer = LLMSummarizer(ScriptedModel(default=unavailable))
    engine, sink = make_engine(compactor="restart", summarizer=summarizer)
    driver = start(engine)
    parent = driver.session.id
    driver.until(lambda r: driver.session.id != parent)

    fell_back = [e for e in sink.events if isinstance(e, SummarizerFellBack)]
    assert len(fell_back) == 1 and "503" in fell_back[0].error
    seeded = [m for _, m in engine.store.iter_messages(driver.session.id)]
    summary = next(p for m in seeded for p in m.parts if isinstance(p, SummaryPart))
    assert f"Task: {TASK}" in summary.text


def test_outputs_stored_before_a_store_failure_stay_readable(make_engine: EngineFactory) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inner = open_store(":memory:")
    engine, sink = make_engine(store=FlakyStore(inner, healthy_appends=4))  # type: ignore[arg-type]
    driver = start(engine, output=lambda turn: listing(turn, lines=2_000))
    driver.turn()  # its output is offloaded to the store, then the store starts failing
    before = driver.session.view[-1].tool_results[0].ref
    for _ in range(4):
        driver.turn()
    assert _degraded(sink.events, "store") and before is not None

    page = driver.session.read_result(before, start_line=2_000, end_line=2_000)
    assert not page.is_error, page.content
    assert "src/mod1.py:1999" in page.content
    inner.close()


class DownStore(FlakyStore):
    """A store that goes down for good: after ``healthy_appends`` appends, new sessions fail
    too (blobs, snapshots and reads still work, as on a full disk)."""

    def create_session(self, *args: Any, **kwargs: Any) -> Any:
        if self._left <= 0:
            raise sqlite3.OperationalError("disk I/O error")
        return self._inner.create_session(*args, **kwargs)


@pytest.mark.parametrize("store_class", [FlakyStore, DownStore])
def test_after_a_store_failure_the_restart_preset_compacts_in_place_and_keeps_its_refs(
    make_engine: EngineFactory, store_class: type[FlakyStore]
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inner = open_store(":memory:")
    store = store_class(inner, healthy_appends=5)
    engine, sink = make_engine(compactor="restart", store=store)  # type: ignore[arg-type]
    driver = start(engine, output=lambda turn: listing(turn, lines=2_000 if turn == 6 else 150))
    for _ in range(6):
        driver.turn()
    assert not driver.session.persisted
    big = next(p for m in driver.session.view for p in m.tool_results if "mod6.py" in p.content)
    assert big.ref is not None
    for _ in range(150):  # far past the compact threshold, several times over
        request = driver.turn()
        assert request.tokens <= engine.effective_window
        validate(list(request.messages), provider="anthropic")
    # With the store down a restart has nowhere to go: the session compacts in place, and the
    # model is never told a restart is coming.
    assert driver.session.restarts == 0
    compacted = [e for e in sink.of_type(CompactionFinished) if e.trigger != "mask"]
    assert compacted
    assert not any("restart soon" in r.note for r in driver.requests[6:])
    page = driver.session.read_result(big.ref, start_line=1_999, end_line=2_000)
    assert not page.is_error and "src/mod6.py:1999" in page.content
    assert len(_degraded(sink.events, "store")) == 1  # reported once, whatever failed after
    inner.close()


class NoNewSessions:
    """A real store that refuses to create any session after the first."""

    def __init__(self, inner: SessionStore) -> None:
        self._inner = inner
        self._created = 0

    def create_session(self, *args: Any, **kwargs: Any) -> Any:
        self._created += 1
        if self._created > 1:
            raise sqlite3.OperationalError("database or disk is full")
        return self._inner.create_session(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_restart_the_store_cannot_make_is_reported_and_the_session_compacts_instead(
    make_engine: EngineFactory,
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inner = open_store(":memory:")
    engine, sink = make_engine(compactor="restart", store=NoNewSessions(inner))  # type: ignore[arg-type]
    driver = start(engine)
    first = driver.session.id
    driver.until(lambda r: "restart soon" in r.note)
    for _ in range(30):
        request = driver.turn()
        assert request.tokens <= engine.effective_window
    reported = _degraded(sink.events, "store")
    assert len(reported) == 1 and "create the restarted session" in reported[0].error
    assert driver.session.id == first and driver.session.restarts == 0
    assert [e for e in sink.of_type(CompactionFinished) if e.trigger != "mask"]
    inner.close()
