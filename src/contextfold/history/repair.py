"""A valid tool-call history for OpenAI and Anthropic, repaired in one linear pass.

Both providers reject a request whose history breaks the call/result pairing, and an agent's view
breaks it easily: a crash between a call and its result, a window cut between them, a result
logged twice, a compaction that kept one half of a pair. :func:`repair` makes any message list
valid and says what it changed; :func:`validate` raises :class:`~contextfold.HistoryError`
naming the first problem's message index and call id.

The rules (``provider="any"`` applies all of them; ``"openai"`` skips the Anthropic-only ones;
:func:`history_rules_for` says which set a model's provider needs):

1. Every call gets exactly one result, in ``tool`` messages right after the assistant message
   that made it. A dangling call gets a synthesized result (``"aborted: no result was
   recorded"``, ``is_error``), flagged ``"synthesized"`` with kind ``"synthetic"``, in a message
   whose id derives from the call id, so that repairing the same history twice sends the same
   bytes and prompt caches survive.
2. A result whose call is not in the view is dropped from the view (the transcript keeps it); a
   second result for one call is dropped; a result separated from its call is moved right after
   it. Results are matched to the nearest earlier call with their id.
3. One response's calls stay together: its message is never split, and all its calls are
   answered (by real or synthesized results).
4. Thinking stays with its tool loop: an assistant message keeps its thinking parts and
   signatures; a thinking-only message joins the assistant message that follows it (they were one
   response), or leaves the view when none does.
5. Messages the provider cannot render (no parts, only blank text) leave the view; blank text
   beside other content is removed (Anthropic rejects whitespace-only text blocks), and so are
   parts a role cannot carry (a call in a user message, thinking outside an assistant message).
6. Anthropic only: the first non-system message is a user turn (a minimal synthetic one is put
   before a leading assistant message), and call ids are unique and match ``[A-Za-z0-9_-]+``
   (others are renamed deterministically, with their results).

Messages hidden from the agent (``meta.agent_visible=False``) are passed through untouched and
ignored by the rules, as the provider adapters ignore them. A valid history comes back as it was
(the fast path only checks), so ``repair(repair(x)) == repair(x)``.

How it stays linear and cheap: one allocation-free scan finds the longest valid prefix after which
nothing can change what came before; problems confined to one message are tidied in place; only
when the pairing itself is broken does the two-pass repair run (match each result to its call,
then rebuild), and only on what follows that prefix.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, TypeAlias

from contextfold.errors import HistoryError
from contextfold.history.rules import first_problem, good_id, is_blank, valid_prefix
from contextfold.messages import (
    ImagePart,
    Message,
    Meta,
    Part,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    new_message_id,
)
from contextfold.model_registry import Provider

__all__ = [
    "ABORTED_RESULT_TEXT",
    "LEADING_USER_TEXT",
    "HistoryRules",
    "RepairChange",
    "RepairKind",
    "RepairReport",
    "history_rules_for",
    "repair",
    "synthesized_result",
    "validate",
]

HistoryRules: TypeAlias = Literal["any", "openai", "anthropic"]
"""Which rules a history must pass: ``"anthropic"`` and ``"any"`` all of them, ``"openai"`` all
but the Anthropic-only ones (rule 6)."""


def history_rules_for(provider: Provider) -> HistoryRules:
    """The history rules a request to ``provider`` must pass.

    Only OpenAI's own API gets the lenient set: it is documented to take a history that opens
    with an assistant message and any call id. Every other provider gets all the rules. Local
    servers (Ollama, vLLM, llama.cpp) render the history through the model's chat template, and
    common templates refuse what the lenient set lets through: Qwen3's raises "No user query
    found in messages" (HTTP 400 from vLLM and from llama.cpp with ``--jinja``) when compaction
    left no user turn, Mistral's and Gemma's insist on a user turn first. The strict set costs
    them nothing they would notice: a one-word user turn before a leading assistant message and
    call ids renamed consistently with their results.
    """
    if provider == "openai":
        return "openai"
    if provider == "anthropic":
        return "anthropic"
    return "any"


RepairKind: TypeAlias = Literal[
    "synthesized_result",
    "dropped_orphan_result",
    "dropped_duplicate_result",
    "moved_result",
    "dropped_duplicate_call",
    "renamed_call_id",
    "merged_thinking",
    "dropped_thinking",
    "dropped_empty_message",
    "dropped_blank_text",
    "dropped_stray_part",
    "inserted_user_turn",
]
"""What :func:`repair` changed, one kind per rule it enforced."""

ABORTED_RESULT_TEXT = "aborted: no result was recorded"
"""Content of the result synthesized for a call that never got one."""
LEADING_USER_TEXT = "(continued)"
"""Text of the synthetic user turn put before a leading assistant message (Anthropic)."""
SYNTHESIZED_FLAG = "synthesized"
"""``Meta.flags`` entry of a message contextfold made up to keep the history valid."""

_NOT_ID_CHAR = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class RepairChange:
    """One change :func:`repair` made. ``index`` is the position in the list given to it."""

    kind: RepairKind
    index: int
    message_id: str
    call_id: str | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class RepairReport:
    """Every change one :func:`repair` made; empty for a history that was already valid."""

    changes: tuple[RepairChange, ...] = ()
    messages_in: int = 0
    messages_out: int = 0

    def __bool__(self) -> bool:
        return bool(self.changes)

    @property
    def counts(self) -> dict[str, int]:
        """Number of changes per kind, in the order the kinds first occurred."""
        return dict(Counter(c.kind for c in self.changes))

    def summary(self) -> str:
        """One line for logs: ``"2 synthesized_result, 1 dropped_orphan_result"``."""
        if not self.changes:
            return "no repairs"
        return ", ".join(f"{count} {kind}" for kind, count in self.counts.items())


def validate(messages: Sequence[Message], *, provider: HistoryRules = "any") -> None:
    """Raise :class:`HistoryError` (with ``index`` and ``call_id``) unless ``messages`` meet the
    rules of ``provider``; :func:`repair` fixes whatever this rejects."""
    strict = provider != "openai"
    if valid_prefix(messages, strict)[0] == len(messages):
        return
    problem = first_problem(messages, strict)
    if problem is not None:
        raise HistoryError(
            problem.message + "; normalize.repair() fixes it",
            index=problem.index,
            call_id=problem.call_id,
        )


# --------------------------------------------------------------------------------------------------
# Repairing
# --------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Response:
    """An assistant message with calls, and the results found for them."""

    index: int
    calls: list[ToolCallPart]  # after de-duplication and renaming
    original_ids: list[str]
    renamed: bool
    deduplicated: bool
    results: dict[str, ToolResultPart] = field(default_factory=dict)  # by original id
    sources: list[int] = field(default_factory=list)  # tool messages holding them, in order


@dataclass(slots=True)
class _Repairer:
    messages: Sequence[Message]  # the part of the view that needs repair
    provider: HistoryRules
    origin: Sequence[int] = ()  # index in the caller's list of each of ``messages``
    used_ids: set[str] = field(default_factory=set)  # call ids given out so far (prefix first)
    needs_user_turn: bool = True  # the valid prefix has no user turn yet
    changes: list[RepairChange] = field(default_factory=list)
    responses: dict[int, _Response] = field(default_factory=dict)
    part_owners: dict[int, list[_Response | None]] = field(default_factory=dict)  # tool messages
    taken: set[str] | None = None  # every call id in sight, built at the first rename

    def note(
        self, kind: RepairKind, index: int, call_id: str | None = None, detail: str = ""
    ) -> None:
        message_id = self.messages[index].id
        self.changes.append(RepairChange(kind, self.origin[index], message_id, call_id, detail))

    # -- pass 1: who answers whom ----------------------------------------------------------------

    def match(self) -> None:
        strict = self.provider != "openai"
        latest: dict[str, _Response] = {}
        run_owner: _Response | None = None
        for index, message in enumerate(self.messages):
            if not message.meta.agent_visible:
                continue
            role = message.role
            if role == "assistant":
                run_owner = self._response(index, message, strict)
                if run_owner is not None:
                    self.responses[index] = run_owner
                    for original in run_owner.original_ids:
                        latest[original] = run_owner
                continue
            if role != "tool":
                run_owner = None
                continue
            owners: list[_Response | None] = []
            for part in message.parts:
                owner = None
                if type(part) is not ToolResultPart:  # tidied away before this pass
                    pass
                elif (owner := latest.get(part.call_id)) is None:
                    self.note("dropped_orphan_result", index, part.call_id, "no call in the view")
                elif part.call_id in owner.results:
                    self.note("dropped_duplicate_result", index, part.call_id, "kept the first")
                    owner = None
                else:
                    owner.results[part.call_id] = part
                    if not owner.sources or owner.sources[-1] != index:
                        owner.sources.append(index)
                    if owner is not run_owner:
                        self.note("moved_result", index, part.call_id, "placed after its call")
                owners.append(owner)
            self.part_owners[index] = owners

    def _response(self, index: int, message: Message, strict: bool) -> _Response | None:
        calls: list[ToolCallPart] | None = None
        originals: list[str] = []
        renamed = deduplicated = False
        used = self.used_ids
        for part in message.parts:
            if type(part) is not ToolCallPart:
                continue
            call_id = part.call_id
            if calls is None:
                calls = []
            elif call_id in originals:
                self.note("dropped_duplicate_call", index, call_id, "kept the first")
                deduplicated = True
                continue
            originals.append(call_id)
            if strict and (call_id in used or not good_id(call_id)):
                taken = self._taken()
                new_id = _unique_id(_NOT_ID_CHAR.sub("_", call_id) or "call", taken)
                taken.add(new_id)
                self.note("renamed_call_id", index, call_id, f"now {new_id}")
                part = replace(part, call_id=new_id)
                renamed = True
            used.add(part.call_id)
            calls.append(part)
        if calls is None:
            return None
        return _Response(index, calls, originals, renamed, deduplicated)

    def _taken(self) -> set[str]:
        """Every call id a new one must differ from (the set grows with each one given out)."""
        if self.taken is None:
            self.taken = set(self.used_ids)
            self.taken.update(
                p.call_id
                for m in self.messages
                if m.role == "assistant"
                for p in m.parts
                if type(p) is ToolCallPart
            )
        return self.taken

    # -- pass 2: the repaired view ---------------------------------------------------------------

    def build(self) -> list[Message]:
        out: list[Message] = []
        held: tuple[int, Message] | None = None  # a thinking-only message waiting for its reply
        responses = self.responses
        for index, message in enumerate(self.messages):
            if not message.meta.agent_visible:
                out.append(message)
                continue
            role = message.role
            if role == "tool":
                continue  # emitted right after the call that owns it (or dropped)
            response = responses.get(index) if role == "assistant" else None
            cleaned = self._clean(index, message, response)
            if cleaned is None:
                continue
            if held is not None:
                if role == "assistant":
                    self.note("merged_thinking", held[0], None, f"into {cleaned.id}")
                    cleaned = cleaned.with_parts((*held[1].parts, *cleaned.parts))
                else:
                    self.note("dropped_thinking", held[0], None, "no reply followed it")
                held = None
            if response is None and role == "assistant" and _thinking_only(cleaned):
                held = (index, cleaned)
                continue
            out.append(cleaned)
            if response is not None:
                self._emit_results(response, out)
        if held is not None:
            self.note("dropped_thinking", held[0], None, "no reply followed it")
        if self.provider != "openai" and self.needs_user_turn:
            self._lead_with_user(out)
        return out

    def _clean(self, index: int, message: Message, response: _Response | None) -> Message | None:
        """``message`` tidied (see :func:`_tidy`), its calls de-duplicated and renamed."""
        tidy, notes = _tidy(message)
        for kind, detail in notes:
            self.note(kind, index, None, detail)
        if tidy is None or response is None or not (response.renamed or response.deduplicated):
            return tidy
        calls = iter(response.calls)
        seen: set[str] = set()
        parts: list[Part] = []
        for part in tidy.parts:
            if type(part) is ToolCallPart:
                if part.call_id in seen:
                    continue
                seen.add(part.call_id)
                part = next(calls)
            parts.append(part)
        return tidy.with_parts(parts)

    def _emit_results(self, response: _Response, out: list[Message]) -> None:
        """Append the tool messages answering ``response``: found ones, then synthesized ones."""
        for source in response.sources:
            message = self.messages[source]
            owners = self.part_owners[source]
            if not response.renamed and all(owner is response for owner in owners):
                out.append(message)
                continue
            new_ids = dict(zip(response.original_ids, response.calls, strict=True))
            mine: list[Part] = []
            for owner, part in zip(owners, message.parts, strict=True):
                if owner is response:
                    assert type(part) is ToolResultPart
                    new_id = new_ids[part.call_id].call_id
                    mine.append(part if new_id == part.call_id else replace(part, call_id=new_id))
            first = mine[0]
            assert type(first) is ToolResultPart
            message_id = message.id if owners[0] is response else f"{message.id}#{first.call_id}"
            out.append(replace(message, parts=tuple(mine), id=message_id))
        for original, call in zip(response.original_ids, response.calls, strict=True):
            if original not in response.results:
                self.note("synthesized_result", response.index, call.call_id, ABORTED_RESULT_TEXT)
                out.append(synthesized_result(call, f"synthetic-result-{call.call_id}"))

    def _lead_with_user(self, out: list[Message]) -> None:
        for position, message in enumerate(out):
            if not message.meta.agent_visible or message.role == "system":
                continue
            if message.role == "assistant":
                source = next(
                    (i for i, m in enumerate(self.messages) if m.id == message.id), position
                )
                self.note("inserted_user_turn", source, None, "before a leading assistant turn")
                out.insert(
                    position,
                    Message(
                        "user",
                        (TextPart(LEADING_USER_TEXT),),
                        id=f"synthetic-user-{message.id}",
                        meta=Meta(user_visible=False, kind="synthetic", flags=(SYNTHESIZED_FLAG,)),
                    ),
                )
            return


def synthesized_result(call: ToolCallPart, message_id: str | None = None) -> Message:
    """The tool message that answers ``call`` when it never got a result: an error result
    (:data:`ABORTED_RESULT_TEXT`) flagged ``"synthesized"``, of kind ``"synthetic"``.

    :func:`repair` gives it an id derived from the call id, so that repairing the same history
    twice sends the same bytes; a caller that stores it gives none and gets a fresh one (call ids
    may repeat within a session, stored message ids may not).
    """
    return Message(
        "tool",
        (ToolResultPart(call.call_id, call.name, ABORTED_RESULT_TEXT, True),),
        id=message_id or new_message_id(),
        meta=Meta(kind="synthetic", flags=(SYNTHESIZED_FLAG,)),
    )


_ALLOWED: dict[str, frozenset[type]] = {
    "system": frozenset({TextPart, SummaryPart, ImagePart}),
    "user": frozenset({TextPart, SummaryPart, ImagePart}),
    "assistant": frozenset({TextPart, SummaryPart, ToolCallPart, ThinkingPart}),
    "tool": frozenset({ToolResultPart}),
}
"""The parts each role can carry on both providers' wires."""
_CONTENT = frozenset({TextPart, SummaryPart, ImagePart, ToolCallPart, ToolResultPart})


