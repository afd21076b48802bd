"""Facts about a session, read from its messages without a model.

:func:`extract_facts` gives what a summary must not lose, since an agent that forgets it redoes
work or breaks a rule: the task and the user's later requests and constraints, the files the
agent modified and read, the error lines its tools printed, the approaches that failed and were
later superseded, decisions stated in assistant text, and the next steps from the latest
assistant text. Every fact cites the ids of the messages it came from. The extractive summarizer
renders these facts; the replay retention probes reuse them to check what a compacted view still
knows.

Tool calls are understood across agents: Claude Code (Edit/Write/MultiEdit/Read/Bash), shell-only
agents (mini-swe-agent native calls, or a fenced bash block answered by a
``<returncode>`` message), ``str_replace_editor``-style editors, ``apply_patch`` and contextfold's
own file tools.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Literal, TypeAlias

from contextfold.history.harness_notes import typed_text
from contextfold.history.shell import looks_like_file, shell_effects
from contextfold.history.turns import is_user_turn
from contextfold.lru import LRU
from contextfold.messages import Message, ToolCallPart, ToolResultPart
from contextfold.outputs.error_lines import error_lines
from contextfold.redaction.redactor import redact_text

__all__ = [
    "ActionKind",
    "Fact",
    "SessionFacts",
    "ToolAction",
    "call_action",
    "extract_facts",
    "tool_actions",
]

ActionKind: TypeAlias = Literal["read", "write", "search", "run", "other"]

MAX_SENTENCE_CHARS = 240
"""Longest decision / next-step sentence kept."""
MAX_ACTION_CHARS = 160
"""Longest one-line description of a tool call."""
ACTION_CACHE_SIZE = 8_192
"""Tool calls (with their results) whose :class:`ToolAction` is kept. Messages are immutable,
so an action read once stays true; every compaction, hygiene pass and loss report reads the
whole view's actions again, and parsing each shell command anew cost a third of a compaction
turn."""

_FENCED_BASH = re.compile(r"```(?:bash|sh|shell)?\s*\n(.*?)```", re.S)
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_EXIT_LINE = re.compile(
    r"^\s*(?:exit code|exit status|process exited with code|exit_code|return code)[:=\s]+(-?\d+)",
    re.I | re.M,
)
_SOFT_FAILURE = re.compile(r"No replacement was performed|String to replace not found")
_BENIGN_EXIT_1 = frozenset({"grep", "egrep", "fgrep", "rg", "diff", "cmp", "test", "[", "git"})
_DECISION = re.compile(
    r"\b(?:decid\w*|instead|because|will use|switch(?:ed|ing)? to|going to use|chose|"
    r"root cause|the (?:issue|problem|bug|fix) (?:is|was)|approach)\b",
    re.I,
)
_NEXT = re.compile(
    r"\b(?:next|then|now|let me|let's|i'll|i will|need to|todo|remaining|going to)\b", re.I
)
_CONSTRAINT = re.compile(
    r"\b(?:must|must not|should(?:n't| not)?|don't|do not|never|always|only|make sure|"
    r"without|avoid)\b",
    re.I,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_SHELL_TOOLS = frozenset(
    {
        "bash",
        "shell",
        "sh",
        "run",
        "execute",
        "exec_command",
        "run_command",
        "terminal",
        "local_shell",
        "shell_command",
        "run_shell_command",
        "container.exec",
    }
)
_PATH_ARGS = ("file_path", "path", "notebook_path", "filename", "file", "target_file")
_WRITE_WORDS = ("write", "edit", "create", "replace", "insert", "delete", "append")
_READ_WORDS = ("read", "view", "open", "cat")
_SEARCH_WORDS = ("grep", "glob", "search", "find", "list", "ls")
"""Words in a tool's name that say what it does, for tools this module does not know by name."""
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$|^\*\*\* Move to: (.+)$", re.M)


@dataclass(frozen=True, slots=True)
class Fact:
    """One thing worth keeping, with the ids of the messages it came from."""

    text: str
    sources: tuple[str, ...] = ()
    ref: str | None = None


