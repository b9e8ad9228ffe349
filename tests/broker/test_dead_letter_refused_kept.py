"""A message the broker would dead-letter on its own (a scheduled forward refused, a lock
expired past the maximum delivery count, a TTL expired with dead-lettering on expiration)
is never dropped for a full dead-letter queue: Service Bus keeps it where it is. A
partitioned entity's fragment has no dead-letter queue of its own; its entity's is checked
as a plain entity's is (:meth:`SendPlan.dead_letter`), and its sink's refusal comes back to
the fragment, which keeps the message (:meth:`Entity._dead_letter`). Also: a forwarding
entity that requires sessions forwards its scheduled messages when they come due."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from amqplink.broker.config import EntityProperties, NamespaceConfig, QueueConfig
from amqplink.broker.durable import Persistence
from amqplink.broker.namespace import Entity, EntityError, Namespace
from amqplink.broker.namespace.envelope import split_message
from amqplink.broker.namespace.partitioned import PartitionedEntity
from amqplink.codec.types import Timestamp
from tests.broker.nsutil import T0, payload, send
from tests.broker.nsutil import committed as _committed

SCHEDULED = "x-opt-scheduled-enqueue-time"
ONE = EntityProperties(max_messages=1)


def node(ns: Namespace, address: str) -> Entity | PartitionedEntity:
    target = ns.resolve(address).target
    assert isinstance(target, Entity | PartitionedEntity)
    return target


def leaves(entity: Entity | PartitionedEntity) -> list[Entity]:
    return list(entity.fragments)


def fill(entity: Entity | PartitionedEntity, now: float, mid: str) -> None:
    """Fill ``entity`` (every fragment) to its count limit."""
    for leaf in leaves(entity):
        while len(leaf.store) < leaf.properties.max_messages:
            leaf.accept(split_message(payload(b"filler", message_id=mid)), now)


def ids(entity: Entity | PartitionedEntity) -> list[str]:
    return sorted(m.envelope.message_id for m in entity.store)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def forwarding(partitioned: bool) -> NamespaceConfig:
    props = EntityProperties(forward_to="dst", max_messages=2, enable_partitioning=partitioned, partition_count=2)
    return NamespaceConfig(queues=(QueueConfig("src", props), QueueConfig("dst", ONE)))


@pytest.mark.parametrize("partitioned", [True, False])
def test_a_scheduled_forward_refused_with_a_full_dead_letter_queue_stays_then_forwards(
    partitioned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Partitioned, the fragment dead-lettered through its entity's sink, unchecked, and the
    sink dropped what the full dead-letter queue refused (a WARNING): X was nowhere."""
    ns = Namespace(forwarding(partitioned))
    src, dst = node(ns, "src"), node(ns, "dst")
    fill(dst, T0, "resident")
    fill(node(ns, "src/$DeadLetterQueue"), T0, "dead")
    send(ns, "src", T0, message_id="X", message_annotations={SCHEDULED: Timestamp(int((T0 + 10) * 1000))})
    with caplog.at_level(logging.INFO, "amqplink.broker.namespace"):
        for second in range(11, 40):
            ns.tick(T0 + second)
    assert ids(src) == ["X"] and ids(dst) == ["resident"]
    warned = warnings(caplog)
    assert len(warned) == 1 and "held back" in warned[0] and "dropped" not in warned[0]
    node(ns, "dst").receive(T0 + 40, lock=False)
    ns.tick(T0 + 40 + 60)
    assert ids(dst) == ["X"] and ids(src) == []


def expiring(partitioned: bool) -> NamespaceConfig:
    props = EntityProperties(
        max_messages=2,
        enable_partitioning=partitioned,
        partition_count=2,
        max_delivery_count=1,
        lock_duration=30.0,
        dead_lettering_on_message_expiration=True,
    )
    return NamespaceConfig(queues=(QueueConfig("q", props),))


