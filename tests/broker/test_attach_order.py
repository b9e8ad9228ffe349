"""The broker's half of issue 9 item 6: a link it refuses is attached first."""

from __future__ import annotations

from amqplink.broker import Broker
from amqplink.codec.types import Symbol, UInt
from amqplink.protocol.definitions import Attach, Detach, Transfer

from .wire import RawClient, frame


async def test_a_transfer_before_any_credit_is_refused_after_the_attach_is_answered() -> None:
    """2.6.3: a link is attached before it is detached; a bare detach would make the
    client end the session with amqp:session:unattached-handle."""
    async with Broker() as broker:
        client = await RawClient.connect(broker.port)
        client.open_session()
        client.attach_sender("early")
        early = Transfer(handle=UInt(0), delivery_id=UInt(0), delivery_tag=b"e", message_format=UInt(0), settled=False)
        client.send(frame(0, early, b"\x00Sw\xa1\x05early"))  # before the broker's attach and flow
        await client.wait_for(Detach)
        kinds = [type(p) for p in client.performatives() if isinstance(p, Attach | Detach)]
        assert kinds == [Attach, Detach]
        (detach,) = [p for p in client.performatives() if isinstance(p, Detach)]
        assert detach.error is not None and detach.error.condition == Symbol("amqp:link:transfer-limit-exceeded")
        assert len(broker.queue("early")) == 0
