"""opencode (npm ``opencode-ai``) with an OpenAI-compatible provider (Chat Completions), directly
(the control) and through the proxy at 20k (issue 26): ``opencode run TASK`` then
``opencode run --continue RESUME``.

The provider is declared in ``$XDG_CONFIG_HOME/opencode/opencode.json`` with the
``@ai-sdk/openai-compatible`` package (bundled in opencode: nothing is downloaded) and a model
whose ``limit.context`` is large (:data:`CLIENT_CONTEXT`). Permissions ``edit`` and ``bash``
are ``allow``, so no prompt is asked. opencode 1.18 sends a title request first (no tools;
answered as a side request; not again on ``--continue``), then the conversation with 10 tools
(bash, edit, glob, grep, read, skill, task, todowrite, webfetch, write). It also tries to
fetch its model list from models.opencode.ai, which the refusing proxy address turns away.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import installed
from tests.clients.harness import ClientRun, Session, clean_env, drive, run_client
from tests.clients.plans import PlanScript, Step
from tests.clients.repo import edits_missing, make_repo
from tests.clients.responses_upstream import ResponsesUpstream

pytestmark = pytest.mark.slow

TASK = "Work through the scripted inventory plan with opencode, part one."
RESUME = "Continue the inventory plan with opencode, part two."
PART_ONE_END = "CF-OPENCODE-PART-ONE-DONE"
FINAL = "CF-OPENCODE-DONE: the scripted plan is finished."
TIMEOUT = 300.0
WINDOW = 20_000
CLIENT_CONTEXT = 1_000_000
"""The context opencode is told its model has: far above every request, so that opencode never
compacts itself (at 20k it does, in the direct control: a summary request without tools, then
"Continue if you have next steps…" as the user's message, and the script's plan is gone).
Managing the window is the proxy's job here."""


RESPONSES_WINDOW = 200_000
"""The proxy's window for the Responses provider: what is tested there is the protocol, not
the window's management (the 20k case above is issue 26's)."""


def _bash(command: str) -> tuple[str, dict[str, Any]]:
    return "bash", {"command": command, "description": "Scripted step"}


def plan(work: Path) -> list[Step]:
    """Twelve steps with read, edit, write, glob, grep and bash, a turn end, then five more."""
    stock, pricing = str(work / "inventory" / "stock.py"), str(work / "inventory" / "pricing.py")

    def edit(path: str, old: str, new: str) -> tuple[str, dict[str, Any]]:
        return "edit", {"filePath": path, "oldString": old, "newString": new}

    # opencode's glob and grep run ripgrep (`rg`); without it they fail ("ripgrep execution
    # failed"), so the plan lists and searches with bash instead.
    listing = ("glob", {"pattern": "**/*.py"}) if shutil.which("rg") else _bash("ls -R inventory")
    search = (
        ("grep", {"pattern": "TODO", "path": str(work)})
        if shutil.which("rg")
        else _bash("grep -rn TODO inventory")
    )
    return [
        Step((listing,), "Find the files.", ("stock.py",), user=TASK),
        Step((("read", {"filePath": stock}),), "Read stock.", ("def reorder_level",)),
        Step((search,), "Find TODOs.", ("cf-1",)),
        Step(
            (edit(stock, "return 0  # TODO(cf-1)", "return max(0, threshold - on_hand)"),),
            "Fix reorder_level.",
            thinking="The gap to the threshold.",
        ),
        Step((_bash("cat data/items.csv"),), "Print the items.", ("SKU02999",)),
        Step(
            (("read", {"filePath": str(work / "logs" / "app.log"), "offset": 1, "limit": 400}),),
            "Read the log.",
            ("request 0001",),
        ),
        Step((("read", {"filePath": pricing}),), "Read pricing.", ("def price_with_tax",)),
        Step((edit(pricing, "TAX = 0.0  # TODO(cf-2)", "TAX = 0.2"),), "Set the tax."),
        Step((_bash("seq 1 20000"),), "Print many lines."),
        Step((edit(stock, "LIMIT = 100", "LIMIT = 250"),), "Raise the limit."),
        Step((_bash("python3 tests/check.py"),), "Run the checks.", ("cf-all-ok",)),
        Step(say=PART_ONE_END),
        Step((("read", {"filePath": pricing}),), "Read pricing.", ("TAX = 0.2",), user=RESUME),
        Step((edit(pricing, "DISCOUNT = 0  # TODO(cf-3)", "DISCOUNT = 5"),), "Discount."),
        Step(
            (("write", {"filePath": str(work / "NOTES.md"), "content": "# Notes\n\ncf-notes\n"}),),
            "Write notes.",
        ),
        Step((_bash("grep -n ERROR logs/app.log | head -n 200"),), "Errors.", ("request 0007",)),
        Step((_bash("python3 tests/check.py --all"),), "All checks.", ("cf-all-ok",)),
    ]


