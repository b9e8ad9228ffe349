"""A scheduled message come due is never dropped (issue 30: "an acknowledgement is a promise").

Its send was acknowledged when it was scheduled, so when it comes due the clock places each
copy on its own: in its subscription (or forward destination), else in that entity's
dead-letter queue, else it is held back, for that subscription (that entity) alone, and
tried again on a later tick, the wait doubling (:mod:`amqplink.broker.namespace.clock`). On
a durable namespace a copy held back survives a restart as the scheduled message did."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from amqplink.broker.config import EntityProperties, NamespaceConfig, QueueConfig, SubscriptionConfig, TopicConfig
from amqplink.broker.durable import Persistence
from amqplink.broker.namespace import Entity, EntityError, Namespace
from amqplink.broker.namespace.envelope import split_message
from amqplink.broker.namespace.nodes import HELD_FOR, Topic
from amqplink.codec.types import Timestamp
from tests.broker.nsutil import T0, payload, send
from tests.broker.nsutil import committed as _committed

SCHEDULED = "x-opt-scheduled-enqueue-time"
ONE = EntityProperties(max_messages=1)
"""Room for one message (its dead-letter queue too: it shares the entity's properties)."""


def topic_config(cap: EntityProperties = ONE) -> NamespaceConfig:
    return NamespaceConfig(
        topics=(TopicConfig("t", subscriptions=(SubscriptionConfig("full", cap), SubscriptionConfig("roomy"))),)
    )


def fill(entity: Entity, now: float, mid: str) -> None:
    """Fill ``entity`` (and nothing else) to its count limit."""
    while len(entity.store) < entity.properties.max_messages:
        entity.accept(split_message(payload(b"filler", message_id=mid)), now)


def ids(entity: Entity) -> list[str]:
    return [m.envelope.message_id for m in entity.store]


def schedule_x(ns: Namespace, address: str, at: float, now: float = T0) -> None:
    send(ns, address, now, message_id="X", message_annotations={SCHEDULED: Timestamp(int(at * 1000))})


def entity(ns: Namespace, address: str) -> Entity:
    target = ns.resolve(address).target
    assert isinstance(target, Entity)
    return target


def topic(ns: Namespace) -> Topic:
    target = ns.resolve("t").target
    assert isinstance(target, Topic)
    return target


def test_a_copy_neither_its_subscription_nor_its_dead_letter_queue_takes_is_held_back_then_delivered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ns = Namespace(topic_config())
    full, roomy = entity(ns, "t/Subscriptions/full"), entity(ns, "t/Subscriptions/roomy")
    schedule_x(ns, "t", T0 + 10)  # (a send scheduled for later needs room in the subscription as it is sent)
    fill(full, T0, "old")
    fill(full.dead_letter_queue, T0, "dead")  # type: ignore[attr-defined]
    with caplog.at_level(logging.DEBUG, "amqplink.broker.namespace"):
        ns.tick(T0 + 11)
        for second in range(12, 40):  # refused on every try: still held back, warned of once
            ns.tick(T0 + second)
    assert ids(roomy) == ["X"]  # the other subscription got its copy at once
    assert "X" not in ids(full) + ids(full.dead_letter_queue)  # type: ignore[attr-defined]
    assert topic(ns).scheduled_count == 1  # held back, still counted in the schedule
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "held back" in warned[0]  # once, not on every try
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    full.receive(T0 + 40, lock=False)  # room made
    ns.tick(T0 + 40 + 60)  # (the wait backs off to a minute at most)
    assert ids(full) == ["X"] and ids(roomy) == ["X"]  # delivered once room is made; not fanned out again
    assert [m.envelope.annotations.get(HELD_FOR) for m in full.store] == [None]  # placed as it was sent
    assert topic(ns).scheduled_count == 0


def test_a_copy_held_back_goes_to_the_dead_letter_queue_if_room_is_made_there_first() -> None:
    ns = Namespace(topic_config())
    full = entity(ns, "t/Subscriptions/full")
    dlq = full.dead_letter_queue  # type: ignore[attr-defined]
    schedule_x(ns, "t", T0 + 10)
    fill(full, T0, "old")
    fill(dlq, T0, "dead")
    ns.tick(T0 + 11)
    dlq.receive(T0 + 12, lock=False)
    ns.tick(T0 + 13)
    assert ids(dlq) == ["X"] and topic(ns).scheduled_count == 0


def test_the_retries_back_off() -> None:
    ns = Namespace(topic_config())
    full = entity(ns, "t/Subscriptions/full")
    schedule_x(ns, "t", T0 + 10)  # (a send scheduled for later needs room in the subscription as it is sent)
    fill(full, T0, "old")
    fill(full.dead_letter_queue, T0, "dead")  # type: ignore[attr-defined]
    ns.tick(T0 + 10)
    deadlines = []
    for _ in range(10):
        deadlines.append(ns.next_deadline() - (T0 + 10))
        ns.tick(ns.next_deadline())
    assert deadlines == [1, 2, 4, 8, 16, 32, 64, 124, 184, 244]  # doubling, a minute at most


def test_deleting_the_subscription_drops_its_copies_held_back() -> None:
    ns = Namespace(topic_config())
    full = entity(ns, "t/Subscriptions/full")
    schedule_x(ns, "t", T0 + 10)  # (a send scheduled for later needs room in the subscription as it is sent)
    fill(full, T0, "old")
    fill(full.dead_letter_queue, T0, "dead")  # type: ignore[attr-defined]
    ns.tick(T0 + 11)
    assert topic(ns).scheduled_count == 1
    ns.delete_subscription("t", "full")
    assert topic(ns).scheduled_count == 0


def test_a_forward_its_destination_and_the_dead_letter_queue_refuse_stays_in_the_entity() -> None:
    """``_forward_held`` took the messages come due with a receive-and-delete: when the
    forward and the dead-letter queue both refused they were gone from the entity."""
    ns = Namespace(
        NamespaceConfig(
            queues=(QueueConfig("src", EntityProperties(forward_to="dst", max_messages=2)), QueueConfig("dst", ONE))
        )
    )
    src, dst = entity(ns, "src"), entity(ns, "dst")
    fill(dst, T0, "resident")
    fill(src.dead_letter_queue, T0, "dead")  # type: ignore[attr-defined]
    schedule_x(ns, "src", T0 + 10)
    for second in range(11, 30):
        ns.tick(T0 + second)
    assert ids(src) == ["X"] and ids(dst) == ["resident"]
    dst.receive(T0 + 30, lock=False)
    ns.tick(T0 + 30 + 60)
    assert ids(dst) == ["X"] and ids(src) == []


async def test_a_copy_held_back_survives_a_restart(tmp_path: Path) -> None:
    now = time.time()
    store = Persistence(tmp_path, fsync=False)
    ns = Namespace(topic_config())
    store.attach(ns)
    full = entity(ns, "t/Subscriptions/full")
    schedule_x(ns, "t", now + 10, now)
    send(ns, "t", now, message_id="old0")  # the subscription full, then its dead-letter queue
    msg = full.receive(now)
    assert msg is not None and msg.lock is not None
    full.dead_letter(msg.lock, now)
    send(ns, "t", now, message_id="old1")
    entity(ns, "t/Subscriptions/roomy").receive_many(now, 2, lock=False)
    assert len(full.store) == 1 and len(full.dead_letter_queue.store) == 1  # type: ignore[attr-defined]
    ns.tick(now + 11)
    assert topic(ns).scheduled_count == 1
    await _committed(store)
    await store.close()

    store = Persistence(tmp_path, fsync=False)
    ns = Namespace(topic_config())
    store.attach(ns)
    full, roomy = entity(ns, "t/Subscriptions/full"), entity(ns, "t/Subscriptions/roomy")
    assert topic(ns).scheduled_count == 1 and ids(roomy) == ["X"]
    full.receive(now + 12, lock=False)
    ns.tick(now + 12 + 60)
    assert "X" in ids(full) and ids(roomy) == ["X"]
    assert topic(ns).scheduled_count == 0
    await _committed(store)
    await store.close()

    store = Persistence(tmp_path, fsync=False)  # placed: not held back again after a restart
    ns = Namespace(topic_config())
    store.attach(ns)
    assert topic(ns).scheduled_count == 0 and "X" in ids(entity(ns, "t/Subscriptions/full"))
    await store.close()


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("schedule"), st.integers(1, 5)),
        st.tuples(st.just("tick"), st.integers(0, 90)),
        st.tuples(st.just("receive"), st.sampled_from(["a", "b", "a/$DeadLetterQueue", "b/$DeadLetterQueue"])),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(OPS, st.integers(1, 3), st.integers(1, 3))
