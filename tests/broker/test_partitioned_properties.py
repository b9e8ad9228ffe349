"""A partitioned entity against a plain one: the invariants of routing and ordering, for any
sends (property tests), and the interface both satisfy (:mod:`.interface`)."""

from __future__ import annotations

import inspect
from collections import defaultdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker.config import EntityProperties, NamespaceConfig, QueueConfig
from amqplink.broker.namespace import Entity, Namespace
from amqplink.broker.namespace.counts import entity_counts
from amqplink.broker.namespace.interface import MessagingEntity
from amqplink.broker.namespace.partitioned import SEQUENCE_SHIFT, PartitionedEntity, fragment_of
from tests import profiles
from tests.broker.nsutil import T0, delivered, send

KEYS = st.one_of(st.none(), st.sampled_from(["a", "b", "c", "d", "e", "f", "g"]))
"""A send's partition key (None: none, round robin)."""


def _namespace(count: int, **props: Any) -> Namespace:
    """Queue ``pq`` made of ``count`` fragments and queue ``plain``, alike otherwise."""
    return Namespace(
        NamespaceConfig(
            queues=(
                QueueConfig("pq", EntityProperties(enable_partitioning=True, partition_count=count, **props)),
                QueueConfig("plain", EntityProperties(**props)),
            )
        )
    )


def _send_all(ns: Namespace, address: str, keys: list[str | None]) -> None:
    """Message ``n`` carries ``n`` (four bytes, so every message has one size) and key ``keys[n]``."""
    for n, key in enumerate(keys):
        friendly = {} if key is None else {"partition_key": key}
        send(ns, address, body=n.to_bytes(4, "big"), **friendly)


def _number(entity: MessagingEntity, msg: Any) -> int:
    return int.from_bytes(delivered(entity, msg).body, "big")  # type: ignore[arg-type]


@settings(deadline=None)
@given(
    count=st.integers(1, 6),
    keys=st.lists(KEYS, max_size=60),
    batches=st.lists(st.integers(1, 13), min_size=1, max_size=8),
)
def test_every_message_is_received_once_each_keys_in_order_and_counts_agree(
    count: int, keys: list[str | None], batches: list[int]
) -> None:
    """For any sends with or without a key: each message is received exactly once, the
    messages of one key in the order they were sent (a key pins to one fragment), from the
    fragment the key names; at every step the counts (active, total, bytes) are the plain
    queue's."""
    ns = _namespace(count)
    _send_all(ns, "pq", keys)
    _send_all(ns, "plain", keys)
    queue, plain = ns.receiver_source("pq"), ns.receiver_source("plain")
    assert isinstance(queue, PartitionedEntity) and queue.partitions is not None

    def counts_agree() -> None:
        assert entity_counts(queue, queue.dead_letter_queue) == entity_counts(plain, plain.dead_letter_queue)
        assert len(queue.store) == len(plain.store) and queue.bytes == plain.bytes

    counts_agree()
    got: list[int] = []
    turn = 0
    while True:
        size = batches[turn % len(batches)]
        turn += 1
        taken, also = queue.receive_many(T0, size), plain.receive_many(T0, size)
        assert len(taken) == len(also) == min(size, len(keys) - len(got))
        counts_agree()  # locked messages count as active on both
        if not taken:
            break
        for msg in taken:
            n = _number(queue, msg)
            got.append(n)
            if keys[n] is not None:
                assert fragment_of(msg.sequence_number) == queue.partitions.index(keys[n])
        assert queue.complete_all([m.lock for m in taken], T0) == {}  # type: ignore[misc]
        assert plain.complete_all([m.lock for m in also], T0) == {}  # type: ignore[misc]
        counts_agree()
    assert sorted(got) == list(range(len(keys)))
    by_key: dict[str, list[int]] = defaultdict(list)
    for n in got:
        key = keys[n]
        if key is not None:
            by_key[key].append(n)
    assert all(order == sorted(order) for order in by_key.values())


@settings(deadline=None)
@given(count=st.integers(1, 6), keys=st.lists(KEYS, max_size=50), size=st.integers(1, 12))
def test_fragment_i_numbers_from_i_shifted_and_a_peek_loop_sees_each_message_once(
    count: int, keys: list[str | None], size: int
) -> None:
    """Fragment ``i`` gives out ``(i << 48) + 1``, ``+ 2``... in the order it stores; peek
    answers from one fragment at a time, in sequence order, and a caller looping from the
    last sequence number + 1 (as the SDKs do) sees every message exactly once."""
    ns = _namespace(count)
    _send_all(ns, "pq", keys)
    queue = ns.receiver_source("pq")
    assert isinstance(queue, PartitionedEntity)
    for index, fragment in enumerate(queue.fragments):
        seqs = [m.sequence_number for m in fragment.store]
        assert seqs == [(index << SEQUENCE_SHIFT) + n for n in range(1, len(seqs) + 1)]
        numbers = [_number(queue, m) for m in fragment.store]
        assert numbers == sorted(numbers)  # stored in the order they were sent
    seen: list[int] = []
    start = 0
    while batch := queue.peek(start, size, T0):
        assert len(batch) <= size and len({fragment_of(m.sequence_number) for m in batch}) == 1
        seen += [m.sequence_number for m in batch]
        start = batch[-1].sequence_number + 1
    assert seen == sorted(m.sequence_number for m in queue.store) and len(seen) == len(keys)


