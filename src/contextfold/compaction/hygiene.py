"""Context hygiene: cheap edits that take out what the model no longer needs, losing nothing.

They ride on the edits that already break the prompt cache (a MASK-zone batch, a compaction), so
they cost no cache break of their own, and they run before anything lossy (cheap first):

- :class:`SupersededReads`: a file read that the agent read again later shows a stale or
  duplicate copy; its output becomes one line naming the file and the newer read;
- :class:`TrimOldArguments`: old tool calls with big arguments (a ``write_file`` body, a long
  patch) keep the head of each long string; the call keeps its id, name and valid JSON;
- :class:`ClearOldThinking`: thinking of assistant messages before the current user turn leaves
  the view (providers require it only within the current tool-use turn);
- :class:`RestoreFiles`: after a summary, the latest content of the files the agent was working
  on comes back as one note after it (as Claude Code does after compacting), when it fits.

Everything taken out goes to the blob store first and its ref travels with what replaces it, so
``read_result`` brings it back; the edits are ordinary :class:`~contextfold.edits.MaskEdit` and
:class:`~contextfold.edits.SummarizeEdit` records (persisted, replayed and counted like masking).
"""

from __future__ import annotations

import functools
import json
import operator
import posixpath
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contextfold.compaction._context import CompactionContext
from contextfold.compaction._results import ResultSlot, is_placeholder, result_slots
from contextfold.edits import (
    ClearedThinking,
    ContextEdit,
    MaskEdit,
    ReplacedArguments,
    ReplacedResult,
)
from contextfold.history.facts import ToolAction, call_action
from contextfold.history.turns import last_user_index
from contextfold.messages import Message, Meta, TextPart, ThinkingPart, ToolCallPart
from contextfold.outputs.graphemes import floor_boundary
from contextfold.outputs.placeholders import PATH_KEYS, superseded_placeholder
from contextfold.redaction.redactor import redact_text

__all__ = [
    "FILE_RESTORE_FLAG",
    "OLD_ARGUMENTS_ABOVE_TOKENS",
    "OLD_ARGUMENTS_KEEP_TOKENS",
    "RESTORE_FILE_MAX_TOKENS",
    "RESTORE_MAX_FILES",
    "RESTORE_MAX_WINDOW_SHARE",
    "RESTORE_TOTAL_TOKENS",
    "ClearOldThinking",
    "FileRead",
    "RestoreFiles",
    "SupersededReads",
    "TrimOldArguments",
    "file_reads",
    "hygiene_strategies",
]

OLD_ARGUMENTS_ABOVE_TOKENS = 500
"""Old calls whose arguments cost more than this are trimmed: a file body the agent wrote long
ago is in the file (and behind a ref), not worth its tokens on every request."""
OLD_ARGUMENTS_KEEP_TOKENS = 100
"""Tokens of head each long string of trimmed arguments keeps (enough to see what was written)."""
RESTORE_MAX_FILES = 5
"""Most files restored after a summary (Claude Code restores five)."""
RESTORE_FILE_MAX_TOKENS = 5_000
"""Most tokens one restored file takes (its head; the rest stays behind its ref)."""
RESTORE_TOTAL_TOKENS = 20_000
"""Most tokens all restored files take together."""
RESTORE_MAX_WINDOW_SHARE = 0.05
"""Most of the window restored files take. Every token restored is sent again with each request
until the next compaction, and brings that compaction closer: on the shared Claude Code sessions
(75k-token window) 10 % cost 4-7 % more than no restore, 5 % about 1-4 % more."""
RESTORE_MIN_FILE_TOKENS = 100
"""A file is restored only when at least this much of it fits (a few lines say too little)."""
FILE_RESTORE_FLAG = "file_restore"
"""``Meta.flags`` marker of the note holding restored files (its kind is ``context_note``)."""

