"""The broker's memory is bounded (item 20): message size, queue size, high-water
credit, a consumer that does not read, a client that leaves mid-delivery."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc

import pytest

from amqplink.aio import connect
from amqplink.aio.errors import MessageRejected
from amqplink.aio.transport import WRITE_BUFFER_HIGH
from amqplink.broker import Broker
from amqplink.broker.entities import FLUSH_EVERY
from amqplink.codec.types import Symbol, UInt
from amqplink.engine.link import ReceiverLink
from amqplink.protocol.definitions import Accepted, Attach, Detach, Flow, Transfer

from ..aio.helpers import eventually
from .wire import RawClient, frame


def _transfer(delivery_id: int, more: bool) -> Transfer:
    return Transfer(
        handle=UInt(0),
        delivery_id=UInt(delivery_id),
        delivery_tag=b"t%d" % delivery_id,
        message_format=UInt(0),
        settled=False,
        more=more,
    )


async def test_a_message_larger_than_max_message_size_is_refused_with_its_condition() -> None:
    async with Broker(max_message_size=1000) as broker:
        client = await RawClient.connect(broker.port)
        client.open_session()
        client.attach_sender("q")
        (attach,) = await client.wait_for(Attach)
        assert attach.max_message_size == 1000
        await client.wait_for(Flow)
        # An endless multi-frame delivery: refused once it passes the limit, not held.
        for _ in range(3):
            client.send(frame(0, _transfer(0, more=True), b"x" * 600))
        (detach,) = await client.wait_for(Detach)
        assert detach.error is not None and detach.error.condition == Symbol("amqp:link:message-size-exceeded")
        assert len(broker.queue("q")) == 0


async def test_a_full_queue_rejects_with_resource_limit_exceeded_and_says_which() -> None:
    async with Broker(max_queue_bytes=10_000) as broker, await connect(broker.url) as conn:
        sender = await conn.create_sender("full")  # holds credit from the broker
        queue = broker.queue("full")
        queue.put(b"b" * 9_950)
        with pytest.raises(MessageRejected) as refused:
            await sender.send(b"c" * 100, timeout=5)
        assert refused.value.condition == "amqp:resource-limit-exceeded"
        assert "'full' is full" in str(refused.value.description)
        assert queue.size == 9_950 and len(queue) == 1


async def test_producers_get_no_credit_above_the_high_water_mark_until_the_queue_drains() -> None:
    async with Broker(max_queue_bytes=20_000, credit_window=100) as broker, await connect(broker.url) as conn:
        sender = await conn.create_sender("hw")
        queue = broker.queue("hw")
        while not queue.above_high_water:
            assert isinstance(await sender.send(b"m" * 1_000), Accepted)
        (producer,) = [link for link in queue._starved if isinstance(link, ReceiverLink)]
        assert producer.link_credit == 0
        blocked = asyncio.ensure_future(sender.send(b"late" * 100))
        done, _ = await asyncio.wait([blocked], timeout=0.3)
        assert not done, "the producer was not stopped at the high-water mark"
        receiver = await conn.create_receiver("hw", prefetch=50)
        while queue.size >= 20_000 // 4:
            await receiver.accept(*await receiver.receive(10, timeout=5))
        assert isinstance(await asyncio.wait_for(blocked, 5), Accepted)


async def test_dispatch_stops_while_a_consumer_socket_is_full_and_resumes_when_it_reads() -> None:
    body = b"z" * 10_240
    count = 2_000
    async with Broker() as broker:
        consumer = await RawClient.connect(broker.port)
        consumer.open_session(sasl=False)
        consumer.attach_receiver("slow", credit=1_000_000)
        await consumer.wait_for(Attach)
        queue = broker.queue("slow")
        await eventually(lambda: len(queue.consumers) == 1)
        (protocol,) = broker._protocols
        for _ in range(count):
            queue.put(body)
        # The consumer reads nothing: what it cannot take stays queued, not buffered.
        assert protocol.transport is not None
        assert protocol.transport.get_write_buffer_size() <= WRITE_BUFFER_HIGH + FLUSH_EVERY + 2 * len(body)
        assert len(queue) >= count // 4
        # Once it reads, the rest follows.
        await consumer.wait_for(Transfer, count, timeout=60)
        assert len(queue) == 0


async def test_a_client_that_leaves_mid_delivery_frees_its_frames_at_once() -> None:
    chunk = b"p" * 60_000
    frames = 140  # 8.4 MB of one unfinished delivery
    gc.disable()
    tracemalloc.start()
    try:
        async with Broker(max_message_size=64 << 20) as broker:
            client = await RawClient.connect(broker.port)
            client.open_session()
            client.attach_sender("partial")
            await client.wait_for(Flow)
            baseline = tracemalloc.get_traced_memory()[0]
            for _ in range(frames):
                client.send(frame(0, _transfer(0, more=True), chunk))
            await client.writer.drain()
            grown = frames * len(chunk) * 9 // 10
            await eventually(lambda: tracemalloc.get_traced_memory()[0] - baseline > grown, timeout=20)
            client.writer.transport.abort()
            await eventually(lambda: not broker._protocols)
            # Without the cyclic collector (disabled above), the frames are gone already.
            assert tracemalloc.get_traced_memory()[0] - baseline < grown // 4
    finally:
        tracemalloc.stop()
        gc.enable()
