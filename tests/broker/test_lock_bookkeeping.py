"""Lock bookkeeping: as large as the live locks however many were settled; a partitioned
entity finds a settlement's fragment from its token."""

from __future__ import annotations

from typing import Any

from amqplink.broker.config import EntityProperties
from amqplink.broker.namespace import Namespace
from amqplink.broker.namespace.entity import LOCK_EXPIRY_SLACK, LOCK_TAG_MASK, TOKEN_POOL
from amqplink.broker.namespace.partitioned import PartitionedEntity, fragment_of
from tests.broker.nsutil import T0, send


def test_settled_locks_leave_no_growing_expiry_index() -> None:
    ns = Namespace()
    entity = ns.receiver_source("q")
    total = 4 * LOCK_EXPIRY_SLACK
    for _ in range(total):
        send(ns, "q")
    for i in range(total):
        msg = entity.receive(T0 + i * 1e-4)
        assert msg is not None and msg.lock_token is not None
        entity.complete(msg.lock_token, T0 + i * 1e-4)
    assert len(entity._lock_expiry) <= LOCK_EXPIRY_SLACK + 1


def test_live_and_renewed_locks_still_expire_after_a_compaction() -> None:
    ns = Namespace()
    entity = ns.receiver_source("q")
    duration = entity.properties.lock_duration
    for _ in range(3 * LOCK_EXPIRY_SLACK):
        send(ns, "q")
    kept = entity.receive(T0)
    assert kept is not None and kept.lock_token is not None
    renewed = entity.receive(T0)
    assert renewed is not None and renewed.lock_token is not None
    until = entity.renew_lock(renewed.lock_token, T0 + 10)
    for _ in range(3 * LOCK_EXPIRY_SLACK - 2):  # enough settled locks to force compactions
        msg = entity.receive(T0)
        assert msg is not None and msg.lock_token is not None
        entity.complete(msg.lock_token, T0)
    assert len(entity._lock_expiry) <= LOCK_EXPIRY_SLACK + 3
    entity.tick(T0 + duration)  # the first lock runs out, the renewed one does not
    assert kept.lock_token is None and renewed.lock_token is not None
    entity.tick(until)
    assert renewed.lock_token is None
    again = [entity.receive(until), entity.receive(until)]
    assert {m.sequence_number for m in again if m is not None} == {kept.sequence_number, renewed.sequence_number}
    assert all(m is not None and m.delivery_count == 2 for m in again)


def _partitioned() -> Namespace:
    ns = Namespace()
    ns.default_properties = EntityProperties(enable_partitioning=True)
    return ns


def test_a_partitioned_entitys_lock_tokens_name_their_fragment() -> None:
    ns = _partitioned()
    queue = ns.receiver_source("q")
    for _ in range(40):
        send(ns, "q")
    received = [queue.receive(T0) for _ in range(40)]
    for msg in received:
        assert msg is not None and msg.lock_token is not None
        assert msg.lock_token.version == 4
        assert msg.lock_token.int & LOCK_TAG_MASK == fragment_of(msg.sequence_number)
        queue.complete(msg.lock_token, T0)
    assert len(queue.store) == 0


def test_a_token_without_its_fragments_tag_is_still_found() -> None:
    ns = _partitioned()
    queue = ns.receiver_source("q")
    assert isinstance(queue, PartitionedEntity)
    for fragment in queue.fragments:
        fragment.lock_tag = None  # plain uuid4 tokens: the lookup falls back to asking each fragment
    for _ in range(20):
        send(ns, "q")
    for _ in range(20):
        msg = queue.receive(T0)
        assert msg is not None and msg.lock_token is not None
        queue.complete(msg.lock_token, T0)
    assert len(queue.store) == 0


def test_a_batch_larger_than_the_token_pool_gets_a_new_token_each_and_expires_together() -> None:
    """_lock takes a batch's tokens from the pool at once (refilled as often as it needs):
    each lock its own token, all of them in one lock-expiry entry that runs out at once."""
    ns = Namespace()
    entity = ns.receiver_source("q")
    count = 2 * TOKEN_POOL + 10
    for _ in range(count):
        send(ns, "q")
    first = entity.receive_many(T0, 5)
    batch = entity.receive_many(T0 + 1, count - 5)
    tokens = [msg.lock for msg in [*first, *batch]]
    assert len(set(tokens)) == count and None not in tokens
    assert all(entity._locks[msg.lock] == msg.sequence_number for msg in batch if msg.lock is not None)
    assert len(entity._lock_expiry) == 2  # one entry per batch
    until, _, seqs, kept = max(entity._lock_expiry)
    assert (until, seqs, kept) == (T0 + 1 + entity.properties.lock_duration, seqs_of(batch), tokens[5:])
    entity.tick(T0 + entity.properties.lock_duration)  # the first five run out, not the batch
    assert [m.lock for m in first] == [None] * 5 and all(m.lock is not None for m in batch)
    entity.tick(until)
    assert all(m.lock is None for m in batch) and not entity._locks
    again = entity.receive_many(until, count)
    assert sorted(m.sequence_number for m in again) == sorted(seqs_of([*first, *batch]))
    assert {m.delivery_count for m in again} == {2}


def seqs_of(messages: list[Any]) -> list[int]:
    return [m.sequence_number for m in messages]
