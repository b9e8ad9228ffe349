"""A consumer's wake-ups: coalesced into one dispatch per loop pass, harmless once its loop is gone."""

from __future__ import annotations

import asyncio

from amqplink import Message
from amqplink.aio import connect
from amqplink.broker import Broker
from amqplink.broker.namespace import Namespace


def test_a_consumer_left_behind_by_a_closed_loop_does_not_break_later_sends() -> None:
    broker = Broker(servicebus=True)

    async def attach_and_leave() -> None:
        await broker.start()
        conn = await connect(broker.url)
        await conn.create_receiver("q", mode="peek-lock", prefetch=10)
        # the loop ends with the connection open: its consumer stays on the queue

    asyncio.run(attach_and_leave())
    assert broker.servicebus is not None
    ns: Namespace = broker.servicebus.namespace
    queue = ns.receiver_source("q")
    assert queue.listeners, "the consumer's listener should still be registered"
    ns.send(ns.sender_target("q"), Message(b"later").encode(), 0.0)
    assert len(queue.store) == 1


async def test_messages_arriving_together_reach_a_waiting_consumer_in_order() -> None:
    async with Broker(servicebus=True) as broker, await connect(broker.url) as conn:
        receiver = await conn.create_receiver("q", mode="peek-lock", prefetch=500)
        sender = await conn.create_sender("q")
        for i in range(300):
            await sender.send_nowait(Message(str(i).encode()))
        await sender.wait_settled()
        got: list[bytes] = []
        while len(got) < 300:
            batch = await receiver.receive(300, timeout=10)
            assert batch, f"stalled at {len(got)}"
            await receiver.accept(*batch)
            got += [m.body for m in batch]
        assert got == [str(i).encode() for i in range(300)]
