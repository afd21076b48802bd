"""Harness notes: user-role text that an agent harness wrote, not the person using it.

Coding agents put their own text in user-role messages: Claude Code writes
``[Request interrupted by user]`` when the user stops a reply, a ``<task-notification>`` when a
background task ends, hook output in ``<system-reminder>``, and for a local slash command a
caveat, the command and what it printed. The model reads them, but they are no request of the
user's: a summary that calls one "the latest request", or finds a "constraint" in Claude Code's
"DO NOT respond to these messages", misleads the model that reads it.

This module is the one place that knows them. An importer that can tell such a record marks its
message with :data:`HARNESS_NOTE_KIND` (the Claude Code importer does, for ``isMeta`` records
too); :func:`is_harness_note` also recognizes the text itself
(:data:`HARNESS_NOTE_PREFIXES`), for transcripts of other formats that carry it as plain user
text. A typed slash command is the user's (``<command-name>/review</command-name>…``):
:func:`typed_text` gives it back as the user typed it.
"""

from __future__ import annotations

import re

from contextfold.messages import Message, MessageKind, TextPart

__all__ = [
    "HARNESS_NOTE_KIND",
    "HARNESS_NOTE_PREFIXES",
    "LOCAL_COMMAND_CAVEAT",
    "is_harness_note",
    "is_harness_text",
    "slash_command",
    "typed_text",
]

HARNESS_NOTE_KIND: MessageKind = "harness_note"
"""``Meta.kind`` of a user-role message the agent harness wrote (sent to the model, never a
user turn)."""

LOCAL_COMMAND_CAVEAT = "<local-command-caveat>"
"""How Claude Code's note before a local slash command's records (its command line and output)
starts: they are for the user's terminal, and the model is told not to respond to them."""

HARNESS_NOTE_PREFIXES: tuple[str, ...] = (
    "[Request interrupted by user",  # the user stopped a reply ("…]", "… for tool use]")
    "<task-notification>",  # a background task ended
    "<system-reminder>",  # hook output and reminders
    "<user-prompt-submit-hook>",  # what a prompt-submit hook added
    LOCAL_COMMAND_CAVEAT,
    "<local-command-stdout>",  # what a local slash command printed
    "<local-command-stderr>",
    "<bash-input>",  # the `!` shell passthrough: a command run in the user's terminal
    "<bash-stdout>",
    "<bash-stderr>",
)
"""How the text of a harness note starts (Claude Code's markers), after leading whitespace."""

_REMINDER_BLOCK = re.compile(r"<system-reminder>.*?</system-reminder>", re.S)
_COMMAND_OPENERS = ("<command-name>", "<command-message>")
_COMMAND_NAME = re.compile(r"<command-name>\s*(.*?)\s*</command-name>", re.S)
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)


def is_harness_text(text: str) -> bool:
    """True when ``text`` starts as only a harness writes it (:data:`HARNESS_NOTE_PREFIXES`)."""
    return text.lstrip().startswith(HARNESS_NOTE_PREFIXES)


def is_harness_note(message: Message) -> bool:
    """True for a user-role message the harness wrote: so marked by its importer, or with
    harness text (:func:`is_harness_text`)."""
    if message.role != "user":
        return False
    if message.meta.kind == HARNESS_NOTE_KIND:
        return True
    texts = [p.text for p in message.parts if isinstance(p, TextPart) and p.text.strip()]
    if not texts:
        return is_harness_text(message.text)
    # Claude Code opens its first user message with a reminder block and the task after it (in
    # another block, or the same one): that message is the user's.
    return all(_only_harness(text) for text in texts)


def _only_harness(text: str) -> bool:
    """True when ``text`` is harness text through and through: a reminder block followed by
    words of the user's is not."""
    if not is_harness_text(text):
        return False
    rest = _REMINDER_BLOCK.sub("", text).strip()
    return not rest or rest == text.strip() or is_harness_text(rest)


def slash_command(text: str) -> str | None:
    """The slash command a Claude Code command record holds, as typed (``/review the parser``);
    ``None`` when ``text`` is no command record."""
    if not text.lstrip().startswith(_COMMAND_OPENERS):
        return None
    name = _COMMAND_NAME.search(text)
    if name is None or not name.group(1):
        return None
    command = name.group(1) if name.group(1).startswith("/") else f"/{name.group(1)}"
    args = _COMMAND_ARGS.search(text)
    return f"{command} {args.group(1).strip()}".strip() if args else command


def typed_text(text: str) -> str:
    """What the person typed: a slash command as its command line, any other text as it is."""
    return slash_command(text) or text
