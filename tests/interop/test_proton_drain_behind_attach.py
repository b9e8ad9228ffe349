"""qpid-proton's ``receiver.drain`` right behind its attach, against amqplink's engine as
the server (no broker: a scripted sender), whose delivery-count starts near 2**32.

"If the sender's drain flag is set and there are no available messages, the sender
MUST advance the delivery-count until link-credit is zero, and send its updated flow
state to the receiver." (2.6.7) The drain arrives before the server's application has
answered the attach; it is answered once the attach is sent, and afterwards both ends
agree on delivery-count and credit (a later grant of 1 lets exactly one more through).
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from proton.handlers import MessagingHandler
from proton.reactor import Container

from amqplink import Message
from amqplink.aio.server import serve
from amqplink.aio.transport import EngineProtocol
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.events import Event, LinkAttachRequested, LinkCreditChanged
from amqplink.engine.link import SenderLink

INITIAL = 2**32 - 5  # RabbitMQ 4's senders start here
QUEUED = 2  # messages the server has when the drain arrives
DRAIN = 5  # credit the drain grants


class DrainServer:
    """Answers an attach only once the drain behind it has arrived, then sends ``QUEUED``
    messages; sends one more on any later grant."""

    def __init__(self) -> None:
        self.drain_before_attach: list[bool] = []
        self.grants: list[tuple[int, bool]] = []
        self.links: list[SenderLink] = []

    def __call__(self, engine: EngineConnection, protocol: EngineProtocol) -> Callable[[list[Event]], None]:
        answered: set[SenderLink] = set()

        def answer(link: SenderLink) -> None:
            answered.add(link)
            self.drain_before_attach.append(link.drain)
            link.delivery_count = INITIAL
            link.attach()
            for i in range(QUEUED):
                link.send(Message(f"m{i}").encode(), settled=True)

        def on_events(events: list[Event]) -> None:
            for event in events:
                link = event.link if isinstance(event, LinkAttachRequested | LinkCreditChanged) else None
                if not isinstance(link, SenderLink):
                    continue
                if isinstance(event, LinkAttachRequested):
                    self.links.append(link)
                    if link.drain:
                        answer(link)
                elif isinstance(event, LinkCreditChanged):
                    self.grants.append((event.credit, event.drain))
                    if link not in answered:
                        if event.drain:
                            answer(link)
                    elif event.credit > 0 and not event.drain:
                        link.send(Message("after").encode(), settled=True)
            protocol.flush()

        return on_events


@pytest.fixture()
def drain_server() -> Iterator[tuple[str, DrainServer]]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="drain-server", daemon=True)
    thread.start()
    handler = DrainServer()
    server = asyncio.run_coroutine_threadsafe(serve(handler), loop).result(10)
    try:
        yield f"amqp://127.0.0.1:{server.sockets[0].getsockname()[1]}", handler
    finally:

        async def stop() -> None:
            server.close()
            await server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


class DrainingReceiver(MessagingHandler):
    """Attaches a receiver and drains ``DRAIN`` at once; once drained, grants 1 and
    waits for that one message."""

    DEADLINE = 30.0

    def __init__(self, url: str) -> None:
        super().__init__(prefetch=0)
        self.url = url
        self.bodies: list[Any] = []
        self.credit_after_drain: int | None = None
        self.drained = False
        self.timed_out = False

    def on_start(self, event: Any) -> None:
        event.container.schedule(self.DEADLINE, self)
        conn = event.container.connect(self.url)
        receiver = event.container.create_receiver(conn, "q", name=f"proton-{uuid.uuid4()}")
        receiver.drain(DRAIN)

    def on_timer_task(self, event: Any) -> None:
        self.timed_out = True
        event.container.stop()

    def on_link_flow(self, event: Any) -> None:
        link = event.link
        if link.is_receiver and not self.drained and link.drain_mode and link.credit == 0:
            self.drained = True
            self.credit_after_drain = link.credit
            link.drain_mode = False
            link.flow(1)

    def on_message(self, event: Any) -> None:
        self.bodies.append(event.message.body)
        if self.drained and len(self.bodies) == QUEUED + 1:
            event.connection.close()

    def on_connection_closed(self, event: Any) -> None:
        event.container.stop()


def test_proton_drain_right_behind_the_attach_is_answered(drain_server: tuple[str, DrainServer]) -> None:
    url, server = drain_server
    client = DrainingReceiver(url)
    Container(client).run()
    assert not client.timed_out, "the drain was never answered"
    assert server.drain_before_attach == [True], "the drain arrived before the attach was answered"
    assert client.credit_after_drain == 0
    assert client.bodies == ["m0", "m1", "after"]
    (link,) = server.links
    # the drain used two credits for messages and gave three back; the next grant is
    # computed from proton's delivery-count: it agrees with ours, so it is exactly 1
    assert server.grants == [(DRAIN, True), (1, False)]
    assert link.delivery_count == (INITIAL + DRAIN + 1) % 2**32
    assert link.link_credit == 0

