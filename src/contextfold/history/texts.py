"""Every text of a message part a model reads, for the probes that look things up in a view.

Tool-call arguments come twice: as the raw JSON and as the strings inside it, because a command
quoted inside JSON has its quotes escaped and would not be found as typed.
"""

from __future__ import annotations

from collections.abc import Iterator

from contextfold.messages import SummaryPart, TextPart, ThinkingPart, ToolCallPart, ToolResultPart

__all__ = ["json_strings", "part_texts"]


def part_texts(part: object) -> Iterator[str]:
    """The texts of one part: text, summaries, thinking, call arguments (raw and decoded) and
    tool outputs; nothing for other parts (images)."""
    if isinstance(part, TextPart | SummaryPart | ThinkingPart):
        yield part.text
    elif isinstance(part, ToolCallPart):
        yield part.arguments
        yield from json_strings(part.shared_args())
    elif isinstance(part, ToolResultPart):
        yield part.content


def json_strings(value: object) -> Iterator[str]:
    """Every string inside a decoded JSON value, depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from json_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from json_strings(item)
