"""Every benchmark's command line: ``--help`` explains it and runs nothing, and ``--methods``
takes the compared methods by name, commas in names included."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

import pytest

from benchmarks.compaction import DEFAULT_PRESET, METHODS, _methods

ENTRY_POINTS = sorted(
    path.stem
    for path in (Path(__file__).parents[1] / "benchmarks").glob("*.py")
    if not path.stem.startswith("_") and "def main(" in path.read_text(encoding="utf-8")
)


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_help_explains_the_benchmark_and_runs_nothing(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    module = importlib.import_module(f"benchmarks.{name}")
    with pytest.raises(SystemExit) as exited:
        module.main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ")
    assert "--help" in out


def test_the_benchmark_list_is_not_empty() -> None:
    assert {"compaction", "engine_overhead", "proxy", "scoreboard"} <= set(ENTRY_POINTS)


def test_every_method_can_be_picked_by_its_name_alone() -> None:
    for name in METHODS:
        assert _methods(name) == tuple(dict.fromkeys([DEFAULT_PRESET, name]))


def test_names_holding_commas_are_read_back_whole() -> None:
    assert _methods("mask-first, thresholds only,deepagents") == (
        "mask-first",
        "mask-first, thresholds only",
        "deepagents",
    )
    assert _methods("langchain SummarizationMiddleware,untrimmed , window") == (
        "mask-first",
        "langchain SummarizationMiddleware, untrimmed",
        "window",
    )
    assert _methods("langchain SummarizationMiddleware") == (
        "mask-first",
        "langchain SummarizationMiddleware",
    )


@pytest.mark.parametrize("text", ["bogus", "deepagents, bogus", ",", ""])
def test_an_unknown_method_is_refused_with_the_list(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="the methods are: mask-first; "):
        _methods(text)
