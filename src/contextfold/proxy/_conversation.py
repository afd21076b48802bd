"""One client request's conversation: found in the store (or started), carried through the
engine, and left where the next request will find it.

Everything here is synchronous and touches the store; the server runs it on worker threads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from contextfold.engine import ContextEngine, PreparedRequest, Session
from contextfold.errors import ConcurrentWriteError, ContextOverflowError, SessionNotFoundError
from contextfold.hosts.prefixes import RecentHeads, ResentHistory
from contextfold.messages import Message, ToolResultPart
from contextfold.proxy._breaker import Breaker, Tripped, step_key
from contextfold.proxy._engines import ProxyStore
from contextfold.proxy._identity import ANONYMOUS
from contextfold.proxy._kept_sessions import KeptSessions
from contextfold.proxy._latest_turn import latest_turn_missing
from contextfold.proxy._wire import ClientError, ClientRequest, RoundReply
from contextfold.proxy.sessions import METADATA_KEY
from contextfold.tool_spec import ToolSpec
from contextfold.tools.deferral import engine_tools

__all__ = ["ENGINE_TOOL_NAMES", "Conversation"]

logger = logging.getLogger("contextfold.proxy")

ENGINE_TOOL_NAMES = frozenset(t.name for t in engine_tools(deferred=True))
"""The tools the proxy answers itself; the client never sees a call to one."""

_OPEN_ATTEMPTS = 3
"""How often a request that lost a race for its session reads the store again."""

_TITLE_CHARS = 80

REPLY_RESERVE_FLOOR = 4_096
"""The least a reply is planned for (or an eighth of a small window), before the session's
replies say what they use."""

REPLY_HEADROOM = 1.5
"""The reply reserve is this many times the session's largest reply so far."""

REPLY_RESERVE_MAX_SHARE = 0.25
"""The most of the window the reserve takes; a reply that stops at a limit the proxy set is
retried with up to half."""

REPLY_RETRY_MAX_SHARE = 0.5
"""The most of the window a reply retried with more room may have."""

LIMIT_STOPS = frozenset({"max_tokens", "length"})
"""Stop reasons that mean the reply hit its ``max_tokens`` (Anthropic's, OpenAI's)."""


