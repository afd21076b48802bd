"""The core every integration shares: keep a contextfold session in step with a framework's
history, and get the engine's view of it for the next model call.

Frameworks hand their model the whole history on every call (a LangChain state, an Agents SDK
run's input items, pydantic-ai's message list). :class:`HistorySync` appends to the session only
what is new since the last call, recognised as the proxy recognises its clients' histories
(:class:`~contextfold.hosts.prefixes.ResentHistory`, here on an index in memory), so the
transcript in the store grows by exactly what happened. A history that no longer starts with
what the session holds (the framework's own summarization, a trimmed list) continues in a fresh
session, linked to the old one as its parent: nothing already stored is rewritten.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from operator import is_

from contextfold.engine import ContextEngine, PreparedRequest, Session
from contextfold.engine.session import SystemPrompt
from contextfold.hosts.digests import message_digest
from contextfold.hosts.prefixes import MemoryPrefixIndex, ResentHistory
from contextfold.messages import (
    Message,
    ToolResultPart,
)
from contextfold.store import BrowsableSessionStore, SessionStore
from contextfold.tool_spec import ToolSpec

__all__ = ["HistorySync"]


class HistorySync:
    """One framework conversation and the contextfold session that holds it.

    ``session`` is where to continue (a resumed one, say); without it the first :meth:`update`
    starts one in ``engine`` with ``title``. Thread-safe: a framework may call from any thread.
    """

    def __init__(
        self,
        engine: ContextEngine,
        session: Session | None = None,
        *,
        title: str | None = None,
    ) -> None:
        self.engine = engine
        self.title = title
        self._session = session
        self._index = MemoryPrefixIndex()
        self._lock = threading.RLock()
        self._last: _Digested = _Digested([], [], [])
        self._partial: tuple[bytes, int] | None = None
        """A tool message whose results were appended in part (an add failed): its digest and
        how many of its results the session holds."""
        if session is not None:
            stored = ResentHistory(self._index, "", [message_digest(m) for m in _stored(session)])
            self._hold(stored, session, 0, len(stored))

    @property
    def session(self) -> Session:
        """The session the conversation is in now (it changes when the history was rewritten)."""
        with self._lock:
            if self._session is None:
                self._session = self.engine.new_session(title=self.title)
            return self._session

    def update(self, history: Sequence[Message]) -> int:
        """Append to the session what ``history`` holds beyond what it held at the last call;
        the number of messages appended. System messages are left to :meth:`prepare`'s
        ``system`` (frameworks resend them on every call)."""
        messages = [m for m in history if m.role != "system"]
        with self._lock:
            resent = self._resent(messages)
            known = self._continued(resent)
            session = self.session
            if known == len(messages):
                # Nothing new (the call after the one that stored the reply): no transaction,
                # whose begin and commit cost as much as the rest of the update.
                self._hold(resent, session, known, known)
                return 0
            added = known
            try:
                with session.writes_together():  # one commit for the call's new messages
                    new = zip(messages[known:], self._last.digests[known:], strict=True)
                    for message, digest in new:
                        self._add(session, message, digest)
                        added += 1
            finally:
                # What was added before a failed add is stored (the block commits it): the
                # session holds it, and the next call must not append it again.
                self._hold(resent, session, known, added)
            return added - known

    def _add(self, session: Session, message: Message, digest: bytes) -> None:
        """Append one message of the history. A tool message's results go one by one (each is
        a message of the session): when one fails, those before it stay stored, and the next
        call, whose history holds the message whole again, appends only the others."""
        # A message added in part is always the first of the next call's new messages.
        partial, self._partial = self._partial, None
        results = message.tool_results
        if message.role != "tool" or len(results) < 2:
            session.add(message)
            return
        done = partial[1] if partial is not None and partial[0] == digest else 0
        for index in range(done, len(results)):
            try:
                session.add(message.with_parts((results[index],)))
            except BaseException:
                self._partial = (digest, index)
                raise

    def _resent(self, messages: list[Message]) -> ResentHistory:
        """``messages`` against the index. The digests and heads of the first messages that are
        the very objects of the last history are not computed again: integrations hand over
        the same message objects call after call (frozen, so their digests cannot change), and
        a call then costs in proportion to what is new, not to the whole history."""
        last = self._last
        same = len(last.messages)
        if same > len(messages) or not all(map(is_, last.messages, messages)):
            # Not the usual case (the last history and more, told apart at C speed above).
            same = 0
            for given, held in zip(messages, last.messages, strict=False):
                if given is not held:
                    break
                same += 1
        digests = last.digests[:same] + [message_digest(m) for m in messages[same:]]
        resent = ResentHistory(self._index, "", digests, known_heads=last.heads[:same])
        self._last = _Digested(messages, digests, resent.heads)
        return resent

    def _continued(self, resent: ResentHistory) -> int:
        """How many of ``resent``'s messages the session holds already (the longest recorded
        prefix, while the session still ends there); 0 after starting a child session when the
        framework rewrote its history."""
        current = self._session
        held = 0 if current is None else self._index.session_head(current.id)[0]
        longest = resent.longest()
        ours = longest is not None and current is not None and longest.session_id == current.id
        if ours and longest is not None and resent.continues(longest):
            return longest.count
        if held or (longest is not None and current is not None):
            self._restart()
        return 0

    def _hold(self, resent: ResentHistory, session: Session, start: int, held: int) -> None:
        """Record the prefixes ``session`` now holds (the first ``held`` messages of
        ``resent``), from ``start`` on."""
        for count in range(start + 1, held + 1):
            resent.record(session.id, count, count)
        self._index.appended(session.id, held)

    def _restart(self) -> None:
        """The framework rewrote its history: go on in a new session, the old one its parent."""
        parent = self._session
        self._partial = None  # its results are in the old session
        self._session = self.engine.new_session(
            title=self.title, parent_id=parent.id if parent is not None else None
        )

    def prepare(
        self,
        history: Sequence[Message],
        *,
        system: SystemPrompt = None,
        tools: Iterable[ToolSpec] = (),
        engine_tools: bool = True,
    ) -> PreparedRequest:
        """:meth:`update` with ``history``, then the engine's next request: what the model
        should be given instead of the whole history."""
        with self._lock:
            self.update(history)
            return self.session.prepare(system=system, tools=tools, engine_tools=engine_tools)


@dataclass(frozen=True, slots=True)
class _Digested:
    """A history as :meth:`HistorySync.update` was last given it, with its digests and heads."""

    messages: list[Message]
    digests: list[bytes]
    heads: list[str]


def _stored(session: Session) -> list[Message]:
    """The messages a resumed session holds, as the framework sent them: a tool output the
    engine cut or offloaded reads whole again from its blob, so it digests like the original."""
    store = session.engine.store
    stored = (
        [m for _, m in store.iter_messages(session.id)]
        if isinstance(store, BrowsableSessionStore)
        else list(session.view)
    )
    return [_whole(store, session.id, m) for m in stored if m.role != "system"]


def _whole(store: SessionStore, session_id: str, message: Message) -> Message:
    if not any(r.ref for r in message.tool_results):
        return message
    parts = [
        replace(p, content=store.get_blob(session_id, p.ref), ref=None)
        if isinstance(p, ToolResultPart) and p.ref
        else p
        for p in message.parts
    ]
    return message.with_parts(parts)
