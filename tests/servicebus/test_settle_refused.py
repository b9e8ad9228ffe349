"""A settlement the broker refuses leaves the message unsettled (issue 30, item 5): a retry
settles it while its lock is held, or is lock-lost once the lock is gone, never
``MessageAlreadySettled``. The refusals: a full disk (the durable store's ``Journal.space``
seam; a refused write also loses the lock, as a restart would) and dead-lettering from a
dead-letter queue (refused with the lock kept). Asyncio and blocking clients; the receive
link's settlements and the ``$management`` path (a deferred message)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from amqplink.broker import Broker
from amqplink.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from amqplink.servicebus import aio as sbaio
from amqplink.servicebus.exceptions import MessageAlreadySettled, MessageLockLostError, ServiceBusError
from tests.conftest import broker_thread

ACTIONS = ["complete_message", "abandon_message", "defer_message", "dead_letter_message"]


def _connection_string(broker: Broker) -> str:
    return (
        f"Endpoint=sb://127.0.0.1:{broker.port};SharedAccessKeyName=RootManageSharedAccessKey;"
        "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true"
    )


@pytest.fixture()
def durable() -> Iterator[Broker]:
    with tempfile.TemporaryDirectory() as directory, broker_thread(Broker(servicebus=True, data_dir=directory)) as b:
        yield b


def _journal(broker: Broker) -> object:
    assert broker.servicebus is not None and broker.servicebus.persistence is not None
    return broker.servicebus.persistence.commits.journal


@pytest.mark.parametrize("action", ACTIONS)
def test_blocking_a_settlement_refused_for_a_full_disk_leaves_the_message_unsettled(
    durable: Broker, action: str
) -> None:
    journal = _journal(durable)
    with ServiceBusClient.from_connection_string(_connection_string(durable)) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage("x"))
        with client.get_queue_receiver("q") as receiver:
            (message,) = receiver.receive_messages(max_wait_time=5)
            journal.space = 0  # type: ignore[attr-defined]
            with pytest.raises(ServiceBusError) as refused:
                getattr(receiver, action)(message)
            assert "No space left" in str(refused.value)
            journal.space = 1 << 20  # type: ignore[attr-defined]
            with pytest.raises(MessageLockLostError):  # not MessageAlreadySettled: the refused write lost the lock
                getattr(receiver, action)(message)
            (again,) = receiver.receive_messages(max_wait_time=5)  # it is there to receive again
            receiver.complete_message(again)
            with pytest.raises(MessageAlreadySettled):
                receiver.complete_message(again)


@pytest.mark.parametrize("action", ACTIONS)
async def test_aio_a_settlement_refused_for_a_full_disk_leaves_the_message_unsettled(action: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        async with Broker(servicebus=True, data_dir=Path(directory)) as broker:
            journal = _journal(broker)
            async with sbaio.ServiceBusClient.from_connection_string(_connection_string(broker)) as client:
                async with client.get_queue_sender("q") as sender:
                    await sender.send_messages(ServiceBusMessage("x"))
                async with client.get_queue_receiver("q") as receiver:
                    (message,) = await receiver.receive_messages(max_wait_time=5)
                    journal.space = 0  # type: ignore[attr-defined]
                    with pytest.raises(ServiceBusError):
                        await getattr(receiver, action)(message)
                    journal.space = 1 << 20  # type: ignore[attr-defined]
                    with pytest.raises(MessageLockLostError):
                        await getattr(receiver, action)(message)


async def test_a_refusal_that_keeps_the_lock_lets_a_retry_settle() -> None:
    """Dead-lettering from a dead-letter queue is refused (amqp:not-allowed) and the lock kept:
    the complete that follows settles the message (over $management), asyncio and blocking."""
    async with Broker(servicebus=True) as broker:  # noqa: SIM117  (the client needs the running broker)
        async with sbaio.ServiceBusClient.from_connection_string(_connection_string(broker)) as client:
            async with client.get_queue_sender("q") as sender:
                await sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
            async with client.get_queue_receiver("q") as receiver:
                for message in await receiver.receive_messages(2, max_wait_time=5):
                    await receiver.dead_letter_message(message, reason="r")
            async with client.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
                first, second = await dlq.receive_messages(2, max_wait_time=5)
                for message in (first, second):
                    with pytest.raises(ServiceBusError, match="cannot be dead-lettered again"):
                        await dlq.dead_letter_message(message)
                await dlq.complete_message(first)
                await dlq.abandon_message(second)
                with pytest.raises(MessageAlreadySettled):
                    await dlq.complete_message(first)
                (back,) = await dlq.receive_messages(max_wait_time=5)
                assert str(back) == "b"
                await dlq.complete_message(back)


def test_blocking_a_refusal_that_keeps_the_lock_lets_a_retry_settle() -> None:
    with broker_thread(Broker(servicebus=True)) as broker:  # noqa: SIM117  (the client needs the running broker)
        with ServiceBusClient.from_connection_string(_connection_string(broker)) as client:
            with client.get_queue_sender("q") as sender:
                sender.send_messages(ServiceBusMessage("a"))
            with client.get_queue_receiver("q") as receiver:
                (message,) = receiver.receive_messages(max_wait_time=5)
                receiver.dead_letter_message(message)
            with client.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
                (message,) = dlq.receive_messages(max_wait_time=5)
                with pytest.raises(ServiceBusError, match="cannot be dead-lettered again"):
                    dlq.dead_letter_message(message)
                dlq.complete_message(message)
                assert dlq.peek_messages(5) == []


def test_a_management_settlement_refused_leaves_the_deferred_message_unsettled(durable: Broker) -> None:
    journal = _journal(durable)
    with ServiceBusClient.from_connection_string(_connection_string(durable)) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage("later"))
        with client.get_queue_receiver("q") as receiver:
            (message,) = receiver.receive_messages(max_wait_time=5)
            receiver.defer_message(message)
            (deferred,) = receiver.receive_deferred_messages([message.sequence_number])
            journal.space = 0  # type: ignore[attr-defined]
            with pytest.raises(ServiceBusError):
                receiver.complete_message(deferred)
            journal.space = 1 << 20  # type: ignore[attr-defined]
            with pytest.raises(MessageLockLostError):
                receiver.complete_message(deferred)
            (again,) = receiver.receive_deferred_messages([message.sequence_number])
            receiver.complete_message(again)
