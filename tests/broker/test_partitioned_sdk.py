"""A partitioned queue from a Config.json, seen by the official azure-servicebus SDK
(unchanged) and by amqplink's own asyncio client, with fragments taken down through
:meth:`Namespace.set_fragment_down`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import ServiceBusError

from amqplink.aio import connect
from amqplink.aio.errors import MessageRejected
from amqplink.broker import Broker
from amqplink.broker.config import parse_config
from amqplink.broker.namespace.partitioned import PartitionedEntity, fragment_of
from amqplink.message import Message
from tests.broker.sdkutil import running_broker

CONFIG = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "sbemulatorns",
                "Queues": [
                    {"Name": f"p{i}", "Properties": {"EnablePartitioning": True, "PartitionCount": 4}} for i in range(6)
                ]
                + [
                    {
                        "Name": "psessions",
                        "Properties": {"EnablePartitioning": True, "RequiresSession": True, "LockDuration": "PT5S"},
                    }
                ],
                "Topics": [
                    {
                        "Name": "ptopic",
                        "Properties": {"EnablePartitioning": True, "PartitionCount": 4},
                        "Subscriptions": [{"Name": "s"}],
                    }
                ],
            }
        ]
    }
}


@pytest.fixture()
def client(broker: Broker) -> Iterator[ServiceBusClient]:
    sdk = ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0)  # refusals surface at once
    with sdk:
        yield sdk


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with running_broker(parse_config(CONFIG)) as b:
        yield b


def entity(broker: Broker, name: str) -> PartitionedEntity:
    found = broker.namespace.receiver_source(name)
    assert isinstance(found, PartitionedEntity)
    return found


def key_in(broker: Broker, name: str, index: int, prefix: str = "k") -> str:
    parts = entity(broker, name).partitions
    return next(f"{prefix}{n}" for n in range(10_000) if parts.index(f"{prefix}{n}") == index)


def receive_n(receiver: Any, n: int, wait: float = 10) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + wait
    while len(out) < n and time.monotonic() < deadline:
        out += receiver.receive_messages(max_message_count=n - len(out), max_wait_time=1)
    return out


def test_send_with_partition_key_and_session_id_receive_complete(client: ServiceBusClient, broker: Broker) -> None:
    keys = [key_in(broker, "p0", i) for i in range(4)]
    with client.get_queue_sender("p0") as sender:
        for i, k in enumerate(keys):
            sender.send_messages(ServiceBusMessage(f"m{i}", partition_key=k))
        sender.send_messages(ServiceBusMessage("keyless"))
    with client.get_queue_receiver("p0") as receiver:
        got = receive_n(receiver, 5)
        assert len(got) == 5
        by_body = {str(m): m for m in got}
        for i, k in enumerate(keys):
            msg = by_body[f"m{i}"]
            assert msg.partition_key == k and msg.sequence_number >> 48 == i
        for msg in got:
            receiver.complete_message(msg)
    assert len(entity(broker, "p0").store) == 0


def test_peek_returns_one_fragment_at_a_time_and_a_loop_gets_all(client: ServiceBusClient, broker: Broker) -> None:
    with client.get_queue_sender("p1") as sender:
        for i in (0, 2):
            key = key_in(broker, "p1", i)
            for n in range(3):
                sender.send_messages(ServiceBusMessage(f"{i}-{n}", partition_key=key))
    with client.get_queue_receiver("p1") as receiver:
        first = receiver.peek_messages(max_message_count=10)
        assert len(first) == 3  # fewer than asked, though 6 are there
        seen = list(first)
        while batch := receiver.peek_messages(max_message_count=10):  # the SDK goes on from the last + 1
            seen += batch
        assert [str(m) for m in seen] == ["0-0", "0-1", "0-2", "2-0", "2-1", "2-2"]


def test_defer_then_receive_deferred_by_sequence_number(client: ServiceBusClient, broker: Broker) -> None:
    with client.get_queue_sender("p2") as sender:
        for i in range(4):
            sender.send_messages(ServiceBusMessage(f"d{i}", partition_key=key_in(broker, "p2", i)))
    with client.get_queue_receiver("p2") as receiver:
        got = receive_n(receiver, 4)
        seqs = sorted(m.sequence_number for m in got)
        assert sorted(s >> 48 for s in seqs) == [0, 1, 2, 3]
        for msg in got:
            receiver.defer_message(msg)
        deferred = receiver.receive_deferred_messages(sequence_numbers=seqs)
        assert sorted(m.sequence_number for m in deferred) == seqs
        for msg in deferred:
            receiver.complete_message(msg)
    assert len(entity(broker, "p2").store) == 0


def test_sessions_on_a_partitioned_queue(client: ServiceBusClient, broker: Broker) -> None:
    sessions = [key_in(broker, "psessions", i, "s") for i in (1, 3)]
    with client.get_queue_sender("psessions") as sender:
        for sid in sessions:
            for n in range(2):
                sender.send_messages(ServiceBusMessage(f"{sid}-{n}", session_id=sid))
    for sid in sessions:
        with client.get_queue_receiver("psessions", session_id=sid) as receiver:
            got = receive_n(receiver, 2)
            assert [str(m) for m in got] == [f"{sid}-0", f"{sid}-1"]
            assert all(m.session_id == sid and m.partition_key == sid for m in got)
            receiver.session.set_state(b"here")
            assert receiver.session.get_state() == b"here"
            for msg in got:
                receiver.complete_message(msg)
    assert len(entity(broker, "psessions").store) == 0


def test_a_down_fragment_a_keyless_send_succeeds_a_pinned_one_fails(client: ServiceBusClient, broker: Broker) -> None:
    key = key_in(broker, "p3", 1)
    broker.namespace.set_fragment_down("p3", 1)
    try:
        with client.get_queue_sender("p3") as sender:
            for n in range(8):
                sender.send_messages(ServiceBusMessage(f"free{n}"))
            with pytest.raises(ServiceBusError) as info:
                sender.send_messages(ServiceBusMessage("pinned", partition_key=key))
            assert "please retry" in str(info.value)
        queue = entity(broker, "p3")
        assert len(queue.store) == 8 and len(queue.fragment(1).store) == 0
    finally:
        broker.namespace.set_fragment_down("p3", 1, down=False)
    with client.get_queue_sender("p3") as sender:
        sender.send_messages(ServiceBusMessage("pinned", partition_key=key))
    assert len(entity(broker, "p3").fragment(1).store) == 1


async def test_amqplink_client_sees_the_refusals_with_their_conditions(broker: Broker) -> None:
    conn = await connect(broker.url)
    try:
        sender = await conn.create_sender("p4")
        with pytest.raises(MessageRejected) as mismatch:
            await sender.send(Message(b"x", session_id="a", partition_key="b"), timeout=10)
        assert mismatch.value.condition == "com.microsoft:argument-error"
        key = key_in(broker, "p4", 2)
        broker.namespace.set_fragment_down("p4", 2)
        try:
            with pytest.raises(MessageRejected) as down:
                await sender.send(Message(b"x", partition_key=key), timeout=10)
            assert down.value.condition == "amqp:internal-error"
            await sender.send(Message(b"keyless"), timeout=10)
        finally:
            broker.namespace.set_fragment_down("p4", 2, down=False)
        await sender.send(Message(b"pinned", partition_key=key), timeout=10)
        receiver = await conn.create_receiver("p4", prefetch=10)
        got = await receiver.receive(2, timeout=10)
        assert sorted(bytes(m.body) for m in got) == [b"keyless", b"pinned"]
        pinned = next(m for m in got if bytes(m.body) == b"pinned")
        assert fragment_of(pinned.message_annotations["x-opt-sequence-number"]) == 2
        for m in got:
            await receiver.accept(m)
    finally:
        await conn.close()


def test_partitioned_topic_subscription_and_its_dead_letter_queue(client: ServiceBusClient, broker: Broker) -> None:
    parts = broker.namespace.topics["ptopic"].partitions
    assert parts is not None
    key = next(f"t{n}" for n in range(1000) if parts.index(f"t{n}") == 3)
    with client.get_topic_sender("ptopic") as sender:
        sender.send_messages(ServiceBusMessage("keyed", partition_key=key))
        sender.send_messages(ServiceBusMessage("keyless"))
    with client.get_subscription_receiver("ptopic", "s") as receiver:
        got = {str(m): m for m in receive_n(receiver, 2)}
        assert sorted(got) == ["keyed", "keyless"] and got["keyed"].sequence_number >> 48 == 3
        receiver.complete_message(got["keyless"])
        receiver.dead_letter_message(got["keyed"], reason="testing", error_description="partitioned DLQ")
    with client.get_subscription_receiver("ptopic", "s", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        (dead,) = receive_n(dlq, 1)
        assert str(dead) == "keyed" and dead.dead_letter_reason == "testing" and dead.partition_key == key
        assert dead.sequence_number >> 48 == 3  # it kept its fragment
        dlq.complete_message(dead)
    assert len(entity(broker, "ptopic/Subscriptions/s").store) == 0
