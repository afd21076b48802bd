"""AGENTS.md hierarchy: order, file-name precedence, size cap, reload on change, odd files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold import paths as _paths
from contextfold.errors import ConfigError
from contextfold.prompt.instructions import (
    DEFAULT_MAX_BYTES,
    PROJECT_ROOT_MARKERS,
    InstructionsLoader,
    find_project_root,
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git project whose nested folders each hold an AGENTS.md, and a sibling folder."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    write(root / "AGENTS.md", "root rules")
    write(root / "src" / "AGENTS.md", "src rules")
    write(root / "src" / "pkg" / "AGENTS.md", "pkg rules")
    write(root / "docs" / "AGENTS.md", "docs rules")  # a sibling: never read from src/pkg
    (root / "src" / "pkg" / "deep").mkdir()
    return root


def global_agents() -> Path:
    return _paths.config_dir() / "AGENTS.md"


# -- order -----------------------------------------------------------------------------------------


def test_global_first_then_root_then_each_folder_down_to_the_working_dir(project: Path) -> None:
    write(global_agents(), "global rules")
    loaded = InstructionsLoader(project / "src" / "pkg" / "deep").load()
    assert [s.path for s in loaded.sources] == [
        global_agents(),
        project / "AGENTS.md",
        project / "src" / "AGENTS.md",
        project / "src" / "pkg" / "AGENTS.md",
    ]
    assert [s.scope for s in loaded.sources] == ["global", "project", "directory", "directory"]
    text = loaded.text
    positions = [text.index(t) for t in ("global rules", "root rules", "src rules", "pkg rules")]
    assert positions == sorted(positions)
    assert "docs rules" not in text
    assert loaded.project_root == project
    assert not loaded.truncated


def test_every_piece_is_labelled_with_its_source_path(project: Path) -> None:
    loaded = InstructionsLoader(project / "src").load()
    assert loaded.text == (
        f"[instructions from {project / 'AGENTS.md'}]\nroot rules\n\n"
        f"[instructions from {project / 'src' / 'AGENTS.md'}]\nsrc rules"
    )


def test_loading_twice_gives_the_same_bytes(project: Path) -> None:
    write(global_agents(), "global rules")
    first = InstructionsLoader(project / "src" / "pkg").load().text
    assert InstructionsLoader(project / "src" / "pkg").load().text == first


def test_global_file_can_be_left_out(project: Path) -> None:
    write(global_agents(), "global rules")
    loaded = InstructionsLoader(project, include_global=False).load()
    assert "global rules" not in loaded.text
    assert [s.path for s in loaded.sources] == [project / "AGENTS.md"]


# -- project root ----------------------------------------------------------------------------------


@pytest.mark.parametrize("marker", PROJECT_ROOT_MARKERS)
def test_each_marker_makes_a_project_root(tmp_path: Path, marker: str) -> None:
    root = tmp_path / "proj"
    if marker.startswith("."):
        (root / marker).mkdir(parents=True)
    else:
        write(root / marker, "")
    write(root / "AGENTS.md", "project rules")
    write(tmp_path / "AGENTS.md", "outside rules")
    cwd = root / "a" / "b"
    cwd.mkdir(parents=True)
    assert find_project_root(cwd) == root
    loaded = InstructionsLoader(cwd).load()
    assert "project rules" in loaded.text
    assert "outside rules" not in loaded.text


def test_a_git_file_as_in_worktrees_also_marks_the_root(tmp_path: Path) -> None:
    write(tmp_path / "wt" / ".git", "gitdir: /elsewhere\n")
    assert find_project_root(tmp_path / "wt") == tmp_path / "wt"


def test_the_nearest_marker_wins(tmp_path: Path) -> None:
    (tmp_path / "mono" / ".git").mkdir(parents=True)
    write(tmp_path / "mono" / "AGENTS.md", "monorepo rules")
    write(tmp_path / "mono" / "svc" / "go.mod", "module svc\n")
    write(tmp_path / "mono" / "svc" / "AGENTS.md", "service rules")
    loaded = InstructionsLoader(tmp_path / "mono" / "svc").load()
    assert loaded.project_root == tmp_path / "mono" / "svc"
    assert "service rules" in loaded.text
    assert "monorepo rules" not in loaded.text


def test_outside_any_project_only_the_working_dir_and_global_are_read(tmp_path: Path) -> None:
    if find_project_root(tmp_path) is not None:
        pytest.skip("the temporary folder sits inside a project")
    write(global_agents(), "global rules")
    write(tmp_path / "AGENTS.md", "parent rules")
    write(tmp_path / "work" / "AGENTS.md", "work rules")
    loaded = InstructionsLoader(tmp_path / "work").load()
    assert loaded.project_root is None
    assert [s.path for s in loaded.sources] == [global_agents(), tmp_path / "work" / "AGENTS.md"]
    assert "parent rules" not in loaded.text


# -- file-name precedence --------------------------------------------------------------------------


def test_override_replaces_the_regular_file_of_its_folder_only(project: Path) -> None:
    write(project / "src" / "AGENTS.override.md", "local src override")
    loaded = InstructionsLoader(project / "src" / "pkg").load()
    assert "local src override" in loaded.text
    assert "src rules" not in loaded.text
    assert "root rules" in loaded.text and "pkg rules" in loaded.text


def test_claude_md_is_read_only_where_there_is_no_agents_md(project: Path) -> None:
    write(project / "CLAUDE.md", "claude root")
    write(project / "src" / "pkg" / "deep" / "CLAUDE.md", "claude deep")
    loaded = InstructionsLoader(project / "src" / "pkg" / "deep").load()
    assert "claude root" not in loaded.text
    assert "root rules" in loaded.text
    assert loaded.text.endswith("claude deep")


def test_the_preference_list_is_configurable(project: Path) -> None:
    write(project / "CLAUDE.md", "claude root")
    loaded = InstructionsLoader(project, file_names=("CLAUDE.md", "AGENTS.md")).load()
    assert "claude root" in loaded.text
    assert "root rules" not in loaded.text


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"instructions\.max_bytes"):
        InstructionsLoader(max_bytes=0)
    with pytest.raises(ConfigError, match=r"instructions\.file_names"):
        InstructionsLoader(file_names=("sub/AGENTS.md",))


# -- size cap --------------------------------------------------------------------------------------


def test_the_default_cap_is_32_kib() -> None:
    assert DEFAULT_MAX_BYTES == 32 * 1024
    assert InstructionsLoader().max_bytes == 32 * 1024


def test_cap_cuts_in_order_and_the_marker_names_what_was_cut(project: Path) -> None:
    write(project / "AGENTS.md", "r" * 3000)
    write(project / "src" / "AGENTS.md", "s" * 6000)
    loaded = InstructionsLoader(project / "src" / "pkg", max_bytes=7000).load()
    assert loaded.truncated
    assert loaded.size <= 7000
    assert "r" * 3000 in loaded.text  # the root file fits whole
    assert "pkg rules" not in loaded.text
    src_file = project / "src" / "AGENTS.md"
    pkg_file = project / "src" / "pkg" / "AGENTS.md"
    marker = loaded.text[loaded.text.index("[instructions truncated") :]
    assert "to 7000 bytes" in marker
    assert f"{src_file} cut after" in marker and "of 6000 bytes" in marker
    assert f"{pkg_file} left out (9 bytes)" in marker  # "pkg rules"
    by_path = {s.path: s for s in loaded.sources}
    assert not by_path[project / "AGENTS.md"].truncated
    assert by_path[src_file].truncated and 3000 < by_path[src_file].included_bytes < 6000
    assert by_path[pkg_file].truncated and by_path[pkg_file].included_bytes == 0


def test_a_huge_file_is_cut_without_splitting_a_character(project: Path) -> None:
    write(project / "AGENTS.md", "é" * 200_000)  # 400 KB, two bytes per character
    loaded = InstructionsLoader(project, max_bytes=1000).load()
    assert loaded.size <= 1000
    assert "\ufffd" not in loaded.text
    assert "é" * 100 in loaded.text


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=4),
    cap=st.integers(1, 6000),
    char=st.sampled_from(["a", "é", "€", "😀"]),
)
def test_merged_text_never_exceeds_the_cap(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], cap: int, char: str
) -> None:
    root = tmp_path_factory.mktemp("capped")
    (root / ".git").mkdir()
    folder = root
    for size in sizes:
        write(folder / "AGENTS.md", char * size)
        folder = folder / "sub"
    folder.mkdir(parents=True, exist_ok=True)
    loaded = InstructionsLoader(folder, include_global=False, max_bytes=cap).load()
    assert loaded.size <= cap
    total = sum(len((char * n).encode()) for n in sizes)
    if total + 200 * len(sizes) <= cap:
        assert not loaded.truncated


# -- reload ----------------------------------------------------------------------------------------


def test_reload_reports_nothing_until_a_file_changes(project: Path) -> None:
    loader = InstructionsLoader(project / "src")
    assert loader.reload_if_changed() is True  # first call loads
    assert loader.reload_if_changed() is False
    agents = project / "src" / "AGENTS.md"
    agents.write_text("src rules, edited")
    assert loader.reload_if_changed() is True
    assert loader.current is not None and "src rules, edited" in loader.current.text
    assert loader.reload_if_changed() is False


def test_reload_looks_only_at_mtime_and_size(project: Path) -> None:
    loader = InstructionsLoader(project)
    before = loader.load().text
    agents = project / "AGENTS.md"
    stat = agents.stat()
    agents.write_text("ROOT RULES")  # same size as "root rules"
    os.utime(agents, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert loader.reload_if_changed() is False
    assert loader.current is not None and loader.current.text == before
    os.utime(agents, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert loader.reload_if_changed() is True
    assert loader.current is not None and "ROOT RULES" in loader.current.text


def test_touching_a_file_without_editing_it_changes_nothing(project: Path) -> None:
    loader = InstructionsLoader(project)
    loader.load()
    agents = project / "AGENTS.md"
    stat = agents.stat()
    os.utime(agents, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    assert loader.reload_if_changed() is False


def test_reload_sees_files_appear_and_disappear(project: Path) -> None:
    loader = InstructionsLoader(project / "src")
    loader.load()
    override = write(project / "src" / "AGENTS.override.md", "override")
    assert loader.reload_if_changed() is True
    assert loader.current is not None and "src rules" not in loader.current.text
    override.unlink()
    assert loader.reload_if_changed() is True
    assert loader.current is not None and "src rules" in loader.current.text
    write(global_agents(), "new global")
    assert loader.reload_if_changed() is True
    assert loader.current is not None and loader.current.text.startswith("[global instructions")


# -- files that cannot be read ---------------------------------------------------------------------


def test_a_symlink_loop_is_skipped_with_a_note(project: Path) -> None:
    loop = project / "src" / "AGENTS.override.md"
    os.symlink(loop.name, loop)  # points at itself
    loaded = InstructionsLoader(project / "src").load()
    assert "src rules" in loaded.text  # the next name in the preference list
    assert any("symlink loop" in note and str(loop) in note for note in loaded.notes)


def test_a_broken_symlink_is_skipped_with_a_note(project: Path) -> None:
    link = project / "src" / "AGENTS.override.md"
    os.symlink("missing.md", link)
    loaded = InstructionsLoader(project / "src").load()
    assert "src rules" in loaded.text
    assert any("broken symlink" in note for note in loaded.notes)


def test_a_symlink_to_a_file_already_read_is_not_repeated(project: Path) -> None:
    (project / "src" / "AGENTS.md").unlink()
    os.symlink("../AGENTS.md", project / "src" / "AGENTS.md")
    loaded = InstructionsLoader(project / "src").load()
    assert loaded.text.count("root rules") == 1
    assert any("same file as" in note for note in loaded.notes)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_pipe_or_folder_under_the_name_is_skipped_without_blocking(project: Path) -> None:
    os.mkfifo(project / "src" / "AGENTS.override.md")
    (project / "CLAUDE.md").mkdir()
    (project / "AGENTS.md").unlink()
    loaded = InstructionsLoader(project / "src").load()
    assert loaded.text.endswith("src rules")
    assert sum("not a regular file" in note for note in loaded.notes) == 2


def test_an_unreadable_file_is_skipped_with_a_note(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = project / "src" / "AGENTS.md"
    folder = blocked.parent.stat()
    real_open = os.open

    def guarded_open(path: str, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        # Files are opened by name relative to their folder's descriptor.
        if (
            path == blocked.name
            and dir_fd is not None
            and os.path.samestat(os.fstat(dir_fd), folder)
        ):
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    # chmod cannot lock out root, so deny the read the way the OS would.
    monkeypatch.setattr(os, "open", guarded_open)
    loaded = InstructionsLoader(project / "src" / "pkg").load()
    assert "root rules" in loaded.text and "pkg rules" in loaded.text
    assert "src rules" not in loaded.text
    assert any(str(blocked) in note and "Permission denied" in note for note in loaded.notes)
    assert loaded.refused == ()  # unreadable is a note, not a warning


def test_invalid_utf8_is_replaced_and_a_bom_dropped(project: Path) -> None:
    (project / "AGENTS.md").write_bytes(b"\xef\xbb\xbfUse \xff tabs")
    loaded = InstructionsLoader(project).load()
    assert loaded.text.endswith("]\nUse \ufffd tabs")


# -- the fence: files that lead outside ------------------------------------------------------------


@pytest.fixture
def credentials(tmp_path: Path) -> Path:
    return write(tmp_path / "home" / ".aws" / "credentials", "aws_secret_access_key = TOPSECRET")


def test_an_agents_md_linked_outside_the_project_is_not_read(
    project: Path, credentials: Path
) -> None:
    (project / "src" / "AGENTS.md").unlink()
    (project / "src" / "AGENTS.md").symlink_to(credentials)
    loaded = InstructionsLoader(project / "src").load()
    assert "TOPSECRET" not in loaded.text
    assert "root rules" in loaded.text
    [refusal] = loaded.refused
    assert refusal.startswith(f"{project / 'src' / 'AGENTS.md'}: not read, it leads to")
    assert str(credentials) in refusal
    assert f"outside the project ({project})" in refusal
    assert refusal in loaded.notes
    assert [s.path for s in loaded.sources] == [project / "AGENTS.md"]


def test_a_link_outside_gives_way_to_the_next_name(project: Path, credentials: Path) -> None:
    (project / "AGENTS.override.md").symlink_to(credentials)
    loaded = InstructionsLoader(project).load()
    assert "TOPSECRET" not in loaded.text
    assert "root rules" in loaded.text
    assert len(loaded.refused) == 1


def test_links_inside_the_project_are_still_followed(project: Path) -> None:
    (project / "src" / "AGENTS.md").unlink()
    (project / "src" / "CLAUDE.md").symlink_to(project / "docs" / "AGENTS.md")
    loaded = InstructionsLoader(project / "src").load()
    assert "docs rules" in loaded.text
    assert loaded.refused == ()


def test_outside_any_project_the_working_directory_is_the_fence(
    tmp_path: Path, credentials: Path
) -> None:
    here = tmp_path / "scratch"
    here.mkdir()
    (here / "AGENTS.md").symlink_to(credentials)
    loaded = InstructionsLoader(here, include_global=False).load()
    assert loaded.text == ""
    assert "outside the working directory" in loaded.refused[0]


def test_the_global_file_must_stay_in_the_config_folder(project: Path, credentials: Path) -> None:
    global_agents().parent.mkdir(parents=True, exist_ok=True)
    global_agents().symlink_to(credentials)
    loaded = InstructionsLoader(project).load()
    assert "TOPSECRET" not in loaded.text
    assert "outside the config folder" in loaded.refused[0]


def test_a_hard_link_to_a_file_outside_is_not_read(project: Path, credentials: Path) -> None:
    (project / "AGENTS.md").unlink()
    os.link(credentials, project / "AGENTS.md")
    loaded = InstructionsLoader(project).load()
    assert "TOPSECRET" not in loaded.text
    assert "hard link" in loaded.refused[0]
    os.link(project / "src" / "AGENTS.md", project / "src" / "CLAUDE.md")  # both inside
    assert "src rules" in InstructionsLoader(project / "src").load().text
