"""A client that skips SASL (item 23): the broker admits anonymous clients, so the AMQP
header first is answered in kind (raw socket; qpid-proton's is in tests/interop)."""

from __future__ import annotations

from amqplink.broker import Broker
from amqplink.engine.frames import AMQP_HEADER
from amqplink.protocol.definitions import Attach, Begin, Flow, Open

from .wire import RawClient


async def test_a_raw_client_without_sasl_opens_and_attaches() -> None:
    async with Broker() as broker:
        client = await RawClient.connect(broker.port)
        client.open_session(sasl=False)
        client.attach_sender("plain")
        await client.wait_for(Flow)
        assert bytes(client.received).startswith(AMQP_HEADER + b"\x00\x00")  # no SASL header, a frame
        kinds = [type(p) for p in client.performatives()]
        assert kinds[:4] == [Open, Begin, Attach, Flow]
        client.close()
