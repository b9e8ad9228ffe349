"""The de-duplicating receiver's peek-lock rules on two embedded namespaces: a copy is held
while the first is unsettled and follows its settlement; ids from a property; messages
without an id; every namespace failing raises."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import pytest

from amqplink.servicebus import ServiceBusMessage, ServiceBusReceivedMessage, ServiceBusSubQueue
from amqplink.servicebus.aio import DeduplicatingReceiver, Deduplicator, ReplicationError, ServiceBusClient
from tests.servicebus.replication_util import QUEUE, Namespace, clients, dedup_receiver, two_namespaces


async def _send_to_both(opened: list[ServiceBusClient], *messages: ServiceBusMessage) -> None:
    for client in opened:
        async with client.get_queue_sender(QUEUE) as sender:
            await sender.send_messages(list(messages))


async def _first_with_copy_held(receiver: DeduplicatingReceiver) -> ServiceBusReceivedMessage:
    """Receive the one message; go on receiving until its copy from the other namespace is held."""
    got = await receiver.receive_messages(10, max_wait_time=5)
    assert len(got) == 1
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while receiver.held_copies == 0:
        assert loop.time() < deadline, "the copy never came"
        assert await receiver.receive_messages(10, max_wait_time=0.2) == []  # the copy is not yielded
    return got[0]


async def _drained(*namespaces: Namespace) -> bool:
    return all(ns.stored() == 0 for ns in namespaces)


async def test_a_held_copy_is_completed_with_the_first(tmp_path: Path) -> None:
    async with two_namespaces(tmp_path) as (first, second), clients(first, second) as opened:
        await _send_to_both(opened, ServiceBusMessage("m", message_id="m"))
        receiver = dedup_receiver(opened, Deduplicator())
        message = await _first_with_copy_held(receiver)
        assert (first.stored(), second.stored()) == (1, 1)
        renewed = await receiver.renew_message_lock(message)  # in the namespace it came from
        assert renewed > dt.datetime.now(dt.UTC)
        await receiver.complete_message(message)
        assert (first.stored(), second.stored()) == (0, 0)
        assert receiver.duplicates_removed == 1 and receiver.held_copies == 0
        await receiver.close()


async def test_abandoning_gives_both_copies_back_and_one_is_yielded_again(tmp_path: Path) -> None:
    async with two_namespaces(tmp_path) as (first, second), clients(first, second) as opened:
        await _send_to_both(opened, ServiceBusMessage("m", message_id="m"))
        receiver = dedup_receiver(opened, Deduplicator())
        await receiver.abandon_message(await _first_with_copy_held(receiver))
        again = await _first_with_copy_held(receiver)
        assert again.message_id == "m" and again.delivery_count == 1  # abandoned once, whichever copy
        assert "m" not in receiver.deduplicator and receiver.duplicates_removed == 0
        await receiver.dead_letter_message(again, reason="test")
        assert (first.stored(), second.stored()) == (0, 0)  # one dead-lettered, its copy completed
        dead = [
            c.get_queue_receiver(QUEUE, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=0.5) for c in opened
        ]
        letters = [m for r in dead for m in await r.receive_messages(10, max_wait_time=0.5)]
        assert [m.message_id for m in letters] == ["m"]  # dead-lettered once: the copy was completed
        await receiver.close()


async def test_ids_from_a_property_and_messages_without_an_id(tmp_path: Path) -> None:
    async with two_namespaces(tmp_path) as (first, second), clients(*[first, second]) as opened:
        for index, client in enumerate(opened):
            async with client.get_queue_sender(QUEUE) as sender:
                await sender.send_messages(
                    [
                        ServiceBusMessage("keyed", message_id=f"differs-{index}", application_properties={"key": "k1"}),
                        ServiceBusMessage("no key", message_id=f"plain-{index}"),
                    ]
                )
        receivers = [c.get_queue_receiver(QUEUE) for c in opened]
        receiver = DeduplicatingReceiver(receivers, id_property="key", max_wait_time=0.5)
        bodies: list[str] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while not await _drained(first, second):
            assert loop.time() < deadline
            for message in await receiver.receive_messages(10):
                bodies.append(str(message))
                await receiver.complete_message(message)
        assert sorted(bodies) == ["keyed", "no key", "no key"]
        assert receiver.without_id == 2 and receiver.duplicates_removed == 1
        await receiver.close()


async def test_every_namespace_failing_raises_with_both_errors(tmp_path: Path) -> None:
    async with two_namespaces(tmp_path) as (first, second), clients(first, second) as opened:
        receiver = dedup_receiver(opened, Deduplicator())
        await first.kill()
        await second.kill()
        with pytest.raises(ReplicationError, match="every namespace failed") as raised:
            await receiver.receive_messages(1, max_wait_time=10)
        assert len(raised.value.errors) == 2
        await first.start()
        await _send_to_both(opened[:1], ServiceBusMessage("back", message_id="back"))
        got = await receiver.receive_messages(1, max_wait_time=10)  # one namespace back is enough
        assert [m.message_id for m in got] == ["back"]
        await receiver.close()


def test_bad_arguments_are_refused() -> None:
    client = ServiceBusClient.from_connection_string(
        "Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=n;SharedAccessKey=k;UseDevelopmentEmulator=true"
    )
    r1, r2 = client.get_queue_receiver(QUEUE), client.get_queue_receiver(QUEUE, receive_mode="receiveanddelete")
    with pytest.raises(ValueError, match="two or more different receivers"):
        DeduplicatingReceiver([r1, r1])
    with pytest.raises(ValueError, match="same receive mode"):
        DeduplicatingReceiver([r1, r2])
