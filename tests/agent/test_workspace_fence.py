"""The workspace is a fence: hard links, symlink swaps and symlinked folders lead nowhere out.

Each test plants what a hostile repository or a hostile process could (a hard link to a file
outside, a folder that is a symlink to one outside, a path swapped between a file and a symlink
while the tools run) and checks what a user would notice: nothing from outside reaches the
model, nothing outside changes, and the tool says what it did.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from benchmarks.workspace_attacks import swapping
from contextfold.agent import Toolbox, Workspace
from contextfold.confined_files import ConfinedRoot, LinkCensus
from tests.agent.conftest import failed, ok, run

SECRET = "TOP SECRET aws_secret_access_key\n"
RACE_CALLS = 2_000
"""Calls each race test makes while another process swaps the path: enough to hit the window (a
check by name then an open by name lost about 1 in 400 of them: benchmarks/workspace_attacks)."""


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A secret file beside the workspace, not in it."""
    folder = tmp_path / "home"
    folder.mkdir()
    secret = folder / "credentials"
    secret.write_text(SECRET)
    return secret


# -- hard links ------------------------------------------------------------------------------------


@pytest.fixture
def hard_link(root: Path, outside: Path) -> Path:
    link = root / "notes.txt"
    os.link(outside, link)
    return link


def test_hard_link_to_outside_is_not_read(toolbox: Toolbox, hard_link: Path) -> None:
    message = failed(toolbox, "read_file", path="notes.txt")
    assert "TOP SECRET" not in message
    assert "'notes.txt' is a hard link: the file has 2 names, and 1 of them is outside" in message
    assert "nothing was read" in message
    assert "ask the user to copy the file" in message
    assert run(toolbox, "read_file", path="notes.txt").metadata["error"] == "hard_link"


def test_hard_link_to_outside_is_not_searched(
    toolbox: Toolbox, root: Path, hard_link: Path
) -> None:
    (root / "plain.txt").write_text("TOP of the file\n")
    text = ok(toolbox, "grep", pattern="TOP")
    assert "SECRET" not in text
    assert text.splitlines()[1] == "plain.txt:1:TOP of the file"
    assert "[not searched: 1 hard link to a file with a name outside the workspace: notes.txt" in (
        text
    )
    # Named alone, the file is an error the model reads, not a silent empty result.
    message = failed(toolbox, "grep", pattern="SECRET", path="notes.txt")
    assert "hard link" in message
    assert "TOP SECRET" not in message


def test_hard_link_is_not_written_or_edited(
    toolbox: Toolbox, hard_link: Path, outside: Path
) -> None:
    before = outside.stat()
    message = failed(toolbox, "write_file", path="notes.txt", content="pwned\n")
    assert "is a hard link: the file has 2 names" in message
    assert "nothing was written" in message
    message = failed(toolbox, "edit_file", path="notes.txt", old_string="TOP", new_string="X")
    assert "nothing was written" in message
    assert "TOP SECRET" not in message
    assert outside.read_text() == SECRET
    assert outside.stat().st_mtime_ns == before.st_mtime_ns
    assert hard_link.stat().st_ino == outside.stat().st_ino  # the link itself is left alone


def test_hard_links_all_inside_are_read_but_not_written(toolbox: Toolbox, root: Path) -> None:
    (root / "a.txt").write_text("shared\n")
    (root / "sub").mkdir()
    os.link(root / "a.txt", root / "sub" / "b.txt")
    assert ok(toolbox, "read_file", path="sub/b.txt") == "     1\tshared"
    assert ok(toolbox, "grep", pattern="shared").splitlines()[1:] == [
        "a.txt:1:shared",
        "sub/b.txt:1:shared",
    ]
    assert "hard link" in failed(toolbox, "write_file", path="a.txt", content="x")
    assert (root / "a.txt").read_text() == "shared\n"


def test_a_census_past_its_budget_cannot_prove_a_link_inside(root: Path) -> None:
    (root / "a.txt").write_text("x")
    (root / "sub").mkdir()
    os.link(root / "a.txt", root / "sub" / "b.txt")
    for index in range(5):
        (root / f"filler{index}").write_text("")
    confined = ConfinedRoot(root)
    status = (root / "a.txt").stat()
    assert LinkCensus(confined).names_inside(status) == 2
    short = LinkCensus(confined, budget=2)
    assert short.names_inside(status) < 2
    assert not short.complete


# -- symlinked folders in the middle of a path -----------------------------------------------------


