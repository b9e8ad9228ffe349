"""Partitioned entities (seed 002) on the socket-free namespace: every rule, with fragments
taken down through :meth:`Namespace.set_fragment_down`."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker.config import (
    ConfigError,
    EntityProperties,
    NamespaceConfig,
    QueueConfig,
    SubscriptionConfig,
    TopicConfig,
    parse_config,
)
from amqplink.broker.namespace import EntityError, Namespace, Queue
from amqplink.broker.namespace.management import handle_management
from amqplink.broker.namespace.namespace import PartitionedQueue, PartitionedSubscription
from amqplink.broker.namespace.partitioned import PartitionedEntity, Partitions, fragment_of
from amqplink.codec.types import AMQPType, Array, Long, Symbol
from amqplink.message import Message
from tests import profiles
from tests.broker.nsutil import T0, delivered, payload, send

PARTITIONED = EntityProperties(enable_partitioning=True)


def namespace(**props: Any) -> Namespace:
    queue = QueueConfig("pq", EntityProperties(enable_partitioning=True, **props))
    return Namespace(NamespaceConfig(queues=(queue, QueueConfig("plain"))))


def pq(ns: Namespace) -> PartitionedQueue:
    queue = ns.receiver_source("pq")
    assert isinstance(queue, PartitionedQueue)
    return queue


def key_in(partitions: Partitions, index: int, prefix: str = "k", skip: int = 0) -> str:
    """A key that pins to fragment ``index`` (the ``skip``-th such key)."""
    found = (f"{prefix}{n}" for n in itertools.count() if partitions.index(f"{prefix}{n}") == index)
    return next(itertools.islice(found, skip, None))


def refused(condition: str, call: Any, *args: Any, **kwargs: Any) -> EntityError:
    with pytest.raises(EntityError) as info:
        call(*args, **kwargs)
    assert info.value.condition == condition, info.value
    return info.value


def receive_all(entity: PartitionedEntity, now: float = T0, **kwargs: Any) -> list[Any]:
    out = []
    while (msg := entity.receive(now, **kwargs)) is not None:
        out.append(msg)
    return out


# -- configuration -----------------------------------------------------------------------
def test_config_enable_partitioning_count_and_premium_tier() -> None:
    doc = {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "ns",
                    "Queues": [
                        {"Name": "p", "Properties": {"EnablePartitioning": True}},
                        {"Name": "p4", "Properties": {"EnablePartitioning": True, "PartitionCount": 4}},
                        {"Name": "plain"},
                    ],
                    "Topics": [
                        {"Name": "t", "Properties": {"EnablePartitioning": True}, "Subscriptions": [{"Name": "s"}]}
                    ],
                }
            ]
        }
    }
    ns = Namespace(parse_config(doc).namespaces[0])
    assert len(ns.queues["p"].fragments) == 16  # type: ignore[attr-defined]
    assert len(ns.queues["p4"].fragments) == 4  # type: ignore[attr-defined]
    assert type(ns.queues["plain"]) is Queue and ns.queues["plain"].partitions is None
    sub = ns.receiver_source("t/Subscriptions/s")
    assert isinstance(sub, PartitionedSubscription) and sub.partitions is ns.topics["t"].partitions

    doc["UserConfig"]["Namespaces"][0]["Tier"] = "Premium"  # type: ignore[index]
    premium = Namespace(parse_config(doc).namespaces[0])
    assert len(premium.queues["plain"].fragments) == 2  # type: ignore[attr-defined]  # always partitioned
    assert len(premium.queues["p4"].fragments) == 4  # type: ignore[attr-defined]
    bad = {"UserConfig": {"Namespaces": [{"Queues": [{"Name": "q", "Properties": {"PartitionCount": 0}}]}]}}
    with pytest.raises(ConfigError, match=r"Queues\[0\]\.Properties\.PartitionCount"):
        parse_config(bad)
    with pytest.raises(ConfigError, match="Tier"):
        parse_config({"UserConfig": {"Namespaces": [{"Tier": "Gold"}]}})


# -- choosing a fragment -------------------------------------------------------------------
def test_fragment_by_session_id_then_partition_key_then_message_id_with_duplicate_detection() -> None:
    ns = namespace(requires_duplicate_detection=True)
    queue = pq(ns)
    parts = queue.partitions
    send(ns, "pq", session_id="s1", partition_key="s1", message_id="m-a")
    send(ns, "pq", partition_key="pk1", message_id="m-b")
    send(ns, "pq", message_id="m-c")
    by_body = {str(delivered(queue, m).message_id): fragment_of(m.sequence_number) for m in queue.store}
    assert by_body == {"m-a": parts.index("s1"), "m-b": parts.index("pk1"), "m-c": parts.index("m-c")}

    plain_dedup_off = namespace()  # without duplicate detection a MessageId is no key: round robin
    q2 = pq(plain_dedup_off)
    for _ in range(16):
        send(plain_dedup_off, "pq", message_id="same")
    assert sorted(fragment_of(m.sequence_number) for m in q2.store) == list(range(16))


def test_same_key_same_fragment_and_x_opt_partition_key_is_stamped() -> None:
    ns = namespace()
    queue = pq(ns)
    for _ in range(5):
        send(ns, "pq", partition_key="orders-7")
    send(ns, "pq", session_id="sess-9")  # a session id decides, and is the partition key
    frags = [fragment_of(m.sequence_number) for m in queue.store]
    assert sorted(frags) == sorted([queue.partitions.index("orders-7")] * 5 + [queue.partitions.index("sess-9")])
    keys = sorted(delivered(queue, m).message_annotations[Symbol("x-opt-partition-key")] for m in queue.store)
    assert keys == ["orders-7"] * 5 + ["sess-9"]


def test_partition_key_different_from_session_id_is_refused() -> None:
    ns = namespace()
    error = refused("com.microsoft:argument-error", send, ns, "pq", session_id="a", partition_key="b")
    assert "PartitionKey 'b' differs from the SessionId 'a'" in error.description and error.status == 400
    assert len(pq(ns).store) == 0
    send(ns, "pq", session_id="a", partition_key="a")  # equal is fine
    assert len(pq(ns).store) == 1


def test_no_key_round_robin_skips_a_down_fragment_and_the_send_succeeds() -> None:
    ns = namespace()
    queue = pq(ns)
    ns.set_fragment_down("pq", 3)
    for _ in range(30):
        send(ns, "pq")
    counts = [len(queue.fragment(i).store) for i in range(16)]
    assert counts[3] == 0 and sum(counts) == 30 and all(c == 2 for i, c in enumerate(counts) if i != 3)
    ns.set_fragment_down("pq", 3, down=False)
    for _ in range(16):
        send(ns, "pq")
    assert len(queue.fragment(3).store) == 1


def test_a_key_pinned_to_a_down_fragment_fails_retryably_until_it_is_up() -> None:
    ns = namespace()
    queue = pq(ns)
    key = key_in(queue.partitions, 5)
    ns.set_fragment_down("pq", 5)
    error = refused("amqp:internal-error", send, ns, "pq", partition_key=key)
    assert error.status == 500 and "please retry" in error.description and "Fragment 5 of 'pq'" in error.description
    refused("amqp:internal-error", send, ns, "pq", session_id=key)
    send(ns, "pq", partition_key=key_in(queue.partitions, 6))  # other fragments still take keyed sends
    ns.set_fragment_down("pq", 5, down=False)
    send(ns, "pq", partition_key=key)
    assert len(queue.fragment(5).store) == 1


def test_every_fragment_down_refuses_a_keyless_send() -> None:
    ns = namespace(partition_count=2)
    ns.set_fragment_down("pq", 0)
    ns.set_fragment_down("pq", 1)
    refused("amqp:internal-error", send, ns, "pq")


def test_set_fragment_down_errors() -> None:
    ns = namespace()
    refused("amqp:not-allowed", ns.set_fragment_down, "plain", 0)
    refused("amqp:not-found", ns.set_fragment_down, "nope", 0)
    with pytest.raises(IndexError):
        ns.set_fragment_down("pq", 16)


def test_sequence_numbers_carry_the_fragment_in_the_top_16_bits() -> None:
    ns = namespace()
    queue = pq(ns)
    for i in range(16):
        send(ns, "pq", partition_key=key_in(queue.partitions, i))
        send(ns, "pq", partition_key=key_in(queue.partitions, i, skip=1))
    for msg in queue.store:
        wire = delivered(queue, msg).message_annotations
        assert wire[Symbol("x-opt-sequence-number")] == msg.sequence_number
        assert msg.sequence_number >> 48 == fragment_of(msg.sequence_number)
    seqs = sorted(m.sequence_number for m in queue.store)
    assert seqs == [(i << 48) + n for i in range(16) for n in (1, 2)]
    plain = ns.receiver_source("plain")
    send(ns, "plain")
    assert [m.sequence_number for m in plain.store] == [1]  # a plain queue is unchanged


def test_duplicate_detection_is_per_fragment() -> None:
    ns = namespace(requires_duplicate_detection=True)
    queue = pq(ns)
    send(ns, "pq", message_id="m1")
    send(ns, "pq", message_id="m1")  # accepted and dropped
    assert len(queue.store) == 1
    # The key decides the fragment: the same MessageId under two partition keys in two
    # fragments is two messages (each fragment remembers its own ids).
    a, b = key_in(queue.partitions, 1), key_in(queue.partitions, 2)
    send(ns, "pq", message_id="m2", partition_key=a)
    send(ns, "pq", message_id="m2", partition_key=b)
    send(ns, "pq", message_id="m2", partition_key=a)
    assert len(queue.store) == 3
    assert queue.partitions.duplicates is not None
    assert sum(d.dropped for d in queue.partitions.duplicates) == 2  # the copies each fragment dropped


def test_a_batch_goes_to_one_fragment_and_needs_one_key() -> None:
    ns = namespace()
    queue = pq(ns)
    target = ns.sender_target("pq")

    def batch(*messages: Message) -> bytes:
        return Message([m.encode() for m in messages], body_type="data").encode()

    key = key_in(queue.partitions, 7)
    ns.send(target, batch(Message(b"1", partition_key=key), Message(b"2", partition_key=key)), T0, 0x80013700)
    assert len(queue.fragment(7).store) == 2
    error = refused(
        "com.microsoft:argument-error",
        ns.send,
        target,
        batch(Message(b"1", partition_key="x"), Message(b"2", partition_key="y")),
        T0,
        0x80013700,
    )
    assert "distinct SessionId, PartitionKey, or MessageId" in error.description
    assert len(queue.store) == 2
    ns.send(target, batch(Message(b"a"), Message(b"b"), Message(b"c")), T0, 0x80013700)
    assert len(queue.store) == 5


# -- receiving -------------------------------------------------------------------------------
def test_receive_takes_from_every_fragment_fairly_and_skips_a_down_one() -> None:
    ns = namespace(partition_count=4)
    queue = pq(ns)
    for i in range(4):
        for n in range(3):
            send(ns, "pq", body=f"{i}-{n}".encode(), partition_key=key_in(queue.partitions, i))
    first = [fragment_of(queue.receive(T0).sequence_number) for _ in range(4)]  # type: ignore[union-attr]
    assert sorted(first) == [0, 1, 2, 3]  # one from each before any fragment gives a second
    ns.set_fragment_down("pq", 2)
    rest = receive_all(queue)
    assert len(rest) == 6 and all(fragment_of(m.sequence_number) != 2 for m in rest)
    ns.set_fragment_down("pq", 2, down=False)
    again = receive_all(queue)
    assert [fragment_of(m.sequence_number) for m in again] == [2, 2]


def test_receive_wakes_listeners_of_the_whole_entity() -> None:
    ns = namespace()
    woke: list[int] = []
    pq(ns).listeners.append(lambda: woke.append(1))
    send(ns, "pq", partition_key="k")
    send(ns, "pq")
    assert len(woke) == 2


def test_settlement_on_each_fragment() -> None:
    ns = namespace(partition_count=4, max_delivery_count=5)
    queue = pq(ns)
    for i in range(4):
        send(ns, "pq", body=str(i).encode(), partition_key=key_in(queue.partitions, i))
    msgs = {fragment_of(m.sequence_number): m for m in receive_all(queue)}
    assert sorted(msgs) == [0, 1, 2, 3]
    tokens = {i: m.lock_token for i, m in msgs.items()}
    until = queue.renew_lock(tokens[0], T0 + 10)
    assert until == T0 + 10 + queue.properties.lock_duration
    queue.complete(tokens[0], T0 + 11)
    queue.abandon(tokens[1], T0 + 11)
    queue.defer(tokens[2], T0 + 11)
    queue.dead_letter(tokens[3], T0 + 11, "bad", "why")
    assert queue.fragment(0).store.get(msgs[0].sequence_number) is None
    refused("com.microsoft:message-lock-lost", queue.complete, tokens[0], T0 + 12)
    again = queue.receive(T0 + 12)
    assert again is not None and again.sequence_number == msgs[1].sequence_number and again.delivery_count == 2
    (deferred,) = queue.receive_deferred([msgs[2].sequence_number], T0 + 12)
    assert deferred.sequence_number == msgs[2].sequence_number
    (dead,) = receive_all(queue.dead_letter_queue)
    message = delivered(queue.dead_letter_queue, dead)
    assert message.body == b"3" and message.application_properties["DeadLetterReason"] == "bad"
    assert isinstance(queue.dead_letter_queue, PartitionedEntity)


def test_settling_on_a_down_fragment_fails_retryably_and_works_once_up() -> None:
    ns = namespace(partition_count=2)
    queue = pq(ns)
    send(ns, "pq", partition_key=key_in(queue.partitions, 1))
    msg = queue.receive(T0)
    assert msg is not None and msg.lock_token is not None
    ns.set_fragment_down("pq", 1)
    refused("amqp:internal-error", queue.complete, msg.lock_token, T0 + 1)
    refused("amqp:internal-error", queue.renew_lock, msg.lock_token, T0 + 1)
    ns.set_fragment_down("pq", 1, down=False)
    queue.complete(msg.lock_token, T0 + 1)
    assert len(queue.store) == 0


def test_lock_expiry_and_release_reach_the_fragment() -> None:
    ns = namespace(partition_count=2, lock_duration=5)
    queue = pq(ns)
    send(ns, "pq", partition_key=key_in(queue.partitions, 1))
    send(ns, "pq", partition_key=key_in(queue.partitions, 0))
    first, second = queue.receive(T0), queue.receive(T0)
    assert first is not None and second is not None
    queue.release([second.lock_token], T0)  # type: ignore[list-item]
    assert ns.next_deadline() == T0 + 5  # the fragment's lock is on the namespace's clock
    ns.tick(T0 + 6)
    assert {m.delivery_count for m in receive_all(queue, T0 + 6)} == {2}


def test_receive_deferred_routes_by_sequence_number_and_is_all_or_nothing() -> None:
    ns = namespace(partition_count=4)
    queue = pq(ns)
    for i in range(4):
        send(ns, "pq", partition_key=key_in(queue.partitions, i))
    for msg in receive_all(queue):
        queue.defer(msg.lock_token, T0)  # type: ignore[arg-type]
    seqs = sorted(m.sequence_number for m in queue.store)
    refused("com.microsoft:message-not-found", queue.receive_deferred, [*seqs, (3 << 48) + 99], T0)
    refused("com.microsoft:message-not-found", queue.receive_deferred, [(9 << 48) + 1], T0)
    assert all(m.lock_token is None for m in queue.store)  # nothing was taken
    ns.set_fragment_down("pq", 2)
    refused("amqp:internal-error", queue.receive_deferred, seqs, T0)
    ns.set_fragment_down("pq", 2, down=False)
    got = queue.receive_deferred(list(reversed(seqs)), T0)
    assert [m.sequence_number for m in got] == list(reversed(seqs))


def test_peek_reads_one_fragment_at_a_time_so_returns_fewer_than_asked() -> None:
    ns = namespace(partition_count=4)
    queue = pq(ns)
    for i in (1, 3):
        for _ in range(3):
            send(ns, "pq", partition_key=key_in(queue.partitions, i))
    first = queue.peek(0, 10, T0)
    assert len(first) == 3 and {fragment_of(m.sequence_number) for m in first} == {1}
    seen, start = [], 0
    while batch := queue.peek(start, 10, T0):  # callers loop from the last sequence number + 1
        seen += batch
        start = batch[-1].sequence_number + 1
    assert len(seen) == 6 and [fragment_of(m.sequence_number) for m in seen] == [1, 1, 1, 3, 3, 3]
    ns.set_fragment_down("pq", 1)
    assert {fragment_of(m.sequence_number) for m in queue.peek(0, 10, T0)} == {3}


def test_management_requests_on_a_partitioned_queue() -> None:
    ns = namespace(partition_count=4)
    queue = pq(ns)
    for i in range(4):
        send(ns, "pq", partition_key=key_in(queue.partitions, i))

    def call(operation: str, body: dict[str, Any]) -> tuple[int, Any]:
        req = Message(body, application_properties={"operation": "com.microsoft:" + operation}, message_id="r")
        resp = handle_management(ns, "pq/$management", req, T0)
        return resp.application_properties["statusCode"], resp.body  # type: ignore[index]

    code, body = call("peek-message", {"from-sequence-number": Long(0), "message-count": 10})
    assert code == 200 and len(body["messages"]) == 1  # fewer than asked: one fragment's worth
    msgs = receive_all(queue)
    code, _ = call(
        "update-disposition",
        {"lock-tokens": Array([m.lock_token for m in msgs], AMQPType.UUID), "disposition-status": "defered"},
    )
    assert code == 200 and all(m.deferred for m in queue.store)
    code, body = call(
        "receive-by-sequence-number",
        {"sequence-numbers": Array([Long(m.sequence_number) for m in msgs], AMQPType.LONG)},
    )
    assert code == 200 and len(body["messages"]) == 4
    tokens = [item["lock-token"] for item in body["messages"]]
    code, body = call("renew-lock", {"lock-tokens": Array(tokens, AMQPType.UUID)})
    assert code == 200 and len(body["expirations"]) == 4
    ns.set_fragment_down("pq", 0)
    code, _ = call("renew-lock", {"lock-tokens": Array(tokens, AMQPType.UUID)})
    assert code == 500


def test_scheduled_messages_on_a_partitioned_queue() -> None:
    ns = namespace(partition_count=4)
    queue = pq(ns)
    key = key_in(queue.partitions, 2)
    seq = queue.schedule(delivered_envelope(partition_key=key), T0 + 60, T0)
    other = queue.schedule(delivered_envelope(), T0 + 60, T0)
    assert fragment_of(seq) == 2
    queue.cancel_scheduled([other])
    refused("com.microsoft:message-not-found", queue.cancel_scheduled, [other])
    ns.tick(T0 + 61)
    (msg,) = receive_all(queue, T0 + 61)
    assert msg.sequence_number == seq


def delivered_envelope(**friendly: Any) -> Any:
    from amqplink.broker.namespace import split_message

    return split_message(payload(b"s", **friendly))


# -- sessions, dead letters, topics ----------------------------------------------------------
def test_sessions_live_in_their_fragment() -> None:
    ns = namespace(partition_count=4, requires_session=True)
    queue = pq(ns)
    s1, s2 = key_in(queue.partitions, 1, "s"), key_in(queue.partitions, 2, "s")
    for sid in (s1, s2, s1):
        send(ns, "pq", session_id=sid)
    refused("amqp:not-allowed", send, ns, "pq")  # a session entity still needs a session id
    first, second = object(), object()
    taken = queue.accept_session(None, first, T0)
    other = queue.accept_session(None, second, T0)
    assert taken is not None and other is not None and {taken[0], other[0]} == {s1, s2}
    assert queue.accept_session(None, object(), T0) is None  # both sessions are held
    owner_of = {taken[0]: first, other[0]: second}
    msgs = receive_all(queue, session_id=s1, owner=owner_of[s1])
    assert len(msgs) == 2 and all(fragment_of(m.sequence_number) == 1 for m in msgs)
    refused("com.microsoft:session-lock-lost", queue.receive, T0, session_id=s1, owner=object())
    queue.sessions.state[s1] = b"state"
    assert queue.fragment(1).sessions.state == {s1: b"state"} and queue.sessions.state.get(s1) == b"state"
    assert queue.sessions.renew(s1, T0 + 1) == T0 + 1 + queue.properties.lock_duration
    queue.close_session(s2, owner_of[s2], T0)
    assert queue.fragment(2).sessions.is_locked(s2, T0) is False
    ns.set_fragment_down("pq", 2)
    refused("amqp:internal-error", queue.accept_session, s2, object(), T0)
    assert queue.accept_session(None, object(), T0) is None  # s2's fragment is down
    assert queue.receive(T0, session_id=s2) is None
    ns.set_fragment_down("pq", 2, down=False)
    assert queue.accept_session(None, object(), T0) == (s2, T0 + queue.properties.lock_duration)


def test_session_peek_reads_the_sessions_fragment() -> None:
    ns = namespace(partition_count=4, requires_session=True)
    queue = pq(ns)
    s3 = key_in(queue.partitions, 3, "s")
    send(ns, "pq", session_id=key_in(queue.partitions, 0, "s"))
    send(ns, "pq", session_id=s3)
    (msg,) = queue.peek(0, 10, T0, session_id=s3)
    assert msg.session_id == s3


def test_dead_letter_queue_is_partitioned_alike_and_max_delivery_count_reaches_it() -> None:
    ns = namespace(partition_count=4, max_delivery_count=1)
    queue = pq(ns)
    key = key_in(queue.partitions, 2)
    send(ns, "pq", partition_key=key)
    send(ns, "pq")
    for msg in receive_all(queue):
        queue.abandon(msg.lock_token, T0)  # type: ignore[arg-type]
    dlq = ns.receiver_source("pq/$DeadLetterQueue")
    assert isinstance(dlq, PartitionedEntity) and len(dlq.store) == 2
    pinned = [m for m in dlq.store if delivered(dlq, m).message_annotations.get(Symbol("x-opt-partition-key"))]
    assert [fragment_of(m.sequence_number) for m in pinned] == [2]  # a dead letter keeps its fragment
    ns.set_fragment_down("pq", 2)  # the DLQ shares the queue's fragments
    got = receive_all(dlq)
    assert len(got) == 1 and fragment_of(got[0].sequence_number) != 2
    assert len(dlq.store) == 2


def test_partitioned_topic_and_its_subscriptions() -> None:
    topic = TopicConfig(
        "t",
        EntityProperties(enable_partitioning=True, partition_count=4),
        (SubscriptionConfig("a"), SubscriptionConfig("b")),
    )
    ns = Namespace(NamespaceConfig(topics=(topic,)))
    a, b = ns.receiver_source("t/Subscriptions/a"), ns.receiver_source("t/Subscriptions/b")
    assert isinstance(a, PartitionedEntity) and isinstance(b, PartitionedEntity)
    parts = ns.topics["t"].partitions
    assert parts is not None
    key = key_in(parts, 3)
    send(ns, "t", partition_key=key)
    assert [fragment_of(m.sequence_number) for m in a.store] == [3] == [fragment_of(m.sequence_number) for m in b.store]
    refused("com.microsoft:argument-error", send, ns, "t", session_id="x", partition_key="y")
    ns.set_fragment_down("t", 3)
    refused("amqp:internal-error", send, ns, "t", partition_key=key)
    assert a.receive(T0) is None  # its only message is in the down fragment
    for _ in range(6):
        send(ns, "t")
    assert len(a.store) == 7 and len(a.fragment(3).store) == 1 and len(b.fragment(3).store) == 1
    ns.set_fragment_down("t", 3, down=False)
    assert len(receive_all(a)) == 7


def test_duplicate_detection_on_a_partitioned_topic() -> None:
    topic = TopicConfig(
        "t",
        EntityProperties(enable_partitioning=True, requires_duplicate_detection=True),
        (SubscriptionConfig("a"),),
    )
    ns = Namespace(NamespaceConfig(topics=(topic,)))
    for _ in range(3):
        send(ns, "t", message_id=str(uuid.UUID(int=7)))
    assert len(ns.receiver_source("t/Subscriptions/a").store) == 1


def test_scheduling_on_a_partitioned_topic_keeps_the_key_rules() -> None:
    topic = TopicConfig("t", EntityProperties(enable_partitioning=True, partition_count=4), (SubscriptionConfig("a"),))
    ns = Namespace(NamespaceConfig(topics=(topic,)))
    target = ns.sender_target("t")
    parts = ns.topics["t"].partitions
    assert parts is not None
    refused(
        "com.microsoft:argument-error",
        ns.schedule,
        target,
        delivered_envelope(session_id="a", partition_key="b"),
        T0 + 5,
        T0,
    )
    key = key_in(parts, 1)
    ns.set_fragment_down("t", 1)
    refused("amqp:internal-error", ns.schedule, target, delivered_envelope(partition_key=key), T0 + 5, T0)
    ns.set_fragment_down("t", 1, down=False)
    ns.schedule(target, delivered_envelope(session_id=key), T0 + 5, T0)
    ns.tick(T0 + 6)
    sub = ns.receiver_source("t/Subscriptions/a")
    (msg,) = sub.store
    assert fragment_of(msg.sequence_number) == 1
    assert delivered(sub, msg).message_annotations[Symbol("x-opt-partition-key")] == key


def test_a_down_fragment_may_answer_server_busy_instead() -> None:
    ns = namespace(partition_count=2)
    key = key_in(pq(ns).partitions, 0)
    ns.set_fragment_down("pq", 0, condition="com.microsoft:server-busy")
    assert refused("com.microsoft:server-busy", send, ns, "pq", partition_key=key).status == 503
    with pytest.raises(ValueError, match="server-busy"):
        ns.set_fragment_down("pq", 0, condition="amqp:not-found")


def test_the_store_of_a_partitioned_entity_is_its_fragments() -> None:
    ns = namespace(partition_count=2)
    queue = pq(ns)
    for _ in range(3):
        send(ns, "pq")
    assert len(queue.store) == 3 == sum(len(f.store) for f in queue.fragments)
    seq = next(iter(queue.store)).sequence_number
    assert queue.store.get(seq) is queue.fragment(fragment_of(seq)).store.get(seq)
    assert queue.bytes == sum(f.bytes for f in queue.fragments) > 0
    with pytest.raises(TypeError, match="each of its fragments"):
        queue.store = queue.fragment(0).store  # a durable store goes under each fragment instead


@settings(profiles.HEAVY, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("send"), st.one_of(st.none(), st.sampled_from(["a", "b", "c", "d", "e"]))),
            st.tuples(st.just("down"), st.integers(0, 3)),
            st.tuples(st.just("up"), st.integers(0, 3)),
        ),
        max_size=40,
    )
)
def test_every_accepted_send_is_received_once_from_where_the_rules_put_it(steps: list[tuple[str, Any]]) -> None:
    ns = namespace(partition_count=4)
    queue = pq(ns)
    accepted: dict[int, str | None] = {}
    for n, (op, arg) in enumerate(steps):
        if op in ("down", "up"):
            ns.set_fragment_down("pq", arg, down=op == "down")
            continue
        down = list(queue.partitions.down)
        try:
            send(ns, "pq", body=str(n).encode(), partition_key=arg)
        except EntityError as exc:
            assert exc.condition == "amqp:internal-error"
            assert (arg is not None and down[queue.partitions.index(arg)]) or all(down)
            continue
        accepted[n] = arg
        (where,) = [m for m in queue.store if delivered(queue, m).body == str(n).encode()]
        fragment = fragment_of(where.sequence_number)
        assert not down[fragment]
        assert arg is None or fragment == queue.partitions.index(arg)
    for i in range(4):
        ns.set_fragment_down("pq", i, down=False)
    got = sorted(int(delivered(queue, m).body) for m in receive_all(queue))
    assert got == sorted(accepted)


@given(
    down=st.lists(st.booleans(), min_size=1, max_size=8),
    start=st.integers(min_value=0, max_value=7),
    turns=st.integers(min_value=1, max_value=20),
)
def test_round_robin_takes_the_next_fragment_that_is_up(down: list[bool], start: int, turns: int) -> None:
    """The next fragment up from where the last pick left off; when every fragment is down,
    the next one in turn (the broker's own moves)."""
    partitions = Partitions("q", len(down))
    partitions.down = list(down)
    partitions._next = expected_next = start % len(down)
    count = len(down)
    for _ in range(turns):
        up = [i % count for i in range(expected_next, expected_next + count) if not down[i % count]]
        expected = up[0] if up else expected_next
        assert partitions.round_robin() == expected
        expected_next = (expected + 1) % count
