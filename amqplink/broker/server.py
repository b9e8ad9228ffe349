"""The embedded broker's server: accepts connections and routes links to queues.

A peer's sending link delivers into the queue named by its target address; a
peer's receiving link consumes from the queue named by its source address (a
dynamic source gets a fresh queue). Incoming messages are accepted once stored;
the broker grants ``credit_window`` credit to each sending peer and tops it up as
messages arrive.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import uuid
from typing import Any

from amqplink.aio.server import serve
from amqplink.aio.transport import EngineProtocol
from amqplink.broker.entities import Consumer, Queue
from amqplink.engine import errors as engine_errors
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.events import (
    ConnectionClosed,
    DeliveryReceived,
    DeliveryUpdated,
    Event,
    LinkAttachRequested,
    LinkCreditChanged,
    LinkDetached,
)
from amqplink.engine.link import TERMINAL_OUTCOMES, Link, ReceiverLink, SenderLink
from amqplink.protocol.definitions import Accepted, Error, Source

__all__ = ["Broker"]

log = logging.getLogger(__name__)

_ACCEPTED = Accepted()


class Broker:
    """An in-memory AMQP 1.0 queue broker on the amqplink engine (server role)."""

    def __init__(self, *, credit_window: int = 1000) -> None:
        self.credit_window = credit_window
        self.queues: dict[str, Queue] = {}
        self._server: asyncio.Server | None = None
        self._tls = False
        self._protocols: set[EngineProtocol] = set()

    @property
    def port(self) -> int:
        """The TCP port it listens on (after :meth:`start`)."""
        if self._server is None:
            raise RuntimeError("the broker is not started")
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def url(self) -> str:
        """``amqp://127.0.0.1:PORT`` for clients (``amqps://`` when started with TLS)."""
        return f"{'amqps' if self._tls else 'amqp'}://127.0.0.1:{self.port}"

    def queue(self, name: str) -> Queue:
        """The queue called ``name``, created on first use."""
        queue = self.queues.get(name)
        if queue is None:
            queue = self.queues[name] = Queue(name)
        return queue

    async def start(
        self, host: str = "127.0.0.1", port: int = 0, *, ssl_context: ssl.SSLContext | None = None
    ) -> Broker:
        """Listen on ``host:port`` (0: any free port); TLS first when ``ssl_context`` is given."""
        self._server = await serve(self._accept, host, port, ssl_context=ssl_context)
        self._tls = ssl_context is not None
        log.info("amqplink broker listening on %s", self.url)
        return self

    async def stop(self) -> None:
        """Stop listening and drop every connection."""
        if self._server is not None:
            self._server.close()
        for protocol in list(self._protocols):
            protocol.abort()
        if self._server is not None:
            await self._server.wait_closed()

    async def __aenter__(self) -> Broker:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- per connection ---------------------------------------------------------------
    def _accept(self, engine: EngineConnection, protocol: EngineProtocol) -> Any:
        self._protocols.add(protocol)
        consumers: dict[SenderLink, Queue] = {}
        producers: dict[ReceiverLink, Queue] = {}

        def on_events(events: list[Event]) -> None:
            for event in events:
                t = type(event)
                if t is DeliveryReceived:
                    link = event.link  # type: ignore[attr-defined]
                    self._on_message(link, event.delivery, producers[link])  # type: ignore[attr-defined]
                elif t is DeliveryUpdated:
                    queue = consumers.get(event.link)  # type: ignore[attr-defined]
                    state = event.state  # type: ignore[attr-defined]
                    if queue is not None and (event.settled or isinstance(state, TERMINAL_OUTCOMES)):  # type: ignore[attr-defined]
                        queue.on_outcome(event.delivery, state)  # type: ignore[attr-defined]
                elif t is LinkCreditChanged:
                    queue = consumers.get(event.link)  # type: ignore[attr-defined]
                    if queue is not None:
                        queue.dispatch()
                elif t is LinkAttachRequested:
                    self._on_attach(event.link, protocol, consumers, producers)  # type: ignore[attr-defined]
                elif t is LinkDetached:
                    link = event.link  # type: ignore[attr-defined]
                    if not link.detach_sent:
                        link.detach()
                    self._drop(link, consumers, producers)
                elif t is ConnectionClosed:
                    for link in list(consumers):
                        self._drop(link, consumers, producers)
                    producers.clear()
                    self._protocols.discard(protocol)

        return on_events

    def _on_attach(
        self,
        link: Link,
        protocol: EngineProtocol,
        consumers: dict[SenderLink, Queue],
        producers: dict[ReceiverLink, Queue],
    ) -> None:
        remote = link.remote_attach
        assert remote is not None
        if isinstance(link, SenderLink):
            source = remote.source
            if source is not None and source.dynamic:
                address = f"dynamic-{uuid.uuid4()}"
                link.attach(Source(address=address, dynamic=True), remote.target)
            elif source is None or not source.address:
                self._refuse(link, "a receiving link needs a source address")
                return
            else:
                address = str(source.address)
                link.attach()
            queue = self.queue(address)
            consumers[link] = queue
            queue.add_consumer(Consumer(link, protocol.schedule_flush))
        else:
            assert isinstance(link, ReceiverLink)
            target = remote.target
            if target is None or not target.address:
                self._refuse(link, "a sending link needs a target address")
                return
            link.attach()
            producers[link] = self.queue(str(target.address))
            link.flow(self.credit_window)

    @staticmethod
    def _refuse(link: Link, why: str) -> None:
        link.attach(None, None, keep=False)
        link.detach(Error(condition=engine_errors.NOT_FOUND, description=why))

    def _on_message(self, link: ReceiverLink, delivery: Any, queue: Queue) -> None:
        payload = delivery.payload
        queue.put(payload if type(payload) is bytes else bytes(payload))
        if not delivery.settled:
            link.settle(delivery, _ACCEPTED)
        if link.link_credit < self.credit_window // 2:
            link.flow(self.credit_window)

    @staticmethod
    def _drop(link: Link, consumers: dict[SenderLink, Queue], producers: dict[ReceiverLink, Queue]) -> None:
        if isinstance(link, SenderLink):
            queue = consumers.pop(link, None)
            if queue is not None:
                queue.remove_consumer(link)
        elif isinstance(link, ReceiverLink):
            producers.pop(link, None)
