"""A send to a topic, or into a chain of forwards, is all or none (issue 30, item 1: "a
refusal of any kind leaves no trace"): every subscription's copy and every forward
destination is checked before anything is stored, so a refusal anywhere stores nothing
anywhere and records no id, and the sender's retry leaves each subscription holding
exactly one copy (docs/broker-semantics.md#a-send-is-all-or-none-topics-and-forwards-issue-30-item-1).
What Service Bus does with a copy its forward destination has no room for (dead-lettered
in the source: docs/broker-semantics.md#forwarding-c4) is a stored copy, not a refusal.
Namespace objects, no sockets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from amqplink.broker.config import EntityProperties, NamespaceConfig, QueueConfig, SubscriptionConfig, TopicConfig
from amqplink.broker.namespace import EntityError, Namespace
from amqplink.codec.types import Timestamp
from amqplink.message import Message
from tests.broker.nsutil import T0, send

DEDUP = {"requires_duplicate_detection": True, "duplicate_detection_window": 600.0}


def ids(ns: Namespace, path: str) -> list[Any]:
    """The message ids ``path`` holds (any state), in sequence order."""
    return [m.envelope.message_id for m in ns.resolve(path).target.store]  # type: ignore[union-attr]


def drain(ns: Namespace, path: str) -> None:
    entity = ns.resolve(path).entity
    assert entity is not None
    entity.receive_many(T0, len(entity.store), lock=False)


def topology(dest: EntityProperties, fw: EntityProperties | None = None) -> Namespace:
    """Topic ``t`` (duplicate detection on) with subscription ``a`` (plain) before ``b``,
    which forwards to queue ``dest``."""
    return Namespace(
        NamespaceConfig(
            queues=(QueueConfig("dest", dest),),
            topics=(
                TopicConfig(
                    "t",
                    EntityProperties(**DEDUP),
                    subscriptions=(
                        SubscriptionConfig("a"),
                        SubscriptionConfig("b", fw or EntityProperties(forward_to="dest")),
                    ),
                ),
            ),
        )
    )


def _fragment_down(ns: Namespace, mid: str) -> Callable[[], None]:
    partitions = ns.resolve("dest").target.partitions
    assert partitions is not None
    index = partitions.index(mid)  # (duplicate detection: the message id is the key)
    ns.set_fragment_down("dest", index)
    return lambda: ns.set_fragment_down("dest", index, down=False)


def _dead_letters_full(ns: Namespace, mid: str) -> Callable[[], None]:
    # dest holds its one message; b's dead-letter queue (b's limit: one) holds one too
    send(ns, "dest", message_id="resident")
    b = ns.subscription("t", "b")
    b.dead_letter_queue.accept_all([ns.unpack(Message(b"dl").encode(), 0, 1 << 20)[0]], T0)
    return lambda: drain(ns, "t/Subscriptions/b/$DeadLetterQueue")


def _destination_deleted(ns: Namespace, mid: str) -> Callable[[], None]:
    ns.delete_queue("dest")
    return lambda: ns.add_queue(QueueConfig("dest", EntityProperties()))


CASES = {
    "a fragment of the destination down": (
        EntityProperties(enable_partitioning=True, partition_count=4, **DEDUP),
        None,
        _fragment_down,
        "amqp:internal-error",
    ),
    "the destination and the source's dead-letter queue full": (
        EntityProperties(max_messages=1),
        EntityProperties(forward_to="dest", max_messages=1),
        _dead_letters_full,
        "amqp:resource-limit-exceeded",
    ),
    "the destination deleted": (EntityProperties(), None, _destination_deleted, "amqp:not-found"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_refused_fan_out_stores_nothing_and_its_retry_leaves_one_copy_in_each_subscription(case: str) -> None:
    """``b`` (forwarding) is handled after ``a``: before, ``a`` kept its copy of the refused
    send, and the retry gave it a second one (and the topic, had it logged the id, would
    have dropped the retry as a duplicate)."""
    dest, fw, break_it, condition = CASES[case]
    ns = topology(dest, fw)
    fix = break_it(ns, "X")
    with pytest.raises(EntityError) as refused:
        send(ns, "t", message_id="X")
    assert refused.value.condition == condition
    assert ids(ns, "t/Subscriptions/a") == []
    fix()
    drain(ns, "dest")
    send(ns, "t", message_id="X")  # the retry: stored, not taken for a duplicate
    assert ids(ns, "t/Subscriptions/a") == ["X"]
    held = ids(ns, "dest") + ids(ns, "t/Subscriptions/b/$DeadLetterQueue")
    assert held == ["X"]


def two_forwards(dest: EntityProperties) -> Namespace:
    """Topic ``t`` whose subscriptions ``a`` and ``b`` both forward to queue ``dest``."""
    forward = EntityProperties(forward_to="dest")
    subs = (SubscriptionConfig("a", forward), SubscriptionConfig("b", forward))
    topic = TopicConfig("t", subscriptions=subs)
    return Namespace(NamespaceConfig(queues=(QueueConfig("dest", dest),), topics=(topic,)))


def test_two_forwards_into_one_queue_are_checked_together() -> None:
    """Subscriptions ``a`` and ``b`` both forward to ``dest`` (room for one): the first copy
    takes the room, the second is dead-lettered in ``b`` (its destination over quota), one
    send, nothing refused."""
    ns = two_forwards(EntityProperties(max_messages=1))
    send(ns, "t", message_id="X")
    assert ids(ns, "dest") == ["X"]
    assert ids(ns, "t/Subscriptions/a/$DeadLetterQueue") == []
    assert ids(ns, "t/Subscriptions/b/$DeadLetterQueue") == ["X"]


def test_a_batch_of_scheduled_messages_beyond_the_topics_room_schedules_none() -> None:
    """Two scheduled messages in one batch to a topic with room for one on its schedule:
    refused whole (before, the first stayed scheduled)."""
    ns = Namespace(
        NamespaceConfig(topics=(TopicConfig("t", EntityProperties(max_messages=1), (SubscriptionConfig("a"),)),))
    )
    at = Timestamp(int((T0 + 60) * 1000))
    inner = [
        Message(b"x", message_id=mid, message_annotations={"x-opt-scheduled-enqueue-time": at}).encode()
        for mid in ("m1", "m2")
    ]
    batch = Message(inner, body_type="data").encode()
    target = ns.sender_target("t")
    with pytest.raises(EntityError) as refused:
        ns.send(target, batch, T0, 0x80013700)
    assert refused.value.condition == "amqp:resource-limit-exceeded"
    assert ns.topic("t").scheduled_count == 0


def test_keyless_copies_into_a_partitioned_queue_take_one_fragment_each() -> None:
    """Two subscriptions forward a message with no partition key into ``dest`` (two
    fragments, room for one message each): the plan places the first copy where the round
    robin stands and the second in the other fragment, as two sends one after the other
    would; neither is dead-lettered."""
    ns = two_forwards(EntityProperties(max_messages=1, enable_partitioning=True, partition_count=2))
    send(ns, "t", message_id="X")
    dest = ns.queue("dest")
    assert [len(fragment.store) for fragment in dest.fragments] == [1, 1]
    assert ids(ns, "t/Subscriptions/a/$DeadLetterQueue") + ids(ns, "t/Subscriptions/b/$DeadLetterQueue") == []
    send(ns, "t", message_id="Y")  # no room left in either fragment: both copies dead-lettered
    assert ids(ns, "t/Subscriptions/a/$DeadLetterQueue") == ids(ns, "t/Subscriptions/b/$DeadLetterQueue") == ["Y"]


def test_a_scheduled_message_come_due_reaches_every_subscription_that_has_room() -> None:
    """A message scheduled on topic ``t`` comes due while subscription ``a`` is full: ``b``
    gets its copy and ``a``'s is dead-lettered there. Before, the clock's fan-out raised
    at ``a`` and the message, already taken off the schedule, was in no subscription."""
    ns = Namespace(
        NamespaceConfig(
            topics=(
                TopicConfig(
                    "t",
                    subscriptions=(SubscriptionConfig("a", EntityProperties(max_messages=1)), SubscriptionConfig("b")),
                ),
            )
        )
    )
    at = Timestamp(int((T0 + 60) * 1000))
    send(ns, "t", message_id="S", message_annotations={"x-opt-scheduled-enqueue-time": at})
    send(ns, "t", T0 + 1, message_id="A")  # a is full now
    ns.tick(T0 + 61)
    assert ids(ns, "t/Subscriptions/a") == ["A"]
    assert ids(ns, "t/Subscriptions/b") == ["A", "S"]
    (dead,) = ns.subscription("t", "a").dead_letter_queue.store
    assert dead.envelope.message_id == "S"
    assert (dead.envelope.application_properties or {}).get("DeadLetterReason") == "QuotaExceeded"