@dataclass(frozen=True, slots=True)
class ToolAction:
    """One tool call, what it touched and how it ended."""

    call_id: str
    tool: str
    summary: str
    kind: ActionKind
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    call_message_id: str
    result_message_id: str | None = None
    exit_code: int | None = None
    failed: bool = False
    errors: tuple[str, ...] = ()
    output_chars: int = 0
    ref: str | None = None

    @property
    def key(self) -> str:
        """What makes two actions 'the same attempt' (a later success supersedes a failure)."""
        if self.kind == "write" and self.writes:
            return f"write:{','.join(self.writes)}"
        return f"{self.tool}:{' '.join(self.summary.split())}"

    @property
    def sources(self) -> tuple[str, ...]:
        """Ids of the call message and, when there is one, the result message."""
        if self.result_message_id and self.result_message_id != self.call_message_id:
            return (self.call_message_id, self.result_message_id)
        return (self.call_message_id,)


@dataclass(frozen=True, slots=True)
class SessionFacts:
    """Everything :func:`extract_facts` found, each list in the order it happened."""

    task: Fact | None = None
    user_requests: tuple[Fact, ...] = ()
    constraints: tuple[Fact, ...] = ()
    files_modified: tuple[Fact, ...] = ()
    files_read: tuple[Fact, ...] = ()
    errors: tuple[Fact, ...] = ()
    failed_approaches: tuple[Fact, ...] = ()
    decisions: tuple[Fact, ...] = ()
    next_steps: tuple[Fact, ...] = ()
    latest_progress: Fact | None = None
    actions: tuple[ToolAction, ...] = field(default=())


# --------------------------------------------------------------------------------------------------
# Tool actions
# --------------------------------------------------------------------------------------------------


def tool_actions(
    messages: Sequence[Message], *, touching: Collection[str] | None = None
) -> list[ToolAction]:
    """Every tool call in ``messages`` paired with its result, in call order.

    With ``touching`` (message ids), just the actions whose call or result is in one of those
    messages (one of their :attr:`ToolAction.sources`), the same as filtering every action: the
    others are not read at all (a compaction's ledger wants those of the few messages it took).
    """
    results: dict[str, tuple[Message, ToolResultPart]] = {}
    for message in messages:
        for result in message.tool_results:
            results.setdefault(result.call_id, (message, result))
    actions: list[ToolAction] = []
    for i, message in enumerate(messages):
        if message.role != "assistant":
            continue
        for call in message.tool_calls:
            found = results.get(call.call_id)
            if not _touches(touching, message, found[0] if found else None):
                continue
            actions.append(
                _cached_action(
                    call, message.id, found[0].id if found else None, found[1] if found else None
                )
            )
        answer = messages[i + 1] if i + 1 < len(messages) else None
        if not message.tool_calls and _touches(touching, message, answer):
            actions.extend(_text_command_action(messages, i))
    return actions


def call_action(call: ToolCallPart) -> ToolAction:
    """What ``call`` does on its own, without its result: its kind, summary and the files it
    reads and writes, as :func:`tool_actions` reads it from an assistant message holding only
    that call (whose id, ``"call"``, the action cites). Remembered like every action, and
    without making that message: hygiene asks this of every call of the view at each
    compaction."""
    return _cached_action(call, "call", None, None)


def _touches(touching: Collection[str] | None, call: Message, result: Message | None) -> bool:
    """Whether an action called in ``call`` and answered in ``result`` is one ``touching`` asks
    for (``None``: every action)."""
    return touching is None or call.id in touching or (result is not None and result.id in touching)


def _text_command_action(messages: Sequence[Message], i: int) -> list[ToolAction]:
    """A shell-only agent's command: a fenced bash block answered by a ``<returncode>`` message."""
    blocks = _FENCED_BASH.findall(messages[i].text)
    if not blocks or i + 1 >= len(messages):
        return []
    answer = messages[i + 1]
    if answer.role not in ("user", "tool") or not _RETURNCODE.search(answer.text[:200]):
        return []
    call = ToolCallPart(messages[i].id, "bash", "")
    result = ToolResultPart(messages[i].id, "bash", answer.text)
    return [_cached_action(call, messages[i].id, answer.id, result, blocks[-1].strip())]


