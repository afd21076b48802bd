"""Facts read from tool calls and outputs: files touched, errors, failed approaches."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from contextfold.compaction import extract_facts
from contextfold.history import facts
from contextfold.history.shell import shell_effects
from contextfold.messages import Message, ToolCallPart, ToolResultPart

from .conftest import tool_round


@pytest.mark.parametrize(
    ("command", "reads", "writes"),
    [
        ("sed -i 's/a;b/c/' src/app.py", [], ["src/app.py"]),
        ("sed -n '10,40p' src/app.py", ["src/app.py"], []),
        ("cat > repro.py <<'EOF'\nimport app\nprint(open('x.txt').read())\nEOF", [], ["repro.py"]),
        ("cat <<EOF > notes.md\nhello > not_a_file.txt\nEOF\npython notes.md", [], ["notes.md"]),
        ("echo 'x = 1' >> config.py && python config.py", [], ["config.py"]),
        ("printf 'a' | tee out.log >/dev/null", [], ["out.log"]),
        ("cd /testbed && cat src/a.py | head -n 20", ["src/a.py"], []),
        ("head -n 50 setup.py; tail -20 CHANGES.rst", ["setup.py", "CHANGES.rst"], []),
        ("nl -ba django/db/models/query.py | sed -n '1,20p'", ["django/db/models/query.py"], []),
        ("grep -n 'def foo' src/a.py src/b.py", ["src/a.py", "src/b.py"], []),
        ("grep -rn pattern src/", [], []),
        ("git diff src/a.py", ["src/a.py"], []),
        ("git checkout -- src/a.py", [], ["src/a.py"]),
        (
            "python - <<'EOF'\nwith open('src/gen.py', 'w') as f:\n    f.write('x')\nEOF",
            [],
            ["src/gen.py"],
        ),
        ("python -c \"open('data.json','w').write('{}')\"", [], ["data.json"]),
        (
            "cp src/a.py src/a.py.bak && mv tmp.py src/b.py",
            [],
            ["src/a.py.bak", "src/b.py", "tmp.py"],
        ),
        ("perl -pi -e 's/x/y/' lib/m.pm", [], ["lib/m.pm"]),
        ("python reproduce.py 2>&1 | tail -5", [], []),
        ("ls -la && find . -name '*.py' | head", [], []),
    ],
)
def test_shell_commands_reveal_the_files_they_touch(
    command: str, reads: list[str], writes: list[str]
) -> None:
    effects = shell_effects(command)
    assert sorted(effects.reads) == sorted(reads)
    assert sorted(effects.writes) == sorted(writes)


def _session(*calls: tuple[str, dict[str, object], str, bool]) -> list[Message]:
    view = [Message.user("Make the tests pass.", id="u")]
    for n, (name, args, output, is_error) in enumerate(calls):
        view.append(
            Message.assistant("", [ToolCallPart.from_args(f"c{n}", name, args)], id=f"a{n}")
        )
        view.append(Message.tool(ToolResultPart(f"c{n}", name, output, is_error), id=f"t{n}"))
    return view


def test_claude_code_and_editor_tools() -> None:
    view = _session(
        ("Read", {"file_path": "/repo/lib/a.ex"}, "1\tdefmodule A", False),
        (
            "Edit",
            {"file_path": "/repo/lib/a.ex", "old_string": "a", "new_string": "b"},
            "ok",
            False,
        ),
        ("Write", {"file_path": "/repo/lib/new.ex", "content": "x"}, "ok", False),
        ("str_replace_editor", {"command": "view", "path": "/repo/README.md"}, "text", False),
        ("str_replace_editor", {"command": "str_replace", "path": "/repo/x.py"}, "done", False),
        (
            "apply_patch",
            {"input": "*** Begin Patch\n*** Update File: src/m.rs\n@@\n*** End Patch"},
            "ok",
            False,
        ),
        ("Read", {"file_path": "/repo/lib/b.ex"}, "1\tdefmodule B", False),
    )
    facts = extract_facts(view)
    assert [f.text for f in facts.files_modified] == [
        "/repo/lib/a.ex",
        "/repo/lib/new.ex",
        "/repo/x.py",
        "src/m.rs",
    ]
    # A file both read and modified is listed once, as modified.
    assert [f.text for f in facts.files_read] == ["/repo/README.md", "/repo/lib/b.ex"]
    assert facts.files_modified[0].sources == ("a1",)


def test_errors_are_kept_verbatim_with_the_exact_line() -> None:
    traceback = (
        "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n"
        '  File "repro.py", line 3, in <module>\n    main()\n'
        "TypeError: 'NoneType' object is not subscriptable\n</output>"
    )
    view = [Message.user("fix it", id="u")]
    view += tool_round(0, "python repro.py", traceback)
    view += tool_round(
        1, "grep -n missing src/a.py", "<returncode>1</returncode>\n<output>\n</output>"
    )
    view += tool_round(
        2, "make build", "<returncode>2</returncode>\n<output>\ncc: fatal: no input\n</output>"
    )
    facts = extract_facts(view)
    assert [e.text for e in facts.errors] == [
        "TypeError: 'NoneType' object is not subscriptable",
        "cc: fatal: no input",
    ]
    assert facts.errors[0].sources == ("t0",)
    grep = facts.actions[1]
    assert grep.exit_code == 1 and not grep.failed  # grep finding nothing is not an error


def test_a_failure_later_superseded_is_a_failed_approach() -> None:
    view = [Message.user("fix it", id="u")]
    view += tool_round(
        0, "python repro.py", "<returncode>1</returncode>\n<output>\nValueError: bad\n</output>"
    )
    view += tool_round(
        1, "sed -i 's/x/y/' app.py", "<returncode>0</returncode>\n<output>\n</output>"
    )
    view += tool_round(2, "python repro.py", "<returncode>0</returncode>\n<output>\nok\n</output>")
    facts = extract_facts(view)
    assert [f.text for f in facts.failed_approaches] == [
        "`python repro.py` → ValueError: bad (superseded later)"
    ]
    assert facts.failed_approaches[0].sources == ("a0", "a2")


def test_claude_code_tool_errors_count_as_failures() -> None:
    view = _session(
        (
            "Edit",
            {"file_path": "a.py", "old_string": "zz"},
            "<tool_use_error>String to replace not found in file.</tool_use_error>",
            True,
        ),
        (
            "Bash",
            {"command": "mix test"},
            "Exit code 1\n** (CompileError) lib/a.ex:3: undefined function foo/0",
            True,
        ),
    )
    facts = extract_facts(view)
    assert facts.files_modified == ()  # the edit failed: nothing was modified
    assert [e.text for e in facts.errors] == [
        "<tool_use_error>String to replace not found in file.</tool_use_error>",
        "** (CompileError) lib/a.ex:3: undefined function foo/0",
    ]


def test_text_actions_of_shell_only_agents() -> None:
    view = [
        Message.user("fix the bug", id="u"),
        Message.assistant("THOUGHT: edit it.\n\n```bash\nsed -i 's/a/b/' pkg/mod.py\n```", id="a"),
        Message.user("<returncode>0</returncode>\n<output>\n</output>", id="o"),
    ]
    facts = extract_facts(view)
    assert [f.text for f in facts.files_modified] == ["pkg/mod.py"]
    assert facts.task is not None and facts.task.text == "fix the bug"


def _narrative_view() -> list[Message]:
    """A task with a constraint, a decision and a next step."""
    return [
        Message.user("Port the cache. Do not change the public API.", id="u"),
        Message.assistant(
            "The root cause is a stale key. I will use an LRU instead of a dict.", id="a1"
        ),
        Message.assistant("Tests pass. Next I need to update the docs.", id="a2"),
    ]


def test_decisions_next_steps_and_constraints() -> None:
    view = _narrative_view()
    facts = extract_facts(view)
    assert [f.text for f in facts.constraints] == ["Do not change the public API."]
    assert "The root cause is a stale key." in [f.text for f in facts.decisions]
    assert [f.text for f in facts.next_steps] == ["Next I need to update the docs."]
    assert json.dumps([f.sources for f in facts.next_steps]) == '[["a2"]]'


def _history_with_failures() -> list[Message]:
    view = [Message.user("Fix the failing test in app.py", id="u")]
    outputs = [
        ("pytest -q", "<returncode>1</returncode>\nE   AssertionError: 3 != 2\n1 failed"),
        ("grep -n foo app.py", "<returncode>1</returncode>\n"),
        ("cat app.py", "def f(x):\n    return x + 1\n"),
        ("python run.py", "Traceback (most recent call last):\nValueError: bad input\n"),
        ("pytest -q", "<returncode>0</returncode>\n3 passed"),
    ]
    for n, (command, output) in enumerate(outputs):
        view += tool_round(n, command, output)
    return view


def test_actions_remembered_are_the_actions_computed_afresh() -> None:
    view = _history_with_failures()
    remembered = facts.tool_actions(view)
    facts._cached_action.cache_clear()
    facts._classified_call.cache_clear()
    facts._outcomes.clear()
    assert facts.tool_actions(view) == remembered
    assert any(a.failed for a in remembered) and any(a.errors for a in remembered)


def test_an_output_read_back_with_its_ref_gives_the_same_action_but_the_ref() -> None:
    # A summary reads outputs back with their refs set: the same call, the same output.
    view = _history_with_failures()
    with_refs = [
        m.with_parts(
            [
                ToolResultPart(p.call_id, p.name, p.content, ref=f"ref_{i:012d}")
                if isinstance(p, ToolResultPart)
                else p
                for p in m.parts
            ]
        )
        for i, m in enumerate(view)
    ]
    plain, read_back = facts.tool_actions(view), facts.tool_actions(with_refs)
    assert [replace(a, ref=None) for a in read_back] == plain
    assert all(a.ref is not None for a in read_back)


def test_without_the_narrative_only_the_narrative_is_left_out() -> None:
    view = _narrative_view()
    full = extract_facts(view)
    narrow = extract_facts(view, narrative=False)
    assert full.decisions and full.next_steps and full.latest_progress
    assert narrow == replace(
        full, failed_approaches=(), decisions=(), next_steps=(), latest_progress=None
    )
