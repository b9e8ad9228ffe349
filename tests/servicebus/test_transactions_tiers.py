"""A send in a transaction through the senders with more tiers than the primary (a paired
client's, a local-queue client's): it goes on the transaction's connection or fails, and is
never parked in a backlog queue nor stored in the local queue (docs/transactions.md): a
parked or stored message would arrive whether the transaction commits or not."""

from __future__ import annotations

from pathlib import Path

import pytest

from amqplink.broker import Broker
from amqplink.servicebus import ServiceBusMessage
from amqplink.servicebus.aio import ServiceBusClient
from amqplink.servicebus.exceptions import ServiceBusError
from tests.servicebus.paired_util import namespaces, paired_client, send_until_parked, stored
from tests.servicebus.test_localqueue_client import down, local_client, local_depth


def batch(prefix: str) -> list[ServiceBusMessage]:
    return [ServiceBusMessage(f"{prefix}{i}", message_id=f"{prefix}{i}") for i in range(3)]


async def commit_and_roll_back(client: ServiceBusClient, primary: Broker) -> None:
    """A committed transaction's sends arrive at the commit, not before; a rolled-back one's never."""
    async with client.get_queue_sender("orders") as sender:
        async with client.transaction() as txn:
            await sender.send_messages(batch("c"), transaction=txn)
            await sender.send_messages(ServiceBusMessage("c3", message_id="c3"), transaction=txn)
            assert stored(primary, "orders") == 0  # not before the commit
        assert stored(primary, "orders") == 4
        with pytest.raises(KeyError):
            async with client.transaction() as txn:
                await sender.send_messages(batch("r"), transaction=txn)
                raise KeyError("rolled back")
        assert stored(primary, "orders") == 4


async def test_a_paired_sender_commits_and_rolls_back_on_the_primary() -> None:
    async with namespaces() as (primary, secondary):
        client = paired_client(primary, secondary)
        async with client:
            await commit_and_roll_back(client, primary)
            state = client.paired_state
            assert state is not None and state.parked == 0 and state.failovers == 0
            assert all(stored(secondary, q) == 0 for q in state.backlog_queues)


async def test_a_paired_sender_failed_over_raises_and_parks_nothing() -> None:
    async with namespaces() as (primary, secondary):
        client = paired_client(primary, secondary)
        async with client, client.get_queue_sender("orders") as sender:
            fault = primary.faults.entity_unavailable("orders", condition="amqp:internal-error")
            await send_until_parked(sender, ServiceBusMessage("engage", message_id="engage"))
            state = client.paired_state
            assert state is not None and state.failed_over and state.parked == 1
            assert "send_messages" in vars(sender)  # the routed methods
            async with client.transaction() as txn:
                with pytest.raises(ServiceBusError) as caught:
                    await sender.send_messages(batch("t"), transaction=txn)
                assert caught.value.entity == "orders"
            primary.faults.clear(fault)
            state = client.paired_state
            assert state is not None and state.parked == 1  # only the plain send was parked
            assert sum(stored(secondary, q) for q in state.backlog_queues) == 1
            assert stored(primary, "orders") == 0


async def test_a_paired_sender_whose_primary_went_down_raises_and_parks_nothing() -> None:
    async with namespaces() as (primary, secondary):
        client = paired_client(primary, secondary)
        async with client, client.get_queue_sender("orders") as sender:
            txn = await client.transaction().begin()
            async with down(primary):
                with pytest.raises(ServiceBusError):
                    await sender.send_messages(batch("t"), transaction=txn)
                state = client.paired_state
                assert state is not None and state.parked == 0
                assert all(stored(secondary, q) == 0 for q in state.backlog_queues)
            assert stored(primary, "orders") == 0


async def test_a_local_queue_sender_commits_and_rolls_back(tmp_path: Path) -> None:
    async with Broker(servicebus=True) as primary:
        client = local_client(primary, tmp_path / "lq")
        async with client:
            await commit_and_roll_back(client, primary)
            state = client.local_queue_state
            assert state is not None and state.stored == 0 and state.depth == 0


async def test_a_local_queue_sender_whose_primary_went_down_raises_and_stores_nothing(tmp_path: Path) -> None:
    async with Broker(servicebus=True) as primary:
        client = local_client(primary, tmp_path / "lq")
        async with client, client.get_queue_sender("orders") as sender:
            txn = await client.transaction().begin()
            async with down(primary):
                with pytest.raises(ServiceBusError):
                    await sender.send_messages(batch("t"), transaction=txn)
                await sender.send_messages(ServiceBusMessage("plain", message_id="plain"))  # stored: shielded
                assert "send_messages" in vars(sender)  # local first now: the routed methods
                with pytest.raises(ServiceBusError):
                    await sender.send_messages(batch("u"), transaction=txn)
                state = client.local_queue_state
                assert state is not None and state.stored == 1 and local_depth(client) == 1
            assert stored(primary, "orders") == 0


async def test_a_local_queue_sender_with_an_unavailable_entity_raises_and_stores_nothing(tmp_path: Path) -> None:
    async with Broker(servicebus=True) as primary:
        client = local_client(primary, tmp_path / "lq")
        async with client, client.get_queue_sender("orders") as sender:
            await sender.send_messages(ServiceBusMessage("attached", message_id="attached"))
            primary.faults.entity_unavailable("orders", condition="amqp:internal-error")
            async with client.transaction() as txn:
                with pytest.raises(ServiceBusError) as caught:
                    await sender.send_messages(batch("t"), transaction=txn)
                assert caught.value.entity == "orders"
            state = client.local_queue_state
            assert state is not None and state.stored == 0 and local_depth(client) == 0
            assert stored(primary, "orders") == 1
