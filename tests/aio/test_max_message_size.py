"""``max_message_size`` from ``connect`` and ``create_receiver`` reaches the receiver's
attach, and a peer that sends past it detaches the receiver instead of filling memory.

"max-message-size: the maximum message size supported by the link endpoint. Any
attempt to deliver a message larger than this results in a message-size-exceeded
link-error." (2.7.3)
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from amqplink.aio import LinkDetachedError, connect
from amqplink.aio.server import serve
from amqplink.aio.transport import EngineProtocol
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.events import Event, LinkAttachRequested, LinkCreditChanged
from amqplink.engine.link import DEFAULT_MAX_MESSAGE_SIZE, SenderLink


class OversizeServer:
    """Records each receiver's advertised max-message-size; on the first grant, sends a
    message of ``size`` bytes whatever the receiver said (a peer that does not check)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.advertised: list[int | None] = []

    def __call__(self, engine: EngineConnection, protocol: EngineProtocol) -> Callable[[list[Event]], None]:
        def on_events(events: list[Event]) -> None:
            for event in events:
                if isinstance(event, LinkAttachRequested):
                    remote = event.link.remote_attach
                    assert remote is not None
                    self.advertised.append(remote.max_message_size)
                    event.link.attach()
                elif isinstance(event, LinkCreditChanged) and event.link.link_credit > 0:
                    link = event.link
                    assert isinstance(link, SenderLink)
                    link.peer_max_message_size = 0  # ignore the receiver's limit
                    link.send(b"\x00\x53\x75\xb0" + (self.size - 8).to_bytes(4, "big") + bytes(self.size - 8))
            protocol.flush()

        return on_events


async def test_max_message_size_reaches_the_attach_and_an_oversize_delivery_detaches() -> None:
    peer = OversizeServer(size=3000)
    server = await serve(peer)
    try:
        url = f"amqp://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        async with await connect(url) as conn:
            default = await conn.create_receiver("q", mode="receive-and-delete", prefetch=0)
            assert default.link.max_message_size == DEFAULT_MAX_MESSAGE_SIZE
        async with await connect(url, max_message_size=5000) as conn:
            await conn.create_receiver("q", mode="receive-and-delete", prefetch=0)
            small = await conn.create_receiver("q", mode="receive-and-delete", prefetch=1, max_message_size=2000)
            with pytest.raises(LinkDetachedError, match="message-size-exceeded"):
                await small.receive(1, timeout=5)
            assert not conn.closed  # only the link ended
        assert peer.advertised == [DEFAULT_MAX_MESSAGE_SIZE, 5000, 2000]
    finally:
        server.close()
        await server.wait_closed()