_CONTENT_KEYS = ("content", "file_text", "contents", "text")
"""Arguments that hold a whole file's new content in a write (Write, write_file, create)."""
_WHOLE_FILE_READERS = frozenset({"cat", "nl"})
_FIRST_WORD = re.compile(r"[ \t\r\n]*([^ \t\r\n]*)")
"""The first run of what shlex does not take for blanks (its whitespace is these four)."""
_QUOTING = frozenset("'\"\\")
"""What makes shlex's first word differ from the text's first run of non-blanks."""
_LINE_PRINTERS = frozenset(
    {
        "cd",
        "cat",
        "nl",
        "head",
        "tail",
        "sed",
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "awk",
        "less",
        "more",
    }
)
"""Programs whose output is lines of the file they read (``cd`` prints nothing): a later read of
the whole file holds everything they showed (``git diff``, ``python`` or ``wc`` print something
else)."""
_SHELL_SEPARATOR = re.compile(r"\|\||&&|[|;&\n]")
_ARGUMENTS_CUT_NOTE = "more characters; full arguments: read_result"
"""Text the cut of a trimmed argument string ends with (a call holding it is not cut again)."""


# --------------------------------------------------------------------------------------------------
# File reads
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FileRead:
    """One read of one file in a view: its result slot, the file, and which part it showed.

    ``span`` is ``None`` for a read of the whole file; otherwise what selected the part (the
    other arguments, or the shell command), so only a read of the same part or of the whole file
    supersedes it. ``in_file`` is false for a command whose output the file does not hold (``git
    diff``, a script fed the file): only the same command again supersedes that.
    """

    slot: ResultSlot
    path: str
    span: str | None
    in_file: bool = True

    @property
    def call(self) -> ToolCallPart:
        """The call that read the file (a read is only found with its call)."""
        assert self.slot.call is not None
        return self.slot.call


_last_reads: tuple[tuple[Message, ...], tuple[FileRead, ...]] = ((), ())
"""The view :func:`file_reads` last read, and its reads. A compaction asks twice for the reads
of the same messages: superseded reads, then the files to restore after its summary (the same
view when nothing was truncated before them). It holds the messages, so their ids stay theirs."""


def file_reads(view: Sequence[Message]) -> list[FileRead]:
    """Every tool result of ``view`` that read exactly one file, oldest first.

    What counts as a read, and which file, is what the summary's fact extraction says
    (:func:`~contextfold.history.facts.tool_actions`): named read tools and shell readers.
    """
    global _last_reads
    last_view, last = _last_reads
    if len(last_view) == len(view) and all(map(operator.is_, last_view, view)):
        return list(last)
    reads = _file_reads(view)
    _last_reads = (tuple(view), tuple(reads))
    return reads


def _file_reads(view: Sequence[Message]) -> list[FileRead]:
    reads: list[FileRead] = []
    for slot in result_slots(view):
        if slot.call is None:
            continue
        action = call_action(slot.call)
        if action.kind != "read" or len(action.reads) != 1:
            continue
        span, in_file = _read_shape(slot.call)
        reads.append(FileRead(slot, _normal_path(action.reads[0]), span, in_file))
    return reads


@functools.lru_cache(maxsize=2_048)
def _read_shape(call: ToolCallPart) -> tuple[str | None, bool]:
    """What part of its file ``call`` read (``None``: all of it), and whether its output is only
    lines of the file (remembered, like :func:`~contextfold.history.facts.call_action`: parsing
    the command again each compaction cost more than the rest of hygiene)."""
    span = _span(call)
    return span, span is None or not _command(call) or _shows_only_the_file(span)


@functools.lru_cache(maxsize=4_096)
def _normal_path(path: str) -> str:
    """``path`` normalised (remembered: each compaction normalises the path of every read and
    write in its view again, and the same few files come back again and again)."""
    return posixpath.normpath(path.strip()) if path.strip() else path