@pytest.mark.parametrize("partitioned", [True, False])
def test_a_lock_expired_past_the_max_delivery_count_keeps_the_message_while_the_dead_letter_queue_is_full(
    partitioned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    ns = Namespace(expiring(partitioned))
    q, dlq = node(ns, "q"), node(ns, "q/$DeadLetterQueue")
    send(ns, "q", T0, message_id="X")
    fill(dlq, T0, "dead")
    with caplog.at_level(logging.INFO, "amqplink.broker.namespace"):
        for attempt in range(3):  # each lock runs out; the dead-letter queue refuses each time
            at = T0 + 100 * attempt
            msg = q.receive(at)
            assert msg is not None and msg.envelope.message_id == "X"
            ns.tick(at + 31)
            assert ids(q) == ["X"]
    warned = warnings(caplog)
    assert len(warned) == 1 and "kept" in warned[0]  # once, not at every try
    assert dlq.receive(T0 + 400, lock=False) is not None  # room made
    msg = q.receive(T0 + 400)
    assert msg is not None
    ns.tick(T0 + 431)
    assert ids(q) == [] and "X" in ids(dlq)


@pytest.mark.parametrize("partitioned", [True, False])
def test_an_expired_message_is_kept_while_the_dead_letter_queue_is_full(
    partitioned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    ns = Namespace(expiring(partitioned))
    q, dlq = node(ns, "q"), node(ns, "q/$DeadLetterQueue")
    send(ns, "q", T0, message_id="X", ttl=10)
    fill(dlq, T0, "dead")
    with caplog.at_level(logging.INFO, "amqplink.broker.namespace"):
        for second in range(11, 200):
            ns.tick(T0 + second)
        assert q.receive(T0 + 200) is None  # expired: not handed out
    assert ids(q) == ["X"]
    warned = warnings(caplog)
    assert len(warned) == 1 and "kept" in warned[0]
    assert dlq.receive(T0 + 200, lock=False) is not None
    ns.tick(T0 + 200 + 60)  # (the wait grows to a minute at most)
    assert ids(q) == [] and "X" in ids(dlq)
    reasons = [
        (m.envelope.application_properties or {}).get("DeadLetterReason")
        for m in dlq.store
        if m.envelope.message_id == "X"
    ]
    assert reasons == ["TTLExpiredException"]


@pytest.mark.parametrize("partitioned", [True, False])
def test_a_receivers_dead_letter_refused_by_a_full_dead_letter_queue_is_refused_to_it(partitioned: bool) -> None:
    ns = Namespace(expiring(partitioned))
    q, dlq = node(ns, "q"), node(ns, "q/$DeadLetterQueue")
    send(ns, "q", T0, message_id="X")
    fill(dlq, T0, "dead")
    msg = q.receive(T0)
    assert msg is not None and msg.lock is not None
    with pytest.raises(EntityError):
        q.dead_letter(msg.lock, T0, "mine", "no room", annotations={"x-mine": 1})
    assert ids(q) == ["X"] and "x-mine" not in (msg.envelope.annotations or {})
    q.complete(msg.lock, T0 + 1)  # the lock was kept
    assert ids(q) == []


def sessions(partitioned: bool, dst: EntityProperties | None = None) -> NamespaceConfig:
    props = EntityProperties(
        forward_to="dst", max_messages=3, requires_session=True, enable_partitioning=partitioned, partition_count=2
    )
    return NamespaceConfig(queues=(QueueConfig("src", props), QueueConfig("dst", dst or EntityProperties())))


@pytest.mark.parametrize("partitioned", [True, False])
def test_a_session_forwarding_entity_forwards_its_scheduled_messages_when_due(partitioned: bool) -> None:
    """``_forward_held`` took only the sessionless messages: these stayed in ``src`` for ever."""
    ns = Namespace(sessions(partitioned))
    for i, sid in enumerate(["a", "b", "a"]):
        at = Timestamp(int((T0 + 10) * 1000))
        send(ns, "src", T0, message_id=f"m{i}", session_id=sid, message_annotations={SCHEDULED: at})
    assert len(node(ns, "src").store) == 3
    ns.tick(T0 + 11)
    assert ids(node(ns, "dst")) == ["m0", "m1", "m2"] and ids(node(ns, "src")) == []


def test_a_session_message_refused_with_a_full_dead_letter_queue_is_held_back_then_forwarded() -> None:
    ns = Namespace(sessions(False, ONE))
    src, dst = node(ns, "src"), node(ns, "dst")
    fill(dst, T0, "resident")
    fill(node(ns, "src/$DeadLetterQueue"), T0, "dead")
    at = Timestamp(int((T0 + 10) * 1000))
    send(ns, "src", T0, message_id="X", session_id="s", message_annotations={SCHEDULED: at})
    for second in range(11, 30):
        ns.tick(T0 + second)
    assert ids(src) == ["X"]
    dst.receive(T0 + 30, lock=False)
    ns.tick(T0 + 30 + 60)
    assert ids(dst) == ["X"] and ids(src) == []


async def test_a_partitioned_forward_held_back_and_an_expired_message_kept_survive_a_restart(tmp_path: Path) -> None:
    now = time.time()
    config = NamespaceConfig(
        queues=(
            *forwarding(True).queues,
            QueueConfig("q", EntityProperties(max_messages=1, enable_partitioning=True, partition_count=2,
                                              dead_lettering_on_message_expiration=True)),
        )
    )  # fmt: skip
    store = Persistence(tmp_path, fsync=False)
    ns = Namespace(config)
    store.attach(ns)
    for address in ("dst", "src/$DeadLetterQueue", "q/$DeadLetterQueue"):
        fill(node(ns, address), now, "filler")  # (every fragment: the dead-letter queues of two fragments of one)
    send(ns, "src", now, message_id="X", message_annotations={SCHEDULED: Timestamp(int((now + 10) * 1000))})
    send(ns, "q", now, message_id="Y", ttl=10)
    ns.tick(now + 11)
    assert ids(node(ns, "src")) == ["X"] and ids(node(ns, "q")) == ["Y"]
    await _committed(store)
    await store.close()

    store = Persistence(tmp_path, fsync=False)
    ns = Namespace(config)
    store.attach(ns)
    assert ids(node(ns, "src")) == ["X"] and ids(node(ns, "q")) == ["Y"]
    node(ns, "dst").receive(now + 12, lock=False)
    for leaf in leaves(node(ns, "q/$DeadLetterQueue")):
        leaf.receive(now + 12, lock=False)
    ns.tick(now + 12 + 60)
    assert ids(node(ns, "dst")) == ["X"] and ids(node(ns, "src")) == []
    assert ids(node(ns, "q")) == [] and "Y" in ids(node(ns, "q/$DeadLetterQueue"))
    await _committed(store)
    await store.close()


def test_what_an_entity_remembers_of_messages_it_kept_stays_bounded_as_they_are_completed() -> None:
    """Rounds of messages kept for a full dead-letter queue, then completed: the entity's
    note of which it kept (each warned of once) drops those gone, so it stays near what is
    kept now, not everything ever kept."""
    props = EntityProperties(max_messages=5000, max_delivery_count=1, lock_duration=30.0)
    ns = Namespace(NamespaceConfig(queues=(QueueConfig("q", props),)))
    q, dlq = node(ns, "q"), node(ns, "q/$DeadLetterQueue")
    assert isinstance(q, Entity)
    fill(dlq, T0, "dead")
    now = T0
    for round_ in range(8):
        for i in range(600):
            send(ns, "q", now, message_id=f"r{round_}-{i}")
        assert len(q.receive_many(now, 600)) == 600
        now += 31
        q.tick(now)  # every lock ran out past the max delivery count: kept, the queue being full
        assert len(q.store) == 600
        for msg in q.receive_many(now, 600):
            q.complete(msg.lock, now)
        assert len(q.store) == 0
        assert len(q._kept) <= 1024 + 600


def test_a_dead_letter_forward_and_the_dead_letter_queue_both_refusing_is_warned_of_once_naming_both(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The forward's refusal was logged at every try while the message was kept."""
    props = EntityProperties(
        max_messages=2, max_delivery_count=1, lock_duration=30.0, forward_dead_lettered_messages_to="dst"
    )
    ns = Namespace(NamespaceConfig(queues=(QueueConfig("q", props), QueueConfig("dst", ONE))))
    q, dlq, dst = node(ns, "q"), node(ns, "q/$DeadLetterQueue"), node(ns, "dst")
    fill(dst, T0, "resident")
    fill(dlq, T0, "dead")
    send(ns, "q", T0, message_id="X")
    with caplog.at_level(logging.INFO, "amqplink.broker.namespace"):
        for attempt in range(3):  # each lock runs out; the forward and the dead-letter queue refuse
            at = T0 + 100 * attempt
            assert q.receive(at) is not None
            ns.tick(at + 31)
            assert ids(q) == ["X"]
        warned = warnings(caplog)
        assert len(warned) == 1 and "kept" in warned[0] and "forwarding it to 'dst' failed too" in warned[0]
        caplog.clear()
        assert dlq.receive(T0 + 400, lock=False) is not None  # room in the dead-letter queue
        assert q.receive(T0 + 400) is not None
        ns.tick(T0 + 431)
    assert ids(q) == [] and "X" in ids(dlq)
    warned = warnings(caplog)
    assert len(warned) == 1 and "kept in its dead-letter queue" in warned[0]
