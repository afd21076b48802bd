"""mini-swe-agent trajectories whose actions are bash blocks in the assistant's text."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.transcripts import load_mini_swe_agent, load_transcript
from tests.formats.writers import write_json
from tests.strategies import nonempty_text

SUBMISSION = "diff --git a/x.py b/x.py\n+fixed\n"


def trajectory(*messages: dict[str, Any], config: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "info": {
            "mini_version": "1.15.0",
            "exit_status": "Submitted",
            "submission": SUBMISSION,
            "config": config or {"model": {"model_name": "gemini/x"}},
        },
        "messages": [
            {"role": "system", "content": "You run one bash command per reply."},
            {"role": "user", "content": "<pr_description>Fix x</pr_description>"},
            *messages,
        ],
        "trajectory_format": "mini-swe-agent-1",
        "instance_id": "x__x-1",
    }


def said(text: str, prompt_tokens: int = 100) -> dict[str, Any]:
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 9}
    return {"role": "assistant", "content": text, "extra": {"response": {"usage": usage}}}


def observed(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def action(command: str) -> str:
    return f"THOUGHT: next step.\n\n```bash\n{command}\n```"


STEPS = (
    said(action("ls")),
    observed("<returncode>0</returncode>\n<output>\nx.py\n</output>"),
    said(action("python x.py")),
    observed("<returncode>1</returncode>\n<output>\nTraceback\n</output>"),
    said("Two commands:\n```bash\nls\n```\n```bash\npwd\n```"),
    observed("Please always provide EXACTLY ONE action in triple backticks, found 2 actions."),
    said(action("sleep 999")),
    observed("The last command <command>sleep 999</command> timed out and has been killed."),
    said(action("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff")),
    observed(SUBMISSION),
)


def test_text_actions_become_calls_with_their_observations(tmp_path: Path) -> None:
    transcript = load_transcript(write_json(tmp_path / "t.traj.json", trajectory(*STEPS)))
    roles = [m.role for m in transcript.messages]
    assert (
        roles
        == ["system", "user"]
        + ["assistant", "tool"] * 2
        + ["assistant", "user"]
        + [
            "assistant",
            "tool",
        ]
        * 2
    )
    calls = transcript.tool_calls()
    assert [c.args()["command"] for c in calls] == [
        "ls",
        "python x.py",
        "sleep 999",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff",
    ]
    results = [r for m in transcript.messages for r in m.tool_results]
    assert [r.is_error for r in results] == [False, True, True, False]
    # Texts stay verbatim on both sides.
    assert transcript.messages[2].text == action("ls")
    assert results[0].content == STEPS[1]["content"]
    assert all("text_actions" in m.meta.flags for m in transcript.messages if m.tool_calls)
    assert transcript.unanswered_calls() == []
    assert transcript.messages[7].text.startswith("Please always provide")
    assert [u.input_tokens for _, u in transcript.usages()] == [100] * 5
    assert transcript.model == "gemini/x" and transcript.title == "x__x-1"


def test_text_mode_imports_exactly_what_was_recorded(tmp_path: Path) -> None:
    document = trajectory(*STEPS)
    path = write_json(tmp_path / "t.traj.json", document)
    transcript = load_mini_swe_agent(path, actions="text")
    assert [(m.role, m.text) for m in transcript.messages] == [
        (m["role"], m["content"]) for m in document["messages"]
    ]
    assert transcript.tool_calls() == []


def test_the_recorded_action_regex_is_used(tmp_path: Path) -> None:
    config = {"agent": {"action_regex": r"<cmd>(.*?)</cmd>"}}
    document = trajectory(
        said("THOUGHT: look\n<cmd>ls -la</cmd>"),
        observed("<returncode>0</returncode>\n<output>\n.\n</output>"),
        config=config,
    )
    transcript = load_transcript(write_json(tmp_path / "t.traj.json", document))
    assert [c.args() for c in transcript.tool_calls()] == [{"command": "ls -la"}]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(nonempty_text.filter(lambda s: "```" not in s), st.integers(-1, 3)),
        max_size=4,
    )
)
def test_text_actions_round_trip(steps: list[tuple[str, int]]) -> None:
    commands = [f"echo {i} {text!r}" for i, (text, _) in enumerate(steps)]
    messages: list[dict[str, Any]] = []
    for command, (text, code) in zip(commands, steps, strict=True):
        messages.append(said(f"THOUGHT: {text}\n\n```bash\n{command}\n```"))
        messages.append(observed(f"<returncode>{code}</returncode>\n<output>\n{text}\n</output>"))
    with tempfile.TemporaryDirectory() as folder:
        path = write_json(Path(folder) / "t.traj.json", trajectory(*messages))
        transcript = load_transcript(path)
    assert [c.args()["command"] for c in transcript.tool_calls()] == commands
    results = [r for m in transcript.messages for r in m.tool_results]
    assert [r.is_error for r in results] == [code != 0 for _, code in steps]
    assert [r.content for r in results] == [m["content"] for m in messages[1::2]]