@settings(profiles.HEAVY, deadline=None)
@given(
    count=st.integers(1, 5),
    sessions=st.lists(st.sampled_from(["s1", "s2", "s3", "s4", "s5"]), max_size=40),
)
def test_each_session_is_received_whole_and_in_order_from_its_fragment(count: int, sessions: list[str]) -> None:
    """A session lives in its key's fragment: whoever takes the next available session gets
    all of its messages, in the order they were sent; every session is taken once."""
    ns = _namespace(count, requires_session=True)
    for n, sid in enumerate(sessions):
        send(ns, "pq", body=n.to_bytes(4, "big"), session_id=sid)
    queue = ns.receiver_source("pq")
    assert isinstance(queue, PartitionedEntity) and queue.partitions is not None
    taken: dict[str, list[int]] = {}
    while (accepted := queue.accept_session(None, owner := object(), T0)) is not None:
        sid = accepted[0]
        assert sid not in taken
        msgs = queue.receive_many(T0, len(sessions) + 1, session_id=sid, owner=owner)
        assert {fragment_of(m.sequence_number) for m in msgs} == {queue.partitions.index(sid)}
        taken[sid] = [_number(queue, m) for m in msgs]
    assert taken == {sid: [n for n, s in enumerate(sessions) if s == sid] for sid in set(sessions)}


def test_both_kinds_have_every_member_of_the_interface_and_neither_derives_from_the_other() -> None:
    ns = _namespace(3)
    members = {
        name
        for klass in MessagingEntity.__mro__
        if klass.__module__ == MessagingEntity.__module__
        for name in (*vars(klass), *getattr(klass, "__annotations__", {}))
        if not name.startswith("_")
    }
    assert {"receive_many", "complete_all", "store", "fragments", "partitions", "on_timed"} <= members
    for entity in (ns.receiver_source("plain"), ns.receiver_source("pq")):
        missing = [name for name in members if not hasattr(entity, name)]
        assert missing == [], f"{type(entity).__name__} lacks {missing}"
    assert not issubclass(PartitionedEntity, Entity) and not issubclass(Entity, PartitionedEntity)
    plain, partitioned = ns.receiver_source("plain"), ns.receiver_source("pq")
    assert isinstance(plain, Entity) and plain.fragments == (plain,) and plain.partitions is None
    assert isinstance(partitioned, PartitionedEntity) and all(type(f) is Entity for f in partitioned.fragments)
    for name in ("receive_many", "complete_all", "peek", "accept_all"):  # the same call shape
        assert inspect.signature(getattr(Entity, name)).parameters.keys() <= (
            inspect.signature(getattr(PartitionedEntity, name)).parameters.keys()
        )


def test_expire_locks_ends_the_locks_of_every_fragment_and_the_messages_come_back() -> None:
    """Fault injection's expire-locks on a partitioned queue: each fragment's locks end,
    and each message can be received again (with its delivery count taken)."""
    ns = _namespace(3, lock_duration=30)
    _send_all(ns, "pq", [None] * 5)
    queue = ns.receiver_source("pq")
    held = queue.receive_many(T0, 5)
    assert len(held) == 5 and all(queue.holds_lock(m.lock) for m in held)  # type: ignore[arg-type]
    assert queue.expire_locks(T0 + 1) == 5
    assert not any(queue.holds_lock(m.lock or b"") for m in held)
    again = queue.receive_many(T0 + 1, 10)
    assert sorted(m.sequence_number for m in again) == sorted(m.sequence_number for m in held)
    assert {m.delivery_count for m in again} == {2}


def test_deleting_a_partitioned_queue_takes_its_fragments_off_the_clock() -> None:
    ns = _namespace(2, lock_duration=30)
    _send_all(ns, "pq", [None, None])
    assert len(ns.receiver_source("pq").receive_many(T0, 2)) == 2
    assert ns.next_deadline() == T0 + 30  # the fragments' locks
    ns.delete_queue("pq")
    assert ns.next_deadline() == float("inf")