@lru_cache(maxsize=ACTION_CACHE_SIZE)
def _cached_action(
    call: ToolCallPart,
    call_message_id: str,
    result_message_id: str | None,
    result: ToolResultPart | None,
    command: str | None = None,
) -> ToolAction:
    """:func:`_action`, once per call and result (see :data:`ACTION_CACHE_SIZE`). The parts are
    frozen and their strings keep their hashes, so a lookup costs no pass over an output."""
    return _action(call, call_message_id, result_message_id, result, command=command)


def _action(
    call: ToolCallPart,
    call_message_id: str,
    result_message_id: str | None,
    result: ToolResultPart | None,
    *,
    command: str | None = None,
) -> ToolAction:
    kind, summary, reads, writes, programs = _classified_call(call, command)
    exit_code: int | None = None
    failed = False
    errors: tuple[str, ...] = ()
    if result is not None:
        exit_code, failed, errors = _outcome(
            result.content, result.is_error, kind, programs[-1] if programs else None
        )
    return ToolAction(
        call_id=call.call_id,
        tool=call.name,
        summary=summary,
        kind=kind,
        reads=tuple(reads),
        writes=tuple(writes),
        call_message_id=call_message_id,
        result_message_id=result_message_id,
        exit_code=exit_code,
        failed=failed,
        errors=errors,
        output_chars=len(result.content) if result is not None else 0,
        ref=result.ref if result is not None else None,
    )


@lru_cache(maxsize=ACTION_CACHE_SIZE)
def _classified_call(call: ToolCallPart, command: str | None) -> Classified:
    """:func:`_classify` with the summary clipped, once per call: the same call comes back
    with other results (a summary reads outputs back with their refs, the loss report reads
    the transcript's), and parsing its arguments again cost more than the rest of an action."""
    kind, summary, reads, writes, programs = _classify(call, command)
    return kind, _clip(summary, MAX_ACTION_CHARS), tuple(reads), tuple(writes), tuple(programs)


_OUTCOMES_KEPT = ACTION_CACHE_SIZE
_outcomes: LRU[tuple[int, int, bool, ActionKind, str | None], _Outcome] = LRU(_OUTCOMES_KEPT)
"""How each output ended, keyed by its length and hash (never the text, which may be large and
read back from the store for one pass): an output met again, whatever the result holding it,
is not scanned again. Two outputs of one length with the same 64-bit hash would share an
outcome."""


def _outcome(output: str, is_error: bool, kind: ActionKind, last_program: str | None) -> _Outcome:
    """Exit code, whether the call failed, and the error lines its output shows."""
    key = (len(output), hash(output), is_error, kind, last_program)
    known = _outcomes.get(key)
    if known is not None:
        return known
    exit_code = _exit_code(output)
    failed = is_error or bool(_SOFT_FAILURE.search(output[:500]))
    benign = exit_code == 1 and last_program in _BENIGN_EXIT_1
    if exit_code not in (None, 0) and not benign:
        failed = True
    errors: tuple[str, ...] = ()
    if failed or kind in ("run", "other", "write"):
        errors = tuple(error_lines(output, failed=failed, exit_code=exit_code))
    found = (exit_code, failed, errors)
    _outcomes.put(key, found)
    return found


Classified: TypeAlias = tuple[ActionKind, str, Sequence[str], Sequence[str], Sequence[str]]
"""Kind, one-line summary, files read, files written, programs run."""
_Outcome: TypeAlias = tuple[int | None, bool, tuple[str, ...]]
"""Exit code, whether the call failed, the error lines of its output."""


def _classify(call: ToolCallPart, command: str | None) -> Classified:
    """What one call did: a shell command is parsed; other tools are known by name and args."""
    args = call.shared_args()
    lower = call.name.lower()
    if _is_editor(lower, args):
        return _named_tool(call, args)
    if command is None:
        raw = args.get("command", args.get("cmd"))
        if isinstance(raw, list):
            # Codex sends argv; ["bash", "-lc", script] carries the script last.
            raw = raw[-1] if len(raw) >= 3 and raw[-2] in ("-c", "-lc") else " ".join(map(str, raw))
        if isinstance(raw, str) and (lower in _SHELL_TOOLS or "path" not in args):
            command = raw
    if command is not None:
        return _shell_call(command)
    return _named_tool(call, args)


