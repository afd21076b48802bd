"""The coding agent's toolbox in one call: :func:`coding_toolbox`."""

from __future__ import annotations

import os
from collections.abc import Collection

from contextfold.agent.approval import ApprovalPolicy
from contextfold.agent.file_tools import EDIT_FILE_TOOL, READ_FILE_TOOL, WRITE_FILE_TOOL, FileTools
from contextfold.agent.search_tools import GLOB_TOOL, GREP_TOOL, LIST_DIR_TOOL, SearchTools
from contextfold.agent.shell_tool import DEFAULT_SHELL_TIMEOUT, ShellTool
from contextfold.agent.toolbox import Toolbox
from contextfold.agent.workspace import Workspace

__all__ = ["CODING_TOOL_NAMES", "WRITE_TOOL_NAMES", "coding_toolbox"]

CODING_TOOL_NAMES: tuple[str, ...] = (
    "read_file",
    "write_file",
    "edit_file",
    "list_dir",
    "glob",
    "grep",
    "shell",
)
"""The tools :func:`coding_toolbox` registers, in the order the model sees them."""

WRITE_TOOL_NAMES: frozenset[str] = frozenset({"write_file", "edit_file", "shell"})
"""The coding tools that go through the approval policy (refused in read-only mode)."""


def coding_toolbox(
    workspace: Workspace | str | os.PathLike[str],
    approval: ApprovalPolicy,
    *,
    shell_timeout: float | None = None,
    env_allow: Collection[str] = (),
) -> Toolbox:
    """A :class:`Toolbox` with the coding tools for ``workspace``.

    ``approval`` decides about ``write_file``, ``edit_file`` and ``shell``; ``shell_timeout`` is
    the ``shell.timeout`` setting (``None``: :data:`DEFAULT_SHELL_TIMEOUT`); ``env_allow`` (the
    ``tools.env_allow`` setting) names environment variables that commands may see although
    they look like credentials. The engine's own tools (``read_result``...) are added by the
    caller with :meth:`Toolbox.register`.
    """
    if not isinstance(workspace, Workspace):
        workspace = Workspace(workspace)
    files = FileTools(workspace, approval)
    search = SearchTools(workspace)
    shell = ShellTool(
        workspace,
        approval,
        timeout=DEFAULT_SHELL_TIMEOUT if shell_timeout is None else shell_timeout,
        env_allow=env_allow,
    )
    toolbox = Toolbox()
    toolbox.register(READ_FILE_TOOL, files.read_file)
    toolbox.register(WRITE_FILE_TOOL, files.write_file)
    toolbox.register(EDIT_FILE_TOOL, files.edit_file)
    toolbox.register(LIST_DIR_TOOL, search.list_dir)
    toolbox.register(GLOB_TOOL, search.glob)
    toolbox.register(GREP_TOOL, search.grep)
    toolbox.register(shell.spec, shell)
    return toolbox
