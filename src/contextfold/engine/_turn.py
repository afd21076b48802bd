"""One turn's pass, from what the agent gives to the request it sends.

:func:`prepare` runs each step once, in order, each a function of its own that takes what it
needs and returns what it produces, the events it sent included::

    prompt   build the system prompt (AGENTS.md included); plain text if the builder fails
    tools    the agent's tools plus the engine's own, some deferred in a small window
    measure  the request's size by component, and its zone
    decide   what the zone calls for (masking, compaction, wind-down, restart)
    apply    do it; the prompt and measurement again only if the view or the ledger changed
    notes    context usage, deferred tools, the wind-down warning
    repair   make the view valid for the provider's history rules
    render   system blocks, cache breakpoints, the view and the note

The session's :class:`~._state.TurnState` goes from step to step as a value (a step that changes
it returns a new one) and is set on the session once, at the end. The request is measured once;
again after the apply step only when it changed the view or the ledger (so the notes and figures
describe the request that is sent), and again each time the ledger gives way to a request over
the window (rare: a compaction as hard as it goes that the grown ledger pushes over).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, replace

from contextfold.budget import Zone
from contextfold.compaction import wind_down_message
from contextfold.engine._compact import act
from contextfold.engine._core import SessionCore
from contextfold.engine._measure import Measurement, awareness_note
from contextfold.engine._recovery import ENGINE_PROVIDER
from contextfold.engine._render import NOTE_ID, SystemPrompt, build_prompt, render, with_kept
from contextfold.engine._schedule import request_sent
from contextfold.engine._state import TurnState
from contextfold.engine._tools import with_engine_tools
from contextfold.engine.request import PreparedRequest
from contextfold.errors import ContextOverflowError
from contextfold.events import Event
from contextfold.history.repair import RepairReport
from contextfold.messages import Message, TextPart
from contextfold.prompt.sections import BuiltPrompt
from contextfold.tool_spec import ToolSpec

__all__ = ["prepare"]


@dataclass(frozen=True, slots=True)
class _Prompt:
    built: BuiltPrompt
    fixed: str
    """The text the request is measured with besides its messages: the system prompt (stable
    sections, then dynamic ones), and the ledger when it rides with the summary."""
    ledger_with: int | None = None
    """Where in the view the summary message the ledger is sent with is (``None``: it is a
    system prompt section, or there is none)."""
    ledger_text: str = ""
    events: tuple[Event, ...] = ()


@dataclass(frozen=True, slots=True)
class _Tools:
    selected: list[ToolSpec]
    deferred: tuple[str, ...]
    note: str | None
    events: tuple[Event, ...] = ()


def prepare(
    core: SessionCore, system: SystemPrompt, tools: Sequence[ToolSpec], engine_tools: bool
) -> PreparedRequest:
    """The next request (see the module docstring)."""
    core.close_open_calls()  # every call is answered before the model is called again
    before = core.state
    prompt = _prompt_step(core, before, system)
    chosen = _tools_step(core, tools, engine_tools)
    m = core.measure(prompt.fixed, chosen.selected, prompt.built)
    chosen_events = chosen.events
    if m.zone in _SQUEEZE_ZONES and before.deferral.squeeze(tools):
        # Room before a compaction: the client tools the conversation never called go
        # behind tool_search first (the cache breaks here anyway).
        chosen = _tools_step(core, tools, engine_tools)
        chosen_events += chosen.events
        m = core.measure(prompt.fixed, chosen.selected, prompt.built)
    before.window.require_room(m.fixed_tokens, m.budget.tools, provider=ENGINE_PROVIDER)
    before.pace.observe(m.tokens)
    zone = m.zone
    applied = act(core, before, m)
    state = applied.state
    if applied.compaction is not None and applied.compaction.changed and chosen.deferred:
        # The compaction broke the provider's cache: the one place the deferred tools are
        # chosen again (the tools the conversation used since stay; the rest may go).
        state.deferral.refresh()
        chosen = _tools_step(core, tools, engine_tools)
        chosen_events += chosen.events
    if applied.view_changed or state.ledger is not before.ledger:
        # The compaction refreshed the ledger (and may have written the summary it rides
        # with): this request carries it (its prefix changed anyway), rather than the next
        # one breaking the provider's cache again to add it.
        prompt = _prompt_step(core, state, system)
        m = core.measure(prompt.fixed, chosen.selected, prompt.built)
    for share in LEDGER_GIVES_WAY:
        shrunk = _ledger_given_way(state, m, core.effective_window, share)
        if shrunk is None:
            break
        state = shrunk
        prompt = _prompt_step(core, state, system)
        m = core.measure(prompt.fixed, chosen.selected, prompt.built)
    notes = _notes(core, state, m, chosen)
    view, repairs = _repair_step(core)
    request, rendered = _render_step(core, state, prompt, chosen, notes, m, zone, view, repairs)
    settled = request_sent(core, state, request.tokens, core.view)
    events = (*prompt.events, *chosen_events, *applied.events, *rendered, *settled)
    request = replace(
        request,
        compaction=applied.compaction,
        repairs=repairs,
        deferred_tools=chosen.deferred,
        events=events,
    )
    core.state = _remembered(state, request, core.view, repairs, prompt.ledger_text)
    if (applied.view_changed and applied.compaction is None) or (
        state.ledger is not applied.state.ledger
    ):
        # A restart's new session, or a ledger that gave way after the compaction, must be in
        # the store now. A compaction's edits were saved with the state whose ledger they
        # refreshed (apply_result), and a steady pass saves nothing: the reply's add_assistant
        # saves the rest of the turn, only the parts that changed.
        core.save_state()
    return request


_ROLE = operator.attrgetter("role")

_SQUEEZE_ZONES = frozenset({Zone.COMPACT, Zone.BLOCK, Zone.OVERFLOW})
"""Where the view would be compacted: a host's unused tools give way before its history."""

