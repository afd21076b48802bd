"""The context engine: one object per agent, one :class:`Session` per conversation.

Each turn an agent calls ``session.prepare(system=..., tools=...)`` and sends what it returns;
contextfold guarantees that request fits the window, passes the provider's history rules and
keeps a stable, cacheable prefix. Everything the agent adds goes through the session::

    engine = ContextEngine("anthropic/claude-sonnet-4-5", store="sessions.db")
    session = engine.new_session(title="fix the parser")
    session.add_user("The parser fails on empty input; fix it.")
    while True:
        request = session.prepare(system=BASE_PROMPT, tools=my_tools)
        try:
            response = model.complete(request.to_chat_request())
        except ContextOverflowError as error:
            session.recover(error)          # learn its limit, compact hard; never resend
            continue
        session.add_assistant(response)     # anchors token counts on the reported usage
        if not response.tool_calls:
            break
        for call in response.tool_calls:
            result = session.run_engine_tool(call) or run_my_tool(call)
            session.add_tool_result(call.call_id, result.content, name=call.name)

One turn's pass (prompt, tools, measure, decide, apply, notes, repair, render) is in
:mod:`contextfold.engine._turn`; compaction, masking and offloading append *edits* to the stored
transcript, so nothing is ever deleted and every removed output stays readable through the
``read_result`` tool. ``engine.resume(session_id)`` continues a session from its latest snapshot
without re-reading the history before it.

The package, from the top: :mod:`.engine` (:class:`ContextEngine`, which builds the
dependencies), :mod:`.session` (:class:`Session`, the face an agent uses), :mod:`.policy` and
:mod:`.request` (the value types); then the private steps, none of which imports the ones above
it: ``_turn`` → ``_compact`` (with ``_zones`` deciding) → ``_restart`` → ``_core`` (a session's
working set: ``_deps``, ``_state``, ``_writer``, ``_sizes``, ``_measure``, ``_render``,
``_repair``, ``_window``, ``_recovery``).
"""

from contextfold.engine.engine import ContextEngine
from contextfold.engine.policy import ContextPolicy
from contextfold.engine.request import PreparedRequest
from contextfold.engine.session import Session

__all__ = ["ContextEngine", "ContextPolicy", "PreparedRequest", "Session"]