def test_a_symlinked_folder_mid_path_pointing_out_is_refused(
    toolbox: Toolbox, root: Path, outside: Path
) -> None:
    (root / "src").mkdir()
    (root / "src" / "conf").symlink_to(outside.parent, target_is_directory=True)
    for tool, arguments in [
        ("read_file", {"path": "src/conf/credentials"}),
        ("grep", {"pattern": "SECRET", "path": "src/conf"}),
        ("list_dir", {"path": "src/conf"}),
        ("write_file", {"path": "src/conf/new.txt", "content": "x"}),
        ("edit_file", {"path": "src/conf/credentials", "old_string": "TOP", "new_string": "X"}),
    ]:
        message = failed(toolbox, tool, **arguments)
        assert "outside the workspace" in message, tool
        assert "TOP SECRET" not in message
    assert sorted(p.name for p in outside.parent.iterdir()) == ["credentials"]
    assert outside.read_text() == SECRET
    assert ok(toolbox, "grep", pattern="TOP SECRET").startswith("No matches")


def test_a_symlinked_folder_mid_path_pointing_inside_still_works(
    toolbox: Toolbox, root: Path
) -> None:
    (root / "real" / "deep").mkdir(parents=True)
    (root / "real" / "deep" / "f.txt").write_text("one\n")
    (root / "alias").symlink_to(root / "real", target_is_directory=True)
    assert ok(toolbox, "read_file", path="alias/deep/f.txt") == "     1\tone"
    ok(toolbox, "edit_file", path="alias/deep/f.txt", old_string="one", new_string="two")
    assert (root / "real" / "deep" / "f.txt").read_text() == "two\n"
    assert (root / "alias").is_symlink()


# -- atomic writes ---------------------------------------------------------------------------------


def test_writes_replace_atomically_and_keep_the_mode(toolbox: Toolbox, root: Path) -> None:
    script = root / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o750)
    ok(toolbox, "write_file", path="run.sh", content="echo new\n")
    assert script.read_text() == "echo new\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    ok(toolbox, "edit_file", path="run.sh", old_string="new", new_string="newer")
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert sorted(p.name for p in root.iterdir()) == ["run.sh"]  # no temporary file left


def test_a_read_only_file_is_not_replaced(toolbox: Toolbox, root: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root may write any file")
    locked = root / "locked.txt"
    locked.write_text("keep\n")
    locked.chmod(0o444)
    outcome = run(toolbox, "write_file", path="locked.txt", content="x")
    assert outcome.is_error
    assert "Permission denied" in outcome.content
    assert locked.read_text() == "keep\n"


def test_a_symlink_inside_is_written_through_to_its_target(toolbox: Toolbox, root: Path) -> None:
    (root / "real.txt").write_text("a\n")
    (root / "alias.txt").symlink_to("real.txt")
    ok(toolbox, "write_file", path="alias.txt", content="b\n")
    assert (root / "real.txt").read_text() == "b\n"
    assert (root / "alias.txt").is_symlink()


# -- the swap race ---------------------------------------------------------------------------------


def test_a_file_swapped_for_a_symlink_never_leaks_on_read(
    toolbox: Toolbox, root: Path, outside: Path
) -> None:
    kinds: dict[str, str] = {}
    with swapping(root / "swap.txt", False, outside):
        for _ in range(RACE_CALLS):
            outcome = run(toolbox, "read_file", path="swap.txt")
            assert "TOP SECRET" not in outcome.content
            kinds[str(outcome.metadata.get("error", "read"))] = outcome.content
    assert "read" in kinds, kinds  # the race ran: both sides of the swap were met
    assert set(kinds) <= {"read", "outside_workspace", "path_changed", "not_found"}, kinds


def test_a_file_swapped_for_a_symlink_is_never_written_through(
    toolbox: Toolbox, root: Path, outside: Path
) -> None:
    before = outside.stat()

    with swapping(root / "swap.txt", False, outside):
        for index in range(RACE_CALLS):
            run(toolbox, "write_file", path="swap.txt", content=f"model text {index}\n")
    assert outside.read_text() == SECRET
    assert outside.stat().st_mtime_ns == before.st_mtime_ns
    leftovers = [p.name for p in root.iterdir() if "contextfold-tmp" in p.name]
    assert leftovers == []


def test_a_folder_swapped_for_a_symlink_never_leaks(
    toolbox: Toolbox, root: Path, outside: Path
) -> None:
    writes_done = 0
    with swapping(root / "conf", True, outside.parent):
        for index in range(RACE_CALLS // 2):
            outcome = run(toolbox, "read_file", path="conf/credentials")
            assert "TOP SECRET" not in outcome.content
            grep = run(toolbox, "grep", pattern="SECRET|inside")
            assert "SECRET" not in grep.content.replace("/SECRET|inside/", "")
            write = run(toolbox, "write_file", path="conf/credentials", content=f"{index}\n")
            writes_done += not write.is_error
    assert writes_done  # the race ran: the real folder was met too
    assert outside.read_text() == SECRET
    assert sorted(p.name for p in outside.parent.iterdir()) == ["credentials"]


def test_workspace_open_file_names_what_it_opened(workspace: Workspace, root: Path) -> None:
    (root / "a.txt").write_text("x")
    with workspace.open_file("a.txt", tool="read_file") as opened:
        assert opened.path == root / "a.txt"
        assert opened.handle.read() == b"x"
        assert opened.status.st_size == 1
