"""The coding agent: its loop (:func:`run_agent`) and its tools.

Run a model with the coding tools on an engine session until it answers::


    from contextfold import ContextEngine
    from contextfold.agent import ApprovalPolicy, coding_toolbox, run_agent

    engine = ContextEngine("anthropic/claude-sonnet-4-5", store="sessions.db")
    toolbox = coding_toolbox(".", ApprovalPolicy.auto())
    result = run_agent(engine.new_session(), model, toolbox, "Make the tests pass.")
    print(result.text)

Or use the tools on their own, running the model's calls through them::

    from contextfold.agent import ApprovalPolicy, coding_toolbox

    toolbox = coding_toolbox("/path/to/project", ApprovalPolicy.ask(ui_confirm), shell_timeout=60)
    request_tools = toolbox.specs()                 # ToolSpec list for the provider
    outcome = toolbox.run(call)                     # call: a ToolCallPart from the model
    part = outcome.to_result(call)                  # ToolResultPart for the transcript

:meth:`Toolbox.run` never raises for a bad call: unknown tools, invalid arguments, paths outside
the workspace, declined approvals and handler exceptions all come back as ``is_error`` outcomes
the model can act on.
"""

from __future__ import annotations

from contextfold.agent._outcome import ToolError, ToolOutcome
from contextfold.agent._restart import restart_session
from contextfold.agent.approval import (
    ApprovalCallback,
    ApprovalDeniedError,
    ApprovalMode,
    ApprovalPolicy,
)
from contextfold.agent.coding_tools import CODING_TOOL_NAMES, WRITE_TOOL_NAMES, coding_toolbox
from contextfold.agent.file_tools import EDIT_FILE_TOOL, READ_FILE_TOOL, WRITE_FILE_TOOL, FileTools
from contextfold.agent.loop import (
    DEFAULT_MAX_STEPS,
    DEFAULT_SYSTEM_PROMPT,
    INTERRUPTED_RESULT,
    AgentHooks,
    AgentResult,
    StopReason,
    run_agent,
)
from contextfold.agent.search_tools import GLOB_TOOL, GREP_TOOL, LIST_DIR_TOOL, SearchTools
from contextfold.agent.shell_tool import (
    DEFAULT_SHELL_TIMEOUT,
    CommandResult,
    ShellTool,
    run_command,
    scrubbed_environment,
)
from contextfold.agent.toolbox import Toolbox, ToolHandler
from contextfold.agent.workspace import NOISE_DIRS, PathOutsideWorkspaceError, Workspace

__all__ = [
    "CODING_TOOL_NAMES",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_SHELL_TIMEOUT",
    "DEFAULT_SYSTEM_PROMPT",
    "EDIT_FILE_TOOL",
    "GLOB_TOOL",
    "GREP_TOOL",
    "INTERRUPTED_RESULT",
    "LIST_DIR_TOOL",
    "NOISE_DIRS",
    "READ_FILE_TOOL",
    "WRITE_FILE_TOOL",
    "WRITE_TOOL_NAMES",
    "AgentHooks",
    "AgentResult",
    "ApprovalCallback",
    "ApprovalDeniedError",
    "ApprovalMode",
    "ApprovalPolicy",
    "CommandResult",
    "FileTools",
    "PathOutsideWorkspaceError",
    "SearchTools",
    "ShellTool",
    "StopReason",
    "ToolError",
    "ToolHandler",
    "ToolOutcome",
    "Toolbox",
    "Workspace",
    "coding_toolbox",
    "restart_session",
    "run_agent",
    "run_command",
    "scrubbed_environment",
]
