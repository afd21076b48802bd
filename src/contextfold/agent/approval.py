"""Who decides whether the agent may change files or run commands.

Three modes, the values of the ``approval`` setting:

- ``ask`` — every write and every shell command is shown to the user, whole, through a callback
  ``approve(tool_name, summary) -> bool`` that the UI supplies (``contextfold chat``'s default);
- ``auto`` — everything is allowed;
- ``read-only`` — writes and shell commands are refused; reading and searching still work.

A refusal never raises out of a tool call: the tool raises :class:`ApprovalDeniedError` (a
:class:`~contextfold.agent.ToolError`) and the toolbox turns it into an error result the model
can adapt to. Tools that change something call :meth:`ApprovalPolicy.require` right before they
do it, once the change is known to be possible, so the user is never asked about an edit that
would fail anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias, get_args

from contextfold.agent._outcome import ToolError
from contextfold.errors import ConfigError, UsageError

__all__ = [
    "ApprovalCallback",
    "ApprovalDeniedError",
    "ApprovalMode",
    "ApprovalPolicy",
]

ApprovalMode: TypeAlias = Literal["ask", "auto", "read-only"]
_MODES: tuple[str, ...] = get_args(ApprovalMode)

ApprovalCallback: TypeAlias = Callable[[str, str], bool]
"""``approve(tool_name, summary) -> bool``: ask the user; True allows the call.

``summary`` is all of what the call will do, however long: the whole command, every line of a
new file, the whole diff of an overwrite, every hunk of an edit. Its first line says what the
call is. A UI must let the user see all of it before it can return True (``contextfold chat``
pages it, and stopping early declines), and it is written by the model: show its terminal
control characters as escapes, never send them to the terminal."""


class ApprovalDeniedError(ToolError):
    """A write or a command was not allowed (the user declined, or read-only mode)."""


@dataclass(frozen=True, slots=True)
class ApprovalPolicy:
    """The approval mode and, in ``ask`` mode, the callback that asks the user.

    Build one with :meth:`ask`, :meth:`auto`, :meth:`read_only` or :meth:`from_setting`.
    """

    mode: ApprovalMode
    approve: ApprovalCallback | None = None

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise ConfigError("approval", f"unknown mode {self.mode!r}; expected one of {_MODES}")
        if self.mode == "ask" and self.approve is None:
            raise UsageError(
                "approval mode 'ask' needs a callback approve(tool_name, summary) -> bool; "
                "pass ApprovalPolicy.ask(callback), or use 'auto' or 'read-only'"
            )

    @classmethod
    def ask(cls, approve: ApprovalCallback) -> ApprovalPolicy:
        """Ask the user, through ``approve``, before every write and command."""
        return cls("ask", approve)

    @classmethod
    def auto(cls) -> ApprovalPolicy:
        """Allow every write and command without asking."""
        return cls("auto")

    @classmethod
    def read_only(cls) -> ApprovalPolicy:
        """Refuse every write and command."""
        return cls("read-only")

    @classmethod
    def from_setting(cls, mode: str, approve: ApprovalCallback | None = None) -> ApprovalPolicy:
        """The policy for an ``approval`` setting value; ``approve`` is needed for ``ask``."""
        if mode not in _MODES:
            raise ConfigError("approval", f"unknown mode {mode!r}; expected one of {_MODES}")
        return cls(mode, approve)  # type: ignore[arg-type]  # checked against _MODES above

    @property
    def allows_writes(self) -> bool:
        """False in read-only mode, where no write or command can ever be approved."""
        return self.mode != "read-only"

    def require_writable(self, tool_name: str) -> None:
        """Refuse at once in read-only mode, before a tool does any work for a call."""
        if not self.allows_writes:
            what = "shell commands are" if tool_name == "shell" else "this tool is"
            raise ApprovalDeniedError(
                f"{tool_name} was refused: writes are disabled in read-only mode, and "
                f"{what} not available. You can still read files and search with read_file, "
                "list_dir, glob and grep; describe the change you would make instead.",
                kind="read_only",
            )

    def require(self, tool_name: str, summary: str | Callable[[], str]) -> None:
        """Return when the call described by ``summary`` may go ahead; raise
        :class:`ApprovalDeniedError` (text for the model) when it may not.

        ``summary`` may be a function: it is called only when the user is actually asked, so a
        diff is never computed in ``auto`` mode.
        """
        self.require_writable(tool_name)
        if self.mode == "auto" or self.approve is None:
            return
        if callable(summary):
            summary = summary()
        first_line = summary.splitlines()[0] if summary else tool_name
        try:
            allowed = self.approve(tool_name, summary)
        except Exception as exc:  # a broken prompt must not crash the agent: treat it as a no
            raise ApprovalDeniedError(
                f"{tool_name} was not run: asking the user for approval failed "
                f"({type(exc).__name__}: {exc}). Nothing was changed.",
                kind="approval_failed",
            ) from exc
        if not allowed:
            raise ApprovalDeniedError(
                f"The user declined this {tool_name} call ({first_line}); nothing was changed. "
                "Do not repeat it unchanged: try another approach, or ask the user what they want.",
                kind="denied",
            )
