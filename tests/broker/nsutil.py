"""Helpers for the namespace tests: messages as the SDK would send them, decoded deliveries."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from amqplink.broker.config import EntityProperties, NamespaceConfig, QueueConfig, SubscriptionConfig, TopicConfig
from amqplink.broker.connection.dispositions import Dispositions
from amqplink.broker.durable import Persistence
from amqplink.broker.namespace import BATCH_FORMAT, Entity, Namespace, StoredMessage
from amqplink.message import Message
from amqplink.protocol.definitions import Disposition, Rejected

T0 = 1_700_000_000.0


def payload(body: bytes = b"x", **friendly: Any) -> bytes:
    return Message(body, **friendly).encode()


def delivered(entity: Entity, msg: StoredMessage, *, peek: bool = False) -> Message:
    return Message.decode(entity.encode(msg, peek=peek))


def send(ns: Namespace, address: str, now: float = T0, body: bytes = b"x", **friendly: Any) -> None:
    ns.send(ns.sender_target(address), payload(body, **friendly), now)


@contextmanager
def per_delivery_outcomes(*, each: bool = False) -> Iterator[list[None]]:
    """While open, one entry per outcome the broker handled one delivery at a time
    (``Dispositions.on_outcome``, the path a disposition range goes without);
    ``each``: every range's outcomes go that way, one delivery at a time (the reference
    the ranges are compared with)."""
    calls: list[None] = []
    original = Dispositions.on_outcome
    ranges = Dispositions.on_outcomes

    def counting(self: Dispositions, *args: Any) -> None:
        calls.append(None)
        original(self, *args)

    def one_at_a_time(self: Dispositions, consumer: Any, deliveries: Any, state: Any, now: float) -> None:
        for delivery in deliveries:
            self.on_outcome(consumer, delivery, state, now)

    Dispositions.on_outcome = counting  # type: ignore[method-assign]
    if each:
        Dispositions.on_outcomes = one_at_a_time  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        Dispositions.on_outcome = original  # type: ignore[method-assign]
        Dispositions.on_outcomes = ranges  # type: ignore[method-assign]


def disposition_rows(dispositions: Iterable[Disposition]) -> list[tuple[Any, ...]]:
    """(first, last, settled, outcome, rejection condition) of each disposition."""
    return [
        (int(d.first), None if d.last is None else int(d.last), d.settled, type(d.state).__name__,
         d.state.error.condition if isinstance(d.state, Rejected) and d.state.error is not None else None)
        for d in dispositions
    ]  # fmt: skip


def namespace_of(queues: dict[str, EntityProperties]) -> Namespace:
    """A namespace with ``queues`` and a topic ``topic`` with one subscription ``all``."""
    return Namespace(
        NamespaceConfig(
            queues=tuple(QueueConfig(name, props) for name, props in queues.items()),
            topics=(TopicConfig("topic", subscriptions=(SubscriptionConfig("all"),)),),
        )
    )


SENT_PAYLOADS: list[tuple[bytes, int]] = [
    (payload(b"body only"), 0),
    (payload(bytes(1000)), 0),
    (payload(bytes(1600)), 0),  # above the small queues' maximum
    (payload(b"with id", message_id="m1"), 0),
    (payload(b"with session", session_id="s1"), 0),
    (payload(b"with key", partition_key="k"), 0),
    (payload(b"with ttl", ttl=5.0), 0),
    (payload(b"format 7"), 7),
    (Message([b"one", payload(b"two")]).encode(), BATCH_FORMAT),
    (b"\x00\x53\x75\xa0", 0),  # a data section cut short: only a body, as far as it goes
    (b"\x00\x53\x70\xff", 0),  # a header that cannot be decoded
    (b"", 0),
]
"""Sent transfers (payload, message-format) of every shape the broker's send paths tell apart."""


async def commit_outcome(store: Persistence) -> BaseException | None:
    """What the durable store's next commit ends with (None: written), within 10 s."""
    done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
    store.after_commit(done.set_result)
    return await asyncio.wait_for(done, 10)


async def committed(store: Persistence) -> None:
    """Wait for the durable store's next commit, which must succeed."""
    assert await commit_outcome(store) is None
