"""A receiver settles only with the outcomes the peer's source offers (3.5.3 ``outcomes``).

RabbitMQ 3.x offers accepted, rejected and released, and ends the whole session when it
gets a ``modified``; the client refuses such a settlement locally instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from amqplink import Message
from amqplink.aio import SettlementError, connect
from amqplink.aio.server import serve
from amqplink.aio.transport import EngineProtocol
from amqplink.codec.types import Symbol
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.events import DeliveriesUpdated, Event, LinkAttachRequested, LinkCreditChanged
from amqplink.engine.link import SenderLink
from amqplink.protocol.definitions import Released, Source

OFFERED = [Symbol("amqp:accepted:list"), Symbol("amqp:rejected:list"), Symbol("amqp:released:list")]


async def test_an_outcome_the_source_does_not_offer_is_refused_locally() -> None:
    outcomes: list[Any] = []
    sent: set[SenderLink] = set()

    def factory(engine: EngineConnection, protocol: EngineProtocol) -> Callable[[list[Event]], None]:
        def on_events(events: list[Event]) -> None:
            for event in events:
                if isinstance(event, LinkAttachRequested):
                    remote = event.link.remote_attach
                    assert remote is not None and remote.source is not None
                    event.link.attach(source=Source(address=remote.source.address, outcomes=OFFERED))
                elif isinstance(event, LinkCreditChanged) and event.link not in sent:
                    sent.add(event.link)
                    event.link.send(Message(b"m").encode())
                elif isinstance(event, DeliveriesUpdated) and event.state is not None:
                    outcomes.extend([event.state] * len(event.deliveries))

        return on_events

    server = await serve(factory)
    port = server.sockets[0].getsockname()[1]
    try:
        async with await connect(f"amqp://127.0.0.1:{port}") as conn:
            receiver = await conn.create_receiver("q", mode="peek-lock", prefetch=1)
            assert receiver.confirm  # so release() returns once the server has the outcome
            [message] = await receiver.receive(1, timeout=5)
            with pytest.raises(SettlementError, match="offers only amqp:accepted:list"):
                await receiver.modify(message)
            assert not message.settled and not receiver.closed and outcomes == []
            await receiver.release(message)
            assert message.settled
            assert [type(o) for o in outcomes] == [Released]
    finally:
        server.close()
        await server.wait_closed()