PROVIDERS = {
    "compatible": ("cfscripted", "@ai-sdk/openai-compatible"),
    "openai": ("openai", None),
}
"""opencode's providers under test: a declared OpenAI-compatible one (Chat Completions), and
the built-in ``openai`` provider (the Responses API), pointed at the base URL."""


def write_config(home: Path, base_url: str, provider: str = "compatible") -> str:
    """``opencode.json`` with ``provider`` (a key of :data:`PROVIDERS`) at ``base_url``;
    returns the model name to run (``provider/scripted``)."""
    name, package = PROVIDERS[provider]
    declared: dict[str, Any] = {
        "name": "scripted",
        "options": {"baseURL": f"{base_url}/v1", "apiKey": "dummy"},
        "models": {
            "scripted": {"name": "scripted", "limit": {"context": CLIENT_CONTEXT, "output": 4000}}
        },
    }
    if package is not None:
        declared["npm"] = package
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {name: declared},
        "model": f"{name}/scripted",
        "autoupdate": False,
        "share": "disabled",
        "permission": {"edit": "allow", "bash": "allow"},
    }
    directory = home / ".config" / "opencode"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "opencode.json").write_text(json.dumps(config, indent=2))
    return f"{name}/scripted"


@pytest.fixture(scope="module")
def opencode() -> str:
    return installed("opencode", "npm install -g opencode-ai; .ci/run installs it")


def opencode_session(
    opencode: str, dirs: tuple[Path, Path], provider: str = "compatible", note: str = ""
) -> Session:
    home, work = dirs
    make_repo(work)
    steps = plan(work)

    def run(base_url: str, arguments: list[str]) -> ClientRun:
        model = write_config(home, base_url, provider)
        command = [opencode, "run", "-m", model, *arguments]
        return run_client(command, cwd=work, env=clean_env(home), timeout=TIMEOUT)

    def runs(base_url: str) -> list[ClientRun]:
        done = [run(base_url, [TASK])]
        if done[0].returncode == 0:
            done.append(run(base_url, ["--continue", RESUME]))
        return done

    return Session(
        client="opencode",
        script=PlanScript(steps, marker_tool="bash", final=FINAL),
        runs=runs,
        landed=lambda: edits_missing(work),
        task=TASK,
        final=FINAL,
        note=note,
    )


def test_opencode_direct(
    opencode: str, dirs: tuple[Path, Path], show: Callable[[str], None]
) -> None:
    spec = opencode_session(opencode, dirs)
    _, problems = drive(spec, ResponsesUpstream(spec.script), None, dirs[0].parent, show)
    assert not problems, "\n\n".join(problems)


def test_opencode_through_the_proxy(
    opencode: str, dirs: tuple[Path, Path], show: Callable[[str], None]
) -> None:
    spec = opencode_session(opencode, dirs)
    _, problems = drive(spec, ResponsesUpstream(spec.script), WINDOW, dirs[0].parent, show)
    assert not problems, "\n\n".join(problems)


def test_opencode_openai_provider_direct(
    opencode: str, dirs: tuple[Path, Path], show: Callable[[str], None]
) -> None:
    """The built-in ``openai`` provider speaks the Responses API: the control."""
    spec = opencode_session(opencode, dirs, "openai", note="openai provider, Responses")
    upstream = ResponsesUpstream(spec.script)
    _, problems = drive(spec, upstream, None, dirs[0].parent, show)
    assert not problems, "\n\n".join(problems)
    assert {r.path for r in upstream.requests if r.protocol} == {"/v1/responses"}


def test_opencode_openai_provider_through_the_proxy(
    opencode: str, dirs: tuple[Path, Path], show: Callable[[str], None]
) -> None:
    spec = opencode_session(opencode, dirs, "openai", note="openai provider, Responses")
    upstream = ResponsesUpstream(spec.script)
    _, problems = drive(spec, upstream, RESPONSES_WINDOW, dirs[0].parent, show)
    assert not problems, "\n\n".join(problems)
    assert {r.path for r in upstream.requests if r.protocol} == {"/v1/responses"}