LEDGER_GIVES_WAY = (1.5, 3.0, float("inf"))
"""How much more than the overshoot the ledger sheds in each try (the ledger is counted on its
own scale, the request on the provider's): the last try leaves it empty."""


def _ledger_given_way(
    state: TurnState, m: Measurement, window: int, share: float
) -> TurnState | None:
    """When the request is over the window and carries a ledger, the state with the ledger
    shrunk (its oldest items first) by ``share`` times the overshoot: it is a reminder of what
    left the view, and the view comes first. A compaction as hard as it goes can leave a
    request that the ledger it just grew pushes over the window. ``None``: nothing to shed."""
    over = m.tokens - window
    if over <= 0 or not state.ledger.items:
        return None
    room = max(0, int(state.ledger.tokens() - over * share)) if share != float("inf") else 0
    return replace(state, ledger=state.ledger.merged((), max_tokens=room))


def _prompt_step(core: SessionCore, state: TurnState, system: SystemPrompt) -> _Prompt:
    ledger = state.ledger.render()
    anchor = core.summary_at if ledger else None
    # With a summary in the view, the ledger is sent with it: both change only when a
    # compaction rewrites that part of the view, so the system prompt and the task before it
    # stay cached (in the system prompt, every compaction would re-write them too).
    in_system = "" if anchor is not None else ledger
    kept = with_kept(system, pins=state.pins.render(), ledger=in_system)
    built, stable_text, failure = build_prompt(kept, core.deps.instructions)
    events: tuple[Event, ...] = ()
    if failure is not None:
        events = (core.degraded("prompt_builder", "plain concatenation", failure),)
    dynamic = built.dynamic_text
    fixed = stable_text + (("\n\n" + dynamic) if dynamic else "")
    if anchor is None:
        return _Prompt(built, fixed, events=events)
    return _Prompt(built, fixed + "\n\n" + ledger, anchor, ledger, events)


def _with_ledger(view: list[Message], prompt: _Prompt) -> list[Message]:
    """``view`` with the ledger sent as a part of the summary message it rides with (a copy:
    the stored summary is unchanged)."""
    at = prompt.ledger_with
    if at is None:
        return view
    out = list(view)
    out[at] = _summary_with_ledger(out[at], prompt.ledger_text)
    return out


_latest_with_ledger: tuple[Message, str, Message] | None = None
"""The latest summary message, ledger text and the message carrying both."""


def _summary_with_ledger(summary: Message, ledger: str) -> Message:
    """``summary`` with ``ledger`` as its last part. Both change only at a compaction, so the
    message of the turn before is handed out again (one object turn after turn: what was
    computed from it, the request's token counts or an integration's conversion of it, is found
    again by identity)."""
    global _latest_with_ledger
    latest = _latest_with_ledger
    if latest is not None and latest[0] is summary and latest[1] == ledger:
        return latest[2]
    made = replace(summary, parts=(*summary.parts, TextPart(ledger)))
    _latest_with_ledger = (summary, ledger, made)
    return made


def _tools_step(core: SessionCore, tools: Sequence[ToolSpec], engine_tools: bool) -> _Tools:
    # The engine's own tools are never deferred, but they count against the budget.
    candidates = with_engine_tools(tools) if engine_tools else list(tools)
    selection = core.state.deferral.select(
        candidates, counter=core.deps.counter, effective_window=core.effective_window
    )
    # select() never raises: on a failure it sends every tool and reports it itself, once.
    event = selection.event(core.id)
    events = (core.emit(event),) if event is not None else ()
    return _Tools(list(selection.active), selection.deferred_names, selection.note, events)


def _notes(core: SessionCore, state: TurnState, m: Measurement, chosen: _Tools) -> list[str]:
    wind_down = wind_down_message(m.fraction, m.remaining).text if state.wind_down_sent else ""
    notes = [n for n in (wind_down, chosen.note) if n]
    policy = core.deps.policy
    if policy.awareness_note and policy.thresholds.wants_awareness_note(m.fraction):
        notes.insert(0, awareness_note(m))
    return notes


