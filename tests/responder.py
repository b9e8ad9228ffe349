"""An in-test request/response peer on amqplink's own server: it answers ``$cbs``-
and ``$management``-style requests through a handler the test supplies.

For each connection it takes the client's sending links (requests to a node) and
receiving links (replies, addressed by their target), accepts each request (or
rejects it for a node in ``reject``; refuses reply links from nodes in
``refuse_replies_from``), and sends ``handler(node, request)`` back to the
request's ``reply-to`` with ``correlation-id`` = its ``message-id``. A handler that
returns None holds the request in ``held`` until the test calls :meth:`answer`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from amqplink.aio.server import serve
from amqplink.aio.transport import EngineProtocol
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.events import DeliveriesReceived, Event, LinkAttachRequested, LinkDetached
from amqplink.engine.link import Link, ReceiverLink, SenderLink
from amqplink.message import Message
from amqplink.protocol.definitions import Accepted, Error, Rejected

Handler = Callable[[str, Message], Message | None]


def echo(node: str, request: Message) -> Message:
    """Answer with the request's body and status 200."""
    return Message(request.body, application_properties={"status-code": 200})


class Responder:
    def __init__(self, handler: Handler = echo) -> None:
        self.handler = handler
        self.reject: dict[str, Error] = {}
        self.refuse_replies_from: set[str] = set()
        self.requests: list[tuple[str, Message]] = []
        self.held: list[tuple[str, Message]] = []
        self.reply_links: dict[str, SenderLink] = {}
        self.request_links: dict[ReceiverLink, str] = {}
        self.detached: list[Link] = []
        self.protocols: list[EngineProtocol] = []
        self.server: asyncio.Server | None = None
        self._changed = asyncio.Event()
        self._protocol_of: dict[Link, EngineProtocol] = {}

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"amqp://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aenter__(self) -> Responder:
        self.server = await serve(self._accept)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        self.drop_connections()
        await self.server.wait_closed()

    # -- test controls ------------------------------------------------------------------
    async def wait_until(self, condition: Callable[[], bool], timeout: float = 5.0) -> None:
        """Wait (on the responder's own events, no polling) until ``condition()`` holds."""
        async with asyncio.timeout(timeout):
            while not condition():
                self._changed.clear()
                await self._changed.wait()

    def answer(self, request: Message, response: Message) -> None:
        """Send ``response`` to a held ``request``."""
        self.held = [(n, r) for n, r in self.held if r is not request]
        self._reply(request, response)

    def drop_connections(self) -> None:
        for protocol in self.protocols:
            protocol.abort()

    def detach_reply_links(self, error: Error | None) -> None:
        for link in self.reply_links.values():
            link.detach(error)
            self._protocol_of[link].schedule_flush()

    # -- engine events --------------------------------------------------------------------
    def _accept(self, engine: EngineConnection, protocol: EngineProtocol) -> Callable[[list[Event]], None]:
        self.protocols.append(protocol)

        def on_events(events: list[Event]) -> None:
            for event in events:
                if isinstance(event, LinkAttachRequested):
                    self._on_attach(event.link, protocol)
                elif isinstance(event, DeliveriesReceived):
                    for delivery in event.deliveries:
                        self._on_request(event.link, delivery, protocol)  # type: ignore[arg-type]
                elif isinstance(event, LinkDetached):
                    if not event.link.detach_sent:
                        event.link.detach()
                    self.detached.append(event.link)
            protocol.schedule_flush()
            self._changed.set()

        return on_events

    def _on_attach(self, link: Link, protocol: EngineProtocol) -> None:
        remote = link.remote_attach
        assert remote is not None
        self._protocol_of[link] = protocol
        if (
            isinstance(link, SenderLink)
            and remote.source is not None
            and remote.source.address in self.refuse_replies_from
        ):
            link.attach(None, None, keep=False)
            link.detach(Error(condition="amqp:not-found", description="no replies from here"))
            return
        link.attach()
        if isinstance(link, SenderLink):
            assert remote.target is not None and remote.source is not None
            self.reply_links[str(remote.target.address)] = link
        else:
            assert isinstance(link, ReceiverLink) and remote.target is not None
            self.request_links[link] = str(remote.target.address)
            link.flow(1000)

    def _on_request(self, link: ReceiverLink, delivery: Any, protocol: EngineProtocol) -> None:
        node = self.request_links[link]
        request = Message.decode(bytes(delivery.payload))
        self.requests.append((node, request))
        if node in self.reject:
            link.settle(delivery, Rejected(error=self.reject[node]))
            return
        if not delivery.settled:
            link.settle(delivery, Accepted())
        response = self.handler(node, request)
        if response is None:
            self.held.append((node, request))
        else:
            self._reply(request, response)

    def _reply(self, request: Message, response: Message) -> None:
        response.correlation_id = request.message_id
        link = self.reply_links[str(request.reply_to)]
        link.send(response.encode())
        self._protocol_of[link].schedule_flush()
