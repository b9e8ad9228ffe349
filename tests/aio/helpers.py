"""Helpers for the asyncio client tests: a deadline-bound wait and scripted servers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from amqplink.aio.server import serve
from amqplink.aio.transport import EngineProtocol
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.connection import ConnectionConfig
from amqplink.engine.errors import NOT_IMPLEMENTED
from amqplink.engine.events import DeliveriesReceived, Event, LinkAttachRequested
from amqplink.engine.link import ReceiverLink
from amqplink.engine.session import Session
from amqplink.protocol.definitions import Error


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait until ``condition()`` holds, checking after every loop turn; fail at the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(0.005)


class HoldingServer:
    """Accepts sending links, grants credit, and settles nothing until told to.

    ``ignore_attach=True`` never answers attach frames (a peer that hangs).
    ``refuse_rcv_second_after=s`` ends, ``s`` seconds later, the session of an attach
    that asks for rcv-settle-mode second, with ``amqp:not-implemented`` (as RabbitMQ
    does at once). ``incoming_window`` is the server's session incoming-window (2.5.6).
    """

    def __init__(
        self,
        *,
        credit: int = 10_000,
        ignore_attach: bool = False,
        refuse_rcv_second_after: float | None = None,
        incoming_window: int = 5000,
    ) -> None:
        self.credit = credit
        self.incoming_window = incoming_window
        self.ignore_attach = ignore_attach
        self.refuse_rcv_second_after = refuse_rcv_second_after
        self.held: list[tuple[ReceiverLink, Any]] = []
        self.protocols: list[EngineProtocol] = []
        self.server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"amqp://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aenter__(self) -> HoldingServer:
        self.server = await serve(self._accept, config=lambda: ConnectionConfig(incoming_window=self.incoming_window))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for protocol in self.protocols:
            protocol.abort()
        await self.server.wait_closed()

    def _accept(self, engine: EngineConnection, protocol: EngineProtocol) -> Callable[[list[Event]], None]:
        self.protocols.append(protocol)

        def on_events(events: list[Event]) -> None:
            for event in events:
                if isinstance(event, LinkAttachRequested) and self._asks_rcv_second(event):
                    assert self.refuse_rcv_second_after is not None
                    asyncio.get_running_loop().call_later(
                        self.refuse_rcv_second_after, self._refuse, event.link.session, protocol
                    )
                elif isinstance(event, LinkAttachRequested) and not self.ignore_attach:
                    event.link.attach()
                    if isinstance(event.link, ReceiverLink):
                        event.link.flow(self.credit)
                elif isinstance(event, DeliveriesReceived):
                    assert isinstance(event.link, ReceiverLink)
                    self.held += [(event.link, delivery) for delivery in event.deliveries]

        return on_events

    def _asks_rcv_second(self, event: LinkAttachRequested) -> bool:
        remote = event.link.remote_attach
        return self.refuse_rcv_second_after is not None and remote is not None and remote.rcv_settle_mode == 1

    @staticmethod
    def _refuse(session: Session, protocol: EngineProtocol) -> None:
        session.end(Error(condition=NOT_IMPLEMENTED, description="rcv-settle-mode second"))
        protocol.schedule_flush()

    def settle(self, n: int, state: Any) -> None:
        """Settle the ``n`` oldest held deliveries with ``state``."""
        for link, delivery in self.held[:n]:
            link.settle(delivery, state)
        del self.held[:n]
        for protocol in self.protocols:
            protocol.schedule_flush()
