"""What the official azure-servicebus SDK (unchanged) sees for each injected fault:
a typed exception, or a transparent recovery."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import (
    MessageLockLostError,
    ServiceBusConnectionError,
    ServiceBusError,
    ServiceBusServerBusyError,
)

from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig, EntityProperties, NamespaceConfig, QueueConfig
from amqplink.broker.faults import INTERNAL_ERROR
from tests.broker.sdkutil import running_broker
from tests.broker.test_partitioned import key_in, pq


@pytest.fixture()
def broker() -> Iterator[Broker]:
    with running_broker() as running:
        yield running


def client(broker: Broker, *, retries: int = 0) -> ServiceBusClient:
    """retries=0: the first failure surfaces as the SDK's typed exception."""
    return ServiceBusClient.from_connection_string(
        broker.connection_string, retry_total=retries, retry_backoff_factor=0.01, retry_backoff_max=0.1
    )


def stored(broker: Broker, path: str) -> int:
    return len(broker.namespace.receiver_source(path).store)


def test_unavailable_entity_server_busy_is_a_typed_error(broker: Broker) -> None:
    faults = broker.faults
    with client(broker) as sb, sb.get_queue_sender("q") as sender:
        sender.send_messages(ServiceBusMessage("before"))
        fault = faults.run(faults.entity_unavailable, "q")
        with pytest.raises(ServiceBusServerBusyError):
            sender.send_messages(ServiceBusMessage("refused"))
        assert fault.fired >= 1
        faults.run(faults.clear, fault)
        sender.send_messages(ServiceBusMessage("after"))
    assert stored(broker, "q") == 2


def test_unavailable_entity_internal_error_is_retried_until_it_clears(broker: Broker) -> None:
    faults = broker.faults
    fault = faults.run(faults.entity_unavailable, "q", condition=INTERNAL_ERROR)
    with client(broker) as sb, sb.get_queue_sender("q") as sender:
        with pytest.raises(ServiceBusError) as refused:
            sender.send_messages(ServiceBusMessage("refused"))
        assert "internal-error" in str(refused.value)
    # With retries, a fault that ends on its own (duration) is transparent.
    faults.run(faults.clear, fault)
    with client(broker, retries=30) as sb, sb.get_queue_sender("q") as sender:
        sender.send_messages(ServiceBusMessage("before"))
        fault = faults.run(faults.entity_unavailable, "q", condition=INTERNAL_ERROR, duration=0.3)
        sender.send_messages(ServiceBusMessage("eventually"))
    assert fault.fired >= 1 and not fault.active and stored(broker, "q") == 2


def test_fragment_of_a_plain_entity_down(broker: Broker) -> None:
    faults = broker.faults
    faults.run(broker.namespace.sender_target, "q")
    fault = faults.run(faults.fragment_unavailable, "q", 0)
    with client(broker) as sb, sb.get_queue_sender("q") as sender:
        with pytest.raises(ServiceBusServerBusyError):
            sender.send_messages(ServiceBusMessage("refused"))
        faults.run(faults.clear_all)
        sender.send_messages(ServiceBusMessage("after"))
    assert fault.fired == 1


def test_fragment_of_a_partitioned_queue_down() -> None:
    config = BrokerConfig((NamespaceConfig(queues=(QueueConfig("pq", EntityProperties(enable_partitioning=True)),)),))
    with running_broker(config) as broker:
        faults = broker.faults
        key = key_in(pq(broker.namespace).partitions, 2)
        fault = faults.run(faults.fragment_unavailable, "pq", 2)
        with client(broker) as sb, sb.get_queue_sender("pq") as sender:
            with pytest.raises(ServiceBusServerBusyError):
                sender.send_messages(ServiceBusMessage("pinned", partition_key=key))
            sender.send_messages(ServiceBusMessage("no key"))  # goes to a fragment that is up
            faults.run(faults.clear, fault)
            sender.send_messages(ServiceBusMessage("pinned", partition_key=key))
        assert fault.fired == 1 and "fragment 2 of 'pq'" in broker.faults.history[-1].what
        assert stored(broker, "pq") == 2


def test_refused_connections_are_a_connection_error_then_recover(broker: Broker) -> None:
    faults = broker.faults
    fault = faults.run(faults.refuse_connections)
    with client(broker) as sb, pytest.raises(ServiceBusConnectionError) as refused, sb.get_queue_sender("q") as s:
        s.send_messages(ServiceBusMessage("refused"))
    assert "amqp:connection:forced" in str(refused.value)
    assert fault.fired == 1
    faults.run(faults.clear, fault)
    with client(broker) as sb, sb.get_queue_sender("q") as sender:
        sender.send_messages(ServiceBusMessage("after"))
    assert stored(broker, "q") == 1


@pytest.mark.parametrize("fault_name", ["close_connections", "detach_links", "drop_connections"])
def test_connection_and_link_faults_are_transparent_with_retries(broker: Broker, fault_name: str) -> None:
    faults = broker.faults
    with client(broker, retries=3) as sb, sb.get_queue_sender("q") as sender:
        sender.send_messages(ServiceBusMessage("before"))
        fault = faults.run(getattr(faults, fault_name))
        assert fault.fired >= 1
        sender.send_messages(ServiceBusMessage("after"))  # the SDK reconnects or re-attaches
    assert stored(broker, "q") == 2


def test_drop_mid_transfer_is_transparent_and_redelivers(broker: Broker) -> None:
    faults = broker.faults
    with client(broker, retries=3) as sb:
        with sb.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage("m" * 2000))
        with sb.get_queue_receiver("q", prefetch_count=0) as receiver:
            # The next transfer is cut 50 bytes in: the SDK reconnects and receives again. As
            # Service Bus, the broker holds the cut delivery's lock until it expires (made to
            # expire at once here), then redelivers, that attempt counted.
            fault = faults.run(faults.drop_connections, after_bytes=50)
            got = []
            deadline = time.monotonic() + 30
            while not got and time.monotonic() < deadline:
                got = receiver.receive_messages(max_message_count=1, max_wait_time=2)
                if not got and fault.fired:
                    faults.run(faults.expire_locks, "q")
            (msg,) = got
            assert str(msg) == "m" * 2000 and msg.delivery_count == 1  # the cut attempt counted
            receiver.complete_message(msg)
    assert fault.fired == 1 and stored(broker, "q") == 0


def test_delayed_dispositions_slow_the_sdk_down(broker: Broker) -> None:
    faults = broker.faults
    with client(broker) as sb, sb.get_queue_sender("q") as sender:
        sender.send_messages(ServiceBusMessage("warm"))
        fault = faults.run(faults.delay_dispositions, 400)
        started = time.monotonic()
        sender.send_messages(ServiceBusMessage("slow"))
        assert time.monotonic() - started >= 0.4
        assert fault.fired == 1
        faults.run(faults.clear, fault)


def test_expired_locks_are_message_lock_lost(broker: Broker) -> None:
    faults = broker.faults
    with client(broker) as sb:
        with sb.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage("locked"))
        with sb.get_queue_receiver("q", prefetch_count=0) as receiver:
            (msg,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            fault = faults.run(faults.expire_locks, "q")
            assert fault.fired == 1
            with pytest.raises(MessageLockLostError):
                receiver.complete_message(msg)
            (again,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            assert again.delivery_count == 1
            receiver.complete_message(again)
    assert stored(broker, "q") == 0
