"""Accept AMQP connections with asyncio and drive a server-role engine for each.

The application supplies a factory that, given the engine connection and its
:class:`~amqplink.aio.transport.EngineProtocol`, returns the callback that
handles that connection's events (attach requests, deliveries, ...). The embedded
broker and the interop tests' servers are built on this.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable

from amqplink.aio.transport import EngineProtocol
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.connection import ConnectionConfig
from amqplink.engine.events import Event
from amqplink.engine.sasl import SaslServer

__all__ = ["EventHandler", "HandlerFactory", "serve"]

EventHandler = Callable[[list[Event]], None]
HandlerFactory = Callable[[EngineConnection, EngineProtocol], EventHandler]


async def serve(
    factory: HandlerFactory,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    config: Callable[[], ConnectionConfig] = ConnectionConfig,
    sasl: Callable[[], SaslServer | None] | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> asyncio.Server:
    """Listen on ``host:port`` (0: any free port); return the started ``asyncio.Server``.

    ``config`` and ``sasl`` are called once per connection; ``sasl=None`` uses
    ``SaslServer()`` (PLAIN for anyone, ANONYMOUS, MSSBCBS); pass ``lambda: None``
    to run without a SASL layer.
    """
    make_sasl = sasl if sasl is not None else SaslServer

    def protocol_factory() -> EngineProtocol:
        engine = EngineConnection(config(), server=True, sasl=make_sasl())
        handler: EventHandler | None = None

        def on_events(events: list[Event]) -> None:
            if handler is not None:
                handler(events)

        protocol = EngineProtocol(engine, on_events)
        handler = factory(engine, protocol)
        return protocol

    return await asyncio.get_running_loop().create_server(protocol_factory, host, port, ssl=ssl_context)
