"""Pre-settled senders: woken by every flow that lets deliveries leave, and bounded
by the socket's write buffer, not by the peer's credit."""

from __future__ import annotations

import asyncio

from amqplink import Message, connect
from amqplink.aio.sender import YIELD_EVERY
from amqplink.aio.transport import ENGINE_OUTPUT_HIGH, WRITE_BUFFER_HIGH
from tests.aio.helpers import HoldingServer, eventually


async def test_presettled_sender_held_by_the_session_window_is_woken_by_session_flows() -> None:
    # Credit for everything, but a session window of 4 transfers: the queue moves only
    # when the server's session flow (no handle, so no link event) reopens the window.
    async with HoldingServer(credit=100_000, incoming_window=4) as server, await connect(server.url) as conn:
        sender = await conn.create_sender("q", settle_mode="settled", max_in_flight=3)
        bodies = [f"m{i}".encode() for i in range(300)]
        await asyncio.wait_for(sender.send_many(bodies), 10)
        await asyncio.wait_for(sender.wait_settled(), 10)
        assert sender.in_flight == 0
        await eventually(lambda: len(server.held) == 300)
        assert [bytes(d.payload) for _, d in server.held] == [Message(b).encode() for b in bodies]


async def test_wait_settled_of_a_presettled_sender_wakes_when_the_window_reopens() -> None:
    async with HoldingServer(credit=100_000, incoming_window=2) as server, await connect(server.url) as conn:
        sender = await conn.create_sender("q", settle_mode="settled", max_in_flight=50)
        for i in range(40):  # room for all: queued behind the window, none awaited yet
            await sender.send_nowait(bytes([i]))
        await asyncio.wait_for(sender.wait_settled(), 10)
        await eventually(lambda: len(server.held) == 40)


async def test_presettled_burst_is_bounded_by_the_write_buffer_not_by_credit() -> None:
    count, size = 2000, 10 * 1024  # 20 MB against 60,000 credit
    async with HoldingServer(credit=60_000) as server, await connect(server.url) as conn:
        sender = await conn.create_sender("q", settle_mode="settled", max_in_flight=1000)
        [server_protocol] = server.protocols
        assert server_protocol.transport is not None
        server_protocol.transport.pause_reading()  # a peer that stops reading
        protocol = conn.protocol
        transport = protocol.transport
        assert transport is not None
        most = 0

        async def produce() -> None:
            nonlocal most
            body = Message(bytes(size))
            for _ in range(count):
                await sender.send_nowait(body)
                most = max(most, conn.engine.output_size() + transport.get_write_buffer_size())

        task = asyncio.ensure_future(produce())
        await eventually(lambda: protocol.write_paused, timeout=10)
        assert not task.done()  # held by the socket, not by credit
        # What sits in user space: the engine's buffer up to its mark, the
        # transport's up to its high-water mark, plus one frame past each.
        bound = ENGINE_OUTPUT_HIGH + WRITE_BUFFER_HIGH + 2 * (size + 512)
        assert most <= bound, f"{most} bytes buffered (bound {bound})"
        server_protocol.transport.resume_reading()
        await asyncio.wait_for(task, 30)
        await asyncio.wait_for(sender.wait_settled(), 10)
        await eventually(lambda: len(server.held) == count, timeout=30)
        assert most <= bound, f"{most} bytes buffered (bound {bound})"


async def test_a_long_presettled_burst_lets_the_event_loop_run() -> None:
    """A peer that grants more credit than the burst and reads fast never pauses the
    socket; the sender still lets other tasks run every YIELD_EVERY sends."""
    count = 50_000
    async with HoldingServer(credit=60_000) as server, await connect(server.url) as conn:
        sender = await conn.create_sender("q", settle_mode="settled")
        turns = 0
        done = False

        async def other_task() -> None:
            nonlocal turns
            while not done:
                await asyncio.sleep(0)
                turns += 1

        task = asyncio.ensure_future(other_task())
        await sender.send_many(Message(b"x" * 16) for _ in range(count))
        done = True
        await task
        assert turns >= count // YIELD_EVERY - 1, turns
        await eventually(lambda: len(server.held) == count, timeout=30)
