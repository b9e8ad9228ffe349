"""Settling a received batch with ``asyncio.gather`` of ``complete_message``: the dispositions
leave as a few ranges (one loop turn, one flush), each completion waits for the broker's
confirmation, and the queue is empty afterwards."""

from __future__ import annotations

import asyncio
from typing import Any

from amqplink.protocol.definitions import Disposition
from amqplink.servicebus import ServiceBusMessage
from amqplink.servicebus.aio import ServiceBusClient
from tests.aio.test_wire_efficiency import WireTap
from tests.servicebus.scenario import BrokerThread, broker

__all__ = ["broker"]

COUNT = 100


async def test_gathered_completes_leave_as_ranges_and_are_confirmed(broker: BrokerThread) -> None:
    async with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("other") as sender:
            await sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(COUNT)])
        async with client.get_queue_receiver("other", prefetch_count=COUNT) as receiver:
            got: list[object] = []
            while len(got) < COUNT:
                batch = await receiver.receive_messages(max_message_count=COUNT, max_wait_time=5)
                assert batch, f"received {len(got)} of {COUNT}"
                got += batch
            link = receiver._link
            assert link is not None
            tap = WireTap(link.connection)
            await asyncio.gather(*(receiver.complete_message(m) for m in got))  # type: ignore[arg-type]
            dispositions = [p for p in tap.performatives() if type(p) is Disposition]
            covered = sum(int(d.last if d.last is not None else d.first) - int(d.first) + 1 for d in dispositions)
            assert covered == COUNT
            assert len(dispositions) <= 4, f"{len(dispositions)} disposition frames for {COUNT} completes"
            # rcv-settle-mode second: each completion returned once the broker settled it.
            assert all(not d.settled for d in dispositions)
            assert all(m._delivery._delivery.remote_settled for m in got)  # type: ignore[attr-defined]
            assert not await receiver.peek_messages(max_message_count=1)


async def test_a_complete_awaited_in_turn_leaves_in_the_turn_its_task_woke_in(broker: BrokerThread) -> None:
    """The broker's confirmation wakes the task and schedules a flush after the wake-up, so
    the next complete's disposition leaves in that same loop turn (one turn less per message)."""
    async with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("other") as sender:
            await sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
        async with client.get_queue_receiver("other", prefetch_count=2) as receiver:
            got: list[Any] = []
            while len(got) < 2:
                got += await receiver.receive_messages(max_message_count=2, max_wait_time=5)
            link = receiver._link
            assert link is not None
            protocol = link.connection.protocol
            await receiver.complete_message(got[0])
            assert protocol._flush_pending  # scheduled behind this task's wake-up
            tap = WireTap(link.connection)
            settling = receiver.complete_message(got[1])  # joins that flush
            assert not tap.writes
            await settling
            dispositions = [p for p in tap.performatives() if type(p) is Disposition]
            assert len(dispositions) == 1 and got[1]._settled
