"""Service Bus transactions through the client (docs/transactions.md), asyncio and blocking,
against the embedded broker: what a .NET ``ServiceBusTransactionScope`` user relies on."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from amqplink.broker import Broker
from amqplink.engine.states import TransactionState
from amqplink.servicebus import ServiceBusMessage, ServiceBusMessageBatch
from amqplink.servicebus import blocking as sync_sb
from amqplink.servicebus.aio import ServiceBusClient
from amqplink.servicebus.exceptions import (
    MessageAlreadySettled,
    ServiceBusError,
    ServiceBusQuotaExceededError,
    ServiceBusTransactionError,
    TransactionRolledBackError,
    TransactionTimeoutError,
)
from tests.conftest import broker_thread


@pytest.fixture()
def sb() -> Iterator[Broker]:
    with broker_thread(Broker(servicebus=True)) as broker:
        yield broker


def _stored(broker: Broker, queue: str) -> list[bytes]:
    """The bodies ``queue`` holds (locked ones too)."""
    host = broker.servicebus
    assert host is not None
    entity = host.namespace.receiver_source(queue)
    from amqplink.message import Message

    return [Message.decode(entity.encode(m, peek=True)).body for m in list(entity.store)]  # type: ignore[misc]


async def _one(client: ServiceBusClient, queue: str, body: str = "work") -> tuple[Any, Any]:
    """Send ``body`` to ``queue`` and receive it (peek-lock): the receiver and the message."""
    async with client.get_queue_sender(queue) as sender:
        await sender.send_messages(ServiceBusMessage(body))
    receiver = client.get_queue_receiver(queue)
    (message,) = await receiver.receive_messages(max_wait_time=10)
    return receiver, message


async def test_receive_send_via_and_complete_commit_together(sb: Broker) -> None:
    async with ServiceBusClient.from_connection_string(sb.connection_string) as client:
        receiver, message = await _one(client, "in")
        onward = client.get_queue_sender("out", via="in")
        async with client.transaction() as txn:
            await onward.send_messages(ServiceBusMessage("result"), transaction=txn)
            await receiver.complete_message(message, transaction=txn)
            assert _stored(sb, "out") == [] and len(_stored(sb, "in")) == 1
        assert txn.state is TransactionState.COMMITTED
        assert _stored(sb, "in") == [] and _stored(sb, "out") == [b"result"]
        with pytest.raises(MessageAlreadySettled):
            await receiver.complete_message(message)


async def test_an_exception_rolls_back_and_the_message_can_be_settled_again(sb: Broker) -> None:
    async with ServiceBusClient.from_connection_string(sb.connection_string) as client:
        receiver, message = await _one(client, "in")
        onward = client.get_queue_sender("out", via="in")
        with pytest.raises(KeyError):
            async with client.transaction() as txn:
                await onward.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")], transaction=txn)
                await receiver.complete_message(message, transaction=txn)
                raise KeyError("processing failed")
        assert txn.state is TransactionState.ROLLED_BACK
        assert _stored(sb, "out") == [] and len(_stored(sb, "in")) == 1
        await receiver.abandon_message(message)  # still locked by this receiver: settled again
        (again,) = await receiver.receive_messages(max_wait_time=10)
        assert again.delivery_count == 1


async def test_a_batch_and_dead_letter_and_defer_in_one_transaction(sb: Broker) -> None:
    async with ServiceBusClient.from_connection_string(sb.connection_string) as client:
        async with client.get_queue_sender("in") as sender:
            await sender.send_messages([ServiceBusMessage("x"), ServiceBusMessage("y")])
        receiver = client.get_queue_receiver("in")
        first, second = await receiver.receive_messages(max_message_count=2, max_wait_time=10)
        onward = client.get_queue_sender("in")
        batch = ServiceBusMessageBatch(64 * 1024)
        batch.add_message(ServiceBusMessage("b1"))
        batch.add_message(ServiceBusMessage("b2"))
        async with client.transaction() as txn:
            await receiver.dead_letter_message(first, reason="bad", transaction=txn)
            await receiver.defer_message(second, transaction=txn)
            await onward.send_messages(batch, transaction=txn)
        assert [b for b in _stored(sb, "in") if b in (b"b1", b"b2")] == [b"b1", b"b2"]
        assert len(_stored(sb, "in/$DeadLetterQueue")) == 1


async def test_a_list_goes_as_batches_and_each_message_counts_toward_the_100(sb: Broker) -> None:
    async with ServiceBusClient.from_connection_string(sb.connection_string) as client:
        sender = client.get_queue_sender("q")
        async with client.transaction() as txn:
            await sender.send_messages([ServiceBusMessage(f"a{i}") for i in range(60)], transaction=txn)
            with pytest.raises(ServiceBusQuotaExceededError, match="100"):
                await sender.send_messages([ServiceBusMessage(f"b{i}") for i in range(41)], transaction=txn)
            await sender.send_messages([ServiceBusMessage(f"c{i}") for i in range(40)], transaction=txn)
        bodies = _stored(sb, "q")
        assert len(bodies) == 100 and bodies[:2] == [b"a0", b"a1"] and bodies[-1] == b"c39"


async def test_a_commit_that_cannot_be_applied_raises_rolled_back(sb: Broker) -> None:
    async with ServiceBusClient.from_connection_string(sb.connection_string) as client:
        receiver, message = await _one(client, "in")
        onward = client.get_queue_sender("out", via="in")
        txn = await client.transaction().begin()
        await onward.send_messages(ServiceBusMessage("result"), transaction=txn)
        await receiver.complete_message(message, transaction=txn)
        await receiver.close()  # its message is no longer held by it
        with pytest.raises(TransactionRolledBackError, match="no longer held") as caught:
            await txn.commit()
        assert caught.value.condition == "amqp:transaction:rollback" and not caught.value.retryable
        assert _stored(sb, "out") == []


async def test_sending_elsewhere_in_the_transaction_needs_send_via(sb: Broker) -> None:
    async with ServiceBusClient.from_connection_string(sb.connection_string) as client:
        receiver, message = await _one(client, "in")
        direct = client.get_queue_sender("out")
        async with client.transaction() as txn:
            await receiver.complete_message(message, transaction=txn)
            with pytest.raises(ServiceBusError, match="via") as caught:
                await direct.send_messages(ServiceBusMessage("lost"), transaction=txn)
            assert caught.value.condition == "amqp:not-allowed"
        assert _stored(sb, "in") == [] and _stored(sb, "out") == []


async def test_a_transaction_that_takes_too_long_times_out(sb: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    import amqplink.broker.transactions as broker_transactions

    monkeypatch.setattr(broker_transactions, "TRANSACTION_TIMEOUT", 0.3)  # (Service Bus: 2 minutes)
    async with ServiceBusClient.from_connection_string(sb.connection_string) as client:
        sender = client.get_queue_sender("q")
        txn = await client.transaction().begin()
        await sender.send_messages(ServiceBusMessage("slow"), transaction=txn)
        await asyncio.sleep(0.6)
        with pytest.raises(TransactionTimeoutError) as caught:
            await txn.commit()
        assert caught.value.condition == "amqp:transaction:timeout"
        assert isinstance(caught.value, TransactionRolledBackError)
        assert _stored(sb, "q") == []


async def test_operations_of_another_client_or_after_the_end_cannot_join(sb: Broker) -> None:
    async with (
        ServiceBusClient.from_connection_string(sb.connection_string) as client,
        ServiceBusClient.from_connection_string(sb.connection_string) as other,
    ):
        sender = client.get_queue_sender("q")
        foreign = other.get_queue_sender("q")
        async with client.transaction() as txn:
            with pytest.raises(ServiceBusTransactionError, match="another client"):
                await foreign.send_messages(ServiceBusMessage("x"), transaction=txn)
        with pytest.raises(ServiceBusTransactionError, match="committed"):
            await sender.send_messages(ServiceBusMessage("late"), transaction=txn)
        with pytest.raises(ServiceBusTransactionError, match="not begun"):
            await sender.send_messages(ServiceBusMessage("early"), transaction=client.transaction())


async def test_a_deferred_message_cannot_be_settled_in_a_transaction(sb: Broker) -> None:
    async with ServiceBusClient.from_connection_string(sb.connection_string) as client:
        receiver, message = await _one(client, "in")
        sequence = message.sequence_number
        await receiver.defer_message(message)
        (deferred,) = await receiver.receive_deferred_messages([sequence])
        async with client.transaction() as txn:
            with pytest.raises(ServiceBusTransactionError, match="management"):
                await receiver.complete_message(deferred, transaction=txn)
        await receiver.complete_message(deferred)


def test_the_blocking_api(sb: Broker) -> None:
    with sync_sb.ServiceBusClient.from_connection_string(sb.connection_string) as client:
        with client.get_queue_sender("in") as sender:
            sender.send_messages(ServiceBusMessage("work"))
        with client.get_queue_receiver("in") as receiver, client.get_queue_sender("out", via="in") as onward:
            (message,) = receiver.receive_messages(max_wait_time=10)
            with client.transaction() as txn:
                onward.send_messages(ServiceBusMessage("done"), transaction=txn)
                receiver.complete_message(message, transaction=txn)
            assert txn.state is TransactionState.COMMITTED
            with pytest.raises(ValueError), client.transaction() as txn2:
                onward.send_messages(ServiceBusMessage("never"), transaction=txn2)
                raise ValueError("no")
            assert txn2.state is TransactionState.ROLLED_BACK
    assert _stored(sb, "in") == [] and _stored(sb, "out") == [b"done"]
