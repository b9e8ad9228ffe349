"""connect(min_peer_idle_timeout=): the floor under a peer's idle time-out (2.4.5)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from amqplink import connect
from amqplink.aio.errors import AMQPError
from amqplink.aio.server import serve
from amqplink.aio.transport import EngineProtocol
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.connection import ConnectionConfig
from amqplink.engine.events import Event


def _ignore(engine: EngineConnection, protocol: EngineProtocol) -> Callable[[list[Event]], None]:
    return lambda events: None


async def _server_asking_for(idle_timeout: float) -> asyncio.Server:
    # The peer advertises half its threshold: a 160 ms time-out asks for a frame every 80 ms,
    # below the default floor of 100 ms.
    return await serve(_ignore, config=lambda: ConnectionConfig(container_id="fussy", idle_timeout=idle_timeout))


async def test_a_peer_below_the_default_floor_is_refused_with_a_clear_condition() -> None:
    server = await _server_asking_for(0.16)
    try:
        with pytest.raises(AMQPError) as failure:
            conn = await connect(f"amqp://127.0.0.1:{server.sockets[0].getsockname()[1]}", timeout=5)
            await conn.close()
        assert failure.value.condition == "amqp:not-implemented"
    finally:
        server.close()


async def test_a_lower_floor_lets_the_connection_open_and_keep_it_alive() -> None:
    server = await _server_asking_for(0.16)
    try:
        conn = await connect(
            f"amqp://127.0.0.1:{server.sockets[0].getsockname()[1]}", timeout=5, min_peer_idle_timeout=0.05
        )
        # The scenario is time itself: idle for five of the peer's time-outs, and only
        # our heartbeats keep the connection open.
        await asyncio.sleep(0.8)
        assert not conn.closed
        await conn.close()
    finally:
        server.close()