def _command(call: ToolCallPart) -> str | None:
    """The shell command ``call`` ran (Codex's argv ``[bash, -lc, script]`` as its script), or
    ``None`` for a call that is not a shell command."""
    args = call.shared_args()
    if args.get("command") == "view" and "path" in args:  # an editor tool's view command
        return None
    command = args.get("command", args.get("cmd"))
    if isinstance(command, list) and command and all(isinstance(w, str) for w in command):
        script = len(command) >= 3 and command[-2] in ("-c", "-lc")
        command = command[-1] if script else shlex.join(command)
    return command if isinstance(command, str) else None


def _span(call: ToolCallPart) -> str | None:
    """``None`` when ``call`` read the whole file, else what chose the part it read."""
    command = _command(call)
    if command is not None:
        return None if _reads_whole_file(command) else " ".join(command.split())
    args = call.shared_args()
    rest = {k: v for k, v in args.items() if k not in PATH_KEYS}
    if rest.get("command") == "view":
        del rest["command"]
    if not rest:
        return None
    return json.dumps(rest, sort_keys=True, ensure_ascii=False, default=str)


def _shows_only_the_file(command: str) -> bool:
    """True when every program of ``command`` prints lines of its input (a part of the file)."""
    programs = [words.split()[0] for words in _SHELL_SEPARATOR.split(command) if words.split()]
    return bool(programs) and all(p.rsplit("/", 1)[-1] in _LINE_PRINTERS for p in programs)


def _reads_whole_file(command: str) -> bool:
    """True for ``cat <file>`` and ``nl <file>`` (``-n`` allowed), nothing else."""
    # Parsing each new command was most of a compaction's hygiene, and most reads are of parts
    # (sed -n, head) or start elsewhere (cd): shlex's first word is the text's first run of
    # non-blanks as it stands when that run holds no quote nor escape (whatever the rest holds,
    # even an unbalanced quote: that answers False too).
    first = _FIRST_WORD.match(command)
    word = first.group(1) if first else ""
    if word not in _WHOLE_FILE_READERS and not _QUOTING.intersection(word):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    operands = [w for w in words[1:] if w != "-n"]
    return bool(words) and words[0] in _WHOLE_FILE_READERS and len(operands) == 1


# --------------------------------------------------------------------------------------------------
# Superseded reads
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SupersededReads:
    """A read of a file that the agent read again later becomes a one-line placeholder.

    The newer read (of the whole file, or of the same part) shows the file as it is now, so the
    older output is either a duplicate or stale; its placeholder names the file, the newer call
    and the ref of the old output. Reads that failed neither supersede nor are superseded.
    """

    name: str = "supersede"

    def plan(self, ctx: CompactionContext) -> list[ContextEdit]:
        """One mask edit for every superseded read, or nothing."""
        newest_whole: dict[str, str] = {}  # path -> call id of the newest read of the whole file
        newest_part: dict[tuple[str, str], str] = {}  # (path, span) -> call id
        items: list[ReplacedResult] = []
        for read in reversed(file_reads(ctx.view)):
            if read.slot.result.is_error:
                continue
            newer = newest_whole.get(read.path) if read.in_file else None
            if newer is None and read.span is not None:
                newer = newest_part.get((read.path, read.span))
            if read.span is None:
                newest_whole.setdefault(read.path, read.slot.result.call_id)
            else:
                newest_part.setdefault((read.path, read.span), read.slot.result.call_id)
            if newer is None or is_placeholder(read.slot):
                continue
            item = _superseded(ctx, read, newer)
            if item is not None:
                items.append(item)
        return [MaskEdit(tuple(reversed(items)), reason="mask")] if items else []


def _superseded(
    ctx: CompactionContext, read: FileRead, newer_call_id: str
) -> ReplacedResult | None:
    result = read.slot.result
    ref = ctx.stash_result(result)
    text = superseded_placeholder(read.call, read.path, newer_call_id, ref)
    if ctx.counter.count_text(text) >= ctx.counter.count_text(result.content):
        return None  # a tiny read: its placeholder would cost as much
    return ReplacedResult(read.slot.message.id, result.call_id, text, ref)


