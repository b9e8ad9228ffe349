"""A peer that sends past the receiver's credit: delivered by default, refused on request.

"the receiver MAY either handle the excess messages normally or detach the link with
a transfer-limit-exceeded error code" (2.6.7).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from amqplink import Message
from amqplink.aio import LinkDetachedError, connect
from amqplink.aio.server import serve
from amqplink.aio.transport import EngineProtocol
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.events import Event, LinkAttachRequested, LinkCreditChanged
from amqplink.engine.link import SenderLink

EXTRA = 3


def _overshooting(engine: EngineConnection, protocol: EngineProtocol) -> Callable[[list[Event]], None]:
    """On the receiver's first grant, sends that many messages and ``EXTRA`` more."""
    sent = False

    def on_events(events: list[Event]) -> None:
        nonlocal sent
        for event in events:
            if isinstance(event, LinkAttachRequested):
                event.link.attach()
            elif isinstance(event, LinkCreditChanged) and not sent and event.link.link_credit > 0:
                link = event.link
                assert isinstance(link, SenderLink)
                sent = True
                total = link.link_credit + EXTRA
                link.link_credit = total  # believe in credit that was never granted
                for i in range(total):
                    link.send(Message(f"m{i}").encode(), settled=True)
        protocol.flush()

    return on_events


async def test_excess_deliveries_reach_the_application_by_default() -> None:
    server = await serve(_overshooting)
    try:
        async with await connect(f"amqp://127.0.0.1:{server.sockets[0].getsockname()[1]}") as conn:
            receiver = await conn.create_receiver("q", mode="receive-and-delete", prefetch=2)
            got: list[object] = []
            while len(got) < 2 + EXTRA:
                got += [m.body for m in await receiver.receive(10, timeout=5)]
            assert got == [f"m{i}" for i in range(2 + EXTRA)]
    finally:
        server.close()
        await server.wait_closed()


async def test_excess_delivery_detaches_with_transfer_limit_exceeded_when_asked() -> None:
    server = await serve(_overshooting)
    try:
        url = f"amqp://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        async with await connect(url, on_excess_transfer="detach") as conn:
            receiver = await conn.create_receiver("q", mode="receive-and-delete", prefetch=2)
            with pytest.raises(LinkDetachedError, match="transfer-limit-exceeded"):
                for _ in range(10):  # the two granted messages, then the error
                    await receiver.receive(10, timeout=5)
            assert not conn.closed  # only the link ended
    finally:
        server.close()
        await server.wait_closed()
