"""What a tool gives back, and the error a tool raises when the model asked for something wrong.

Tools never let a mistake reach the agent loop as an exception: a :class:`ToolError` (path outside
the workspace, no match for an edit, a declined approval...) becomes an ``is_error`` outcome whose
text tells the model what to do instead. :class:`~contextfold.agent.Toolbox` does that conversion.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from contextfold.errors import ContextfoldError
from contextfold.messages import ToolCallPart, ToolResultPart

__all__ = ["ToolError", "ToolOutcome"]


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """The result of one tool call: the text the model reads, whether it failed, and facts for
    the loop and the UI (``metadata``: JSON values such as ``path``, ``exit_code``, ``error``).

    ``content`` is the tool's full output; the engine truncates or offloads it later.
    """

    content: str
    is_error: bool = False
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def error(cls, content: str, **metadata: Any) -> ToolOutcome:
        """A failed outcome; ``metadata["error"]`` names the kind of failure when given."""
        return cls(content, True, metadata)

    @classmethod
    def from_result(cls, part: ToolResultPart) -> ToolOutcome:
        """The outcome a ready-made result carries (e.g. one from ``read_result``)."""
        metadata = {"ref": part.ref} if part.ref is not None else {}
        return cls(part.content, part.is_error, metadata)

    def to_result(self, call: ToolCallPart) -> ToolResultPart:
        """The :class:`ToolResultPart` answering ``call``, ready to enter the transcript."""
        return ToolResultPart(call.call_id, call.name, self.content, self.is_error)


class ToolError(ContextfoldError):
    """A tool call that cannot be carried out as asked; the message is written for the model.

    ``kind`` is a short machine-readable name for the failure (``"outside_workspace"``,
    ``"not_found"``, ``"denied"``...); it ends up in :attr:`ToolOutcome.metadata` as ``error``.
    """

    def __init__(self, message: str, *, kind: str = "tool_error") -> None:
        self.kind = kind
        super().__init__(message)
