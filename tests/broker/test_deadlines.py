"""Deadlines and the connection limit (item 19): no silent client holds the broker.

Each bound is configured short here and the test waits for EOF with a timeout.
"""

from __future__ import annotations

import asyncio

from amqplink.aio import connect
from amqplink.broker import Broker
from amqplink.codec.types import Symbol
from amqplink.engine.frames import AMQP_HEADER, SASL_HEADER
from amqplink.protocol.definitions import Accepted, Close, Open

from .wire import RawClient, frames_in


def _amqp_frames(data: bytes) -> list[object]:
    return [p for _, p, _ in frames_in([data[data.index(AMQP_HEADER) :]])]


async def test_a_socket_that_never_opens_is_closed_at_the_handshake_deadline() -> None:
    async with Broker(handshake_timeout=0.3) as broker:
        silent = await RawClient.connect(broker.port)
        assert await silent.until_eof(timeout=5) == b""
        halfway = await RawClient.connect(broker.port)
        halfway.send(SASL_HEADER)  # then nothing: SASL never completes
        assert (await halfway.until_eof(timeout=5)).startswith(SASL_HEADER)


async def test_the_broker_advertises_an_idle_time_out_and_closes_a_silent_connection() -> None:
    async with Broker(idle_timeout=0.4) as broker:
        client = await RawClient.connect(broker.port)
        client.open_session(sasl=False)
        data = await client.until_eof(timeout=5)
        frames = _amqp_frames(data)
        (opened,) = [f for f in frames if isinstance(f, Open)]
        # "it is recommended that the value of idle-time-out be half the actual timeout threshold" (2.4.5)
        assert opened.idle_time_out == 200
        (closed,) = [f for f in frames if isinstance(f, Close)]
        assert closed.error is not None and closed.error.condition == Symbol("amqp:resource-limit-exceeded")


async def test_beyond_the_connection_limit_a_client_is_told_why_and_closed() -> None:
    async with Broker(max_connections=3) as broker:
        held = [await RawClient.connect(broker.port) for _ in range(3)]
        for client in held:
            client.open_session(sasl=False)
            await client.read_at_least(8)  # the broker has counted it
        refused = await RawClient.connect(broker.port)
        refused.open_session()
        (closed,) = [f for f in _amqp_frames(await refused.until_eof(timeout=5)) if isinstance(f, Close)]
        assert closed.error is not None and closed.error.condition == Symbol("amqp:resource-limit-exceeded")
        assert "limit of 3 connections" in str(closed.error.description)
        held[0].close()

        async def send_one() -> object:
            async with await connect(broker.url) as conn:
                return await (await conn.create_sender("q")).send(b"in")

        # A slot is free again once the broker has seen the socket go.
        for _ in range(100):
            try:
                assert isinstance(await send_one(), Accepted)
                break
            except Exception:  # refused while the slot is still counted
                await asyncio.sleep(0.02)
        else:
            raise AssertionError("no slot came free after a connection ended")
        for client in held[1:]:
            client.close()


async def test_many_silent_sockets_do_not_stop_the_broker_from_serving_others() -> None:
    async with Broker(handshake_timeout=0.5, max_connections=40) as broker:
        silent = [await RawClient.connect(broker.port) for _ in range(60)]
        # The 20 beyond the limit and then the 40 within it are all dropped by deadline.
        await asyncio.gather(*(client.until_eof(timeout=10) for client in silent))
        async with await connect(broker.url, timeout=5) as conn:
            assert isinstance(await (await conn.create_sender("q")).send(b"served"), Accepted)
        assert list(broker.queue("q").messages) and len(broker.queue("q")) == 1
