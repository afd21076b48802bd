"""What the store keeps for ``contextfold proxy``: conversation prefixes per tenant, and counts
added to a session's metadata. Both backends."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from contextfold.errors import SessionNotFoundError
from tests.store.conftest import StoreTarget


def test_prefixes_are_found_per_tenant_and_the_newest_session_owns_one(
    target: StoreTarget,
) -> None:
    store = target.open()
    first = store.create_session().id
    second = store.create_session().id
    store.record_proxy_head("tenant-a", "h1", first, 1, 1)
    store.record_proxy_head("tenant-a", "h2", first, 2, 2)
    found = store.find_proxy_heads("tenant-a", ["h0", "h1", "h2"])
    assert found == {"h1": (first, 1), "h2": (first, 2)}
    assert store.find_proxy_heads("tenant-b", ["h1", "h2"]) == {}  # another key sees nothing
    # A fork takes the shared prefix over: the next request that holds it continues the fork.
    store.record_proxy_head("tenant-a", "h1", second, 1, 1)
    assert store.find_proxy_heads("tenant-a", ["h1"]) == {"h1": (second, 1)}
    # Many heads at once (a long conversation) are looked up in chunks.
    many = [f"x{i}" for i in range(1_234)]
    for count, head in enumerate(many[::100], start=1):
        store.record_proxy_head("tenant-a", head, first, 10 + count, 10 + count)
    assert len(store.find_proxy_heads("tenant-a", many)) == len(many[::100])
    with pytest.raises(SessionNotFoundError):
        store.record_proxy_head("tenant-a", "h9", "ses_missing", 1, 1)
    # Deleting a session forgets its prefixes.
    store.delete_session(first)
    assert store.find_proxy_heads("tenant-a", ["h2"]) == {}


def test_counts_added_to_metadata_are_never_lost(target: StoreTarget) -> None:
    store = target.open()
    session_id = store.create_session(metadata={"proxy": {"tenant": "t", "requests": 1}}).id
    writers = [target.open() for _ in range(4)]

    def add(index: int) -> None:
        writers[index % 4].add_to_metadata(session_id, "proxy", {"requests": 1, "tokens": 10})

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(add, range(40)))
    figures = store.get_session(session_id).metadata["proxy"]
    assert figures == {"tenant": "t", "requests": 41, "tokens": 400}
    assert store.session_head(session_id) == (0, 0)