# --------------------------------------------------------------------------------------------------
# Old call arguments
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrimOldArguments:
    """Calls before the recent window whose arguments cost more than ``above_tokens`` keep
    ``keep_tokens`` of head in each long string; the full arguments go behind a ref.

    The arguments stay a JSON object with the same keys, so the call is as valid as it was.
    Arguments that are not a JSON object are left alone (there is no safe way to cut them).
    """

    above_tokens: int = OLD_ARGUMENTS_ABOVE_TOKENS
    keep_tokens: int = OLD_ARGUMENTS_KEEP_TOKENS
    name: str = "trim_arguments"

    def plan(self, ctx: CompactionContext) -> list[ContextEdit]:
        """One edit trimming every big old call, or nothing."""
        items: list[ReplacedArguments] = []
        for message in ctx.view[: ctx.window_start()]:
            if message.role != "assistant":
                continue
            for call in message.tool_calls:
                item = self._trimmed(ctx, message, call)
                if item is not None:
                    items.append(item)
        # Reason "mask": in a MASK-zone batch it is part of the batch, not a compaction of its own.
        return [MaskEdit((), reason="mask", arguments=tuple(items))] if items else []

    def _trimmed(
        self, ctx: CompactionContext, message: Message, call: ToolCallPart
    ) -> ReplacedArguments | None:
        if len(call.arguments) <= self.above_tokens:
            return None  # a token is at least a character: no need to count
        before = ctx.counter.count_text(call.arguments)
        if before <= self.above_tokens or _ARGUMENTS_CUT_NOTE in call.arguments:
            return None
        try:
            value = json.loads(call.arguments)
        except (ValueError, RecursionError):
            return None
        if not isinstance(value, dict):
            return None
        ref = ctx.stash(call.arguments, call.name)
        trimmed = json.dumps(self._cut(ctx, value, ref), ensure_ascii=False)
        if ctx.counter.count_text(trimmed) >= before:
            return None
        return ReplacedArguments(message.id, call.call_id, trimmed, ref)

    def _cut(self, ctx: CompactionContext, value: Any, ref: str) -> Any:
        """``value`` with each long string cut to its head (lists and objects walked through)."""
        if isinstance(value, str):
            tokens = ctx.counter.count_text(value)
            if tokens <= self.keep_tokens:
                return value
            keep = floor_boundary(value, max(1, len(value) * self.keep_tokens // tokens))
            return f"{value[:keep]}… [{len(value) - keep:,} {_ARGUMENTS_CUT_NOTE} {ref}]"
        if isinstance(value, list):
            return [self._cut(ctx, v, ref) for v in value]
        if isinstance(value, dict):
            return {k: self._cut(ctx, v, ref) for k, v in value.items()}
        return value


# --------------------------------------------------------------------------------------------------
# Old thinking
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClearOldThinking:
    """Thinking parts of assistant messages before the last user turn leave the view.

    Anthropic requires the thinking (with its signature) of the current tool-use turn, which
    runs from the last user message on; earlier turns' thinking may go, and OpenAI's reasoning
    follows the same turn boundary. The recent window keeps its thinking too. The thinking text
    goes to the blob store (the transcript keeps the parts); a message left with nothing but
    thinking keeps it (providers refuse such a message).
    """

    name: str = "clear_thinking"

    def plan(self, ctx: CompactionContext) -> list[ContextEdit]:
        """One edit clearing the thinking of every old assistant message, or nothing."""
        last_user = last_user_index(ctx.view)
        if last_user is None:
            return []  # the whole view is one turn: its thinking is the current one
        items: list[ClearedThinking] = []
        for message in ctx.view[: min(last_user, ctx.window_start())]:
            if message.role != "assistant" or not _clearable_thinking(message):
                continue
            text = "\n\n".join(p.text for p in message.parts_of(ThinkingPart) if p.text)
            items.append(ClearedThinking(message.id, ctx.stash(text, "thinking") if text else None))
        return [MaskEdit((), reason="mask", thinking=tuple(items))] if items else []


def _clearable_thinking(message: Message) -> bool:
    """True when ``message`` has thinking and something a provider renders besides it."""
    thinking = rendered = False
    for part in message.parts:
        if isinstance(part, ThinkingPart):
            thinking = True
        elif isinstance(part, ToolCallPart) or (isinstance(part, TextPart) and part.text.strip()):
            rendered = True
    return thinking and rendered


# --------------------------------------------------------------------------------------------------
# Files restored after a summary
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _FileSource:
    """Where the latest content of one file is: a read's output or a whole-file write."""

    path: str
    position: int
    content: str
    ref: str
    what: str
    call_id: str
    shown: str
    """What the view showed of it (the read's output or the call's arguments), to tell whether
    the compacted view still holds it verbatim."""


@dataclass(frozen=True)
class RestoreFiles:
    """After a summary, the files the agent was working on come back in one note after it.

    The files read or edited most recently (at most ``max_files``), each from its newest read
    of the whole file or whole-file write still readable (the view, or the blob store behind the
    result's ref), each cut to ``file_tokens`` of head, all within ``total_tokens`` and
    ``max_window_share`` of the window. A file the compacted view still shows verbatim is not
    repeated. A file edited after its newest read says so (the content may be stale).
    """

    max_files: int = RESTORE_MAX_FILES
    file_tokens: int = RESTORE_FILE_MAX_TOKENS
    total_tokens: int = RESTORE_TOTAL_TOKENS
    max_window_share: float = RESTORE_MAX_WINDOW_SHARE
    name: str = "restore_files"

    def note(
        self, ctx: CompactionContext, before: Sequence[Message], after: Sequence[Message], room: int
    ) -> Message | None:
        """The note restoring files from ``before`` (the view the compaction started from) that
        ``after`` (its result) no longer shows, within ``room`` tokens; ``None`` when none fits."""
        budget = min(room, self.total_tokens, int(self.max_window_share * ctx.window_tokens))
        header = (
            "[Files you were working on before the context was compacted, as the session last "
            "read or wrote them (most recent first); read_result <ref> returns each in full.]"
        )
        budget -= ctx.counter.count_message(Message.user(header))
        if min(self.file_tokens, budget) < RESTORE_MIN_FILE_TOKENS:
            # No file can fit (the budget only shrinks): spare finding and stashing them (the
            # usual case when the summary leaves the view above its target).
            return None
        shown = _verbatim(after)
        blocks: list[str] = []
        for source, stale in _latest_sources(ctx, before, self.max_files):
            if source.shown in shown.get(source.call_id, ()):
                continue
            allowance = min(self.file_tokens, budget)
            if allowance < RESTORE_MIN_FILE_TOKENS:
                break
            block = _file_block(ctx, source, stale, allowance)
            budget -= ctx.counter.count_text(block)
            blocks.append(block)
        if not blocks:
            return None
        text = "\n\n".join([header, *blocks])
        meta = Meta(kind="context_note", user_visible=False, flags=(FILE_RESTORE_FLAG,))
        return Message("user", (TextPart(text),), meta=meta)


def _verbatim(view: Sequence[Message]) -> dict[str, set[str]]:
    """What ``view`` shows of each call, by call id: its arguments and its result's content."""
    shown: dict[str, set[str]] = {}
    for message in view:
        for call in message.tool_calls if message.role == "assistant" else ():
            shown.setdefault(call.call_id, set()).add(call.arguments)
        for result in message.tool_results:
            shown.setdefault(result.call_id, set()).add(result.content)
    return shown


def _latest_sources(
    ctx: CompactionContext, view: Sequence[Message], max_files: int
) -> list[tuple[_FileSource, bool]]:
    """The latest readable content of the ``max_files`` files touched last, most recent first,
    each with whether an edit came after it (the content may be stale). Positions are those of
    the calls, so a read and a write are ordered as the agent made them."""
    touched: dict[str, int] = {}
    edited: dict[str, int] = {}
    sources: dict[str, _FileSource] = {}
    for at, message in enumerate(view):
        for call in message.tool_calls if message.role == "assistant" else ():
            action = call_action(call)
            if action.kind not in ("read", "write"):
                continue
            for path in map(_normal_path, (*action.reads, *action.writes)):
                touched[path] = at
            if action.kind != "write":
                continue
            for path in map(_normal_path, action.writes):
                edited[path] = at
            source = _write_source(ctx, at, call, action)
            if source is not None:
                sources[source.path] = source
    calls_at = {c.call_id: i for i, m in enumerate(view) for c in m.tool_calls}
    for read in file_reads(view):
        at = calls_at.get(read.slot.result.call_id, read.slot.index)
        earlier = sources.get(read.path)
        newest = earlier is None or earlier.position <= at
        if newest and read.span is None and not read.slot.result.is_error:
            source = _read_source(ctx, read, at)
            if source is not None:
                sources[read.path] = source
    chosen: list[tuple[_FileSource, bool]] = []
    for path in sorted(touched, key=touched.__getitem__, reverse=True):
        source = sources.get(path)
        if source is None:
            continue
        chosen.append((source, edited.get(path, -1) > source.position))
        if len(chosen) == max_files:
            break
    return chosen


def _read_source(ctx: CompactionContext, read: FileRead, at: int) -> _FileSource | None:
    result = read.slot.result
    content = result.content
    if result.ref is not None:
        try:
            content = ctx.blobs.get_blob(ctx.session_id, result.ref)
        except LookupError:
            if is_placeholder(read.slot):
                return None  # only a placeholder is left, and its output is not readable
    ref = ctx.stash_result(result)
    what = f"{read.call.name} call {result.call_id}"
    # Compared with what the compacted view shows: a placeholder or a preview is not the file.
    return _FileSource(read.path, at, content, ref, what, result.call_id, content)


def _write_source(
    ctx: CompactionContext, at: int, call: ToolCallPart, action: ToolAction
) -> _FileSource | None:
    """A whole-file write (its new content is in its arguments), else ``None``."""
    if len(action.writes) != 1:
        return None
    # Decoded once per call: every compaction looks at each whole-file write of its view again.
    args = call.shared_args()
    content = next((args[k] for k in _CONTENT_KEYS if isinstance(args.get(k), str)), None)
    if content is None or _ARGUMENTS_CUT_NOTE in content:
        return None  # an edit of a part of the file, or arguments already trimmed
    ref = ctx.stash(content, call.name)
    what = f"{call.name} call {call.call_id}"
    path = _normal_path(action.writes[0])
    return _FileSource(path, at, content, ref, what, call.call_id, call.arguments)


def _file_block(ctx: CompactionContext, source: _FileSource, stale: bool, max_tokens: int) -> str:
    content, cut = _head(ctx, redact_text(source.content), max_tokens - 40)
    notes = [f"from {source.what}"]
    if stale:
        notes.append("edited after this; read it again before editing it")
    if cut:
        notes.append(f"cut to its head; read_result {source.ref} has the rest")
    path = source.path.replace('"', "&quot;")
    attributes = f'path="{path}" ref="{source.ref}" note="{"; ".join(notes)}"'
    return f"<file {attributes}>\n{content}\n</file>"


def _head(ctx: CompactionContext, text: str, max_tokens: int) -> tuple[str, bool]:
    """``text`` cut at a line end to at most ``max_tokens``; whether it was cut."""
    tokens = ctx.counter.count_text(text)
    if tokens <= max_tokens:
        return text, False
    keep = len(text) * max(1, max_tokens) // tokens
    while keep > 0:
        head = text[: floor_boundary(text, keep)]
        if "\n" in head[len(head) // 2 :]:
            head = head[: head.rindex("\n")]
        if ctx.counter.count_text(head) <= max_tokens:
            return head, True
        keep = keep * 9 // 10
    return "", True


def hygiene_strategies() -> tuple[SupersededReads, TrimOldArguments, ClearOldThinking]:
    """The hygiene edits in the order they run (each frees what the one before did not touch)."""
    return (SupersededReads(), TrimOldArguments(), ClearOldThinking())
