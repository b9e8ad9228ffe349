"""A body handed to send is sent as ``Message(body)``: only bytes-likes are data sections."""

from __future__ import annotations

from typing import Any

from amqplink import Message
from amqplink.aio import connect
from amqplink.broker import Broker
from amqplink.protocol.definitions import Accepted
from tests.receiving import receive_exactly

BODIES: list[Any] = ["hello", "", {"k": 1, "nested": [1, 2]}, [1, "two"], None, 42, 2.5, True, b"raw", bytearray(b"ba")]


def _expected(body: Any) -> tuple[Any, str]:
    message = Message(body)
    return message.body, message.body_type


async def test_send_send_nowait_and_send_many_encode_bodies_as_message_does() -> None:
    async with Broker() as broker, await connect(broker.url) as conn:
        sender = await conn.create_sender("q")
        for body in BODIES:
            assert isinstance(await sender.send(body), Accepted)
        for body in BODIES:
            assert isinstance(await (await sender.send_nowait(body)), Accepted)
        assert all(isinstance(o, Accepted) for o in await sender.send_many(BODIES))
        settled = await conn.create_sender("q", settle_mode="settled")
        await settled.send_many(BODIES)
        await settled.wait_settled()
        receiver = await conn.create_receiver("q", mode="peek-lock", prefetch=50)
        got = await receive_exactly(receiver, 4 * len(BODIES))
        assert receiver.decode_failures == 0
        assert [(m.body, m.body_type) for m in got] == [_expected(b) for b in BODIES] * 4
        assert got[0].body == "hello" and got[0].body_type == "value"
        assert got[8].body == b"raw" and got[8].body_type == "data"
