"""Codex CLI (npm ``@openai/codex``): ``codex exec`` then ``codex exec resume --last``, on the
OpenAI Responses API, directly (the control) and through the proxy at 32k (issue 27).

Codex reads its provider from ``$CODEX_HOME/config.toml``: a custom provider whose ``base_url``
is the proxy (or the upstream), ``wire_api = "responses"`` (the only one Codex 0.171 accepts),
``supports_websockets = false`` (else it first tries a WebSocket on ``/v1/responses``), no
retries. Its tools, as 0.171 sends them for an unknown model: ``exec_command`` (``{"cmd": ...}``,
run in a PTY), ``write_stdin``, ``request_user_input``, ``view_image``, the namespace
``multi_agent_v1``, ``get_goal``/``create_goal``/``update_goal`` and the hosted
``web_search`` (switched off here). Its system prompt comes as ``developer`` input messages,
not ``instructions``. Edits are made with shell commands through ``exec_command``.

``model_context_window`` is set far above the proxy's window so that Codex never compacts
itself: managing the window is the proxy's job here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import installed, write_codex_config
from tests.clients.harness import ClientRun, Session, clean_env, drive, run_client
from tests.clients.plans import PlanScript, Step
from tests.clients.repo import edits_missing, make_repo
from tests.clients.responses_upstream import ResponsesUpstream, serving_only

pytestmark = pytest.mark.slow

TASK = "Work through the scripted inventory plan with Codex, part one."
RESUME = "Continue the inventory plan, part two."
PART_ONE_END = "CF-CODEX-PART-ONE-DONE"
FINAL = "CF-CODEX-DONE: the scripted plan is finished."
TIMEOUT = 300.0
WINDOW = 32_000


def _sh(command: str) -> tuple[str, dict[str, Any]]:
    return "exec_command", {"cmd": command, "yield_time_ms": 10_000}


def plan() -> list[Step]:
    """Fifteen steps of shell work, a turn end, then six more after ``resume --last``."""
    return [
        Step((_sh("ls -R inventory tests"),), "List the files.", ("stock.py",), user=TASK),
        Step((_sh("cat inventory/stock.py"),), "Read stock.", ("def reorder_level",)),
        Step((_sh("grep -rn TODO inventory"),), "Find TODOs.", ("TODO(cf-1)",)),
        Step((_sh("python3 tests/check.py"),), "Run the checks.", ("edit-1 FAILED",)),
        Step(
            (
                _sh(
                    "sed -i 's/return 0  # TODO(cf-1)/return max(0, threshold - on_hand)/' "
                    "inventory/stock.py && echo cf-edit-1-done"
                ),
            ),
            "Fix reorder_level.",
            ("cf-edit-1-done",),
            thinking="The reorder level is the gap to the threshold.",
        ),
        Step((_sh("cat data/items.csv"),), "Print the items.", ("sku,name,qty,price",)),
        Step((_sh("head -n 700 logs/app.log"),), "Read the log.", ("request 0001",)),
        Step((_sh("grep -c ERROR logs/app.log"),), "Count errors.", ("500",)),
        Step(
            (_sh("sed -i 's/TAX = 0.0  # TODO(cf-2)/TAX = 0.2/' inventory/pricing.py"),),
            "Set the tax.",
        ),
        Step(
            (_sh("grep -q 'TAX = 0.2' inventory/pricing.py && echo cf-edit-2-ok"),),
            "Check it.",
            ("cf-edit-2-ok",),
        ),
        Step((_sh("seq 1 20000"),), "Print many lines."),
        Step(
            (
                _sh("sed -i 's/LIMIT = 100/LIMIT = 250/' inventory/stock.py"),
                _sh("wc -l data/items.csv"),
            ),
            "Two at once.",
            ("3000",),
        ),
        Step((_sh("python3 tests/check.py"),), "Run the checks.", ("cf-all-ok",)),
        Step(say=PART_ONE_END),
        Step((_sh("cat inventory/pricing.py"),), "Read pricing.", ("TAX = 0.2",), user=RESUME),
        Step(
            (_sh("sed -i 's/DISCOUNT = 0  # TODO(cf-3)/DISCOUNT = 5/' inventory/pricing.py"),),
            "Set the discount.",
            thinking="Discount next.",
        ),
        Step((_sh("grep -n ERROR logs/app.log | head -n 300"),), "List errors.", ("request 0007",)),
        Step((_sh("python3 tests/check.py --all"),), "Run all checks.", ("cf-all-ok",)),
        Step((_sh("sed -n '1000,1600p' data/items.csv"),), "Read some items.", ("SKU01000",)),
        Step((_sh("echo cf-codex-last-step"),), "Last step.", ("cf-codex-last-step",)),
    ]


@pytest.fixture(scope="module")
def codex() -> str:
    return installed("codex", "npm install -g @openai/codex; .ci/run installs it")


def codex_session(codex: str, dirs: tuple[Path, Path], note: str = "") -> Session:
    home, work = dirs
    make_repo(work)
    steps = plan()
    codex_home = home / ".codex"

    def run(base_url: str, arguments: list[str]) -> ClientRun:
        write_codex_config(codex_home, base_url)
        env = clean_env(home, CODEX_HOME=str(codex_home), CF_SCRIPTED_KEY="dummy")
        return run_client([codex, "exec", *arguments], cwd=work, env=env, timeout=TIMEOUT, stdin="")

    def runs(base_url: str) -> list[ClientRun]:
        done = [run(base_url, ["--skip-git-repo-check", TASK])]
        if done[0].returncode == 0:
            done.append(run(base_url, ["resume", "--last", "--skip-git-repo-check", RESUME]))
        return done

    return Session(
        client="codex",
        script=PlanScript(steps, marker_tool="exec_command", final=FINAL),
        runs=runs,
        landed=lambda: edits_missing(work),
        task=TASK,
        final=FINAL,
        note=note,
    )


def test_codex_direct(codex: str, dirs: tuple[Path, Path], show: Callable[[str], None]) -> None:
    spec = codex_session(codex, dirs)
    _, problems = drive(spec, ResponsesUpstream(spec.script), None, dirs[0].parent, show)
    assert not problems, "\n\n".join(problems)


def test_codex_through_the_proxy(
    codex: str, dirs: tuple[Path, Path], show: Callable[[str], None]
) -> None:
    spec = codex_session(codex, dirs)
    _, problems = drive(spec, ResponsesUpstream(spec.script), WINDOW, dirs[0].parent, show)
    assert not problems, "\n\n".join(problems)


def test_codex_bridged_to_a_chat_only_upstream(
    codex: str, dirs: tuple[Path, Path], show: Callable[[str], None]
) -> None:
    """Codex speaks Responses; the upstream only Chat Completions (as Ollama, vLLM and LM
    Studio do): the proxy finds that out (``/v1/responses`` answers 404) and bridges."""
    spec = codex_session(codex, dirs, note="Responses → Chat upstream")
    upstream = serving_only(ResponsesUpstream(spec.script), "openai")
    _, problems = drive(spec, upstream, WINDOW, dirs[0].parent, show)
    assert not problems, "\n\n".join(problems)
    paths = {r.path for r in upstream.requests if r.protocol is not None}
    assert paths == {"/v1/chat/completions"}, paths