def _repair_step(core: SessionCore) -> tuple[list[Message], RepairReport]:
    if not core.deps.policy.repair:
        return list(core.view), RepairReport()
    return core.repairer.repair(core.view, core.sizes.generation)


def _repeats_dropped(
    view: list[Message], sizes: Sequence[int] | None
) -> tuple[list[Message], Sequence[int] | None]:
    """``view`` (and its message sizes) with each system message that repeats an earlier one
    word for word left out: a host resends the same reminder inside its messages turn after
    turn (Claude Code's "The task tools haven't been used recently…"), and one copy says it.
    The first copy stays, so the request's prefix does not change when another arrives; it
    leaves with its turn when a compaction takes that turn out."""
    if "system" not in map(_ROLE, view):
        return view, sizes  # the common case, found at C speed (this runs every turn)
    seen: set[tuple[str, ...]] = set()
    keep: list[int] = []
    for i, message in enumerate(view):
        if message.role == "system":
            text = tuple(p.text for p in message.parts if isinstance(p, TextPart))
            if text in seen:
                continue
            seen.add(text)
        keep.append(i)
    if len(keep) == len(view):
        return view, sizes
    kept_sizes = None if sizes is None or len(sizes) != len(view) else [sizes[i] for i in keep]
    return [view[i] for i in keep], kept_sizes


def _render_step(
    core: SessionCore,
    state: TurnState,
    prompt: _Prompt,
    chosen: _Tools,
    notes: list[str],
    m: Measurement,
    zone: Zone,
    view: list[Message],
    repairs: RepairReport,
) -> tuple[PreparedRequest, tuple[Event, ...]]:
    """The request, and the events rendering it sent; ``zone`` is where the context stood
    before the apply step acted. The ledger rides with the summary of the repaired view
    (repairs only add or fix messages after the summary's place, or none at all)."""
    if prompt.ledger_with is not None and not repairs:
        view = _with_ledger(view, prompt)
    elif prompt.ledger_with is not None:
        view = _with_ledger_by_id(view, prompt, core.view[prompt.ledger_with].id)
    sizes: Sequence[int] | None = core.repairer.sizes() if repairs else core.sizes.messages
    view, sizes = _repeats_dropped(view, sizes)
    request, failure = render(
        core.deps,
        core.id,
        built=prompt.built,
        view=view,
        tools=chosen.selected,
        notes=notes,
        measurement=m,
        zone=zone,
        previous_tail=state.previous_tail,
        message_tokens=sizes,
        counter=core.compaction_counter,
    )
    events: tuple[Event, ...] = ()
    if failure is not None:
        degraded = core.degraded(
            "prompt_cache", "system prompt sent without cache breakpoints", failure
        )
        events = (degraded,)
    window = core.effective_window
    if request.tokens > window:
        raise ContextOverflowError(
            f"the request needs about {request.tokens:,} tokens but the window leaves "
            f"{window:,} after the reply reserve; the system prompt and "
            f"tools alone take {m.fixed_tokens:,}",
            provider=ENGINE_PROVIDER,
            prompt_tokens=request.tokens,
            limit=window,
        )
    if state.refused is not None:
        state.refused.check(request)
    return request, events


def _with_ledger_by_id(view: list[Message], prompt: _Prompt, summary_id: str) -> list[Message]:
    """:func:`_with_ledger` for a repaired view, whose positions may differ from the session's:
    the summary found by its id, from the end."""
    for i in range(len(view) - 1, -1, -1):
        if view[i].id == summary_id:
            return _with_ledger(view, replace(prompt, ledger_with=i))
    return view


def _remembered(
    state: TurnState,
    request: PreparedRequest,
    view: Sequence[Message],
    repairs: RepairReport,
    ledger_text: str,
) -> TurnState:
    """``state`` with what the next turn's usage report and cache plan are read against."""
    return replace(
        state,
        last=request,
        # The view itself when what was sent differs from it (repaired, or the ledger added to
        # the summary): usage reports are read against the view, which the ledger is not part
        # of.
        last_unrepaired=tuple(view) if repairs or ledger_text else None,
        # What the usage report covers besides the view: the system prompt and the ledger
        # when it rode with the summary; the note apart (it changes every turn).
        fixed_prompt=f"{request.system_text}\n\n{ledger_text}"
        if ledger_text
        else request.system_text,
        fixed_note=request.note,
        previous_tail=_view_tail(request),
    )


def _view_tail(request: PreparedRequest) -> int | None:
    """The request's last message breakpoint as a position in the view (the note, which is not
    part of the view, may sit before the view's trailing system messages)."""
    if not request.message_breakpoints:
        return None
    tail = request.message_breakpoints[-1]
    if not request.note:
        return tail  # no note among the messages (looking for it would read them all)
    messages = request.messages  # the note is last or among the last: looked for from the end
    note = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].id == NOTE_ID), None)
    return tail - 1 if note is not None and note < tail else tail
