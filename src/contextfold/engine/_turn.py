"""One turn's pass, from what the agent gives to the request it sends.

:func:`prepare` runs each step once, in order, each a function of its own that hands the next
what it needs::

    prompt   build the system prompt (AGENTS.md included); plain text if the builder fails
    tools    the agent's tools plus the engine's own, some deferred in a small window
    measure  the request's size by component, and its zone
    decide   what the zone calls for (masking, compaction, wind-down, restart)
    apply    do it; measure again if the view changed
    notes    context usage, deferred tools, the wind-down warning
    repair   make the view valid for the provider's history rules
    render   system blocks, cache breakpoints, the view and the note

No step reaches back to patch what an earlier one produced: the only loop is the measurement
taken again after the view changed, so the notes and figures describe the view that is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from contextfold.budget import Zone
from contextfold.compaction import CompactResult, wind_down_message
from contextfold.engine._compact import act
from contextfold.engine._core import SessionCore
from contextfold.engine._measure import Measurement, awareness_note
from contextfold.engine._recovery import ENGINE_PROVIDER
from contextfold.engine._render import NOTE_ID, SystemPrompt, build_prompt, render, with_kept
from contextfold.engine._schedule import request_sent
from contextfold.engine._tools import with_engine_tools
from contextfold.engine.request import PreparedRequest
from contextfold.errors import ContextOverflowError
from contextfold.events import Event
from contextfold.history.repair import RepairReport
from contextfold.messages import Message, SummaryPart, TextPart
from contextfold.prompt.sections import BuiltPrompt
from contextfold.tool_spec import ToolSpec

__all__ = ["prepare"]


@dataclass(frozen=True, slots=True)
class _Prompt:
    built: BuiltPrompt
    fixed: str
    """The text the request is measured with besides its messages: the system prompt (stable
    sections, then dynamic ones), and the ledger when it rides with the summary."""
    ledger_with: str | None = None
    """Id of the summary message the ledger is sent with (``None``: it is a system prompt
    section, or there is none)."""
    ledger_text: str = ""


@dataclass(frozen=True, slots=True)
class _Tools:
    selected: list[ToolSpec]
    deferred: tuple[str, ...]
    note: str | None


def prepare(
    core: SessionCore, system: SystemPrompt, tools: Sequence[ToolSpec], engine_tools: bool
) -> PreparedRequest:
    """The next request (see the module docstring); its events are collected on the way."""
    events: list[Event] = []
    core.collector = events
    try:
        core.close_open_calls()  # every call is answered before the model is called again
        prompt = _prompt_step(core, system)
        chosen = _tools_step(core, tools, engine_tools)
        m = core.measure(prompt.fixed, chosen.selected, prompt.built)
        core.state.window.require_room(m.fixed_tokens, m.budget.tools, provider=ENGINE_PROVIDER)
        core.state.pace.observe(m.tokens)
        zone = m.zone
        ledger = core.state.ledger
        compaction, m = _apply_step(core, m, prompt, chosen)
        if compaction is not None and compaction.changed and chosen.deferred:
            # The compaction broke the provider's cache: the one place the deferred tools are
            # chosen again (the tools the conversation used since stay; the rest may go).
            core.state.deferral.refresh()
            chosen = _tools_step(core, tools, engine_tools)
        if core.state.ledger is not ledger or (compaction is not None and compaction.changed):
            # The compaction refreshed the ledger (and may have written the summary it rides
            # with): this request carries it (its prefix changed anyway), rather than the next
            # one breaking the provider's cache again to add it.
            prompt = _prompt_step(core, system)
            m = core.measure(prompt.fixed, chosen.selected, prompt.built)
        for share in LEDGER_GIVES_WAY:
            if not _ledger_gives_way(core, m, share):
                break
            prompt = _prompt_step(core, system)
            m = core.measure(prompt.fixed, chosen.selected, prompt.built)
        notes = _notes_step(core, m, chosen)
        view, repairs = _repair_step(core)
        view = _with_ledger(view, prompt)
        request = _render_step(core, prompt, chosen, notes, m, zone, view, repairs)
        request = replace(
            request,
            compaction=compaction,
            repairs=repairs,
            deferred_tools=chosen.deferred,
            events=tuple(events),
        )
        request_sent(core, request.tokens, core.view)
        _remember(core, request, repairs, prompt.ledger_text)
        return request
    finally:
        core.collector = None


LEDGER_GIVES_WAY = (1.5, 3.0, float("inf"))
"""How much more than the overshoot the ledger sheds in each try (the ledger is counted on its
own scale, the request on the provider's): the last try leaves it empty."""


def _ledger_gives_way(core: SessionCore, m: Measurement, share: float) -> bool:
    """When the request is over the window and carries a ledger, shrink the ledger (its oldest
    items first) by ``share`` times the overshoot and say so: it is a reminder of what left the
    view, and the view comes first. A compaction as hard as it goes can leave a request that the
    ledger it just grew pushes over the window."""
    state = core.state
    over = m.tokens - core.effective_window
    if over <= 0 or not state.ledger.items:
        return False
    room = max(0, int(state.ledger.tokens() - over * share)) if share != float("inf") else 0
    state.ledger = state.ledger.merged((), max_tokens=room)
    return True


def _prompt_step(core: SessionCore, system: SystemPrompt) -> _Prompt:
    state = core.state
    ledger = state.ledger.render()
    anchor = _summary_id(core.view) if ledger else None
    # With a summary in the view, the ledger is sent with it: both change only when a
    # compaction rewrites that part of the view, so the system prompt and the task before it
    # stay cached (in the system prompt, every compaction would re-write them too).
    in_system = "" if anchor is not None else ledger
    kept = with_kept(system, pins=state.pins.render(), ledger=in_system)
    built, stable_text, failure = build_prompt(kept, core.deps.instructions)
    if failure is not None:
        core.degraded("prompt_builder", "plain concatenation", failure)
    dynamic = built.dynamic_text
    fixed = stable_text + (("\n\n" + dynamic) if dynamic else "")
    if anchor is None:
        return _Prompt(built, fixed)
    return _Prompt(built, fixed + "\n\n" + ledger, anchor, ledger)


def _summary_id(view: Sequence[Message]) -> str | None:
    """The id of the view's latest summary message, if it has one."""
    for message in reversed(view):
        if any(isinstance(part, SummaryPart) for part in message.parts):
            return message.id
    return None


def _with_ledger(view: list[Message], prompt: _Prompt) -> list[Message]:
    """``view`` with the ledger sent as a part of the summary message it rides with (a copy:
    the stored summary is unchanged)."""
    if prompt.ledger_with is None:
        return view
    out = list(view)
    for i in range(len(out) - 1, -1, -1):
        if out[i].id == prompt.ledger_with:
            message = out[i]
            out[i] = replace(message, parts=(*message.parts, TextPart(prompt.ledger_text)))
            break
    return out


def _tools_step(core: SessionCore, tools: Sequence[ToolSpec], engine_tools: bool) -> _Tools:
    # The engine's own tools are never deferred, but they count against the budget.
    candidates = with_engine_tools(tools) if engine_tools else list(tools)
    selection = core.state.deferral.select(
        candidates, counter=core.deps.counter, effective_window=core.effective_window
    )
    # select() never raises: on a failure it sends every tool and reports it itself, once.
    event = selection.event(core.id)
    if event is not None:
        core.emit(event)
    return _Tools(list(selection.active), selection.deferred_names, selection.note)


def _apply_step(
    core: SessionCore, m: Measurement, prompt: _Prompt, chosen: _Tools
) -> tuple[CompactResult | None, Measurement]:
    restarts = core.state.restarts
    compaction = act(core, m)
    if core.state.restarts != restarts or (compaction is not None and compaction.changed):
        # The view changed: the notes and the request's figures must describe the new one.
        m = core.measure(prompt.fixed, chosen.selected, prompt.built)
    return compaction, m


def _notes_step(core: SessionCore, m: Measurement, chosen: _Tools) -> list[str]:
    wind_down = wind_down_message(m.fraction, m.remaining).text if core.state.wind_down_sent else ""
    notes = [n for n in (wind_down, chosen.note) if n]
    policy = core.deps.policy
    if policy.awareness_note and policy.thresholds.wants_awareness_note(m.fraction):
        notes.insert(0, awareness_note(m))
    return notes


def _repair_step(core: SessionCore) -> tuple[list[Message], RepairReport]:
    if not core.deps.policy.repair:
        return list(core.view), RepairReport()
    return core.repairer.repair(core.view, core.sizes.generation)


def _render_step(
    core: SessionCore,
    prompt: _Prompt,
    chosen: _Tools,
    notes: list[str],
    m: Measurement,
    zone: Zone,
    view: list[Message],
    repairs: RepairReport,
) -> PreparedRequest:
    """The request; ``zone`` is where the context stood before the apply step acted."""
    state = core.state
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
        message_tokens=core.repairer.sizes() if repairs else core.sizes.messages,
    )
    if failure is not None:
        core.degraded("prompt_cache", "system prompt sent without cache breakpoints", failure)
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
    return request


def _remember(
    core: SessionCore, request: PreparedRequest, repairs: RepairReport, ledger_text: str
) -> None:
    """Keep what the next turn's usage report and cache plan are read against, and save it."""
    state = core.state
    state.last = request
    # The view itself when what was sent differs from it (repaired, or the ledger added to the
    # summary): usage reports are read against the view, which the ledger is not part of.
    state.last_unrepaired = list(core.view) if repairs or ledger_text else None
    # What the usage report covers besides the view: the system prompt, the ledger when it
    # rode with the summary, the note.
    extra = [t for t in (ledger_text, request.note) if t]
    state.fixed_text = "\n\n".join([request.system_text, *extra])
    state.previous_tail = _view_tail(request)
    core.save_state()


def _view_tail(request: PreparedRequest) -> int | None:
    """The request's last message breakpoint as a position in the view (the note, which is not
    part of the view, may sit before the view's trailing system messages)."""
    if not request.message_breakpoints:
        return None
    tail = request.message_breakpoints[-1]
    note = next((i for i, m in enumerate(request.messages) if m.id == NOTE_ID), None)
    return tail - 1 if note is not None and note < tail else tail