@lru_cache(maxsize=ACTION_CACHE_SIZE)
def _shell_call(command: str) -> Classified:
    """What one shell command does, parsed once per command text (the same command is met
    again in every pass over a view)."""
    effects = shell_effects(command)
    kind: ActionKind = "run"
    if effects.writes:
        kind = "write"
    elif effects.reads:
        kind = "read"
    elif effects.programs and effects.programs[-1] in ("grep", "rg", "find", "ls", "ag"):
        kind = "search"
    first = command.strip().splitlines()[0] if command.strip() else ""
    return kind, first, tuple(effects.reads), tuple(effects.writes), tuple(effects.programs)


def _named_tool(call: ToolCallPart, args: Mapping[str, object]) -> Classified:
    name, lower = call.name, call.name.lower()
    paths = [str(args[k]) for k in _PATH_ARGS if isinstance(args.get(k), str)]
    shown = " ".join(paths)
    if "patch" in lower or "*** Begin Patch" in str(args.get("input", "")):
        text = str(args.get("input", args.get("patch", call.arguments)))
        files = [a or b for a, b in _PATCH_FILE.findall(text)]
        return "write", f"{name} {' '.join(files)}", [], files, []
    if _is_editor(lower, args):
        sub = str(args.get("command", ""))
        if sub == "view":
            return "read", f"{name} view {shown}", paths, [], []
        return "write", f"{name} {sub} {shown}", [], paths, []
    if any(w in lower for w in _WRITE_WORDS):
        return "write", f"{name} {shown}", [], paths, []
    if any(w in lower for w in _READ_WORDS):
        return "read", f"{name} {shown}", [p for p in paths if looks_like_file(p)], [], []
    if any(w in lower for w in _SEARCH_WORDS):
        return "search", f"{name} {args.get('pattern', args.get('query', shown))}", [], [], []
    return "other", f"{name} {shown or call.arguments}", [], [], []


def _is_editor(lower: str, args: Mapping[str, object]) -> bool:
    return ("editor" in lower or "str_replace" in lower) and "path" in args


def _exit_code(output: str) -> int | None:
    head_tail = output[:300] + "\n" + output[-300:]
    match = _RETURNCODE.search(head_tail) or _EXIT_LINE.search(head_tail)
    return int(match.group(1)) if match else None


# --------------------------------------------------------------------------------------------------
# Facts
# --------------------------------------------------------------------------------------------------


def extract_facts(messages: Sequence[Message], *, narrative: bool = True) -> SessionFacts:
    """The facts of ``messages`` (any view or transcript slice), each citing its message ids.

    The task, requests and constraints come from user turns only (never a note of contextfold or
    of the agent harness), in the words the user typed (a slash command as its command line).
    ``narrative=False`` leaves out what only a summary tells (failed approaches, decisions, next
    steps, latest progress: those fields stay empty), for a caller that reads only the task,
    requests, constraints, files and errors (the loss report, at every compaction).
    """
    users = [
        (m.id, typed_text(m.text))
        for m in messages
        if is_user_turn(m) and not _RETURNCODE.match(m.text[:40])
    ]
    task = Fact(users[0][1], (users[0][0],)) if users else None
    requests = tuple(Fact(_first_line(text), (id_,)) for id_, text in users[1:] if text.strip())
    constraints = _unique(
        Fact(s, (id_,)) for id_, text in users for s in _sentences_matching(text, _CONSTRAINT)
    )
    actions = tool_actions(messages)
    modified: dict[str, Fact] = {}
    read: dict[str, Fact] = {}
    for action in actions:
        if action.failed and action.kind == "write":
            continue
        for path in action.writes:
            modified[path] = _cite(modified.get(path), path, action.call_message_id, None)
        for path in action.reads:
            read[path] = _cite(read.get(path), path, action.call_message_id, action.ref)
    errors: dict[str, Fact] = {}
    for action in actions:
        for line in action.errors:
            errors[line] = _cite(errors.get(line), line, action.sources[-1], action.ref)
    facts = SessionFacts(
        task=task,
        user_requests=requests,
        constraints=constraints,
        files_modified=tuple(modified.values()),
        files_read=tuple(f for p, f in read.items() if p not in modified),
        errors=tuple(errors.values()),
        actions=tuple(actions),
    )
    return _with_narrative(facts, messages) if narrative else facts