def _tidy(message: Message) -> tuple[Message | None, list[tuple[RepairKind, str]]]:
    """``message`` without blank text and parts its role cannot carry; None when nothing is left
    (an assistant message of thinking only is kept: it may belong to the next one). Also what
    was changed. A message that needs nothing comes back as it is, nothing built."""
    allowed = _ALLOWED[message.role]
    content = False
    for part in message.parts:
        kind = type(part)
        if kind not in allowed or (
            (kind is TextPart or kind is SummaryPart) and is_blank(part.text)  # type: ignore[union-attr]
        ):
            break
        content = content or kind in _CONTENT
    else:
        if content or (message.role == "assistant" and message.parts):
            return message, []
    notes: list[tuple[RepairKind, str]] = []
    kept: list[Part] = []
    blank = 0
    for part in message.parts:
        kind = type(part)
        if kind not in allowed:
            notes.append(("dropped_stray_part", f"{part.part_kind} in {message.role}"))
        elif (kind is TextPart or kind is SummaryPart) and is_blank(part.text):  # type: ignore[union-attr]
            blank += 1
        else:
            kept.append(part)
    if not any(type(p) in _CONTENT for p in kept) and not (message.role == "assistant" and kept):
        notes.append(("dropped_empty_message", f"{message.role} message"))
        return None, notes
    if blank:
        notes.append(("dropped_blank_text", f"{blank} blank text part(s)"))
    return message.with_parts(kept), notes


