"""What only the PostgreSQL store does: the optional dependency, connections, the pool."""

from __future__ import annotations

import secrets
import sys
import threading

import pytest

from contextfold import ConfigError, MissingDependencyError, StoreError
from contextfold.messages import Message
from contextfold.store import PostgresStore, open_store
from contextfold.store.postgres import redact_url


def test_without_psycopg_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(
        MissingDependencyError, match=r"install it with: pip install \S*\[postgres\]"
    ):
        open_store("postgresql://nobody@127.0.0.1:1/none")


def test_without_a_url_the_error_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTEXTFOLD_DATABASE_URL", raising=False)
    with pytest.raises(ConfigError, match="CONTEXTFOLD_DATABASE_URL"):
        PostgresStore()


def test_pool_sizes_are_checked() -> None:
    with pytest.raises(ConfigError, match="pool sizes"):
        PostgresStore("postgresql://x@127.0.0.1/db", min_size=5, max_size=2)


def test_passwords_never_appear_in_messages() -> None:
    assert redact_url("postgresql://ann:hunter2@db:5432/x") == "postgresql://ann:***@db:5432/x"
    assert redact_url("host=db password=hunter2 user=ann") == "host=db password=*** user=ann"


def test_an_unreachable_server_is_reported_with_the_url() -> None:
    url = "postgresql://ann:hunter2@127.0.0.1:1/sessions"
    with pytest.raises(StoreError, match=r"ann:\*\*\*@127\.0\.0\.1:1/sessions") as caught:
        PostgresStore(url, connect_timeout=1)
    assert "hunter2" not in str(caught.value)


@pytest.mark.postgres
def test_schemas_keep_stores_apart(postgres_database: str) -> None:
    one = open_store(postgres_database, schema=f"a_{secrets.token_hex(4)}")
    two = open_store(postgres_database, schema=f"b_{secrets.token_hex(4)}")
    try:
        one.create_session(session_id="only-in-one")
        assert [s.id for s in one.list_sessions()] == ["only-in-one"]
        assert two.list_sessions() == []
    finally:
        one.close()
        two.close()


@pytest.mark.postgres
def test_a_small_pool_serves_many_threads(postgres_database: str) -> None:
    store = open_store(postgres_database, schema=f"p_{secrets.token_hex(4)}", max_size=2)
    shared = store.create_session().id
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for i in range(20):
                store.append_messages(shared, [Message.user(f"{worker}-{i}")])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        assert [seq for seq, _ in store.iter_messages(shared)] == list(range(1, 161))
    finally:
        store.close()
