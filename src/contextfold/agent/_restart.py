"""Restart a conversation by hand (``/restart``): a child session seeded with a carry-over.

The ``restart`` preset makes the engine do this on its own when the window fills up; this is the
same restart (:meth:`contextfold.engine.Session.restarted`) on request. The child session's
``parent_id`` is the old session, so every ``ref`` of the parent stays readable through
``read_result``.
"""

from __future__ import annotations

from contextfold.compaction import RestartPolicy
from contextfold.engine import Session

__all__ = ["restart_session"]


def restart_session(
    session: Session, *, policy: RestartPolicy | None = None, focus: str | None = None
) -> Session:
    """A new session continuing ``session``: the task, a structured summary of everything so
    far (``focus`` says what matters most) and the last complete turns, as many as ``policy``
    carries (default: the engine's restart policy, else :class:`RestartPolicy`'s defaults)."""
    return session.restarted(policy=policy, focus=focus)
