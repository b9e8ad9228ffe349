"""A connection the peer closes cleanly (no error) is reported as closed by the peer."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from amqplink.aio import ConnectionClosedError, connect
from amqplink.aio.server import serve
from amqplink.aio.transport import EngineProtocol
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.events import Event, LinkAttachRequested


def _close_on_attach(engine: EngineConnection, protocol: EngineProtocol) -> Callable[[list[Event]], None]:
    """A server that answers the first attach by closing the connection, without an error."""

    def on_events(events: list[Event]) -> None:
        if any(isinstance(e, LinkAttachRequested) for e in events):
            engine.close()
            protocol.flush()

    return on_events


async def test_clean_close_started_by_the_peer_fails_waiters_and_sets_the_error() -> None:
    server = await serve(_close_on_attach)
    try:
        url = f"amqp://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        conn = await connect(url)
        with pytest.raises(ConnectionClosedError, match="closed by the peer"):
            await conn.create_sender("q")
        assert conn.closed
        # The engine answers the peer's close at once; that must not read as our own close.
        assert isinstance(conn.error, ConnectionClosedError) and "closed by the peer" in str(conn.error)
        await conn.close()  # nothing left to do, and no error
    finally:
        server.close()
        await server.wait_closed()