def _with_narrative(facts: SessionFacts, messages: Sequence[Message]) -> SessionFacts:
    """``facts`` with what only a summary tells: failed approaches, decisions, next steps and
    the latest progress."""
    assistant = [m for m in messages if m.role == "assistant" and m.text.strip()]
    decisions = _unique(
        Fact(s, (m.id,)) for m in assistant for s in _sentences_matching(m.text, _DECISION)
    )
    latest = assistant[-1] if assistant else None
    next_steps: tuple[Fact, ...] = ()
    progress = None
    if latest is not None:
        sentences = _sentences(latest.text)
        next_steps = _unique(Fact(s, (latest.id,)) for s in sentences if _NEXT.search(s))[:3]
        progress = Fact(sentences[0], (latest.id,)) if sentences else None
    return replace(
        facts,
        failed_approaches=_failed_approaches(facts.actions),
        decisions=decisions,
        next_steps=next_steps,
        latest_progress=progress,
    )


def _failed_approaches(actions: Sequence[ToolAction]) -> tuple[Fact, ...]:
    """(attempt → error) pairs that a later attempt of the same kind superseded."""
    out: list[Fact] = []
    seen: set[str] = set()
    for i, action in enumerate(actions):
        if not action.failed or action.key in seen:
            continue
        later = next((a for a in actions[i + 1 :] if a.key == action.key and not a.failed), None)
        if later is None:
            continue
        seen.add(action.key)
        error = action.errors[-1] if action.errors else f"exit code {action.exit_code}"
        text = f"`{action.summary}` → {error} (superseded later)"
        out.append(Fact(text, (action.call_message_id, later.call_message_id), action.ref))
    return tuple(out)


def _cite(previous: Fact | None, text: str, source: str, ref: str | None) -> Fact:
    if previous is None:
        return Fact(text, (source,), ref)
    sources = previous.sources if source in previous.sources else (*previous.sources, source)
    return Fact(text, sources, ref or previous.ref)


def _unique(facts: Iterable[Fact]) -> tuple[Fact, ...]:
    seen: dict[str, Fact] = {}
    for fact in facts:
        key = _folded(fact.text)
        if key not in seen:
            seen[key] = fact
    return tuple(seen.values())


def _sentences(text: str) -> list[str]:
    return list(_text_sentences(text))


@lru_cache(maxsize=ACTION_CACHE_SIZE)
def _text_sentences(text: str) -> tuple[str, ...]:
    """The sentences of one text, once per text (every summary reads the view's texts again)."""
    out = []
    for raw in _SENTENCE_END.split(_FENCED_BASH.sub(" ", text)):
        sentence = raw.strip(" -*#>\t")
        if len(sentence) >= 8:
            out.append(_clip(sentence, MAX_SENTENCE_CHARS))
    return tuple(out)


@lru_cache(maxsize=ACTION_CACHE_SIZE)
def _sentences_matching(text: str, pattern: re.Pattern[str]) -> tuple[str, ...]:
    """The sentences of ``text`` that ``pattern`` finds something in, once per text and pattern
    (every summary and loss report looks for decisions and constraints in the same texts)."""
    return tuple(s for s in _text_sentences(text) if pattern.search(s))


@lru_cache(maxsize=ACTION_CACHE_SIZE)
def _folded(text: str) -> str:
    """``text`` lowercased with its whitespace runs made one space: what :func:`_unique`
    compares (once per text: the same facts are met at every extraction)."""
    return " ".join(text.lower().split())


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return _clip(line.strip(), MAX_SENTENCE_CHARS)
    return ""


def _clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters. A cut one is redacted first: a fact may be stored
    (a summary, a loss report), and half a secret no longer looks like one to the store's
    redactor."""
    if len(text) <= limit:
        return text
    return redact_text(text)[: limit - 1].rstrip() + "…"
