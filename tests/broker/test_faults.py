"""Fault injection through ``broker.faults``: what amqplink's asyncio client sees for each fault."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from amqplink.aio import Connection, Sender, connect
from amqplink.aio.errors import ConnectionClosedError, LinkDetachedError, MessageRejected
from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig, EntityProperties, NamespaceConfig, QueueConfig, parse_config
from amqplink.broker.faults import (
    CONNECTION_FORCED,
    DETACH_FORCED,
    INTERNAL_ERROR,
    SERVER_BUSY,
    FaultError,
    FaultKind,
)
from amqplink.broker.namespace import EntityError
from amqplink.codec.types import Symbol
from amqplink.message import Message
from amqplink.protocol.definitions import Accepted, Rejected
from tests.broker.nsutil import T0, send
from tests.broker.test_namespace import session_ns
from tests.broker.test_partitioned import key_in, pq


def stored(broker: Broker, path: str) -> int:
    return len(broker.namespace.receiver_source(path).store)


async def refusal(sender: Sender) -> str | None:
    """The condition the next send on ``sender`` is refused with."""
    with pytest.raises(MessageRejected) as refused:
        await sender.send(Message(b"refused"))
    assert "(fault injected)" in str(refused.value)
    return refused.value.condition


async def sending(broker: Broker) -> tuple[Connection, Sender]:
    """A connection with a sender to ``q`` that has sent one message."""
    conn = await connect(broker.url)
    sender = await conn.create_sender("q")
    await sender.send(Message(b"first"))
    return conn, sender


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait (yielding to the loop) until ``condition()`` holds; fail after ``timeout`` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "the condition did not hold in time"
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("condition", [SERVER_BUSY, INTERNAL_ERROR])
async def test_entity_unavailable_refuses_sends_until_cleared(condition: str) -> None:
    async with Broker(servicebus=True) as broker:
        conn = await connect(broker.url)
        try:
            sender = await conn.create_sender("q")
            fault = broker.faults.entity_unavailable("Q", condition=condition)
            assert await refusal(sender) == condition
            assert fault.fired == 1 and fault.fired_event.is_set()
            assert [r.what for r in broker.faults.history] == ["refused a send to 'q'"]
            assert stored(broker, "q") == 0
            assert broker.faults.clear(fault) and not fault.active
            await sender.send(Message(b"taken"))  # the same link goes on
            assert stored(broker, "q") == 1
            assert not broker.faults.clear(fault)
        finally:
            await conn.close()


async def test_a_fault_ends_after_its_duration() -> None:
    async with Broker(servicebus=True) as broker:
        assert broker.servicebus is not None
        fault = broker.faults.entity_unavailable("q", duration=30)
        broker.faults.tick(broker.servicebus.clock() + 29)
        assert fault.active
        broker.faults.tick(broker.servicebus.clock() + 31)
        assert not fault.active and broker.faults.active == []
        conn = await connect(broker.url)
        try:
            await (await conn.create_sender("q")).send(Message(b"after"))
        finally:
            await conn.close()


async def test_fragment_of_a_plain_entity_is_the_entity() -> None:
    async with Broker(servicebus=True) as broker:
        broker.namespace.sender_target("q")  # made on first use
        changes: list[tuple[str, int, bool]] = []
        broker.faults.fragment_listeners.append(lambda *change: changes.append(change))
        with pytest.raises(FaultError, match="'q' has 1 fragment"):
            broker.faults.fragment_unavailable("q", 1)
        fault = broker.faults.fragment_unavailable("q", 0)
        assert broker.faults.fragment_down("q", 0)
        conn = await connect(broker.url)
        try:
            sender = await conn.create_sender("q")
            assert await refusal(sender) == SERVER_BUSY
            broker.faults.clear_all()
            await sender.send(Message(b"y"))
        finally:
            await conn.close()
        assert changes == [("q", 0, True), ("q", 0, False)]
        assert fault.fired == 1


async def test_fragment_of_a_partitioned_queue() -> None:
    config = BrokerConfig((NamespaceConfig(queues=(QueueConfig("pq", EntityProperties(enable_partitioning=True)),)),))
    async with Broker(config) as broker:
        queue = pq(broker.namespace)
        key = key_in(queue.partitions, 5)
        with pytest.raises(FaultError, match="'pq' has 16 fragment"):
            broker.faults.fragment_unavailable("pq", 16)
        fault = broker.faults.fragment_unavailable("PQ", 5, duration=60)
        assert queue.partitions.is_down(5) and broker.faults.unavailable == {}
        conn = await connect(broker.url)
        try:
            sender = await conn.create_sender("pq")
            with pytest.raises(MessageRejected) as refused:
                await sender.send(Message(b"pinned", partition_key=key))
            assert refused.value.condition == SERVER_BUSY  # the fault's condition, retryable
            assert fault.fired == 1
            await sender.send(Message(b"no key"))  # round robin skips fragment 5
            assert len(queue.fragment(5).store) == 0
            broker.faults.tick(fault.until)  # its duration ran out
            assert not queue.partitions.is_down(5) and not fault.active
            assert queue.partitions.on_refused is None
            await sender.send(Message(b"pinned", partition_key=key))
            assert len(queue.fragment(5).store) == 1
        finally:
            await conn.close()


async def test_refused_connections_get_connection_forced() -> None:
    async with Broker(servicebus=True) as broker:
        fault = broker.faults.refuse_connections()
        with pytest.raises(ConnectionClosedError) as closed:
            conn = await connect(broker.url)
            await conn.create_sender("q")
        assert closed.value.condition == CONNECTION_FORCED
        assert fault.fired == 1
        broker.faults.clear(fault)
        conn = await connect(broker.url)
        await (await conn.create_sender("q")).send(Message(b"back"))
        await conn.close()


async def test_closed_connections_get_connection_forced_and_their_locks_are_held() -> None:
    async with Broker(servicebus=True) as broker:
        conn, sender = await sending(broker)
        receiver = await conn.create_receiver("q", prefetch=1)
        (msg,) = await receiver.receive(1, timeout=10)
        entity = broker.namespace.receiver_source("q")
        fault = broker.faults.close_connections()
        assert fault.fired == 1 and not fault.active
        with pytest.raises(ConnectionClosedError) as closed:
            await sender.send(Message(b"after"))
        assert closed.value.condition == CONNECTION_FORCED
        assert broker.servicebus is not None
        await until(lambda: not broker.servicebus.connections)  # type: ignore[union-attr]
        (msg,) = list(entity.store)
        # as Service Bus: the lock is held until it expires (its token settles it over $management)
        assert msg.delivery_count == 1 and msg.state.value == "locked" and entity.holds_lock(msg.lock_token)


async def test_detach_links_of_one_entity() -> None:
    async with Broker(servicebus=True) as broker:
        conn = await connect(broker.url)
        try:
            q, other = await conn.create_sender("q"), await conn.create_sender("other")
            receiver = await conn.create_receiver("Q", prefetch=1)
            fault = broker.faults.detach_links("q")
            assert fault.fired == 2  # q's sender and receiver
            with pytest.raises(LinkDetachedError) as detached:
                await q.send(Message(b"x"))
            assert detached.value.condition == DETACH_FORCED
            with pytest.raises(LinkDetachedError):
                await receiver.receive(1, timeout=10)
            await other.send(Message(b"still attached"))
            q2 = await conn.create_sender("q")  # attaching again works
            await q2.send(Message(b"again"))
            assert broker.faults.detach_links().fired == 2  # every entity link: q2 and other
        finally:
            await conn.close()


async def test_drop_connections_at_once() -> None:
    async with Broker(servicebus=True) as broker:
        conn = await connect(broker.url)
        sender = await conn.create_sender("q")
        fault = broker.faults.drop_connections()
        assert fault.fired == 1
        with pytest.raises(ConnectionClosedError):
            await sender.send(Message(b"x"))
        assert broker.faults.active == []


async def test_drop_a_consumer_mid_transfer_after_n_bytes() -> None:
    async with Broker(servicebus=True) as broker:
        consumer = await connect(broker.url)
        receiver = await consumer.create_receiver("q", prefetch=10)
        fault = broker.faults.drop_connections(after_bytes=100)
        producer = await connect(broker.url)  # opened after: not dropped
        try:
            await (await producer.create_sender("q")).send(Message(b"x" * 1000, message_id="m"))
            with pytest.raises(ConnectionClosedError):
                await receiver.receive(1, timeout=10)
            assert fault.fired == 1 and not fault.active
            entity = broker.namespace.receiver_source("q")
            await until(lambda: len(broker.servicebus.connections) == 1)  # type: ignore[union-attr]
            (msg,) = list(entity.store)
            # the socket died with the delivery: its lock is held to expiry, its token still settles it (as Service Bus)
            assert msg.delivery_count == 1 and msg.state.value == "locked" and entity.holds_lock(msg.lock_token)
        finally:
            await producer.close()


async def test_drop_a_producer_after_n_frames() -> None:
    async with Broker(servicebus=True) as broker:
        _, sender = await sending(broker)
        fault = broker.faults.drop_connections(after_frames=0)
        with pytest.raises(ConnectionClosedError):
            await sender.send(Message(b"second"))  # stored, but its disposition never goes out
        assert fault.fired == 1
        assert stored(broker, "q") == 2


async def test_delay_dispositions() -> None:
    async with Broker(servicebus=True) as broker:
        conn = await connect(broker.url)
        loop = asyncio.get_running_loop()
        try:
            sender = await conn.create_sender("q")
            await sender.send(Message(b"warm"))
            fault = broker.faults.delay_dispositions(300, entity="q")
            started = loop.time()
            await sender.send(Message(b"slow"))
            assert loop.time() - started >= 0.3
            receiver = await conn.create_receiver("q", prefetch=2)
            messages = await receiver.receive(2, timeout=10)
            started = loop.time()
            await receiver.accept(*messages)
            assert loop.time() - started >= 0.3
            assert isinstance(messages[0]._delivery.remote_state, Accepted)  # type: ignore[union-attr]
            assert fault.fired == 3 and stored(broker, "q") == 0
        finally:
            await conn.close()


async def test_expire_every_lock_now() -> None:
    async with Broker(servicebus=True) as broker:
        conn = await connect(broker.url)
        try:
            sender = await conn.create_sender("q")
            await sender.send(Message(b"one"))
            receiver = await conn.create_receiver("q", prefetch=1)
            (first,) = await receiver.receive(1, timeout=10)
            fault = broker.faults.expire_locks()
            assert fault.fired == 1
            # The message is available again: the same receiver gets it once more.
            (again,) = await receiver.receive(1, timeout=10)
            assert again.delivery_tag != first.delivery_tag
            await receiver.accept(first)
            state = first._delivery.remote_state  # type: ignore[union-attr]
            assert isinstance(state, Rejected) and state.error is not None
            assert state.error.condition == Symbol("com.microsoft:message-lock-lost")
            await receiver.accept(again)
            assert isinstance(again._delivery.remote_state, Accepted)  # type: ignore[union-attr]
            assert uuid.UUID(bytes_le=again.delivery_tag)  # type: ignore[arg-type]
        finally:
            await conn.close()


def test_inject_spells_faults_as_control_does() -> None:
    broker = Broker(servicebus=True)
    faults = broker.faults
    with pytest.raises(FaultError, match="unknown fault 'explode': expected one of entity-unavailable"):
        faults.inject({"fault": "explode"})
    with pytest.raises(FaultError, match="refuse-connections does not take entity"):
        faults.inject({"fault": "refuse-connections", "entity": "q"})
    with pytest.raises(FaultError, match=r"com\.microsoft:server-busy or amqp:internal-error"):
        faults.inject({"fault": "entity-unavailable", "entity": "q", "condition": "amqp:not-found"})
    with pytest.raises(FaultError, match="delay-ms is a number from 1"):
        faults.inject({"fault": "delay-dispositions", "delay-ms": 0})
    fault = faults.inject({"fault": "delay-dispositions", "delay-ms": 250, "duration": 5})
    assert fault.kind is FaultKind.DELAY_DISPOSITIONS and fault.delay == 0.25
    assert fault.describe()["delay-ms"] == 250 and faults.active == [fault]
    assert faults.clear_all() == 1 and faults.active == []


def test_expire_locks_ends_message_and_session_locks_in_the_model() -> None:
    namespace = session_ns()
    send(namespace, "s", session_id="A")
    entity = namespace.receiver_source("s")
    owner = object()
    entity.accept_session("A", owner, T0)
    msg = entity.receive(T0, session_id="A", owner=owner)
    assert msg is not None and msg.lock_token is not None
    assert entity.expire_locks(T0 + 1) == 2  # one message lock, one session lock
    with pytest.raises(EntityError) as lost:
        entity.complete(msg.lock_token, T0 + 1)
    assert lost.value.condition == "com.microsoft:message-lock-lost"
    with pytest.raises(EntityError) as session_lost:
        entity.receive(T0 + 1, session_id="A", owner=owner)
    assert session_lost.value.condition == "com.microsoft:session-lock-lost"
    assert entity.accept_session(None, object(), T0 + 1) == ("A", T0 + 31)  # free for anyone again
    assert entity.expire_locks(T0 + 2) == 1  # that session lock; no message is locked


async def test_an_armed_drop_that_is_cleared_leaves_the_connection_alone() -> None:
    async with Broker(servicebus=True) as broker:
        conn, sender = await sending(broker)
        try:
            (served,) = broker.servicebus.connections  # type: ignore[union-attr]
            transport = served.protocol.transport
            fault = broker.faults.drop_connections(after_frames=1000, duration=10)
            assert "write" in vars(transport) and fault.active
            with pytest.raises(FaultError, match="over at once"):
                broker.faults.drop_connections(duration=10)
            broker.faults.tick(fault.until)
            assert "write" not in vars(transport) and not fault.active and fault.fired == 0
            await sender.send(Message(b"still connected"))
        finally:
            await conn.close()


async def test_connection_faults_may_pick_the_connections_of_one_entity() -> None:
    config = parse_config(
        {"UserConfig": {"Namespaces": [{"Name": "ns", "Queues": [{"Name": "q"}, {"Name": "other"}],
                                        "Topics": [{"Name": "t", "Subscriptions": [{"Name": "s"}]}]}]}}
    )  # fmt: skip
    async with Broker(config) as broker:
        on_q, q_sender = await sending(broker)
        on_other = await connect(broker.url)
        other_sender = await on_other.create_sender("other")
        on_topic = await connect(broker.url)
        subscriber = await on_topic.create_receiver("t/subscriptions/s", prefetch=1)
        try:
            assert broker.faults.close_connections("Q").fired == 1
            with pytest.raises(ConnectionClosedError):
                await q_sender.send(Message(b"x"))
            await other_sender.send(Message(b"untouched"))
            assert broker.faults.drop_connections("other").fired == 1
            with pytest.raises(ConnectionClosedError):
                await other_sender.send(Message(b"x"))
            assert broker.faults.close_connections("nothing-here").fired == 0
            assert broker.faults.close_connections("t").fired == 1  # a topic covers its subscriptions
            with pytest.raises(ConnectionClosedError):
                await subscriber.receive(1, timeout=10)
        finally:
            for conn in (on_q, on_other, on_topic):
                await conn.close()


async def test_run_on_the_brokers_own_loop_calls_at_once() -> None:
    async with Broker(servicebus=True) as broker:
        fault = broker.faults.run(broker.faults.refuse_connections, duration=5)
        assert broker.faults.active == [fault]
    with pytest.raises(RuntimeError, match="not started"):
        Broker(servicebus=True).faults.run(print)


async def test_delayed_dispositions_on_a_durable_broker(tmp_path: Path) -> None:
    async with Broker(servicebus=True, data_dir=tmp_path) as broker:
        conn = await connect(broker.url)
        loop = asyncio.get_running_loop()
        try:
            sender = await conn.create_sender("q")
            await sender.send(Message(b"warm"))
            fault = broker.faults.delay_dispositions(300)
            started = loop.time()
            await sender.send(Message(b"stored, then held"))
            assert loop.time() - started >= 0.3 and fault.fired == 1
        finally:
            await conn.close()
