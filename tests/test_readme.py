"""Every Python block of README.md and of the pages in docs/ runs as printed (issue 15: the
library snippet raised ``NameError: my_tools``), and the README's benchmark figures are
RESULTS.md's (issue 30: they had drifted from it), each quoted once.

Each block runs in a fresh temporary folder (``CONTEXTFOLD_HOME`` there too) with what the README
assumes you have: a project file for the agent to read, and a Claude Code log named
``session.jsonl`` for the replay example (generated, see :func:`claude_code_log`).

The model is the one thing replaced: ``contextfold.providers.model_from_name`` returns a
:class:`~contextfold.ScriptedModel` that reads ``parser.py`` with the README's own tool and then
answers. Patching the function the snippet calls keeps the README exactly what a user runs, with
no switch in the library that only tests use (an environment variable that swaps in a fake model
would be one more thing a user could trip over); the block imports the function from
``contextfold.providers`` at run time, so it gets the patched one.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import contextfold.providers
from benchmarks._results import RESULTS
from benchmarks.readme_figures import BLOCK, render
from contextfold import Message, ScriptedModel, ToolCallPart, ToolResultPart, Usage
from tests.formats.writers import claude_code, write_jsonl

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = (README, *sorted((ROOT / "docs").glob("*.md")))
"""The README and the docs pages it links to: their blocks run the same way."""

PROJECT_FILE = "parser.py"
"""The file the scripted agent reads with the README's tool."""
PROJECT_TEXT = "def parse(text):\n    return text.split()[0]  # IndexError on empty input\n"
FINAL_ANSWER = "parse() now returns [] for empty input."
TRANSCRIPT = "session.jsonl"
"""The log the README's replay example loads."""


@dataclass(frozen=True)
class Block:
    """One fenced Python block of a page, and the line it starts on."""

    page: str
    line: int
    code: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def python_blocks(page: Path) -> list[Block]:
    """Every block of ``page`` fenced as ```python, in order."""
    text = page.read_text(encoding="utf-8")
    name = page.relative_to(ROOT).as_posix()
    return [
        Block(name, text.count("\n", 0, found.start()) + 2, found.group(1))
        for found in re.finditer(r"^```python\n(.*?)^```$", text, flags=re.M | re.S)
    ]


BLOCKS = [block for page in PAGES for block in python_blocks(page)]


def scripted_agent() -> ScriptedModel:
    """Reads the project file with the README's ``read_file`` tool, then answers."""
    call = ToolCallPart.from_args("call_1", "read_file", {"path": PROJECT_FILE})
    return ScriptedModel(
        [Message.assistant("Reading the parser first.", [call]), Message.assistant(FINAL_ANSWER)]
    )


def claude_code_log() -> list[dict[str, object]]:
    """A short Claude Code session: a task, tool calls with their outputs, and a reply."""
    messages: list[Message] = [Message.user("Fix the crash in parse() on empty input.")]
    for step in range(6):
        call = ToolCallPart.from_args(f"toolu_{step}", "Read", {"file_path": f"src/m{step}.py"})
        usage = Usage(2_000 + 900 * step, 40)
        messages += [
            Message.assistant(f"Reading module {step}.", [call]).with_meta(usage=usage),
            Message.tool(ToolResultPart(f"toolu_{step}", "Read", f"def f{step}(x): ...\n" * 40)),
        ]
    messages.append(Message.assistant("Fixed.").with_meta(usage=Usage(7_500, 10)))
    return claude_code(messages)


@pytest.fixture
def readme_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONTEXTFOLD_HOME", str(tmp_path / "home"))
    (tmp_path / PROJECT_FILE).write_text(PROJECT_TEXT)
    write_jsonl(tmp_path / TRANSCRIPT, claude_code_log())
    return tmp_path


def test_the_readme_has_the_library_and_replay_examples() -> None:
    """The blocks this file runs are the ones the pages promise (none skipped by a typo in
    the fence)."""
    assert len(BLOCKS) == sum(p.read_text(encoding="utf-8").count("```python") for p in PAGES)
    assert any("model_from_name" in b.code for b in BLOCKS)
    assert any("replay_transcript" in b.code for b in BLOCKS)


@pytest.mark.filterwarnings("ignore::contextfold.store.SQLiteVersionWarning")
@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_a_readme_python_block_runs_as_printed(
    block: Block, readme_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = scripted_agent()
    named: list[str] = []

    def model_from_name(name: str, **options: object) -> ScriptedModel:
        named.append(name)
        return model

    monkeypatch.setattr(contextfold.providers, "model_from_name", model_from_name)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block.code, block.where, "exec"), {"__name__": "__readme__"})

    # What each kind of block promises happened, not merely that it raised nothing.
    if named:  # the agent loop: the model saw the file through the tool, and the loop ended
        assert len(model.requests) == 2
        [result] = model.requests[1].messages[-1].tool_results
        assert result.content == PROJECT_TEXT and not result.is_error
        assert FINAL_ANSWER in printed.getvalue()
    if "write_report" in block.code:
        report = readme_folder / "report.html"
        assert report.stat().st_size > 0 and "<svg" in report.read_text(encoding="utf-8")
        assert printed.getvalue().strip()  # the figures it prints
    assert named or "write_report" in block.code, "a block this test does not check"


def _block(text: str, name: str) -> str:
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    assert begin in text and end in text, f"README.md has no {name} block"
    return text.split(begin, 1)[1].split(end, 1)[0].strip()


def test_the_readme_figures_are_results_md_s() -> None:
    """The README's benchmark figures are the scoreboard rows of RESULTS.md as it is now:
    ``python -m benchmarks.scoreboard`` (or ``benchmarks.readme_figures``) rewrites them."""
    results = RESULTS.read_text(encoding="utf-8")
    assert _block(README.read_text(encoding="utf-8"), BLOCK) == render(results).strip(), (
        "README.md's figures differ from benchmarks/RESULTS.md: python -m benchmarks.readme_figures"
    )


FIGURE = re.compile(r"\$?\d[\d,]*\.\d+ ?(?:%|ms|x)?")
"""A measured figure: a number with decimals (``91.6%``, ``$53.06``, ``0.03 %``, ``1.24x``)."""


def test_each_benchmark_figure_appears_once() -> None:
    """No page repeats a figure of the README's block elsewhere (the README once quoted
    92.7 % where RESULTS.md said 91.6 %)."""
    readme = README.read_text(encoding="utf-8")
    figures = set(FIGURE.findall(_block(readme, BLOCK)))
    outside = readme.replace(_block(readme, BLOCK), "")
    for page in PAGES[1:]:
        outside += page.read_text(encoding="utf-8")
    repeated = sorted(
        f for f in figures if re.search(rf"(?<![\d.$]){re.escape(f)}(?![\d])", outside)
    )
    assert not repeated, f"figures quoted again outside the README's figures block: {repeated}"