def _tidy_all(
    messages: Sequence[Message], start: int, changes: list[RepairChange]
) -> tuple[list[Message], list[int]] | None:
    """The messages from ``start`` on tidied one by one, with the original index of each;
    None when none needed it. Problems confined to one message are fixed here, so that the
    pairing repair (the slow part) runs only when pairing is what is broken."""
    out: list[Message] = []
    origin: list[int] = []
    changed = False
    for index in range(start, len(messages)):
        message = messages[index]
        tidy: Message | None = message
        if message.meta.agent_visible:
            tidy, notes = _tidy(message)
            for kind, detail in notes:
                changes.append(RepairChange(kind, index, message.id, None, detail))
        if tidy is not message:
            changed = True
        if tidy is not None:
            out.append(tidy)
            origin.append(index)
    if not changed:
        return None
    return [*messages[:start], *out], [*range(start), *origin]


def _thinking_only(message: Message) -> bool:
    return all(type(p) is ThinkingPart for p in message.parts)


def _unique_id(base: str, taken: set[str]) -> str:
    candidate, number = base, 2
    while candidate in taken:
        candidate = f"{base}_{number}"
        number += 1
    return candidate


def repair(
    messages: Sequence[Message], *, provider: HistoryRules = "any"
) -> tuple[list[Message], RepairReport]:
    """A copy of ``messages`` that :func:`validate` accepts, and the report of every change.

    Linear in the number of messages; a history that is already valid is only checked and comes
    back unchanged (same message objects).
    """
    strict = provider != "openai"
    safe, user_turn_seen, used = valid_prefix(messages, strict)
    if safe == len(messages):
        return list(messages), RepairReport((), len(messages), len(messages))
    changes: list[RepairChange] = []
    view: Sequence[Message] = messages
    origin: Sequence[int] = range(len(messages))
    tidied = _tidy_all(messages, safe, changes)
    if tidied is not None:
        view, origin = tidied
        safe, user_turn_seen, used = valid_prefix(view, strict)
    if safe < len(view):
        repairer = _Repairer(view[safe:], provider, origin[safe:], used, not user_turn_seen)
        repairer.match()
        view = [*view[:safe], *repairer.build()]
        changes += repairer.changes
    changes.sort(key=lambda c: c.index)
    return list(view), RepairReport(tuple(changes), len(messages), len(view))
