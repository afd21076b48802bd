"""What the upstream must see of the client's latest turn, or the request is not sent.

The model's next step depends on the user's latest words and the newest tool results: a view
that cut, masked or dropped them would mislead it (Claude Code at 32k once got its newest result
as ``[masked] Bash `?` … read_result ref_…`` and its task as a cut marker). When the engine
could only fit the window by doing that, the request does not fit: the client is told so in its
own protocol, and recovers as it knows how (Claude Code compacts its history itself).

A tool output the engine cut on its way in because it is larger than its share of the window
(head and tail, with a ``ref`` to the whole) counts as kept: the model reads the rest back with
``read_result``. An output masked, cleared or shrunk by a compaction does not.
"""

from __future__ import annotations

from collections.abc import Sequence

from contextfold.messages import Message, TextPart

__all__ = ["latest_turn_missing"]

_REPLACED = frozenset({"masked", "cleared", "shrunk"})
"""``Meta.flags`` of a message a compaction rewrote (masking, clearing, shrinking to fit)."""


def latest_turn_missing(client: Sequence[Message], sent: Sequence[Message]) -> str | None:
    """What of the client's latest turn ``sent`` lacks (``None``: all of it is there): the
    texts of its messages after its last assistant message, whole, and each newest tool result
    with the call it answers. ``client`` is the client's conversation as neutral messages.

    ``sent`` is read from its end, only until everything the latest turn holds is found (it
    sits at the end of a view): a steady request checks its new messages, not its history."""
    last_assistant = max((i for i, m in enumerate(client) if m.role == "assistant"), default=-1)
    latest = client[last_assistant + 1 :]
    texts = {p.text.strip() for m in latest for p in _texts(m)} - {""}
    result_ids = {r.call_id for m in latest for r in m.tool_results}
    call_ids = set(result_ids)
    results: dict[str, Message] = {}
    """The message holding the last result of each call of ``result_ids`` in ``sent``."""
    for message in reversed(sent):
        if not (texts or call_ids or len(results) < len(result_ids)):
            break
        if message.role == "assistant":
            call_ids.difference_update(c.call_id for c in message.tool_calls)
        else:
            texts.difference_update(p.text.strip() for p in _texts(message))
        for result in message.tool_results:
            if result.call_id in result_ids:
                results.setdefault(result.call_id, message)
    for message in latest:
        for part in _texts(message):
            if part.text.strip() in texts:
                kind = "system message" if message.role == "system" else "user's latest message"
                return f"the {kind} ({len(part.text):,} characters) was cut"
    for message in latest:
        for result in message.tool_results:
            found = results.get(result.call_id)
            if found is None or result.call_id in call_ids:
                return f"the newest result of call {result.call_id} or its call was left out"
            if _REPLACED.intersection(found.meta.flags):
                return f"the newest result of call {result.call_id} was masked or cut"
    return None


def _texts(message: Message) -> list[TextPart]:
    return [p for p in message.parts if isinstance(p, TextPart)]