class _ClientTools:
    """The client's tools as the engine takes them (``source="client"``), made once per tool
    list. A client resends the same tools on every request, and its reader hands them over as
    the very same tuple of specs (``wire.anthropic_models.CheckedValues``); the engine
    remembers each tool's schema encoding by tool object (``tool_spec.SchemaMemo``), so specs
    made anew for every request were encoded again on every request. At most ``size`` lists
    are remembered (then it starts over); a list that is not a tuple (it could be changed) is
    not. Safe to share between threads: a lost entry costs one making."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._made: dict[int, tuple[Sequence[ToolSpec], list[ToolSpec]]] = {}

    def of(self, tools: Sequence[ToolSpec]) -> list[ToolSpec]:
        """``tools``, each with ``source="client"`` (a new list; the same specs each time)."""
        entry = self._made.get(id(tools))
        # The entry holds its tuple, so its id is no other value's while it is here.
        if entry is not None and entry[0] is tools:
            return list(entry[1])
        made = [replace(tool, source="client") for tool in tools]
        if type(tools) is tuple:
            if len(self._made) >= self.size:
                self._made.clear()
            self._made[id(tools)] = (tools, made)
        return list(made)


_CLIENT_TOOLS = _ClientTools()


class Conversation:
    """Where one request stands in its session.

    :meth:`open` finds the session whose recorded prefix the request's messages continue (or
    starts one, linked as a fork when the client rewrote its history) and appends what is new.
    The server then alternates :meth:`prepare` and :meth:`add_reply` until the reply is the
    client's, and calls :meth:`finish` with the message the client received.
    """

    def __init__(
        self,
        engine: ContextEngine,
        store: ProxyStore,
        tenant: str,
        client: ClientRequest,
        *,
        explicit_session: str | None = None,
        kept: KeptSessions | None = None,
        breaker: Breaker | None = None,
        recent_heads: RecentHeads | None = None,
    ) -> None:
        self.engine = engine
        self.breaker = breaker
        self.kept = kept
        self.claimed: set[str] = set()
        """The sessions this request holds the store's claim on (see :meth:`_claim`)."""
        self.store = store
        self.tenant = tenant
        self.client = client
        self.explicit_session = explicit_session
        heads = recent_heads.chain(tenant, client.digests) if recent_heads is not None else ()
        self.history = ResentHistory(store, tenant, client.digests, known_heads=heads)
        self.heads = self.history.heads
        self.session: Session | None = None
        self.forked_from: str | None = None
        self.appended = 0
        self.created = False
        """This request made the session (it is deleted again when the request is refused)."""
        # The client's tools are deferrable: a deferral is better than a refusal.
        self.tools = _CLIENT_TOOLS.of(client.tools)
        # Engine tools go only into requests that carry tools (a client's side request, such as
        # a title, stays as small as it was), and not when the client has a tool of the same
        # name: its own wins.
        self.engine_tools = bool(client.tools) and not (ENGINE_TOOL_NAMES & set(client.raw_tools))
        self.reply_share = REPLY_RESERVE_MAX_SHARE
        """The most of the window the reply reserve may take; grows when a reply stopped at a
        limit the proxy set."""
        self.reply_floor = 0
        """The least the reply reserve is, set when a reply stopped at a limit the proxy set
        (twice that limit)."""
        self._latest: list[Message] | None = None

    # -- finding the session -----------------------------------------------------------------

    def open(self) -> Session:
        """The session, with the request's new messages appended. A request that raced another
        for the same session (on another worker) reads the store again and goes on from there.
        :class:`ClientError` when the conversation goes round in circles (:mod:`._breaker`)."""
        if self.breaker is not None and self.heads:
            step = step_key(self._latest_step())
            self._watch(lambda b: b.step(self.tenant, self.heads[0], step, len(self.heads)))
        for attempt in range(_OPEN_ATTEMPTS):
            try:
                return self._open()
            except ConcurrentWriteError:
                if attempt == _OPEN_ATTEMPTS - 1:
                    raise
                logger.info("session moved on while this request was appending; reading again")
        raise AssertionError("unreachable")

    def _open(self) -> Session:
        # One transaction: a crash leaves the session as it was, or with the turn appended and
        # its head recorded; a new session (or fork) is not seen by anyone until it is whole.
        with self.store.atomic():
            found = self._locate()
            if found is None:
                session = self._new_session()
                self.created = True
                start = 0
            else:
                session_id, start, stored_head = found
                session = self._resume(session_id, stored_head)
            self._append(session, start)
            self.appended = len(self.heads) - start
        self.session = session
        return session

    def _claim(self, session_id: str) -> bool:
        """Take the session for this request; False when another request, of any worker on
        this store, is answering in it. This one then forks at once: the session header of a
        stream goes out before its reply exists, and must name the session that will hold it.
        The store's claim ends with its holder, so a worker killed mid-request leaves no
        session claimed (see ``contextfold.store._claims``)."""
        if session_id in self.claimed:
            return True
        if not self.store.claim_session(session_id):
            return False
        self.claimed.add(session_id)
        return True

    def end(self) -> None:
        """The request's reply is recorded, or the request is over however it ended: its
        sessions are free for the next request. Safe to call again."""
        while self.claimed:
            self.store.release_session(self.claimed.pop())

    def _record(self, session: Session, messages: int, *, only_new: bool = False) -> None:
        """Note that ``session``, as it now stands, holds the client's first ``messages``."""
        self.history.record(session.id, messages, session.stored_head[0], only_new=only_new)

    def _resume(self, session_id: str, stored_head: tuple[int, int]) -> Session:
        """The session as it stood when it was located; ``ConcurrentWriteError`` when another
        worker wrote to it in between (the request then locates it again)."""
        if self.kept is not None:
            kept = self.kept.take(session_id, stored_head)
            if kept is not None:
                return kept
        session = self.engine.resume(session_id)
        if session.stored_head != stored_head:
            (seq, edit), (now_seq, now_edit) = stored_head, session.stored_head
            raise ConcurrentWriteError(
                session_id, seq, now_seq, expected_edit=edit, actual_edit=now_edit
            )
        return session

    def release(self) -> None:
        """The request is over: keep its session for the conversation's next request."""
        if self.kept is not None and self.session is not None:
            self.kept.keep(self.session)

    def _locate(self) -> tuple[str, int, tuple[int, int]] | None:
        """The session this request continues, how many of its messages it holds already, and
        where its transcript stands; ``None`` for a new session (``forked_from`` set when it
        forks one).

        A recorded prefix is continued only while its session still ends where it ended when
        the prefix was recorded. A session that went on (a later turn, or another reply to this
        same request, recorded by another worker meanwhile) is forked instead: the client
        rewrote its history, or repeats a request already answered.
        """
        if self.explicit_session is not None:
            return self._locate_explicit(self.explicit_session)
        longest = self.history.longest()
        if longest is None:
            return None
        # The head read to see that the history goes on there is the one the session is
        # resumed at: a worker that wrote to it since (PostgreSQL; a SQLite writer waits for
        # this transaction) makes the resume or its first write fail (ConcurrentWriteError),
        # and the request locates its session again.
        head = self.history.continued_head(longest)
        if head is not None and self._claim(longest.session_id):
            return longest.session_id, longest.count, head
        self.forked_from = longest.session_id
        return None

    def _append(self, session: Session, start: int) -> None:
        """The client's messages from ``start`` on, appended in order, each prefix recorded as
        it is reached (a prefix another session holds already stays that session's): a later
        request that shares only part of this history (aider moves its file message after the
        history each turn; a client that rewrites a turn) forks from the session holding its
        longest prefix instead of starting one with no parent. The whole history is recorded
        last, as where this request stands."""
        total = len(self.heads)
        for count, group in enumerate(self.client.read(start), start + 1):
            for message in group:
                session.add(message)
            if count < total:
                self._record(session, count, only_new=True)
        self._record(session, total)

    def _locate_explicit(self, session_id: str) -> tuple[str, int, tuple[int, int]] | None:
        not_found = ClientError(
            f"no session {session_id!r} for this key", status=404, kind="not_found"
        )
        try:
            info = self.store.get_session(session_id)
        except SessionNotFoundError:
            # A client does not choose the ids of new sessions: one it could name before it
            # exists is one another client could be made to continue.
            raise not_found from None
        owner = info.metadata.get(METADATA_KEY, {}).get("tenant") if info.metadata else None
        if owner != self.tenant or self.tenant == ANONYMOUS:
            raise not_found
        stored_head = self.store.session_head(session_id)
        for prefix in self.history.prefixes():
            held = (prefix.session_id, prefix.seq) == (session_id, stored_head[0])
            if held and self._claim(session_id):
                return session_id, prefix.count, stored_head
        self.forked_from = session_id
        return None

    def _new_session(self) -> Session:
        title = " ".join(self.client.first_user_text.split())[:_TITLE_CHARS] or None
        metadata = {
            METADATA_KEY: {
                "tenant": self.tenant,
                "protocol": self.client.protocol,
                "model": self.client.model,
            }
        }
        session = self.engine.new_session(
            title=title, metadata=metadata, parent_id=self.forked_from
        )
        self._claim(session.id)
        return session

    # -- one round ---------------------------------------------------------------------------------

    @property
    def current(self) -> Session:
        if self.session is None:
            raise AssertionError("open() first")
        return self.session

    def prepare(self, *, engine_tools: bool = True) -> PreparedRequest:
        """The engine's next request for the upstream. When another worker wrote to the
        session since it was read, it is read again from the store first."""
        try:
            return self._prepare(engine_tools)
        except ConcurrentWriteError:
            logger.info(
                "session %s moved on before this request's turn; reading it again", self.current.id
            )
            self.session = None
            self.open()
            return self._prepare(engine_tools)

    def _prepare(self, engine_tools: bool) -> PreparedRequest:
        session = self.current
        session.reserve_for_reply(self.reply_reserve())
        prepared = session.prepare(
            system=self.client.system or None,
            tools=self.tools,
            engine_tools=engine_tools and self.engine_tools,
        )
        if self.breaker is not None and self.heads:
            compaction = prepared.compaction
            self._watch(lambda b: b.compacted(self.tenant, self.heads[0], compaction))
        return prepared

    def _watch(self, check: Callable[[Breaker], None]) -> None:
        """Run a breaker check; a trip is the client's error, in its protocol."""
        assert self.breaker is not None
        try:
            check(self.breaker)
        except Tripped as tripped:
            logger.warning("circuit breaker: %s", tripped.reason)
            raise ClientError(
                f"contextfold proxy stopped this conversation: {tripped.reason}. Start a new "
                "conversation, compact it yourself, or give the proxy a larger --window.",
                kind="invalid_request",
            ) from None

    def latest_turn_missing(self, prepared: PreparedRequest) -> str | None:
        """What of the client's latest turn the prepared request lacks (see
        :mod:`._latest_turn`); ``None`` when it carries all of it."""
        return latest_turn_missing(self._latest_step(), prepared.messages)

    def _latest_step(self) -> list[Message]:
        """The client's last assistant message and everything after it, as neutral messages
        (read from the wire only here, once: the rest of a long history is not converted)."""
        if self._latest is not None:
            return self._latest
        latest: list[Message] = []
        for index in range(len(self.heads) - 1, -1, -1):
            [group] = self.client.read(index, index + 1)
            if any(m.role == "assistant" for m in group):
                latest[:0] = [m for m in group if m.role == "assistant"]
                break
            latest[:0] = group
        self._latest = latest
        return latest

    def reply_reserve(self) -> int:
        """Tokens kept free for the reply: what the session's replies use (with headroom, and
        a floor before there are any), never more than the client asked for, nor than
        :attr:`reply_share` of the window. Not a fixed quarter: at 32k that left Claude Code's
        conversation 3k tokens for replies of a few hundred."""
        session = self.current
        window = session.context_window
        need = max(
            min(REPLY_RESERVE_FLOOR, window // 8),
            round(session.largest_reply * REPLY_HEADROOM),
            self.reply_floor,
        )
        if self.client.max_tokens is not None:
            need = min(need, self.client.max_tokens)
        return max(1, min(need, int(window * self.reply_share)))

    def more_room(self, cut_at: int) -> bool:
        """After a reply stopped at ``cut_at`` tokens, a limit the proxy set: plan the next
        try with twice that reserved (the view compacted to make room), up to half the window
        and the client's own limit. False when the reserve cannot grow past ``cut_at``."""
        self.reply_share = REPLY_RETRY_MAX_SHARE
        self.reply_floor = max(self.reply_floor, 2 * cut_at)
        return self.reply_reserve() > cut_at

    def abandon(self) -> None:
        """The request was refused: a session it made holds nothing anyone will continue, so
        it is deleted (with its recorded prefixes)."""
        if self.created and self.session is not None:
            try:
                self.store.delete_session(self.session.id)
            except SessionNotFoundError:
                pass
            self.session = None

    def _fork_current(self) -> None:
        """Go on in a new session holding the client's whole history, forked from this one
        (in one transaction: a fork is not seen until its copy is whole)."""
        self.forked_from = self.current.id
        with self.store.atomic():
            session = self._new_session()
            self._append(session, 0)
        self.appended = len(self.heads)
        self.session = session

    def reply_budget(self, prepared: PreparedRequest) -> tuple[int | None, bool]:
        """The ``max_tokens`` to send, and whether the client's was cut to fit the window."""
        wanted = self.client.max_tokens
        if wanted is None:
            return None, False
        window = self.current.context_window
        # What the prompt leaves, less a margin for the estimate's error.
        room = max(prepared.max_tokens, window - prepared.tokens - window // 50)
        return (room, True) if wanted > room else (wanted, False)

    def add_reply(self, reply: RoundReply) -> bool:
        """Record one upstream reply and answer its calls to the engine's tools. True when the
        upstream must be called again: the reply called only engine tools."""
        with self.store.atomic():
            try:
                self.current.add_assistant(reply.message, reply.usage)
            except ConcurrentWriteError:
                # Another worker recorded a reply to this same request meanwhile (a client's
                # retry racing its original): this reply is another branch of the conversation,
                # kept whole in a fork rather than stacked after the other one.
                logger.info(
                    "session %s answered twice at once; this reply goes to a fork", self.current.id
                )
                self._fork_current()
                self.current.add_assistant(reply.message, reply.usage)
            if reply.engine_calls:
                self._record_round()
        session = self.current
        if not reply.engine_calls:
            return False
        results: list[ToolResultPart] = []
        for call in reply.engine_calls:
            answered = session.run_engine_tool(call)
            if answered is not None:
                results.append(answered)
        with self.store.atomic():
            session.add_tool_results(results)
            self._record_round()
        return reply.client_calls == 0

    def _record_round(self) -> None:
        """The client's request now continues after the engine's own round: a retry after a
        crash here goes on from it, rather than forking a session that only moved on inside
        this same request."""
        self._record(self.current, len(self.heads))

    def recover(self, error: ContextOverflowError) -> bool:
        """After the upstream refused the request as too long: compact hard. False when the
        engine can do nothing more (the client then gets the upstream's error)."""
        try:
            self.current.recover(error)
        except ContextOverflowError:
            return False
        return True

    # -- after the reply -----------------------------------------------------------------------

    def finish(self, visible: bytes, tally: Mapping[str, int]) -> None:
        """Record the prefix the client's next request will start with (its history, then the
        reply it got, as ``visible``, its digest), and add this request's figures to the
        session's."""
        session = self.current
        self.history.record_after(session.id, visible, session.stored_head[0])

        self.store.add_to_metadata(session.id, METADATA_KEY, {**tally, "requests": 1})
