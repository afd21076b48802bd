"""The store protocols: a third party implements the engine's few methods; the CLI asks more."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from contextfold import UsageError
from contextfold.cli._store import browsable
from contextfold.edits import ContextEdit
from contextfold.messages import Message
from contextfold.outputs.blobs import BlobInfo
from contextfold.store import (
    BrowsableSessionStore,
    LoadedView,
    SessionInfo,
    SessionStore,
    Snapshot,
    open_store,
)

ENGINE_METHODS = {
    "create_session",
    "get_session",
    "append_messages",
    "append_edit",
    "save_snapshot",
    "load_view",
    "append_event",
    "put_blob",
    "get_blob",
    "save_engine_state",
    "load_engine_state",
    "close",
}


def _protocol_methods(protocol: type) -> set[str]:
    return {
        name
        for name, value in vars(protocol).items()
        if inspect.isfunction(value) and (not name.startswith("_") or name in ("__enter__",))
    }


class EngineOnlyStore:
    """A third party's store: the methods :class:`SessionStore` asks for, nothing more."""

    def __init__(self, path: str = ":memory:") -> None:
        self.inner = open_store(path)

    def create_session(
        self,
        *,
        model: str | None = None,
        title: str | None = None,
        parent_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> SessionInfo:
        return self.inner.create_session(
            model=model, title=title, parent_id=parent_id, metadata=metadata, session_id=session_id
        )

    def get_session(self, session_id: str) -> SessionInfo:
        return self.inner.get_session(session_id)

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        expected_seq: int | None = None,
        expected_edit: int | None = None,
    ) -> int:
        return self.inner.append_messages(
            session_id, messages, expected_seq=expected_seq, expected_edit=expected_edit
        )

    def append_edit(
        self,
        session_id: str,
        edit: ContextEdit,
        *,
        expected_seq: int | None = None,
        expected_edit: int | None = None,
    ) -> int:
        return self.inner.append_edit(
            session_id, edit, expected_seq=expected_seq, expected_edit=expected_edit
        )

    def save_snapshot(
        self,
        session_id: str,
        view: Sequence[Message],
        token_count: int,
        *,
        last_seq: int,
        last_edit: int,
        expected_seq: int | None = None,
        expected_edit: int | None = None,
    ) -> Snapshot:
        return self.inner.save_snapshot(
            session_id,
            view,
            token_count,
            last_seq=last_seq,
            last_edit=last_edit,
            expected_seq=expected_seq,
            expected_edit=expected_edit,
        )

    def load_view(self, session_id: str) -> LoadedView:
        return self.inner.load_view(session_id)

    def append_event(self, session_id: str, event_type: str, data: Mapping[str, Any]) -> None:
        self.inner.append_event(session_id, event_type, data)

    def put_blob(self, session_id: str, content: str, *, tool_name: str | None = None) -> BlobInfo:
        return self.inner.put_blob(session_id, content, tool_name=tool_name)

    def get_blob(self, session_id: str, ref: str) -> str:
        return self.inner.get_blob(session_id, ref)

    def save_engine_state(self, session_id: str, state: Mapping[str, Any]) -> None:
        self.inner.save_engine_state(session_id, state)

    def load_engine_state(self, session_id: str) -> dict[str, Any] | None:
        return self.inner.load_engine_state(session_id)

    def close(self) -> None:
        self.inner.close()


def test_the_store_a_third_party_writes_has_only_the_engines_methods() -> None:
    assert _protocol_methods(SessionStore) == ENGINE_METHODS
    assert _protocol_methods(EngineOnlyStore) - {"__init__"} == ENGINE_METHODS


def test_the_engines_methods_alone_make_a_session_store_but_not_a_browsable_one() -> None:
    store = EngineOnlyStore()
    try:
        assert isinstance(store, SessionStore)
        assert not isinstance(store, BrowsableSessionStore)
        with pytest.raises(UsageError, match="EngineOnlyStore offers only what the engine"):
            browsable(store)
    finally:
        store.close()


def test_the_built_in_stores_are_browsable_and_the_cli_takes_them_as_they_are() -> None:
    with open_store(":memory:") as store:
        assert isinstance(store, BrowsableSessionStore)
        assert browsable(store) is store