@example(ops=[("schedule", 1)] * 7, cap_a=1, cap_b=1)  # more held back than three rounds place
def test_every_copy_come_due_is_somewhere_exactly_once(ops: list[tuple[str, object]], cap_a: int, cap_b: int) -> None:
    """The model: each subscription takes one copy of every scheduled message come due, so
    what it handed out, holds, holds dead-lettered and holds back is that many copies, no
    more, no fewer; and once there is room everywhere, nothing stays held back."""
    ns = Namespace(
        NamespaceConfig(
            topics=(
                TopicConfig(
                    "t",
                    EntityProperties(max_messages=1000),
                    subscriptions=(
                        SubscriptionConfig("a", EntityProperties(max_messages=cap_a)),
                        SubscriptionConfig("b", EntityProperties(max_messages=cap_b)),
                    ),
                ),
            )
        )
    )
    t = topic(ns)
    now, at_most = T0, T0
    sent: list[float] = []
    taken = {"a": 0, "b": 0}
    for i, (op, arg) in enumerate(ops):
        if op == "schedule":
            at = now + float(arg)  # type: ignore[arg-type]
            try:
                send(ns, "t", now, message_id=f"m{i}", message_annotations={SCHEDULED: Timestamp(int(at * 1000))})
            except EntityError:
                continue  # refused to its sender (a subscription without room): not acknowledged
            sent.append(at)
            at_most = max(at_most, at)
        elif op == "tick":
            now += float(arg)  # type: ignore[arg-type]
            ns.tick(now)
        else:
            if entity(ns, f"t/Subscriptions/{arg}").receive(now, lock=False) is not None:
                taken[str(arg)[0]] += 1
        for name in ("a", "b"):
            sub = entity(ns, f"t/Subscriptions/{name}")
            held = len(t.held_for(name))
            kept = len(sub.store) + len(sub.dead_letter_queue.store)  # type: ignore[attr-defined]
            due = sum(1 for at in sent if at <= now)
            assert taken[name] + kept + held == due, (name, taken, kept, held, due)
    for name in ("a", "b"):  # room everywhere: each copy held back is placed
        for address in (f"t/Subscriptions/{name}", f"t/Subscriptions/{name}/$DeadLetterQueue"):
            e = entity(ns, address)
            while e.receive(now, lock=False) is not None:
                taken[name] += 1
    now = max(now, at_most) + 1000
    # each round places at least one copy per subscription that has some held back (its room,
    # emptied each round, is at least one; a held copy's wait is at most 60 s): one round for
    # the messages still scheduled to come due, then at most one per message
    for _ in range(len(sent) + 1):
        ns.tick(now)
        now += 60
        for name in ("a", "b"):
            for address in (f"t/Subscriptions/{name}", f"t/Subscriptions/{name}/$DeadLetterQueue"):
                e = entity(ns, address)
                while e.receive(now, lock=False) is not None:
                    taken[name] += 1
    assert t.scheduled_count == 0
    assert taken == {"a": len(sent), "b": len(sent)}
