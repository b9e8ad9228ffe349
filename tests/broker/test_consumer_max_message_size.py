"""A consumer that advertises a max-message-size smaller than the message at the head
of the queue: "Any attempt to deliver a message larger than this results in a
message-size-exceeded link-error" (2.7.3). Its link is detached with that condition;
the message stays queued for a consumer that takes it (nothing is lost, the
connection stays up)."""

from __future__ import annotations

import pytest

from amqplink.aio import LinkDetachedError, connect
from amqplink.broker import Broker


async def test_a_message_larger_than_a_consumers_limit_detaches_it_and_stays_queued() -> None:
    async with Broker() as broker, await connect(broker.url) as conn:
        sender = await conn.create_sender("q")
        await sender.send(b"x" * 100)
        small = await conn.create_receiver("q", max_message_size=20, prefetch=1)
        with pytest.raises(LinkDetachedError, match="message-size-exceeded"):
            await small.receive(1, timeout=5)
        assert not conn.closed
        assert len(broker.queue("q")) == 1
        large = await conn.create_receiver("q", prefetch=1)
        (message,) = await large.receive(1, timeout=5)
        assert message.body == b"x" * 100
