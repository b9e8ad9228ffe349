"""Receiving a known number of messages in a test, without ever waiting forever.

``receive_exactly`` is for the asyncio receiver, ``receive_exactly_sync`` for the
blocking facade's. Both fail with an AssertionError naming how many messages came
when a receive times out empty.

``batch`` says how many each receive asks for. Left at ``None``, only as many as are
still missing: exactly ``n`` are taken and whatever came after them stays buffered
on the receiver (for tests that take a queue in parts). A number asks for that many
each time, so the last receive may take more than ``n``: that fails too, for tests
that expect exactly ``n`` on the link.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from amqplink import sync
from amqplink.aio import ReceivedMessage


class Receiving(Protocol):
    """What the helpers use of a receiver: ``amqplink.aio.Receiver`` has it."""

    async def receive(self, max_messages: int, timeout: float | None) -> list[ReceivedMessage]: ...

    async def accept(self, *messages: ReceivedMessage) -> None: ...


async def receive_exactly(
    receiver: Receiving, n: int, *, accept: bool = True, batch: int | None = None, timeout: float = 10.0
) -> list[ReceivedMessage]:
    """``n`` messages from ``receiver``, in arrival order; ``accept`` settles each batch as it comes."""
    got: list[ReceivedMessage] = []
    while len(got) < n:
        taken = await receiver.receive(n - len(got) if batch is None else batch, timeout=timeout)
        assert taken, f"only {len(got)} of {n} messages arrived (none more within {timeout} s)"
        if accept:
            await receiver.accept(*taken)
        got += taken
    assert len(got) == n, f"{len(got)} messages arrived, expected {n}"
    return got


class _Waiting:
    """A blocking receiver seen as an asyncio one: each call blocks until it is done."""

    def __init__(self, receiver: sync.Receiver) -> None:
        self.receiver = receiver

    async def receive(self, max_messages: int, timeout: float | None) -> list[ReceivedMessage]:
        return self.receiver.receive(max_messages, timeout=timeout)

    async def accept(self, *messages: ReceivedMessage) -> None:
        self.receiver.accept(*messages)


def receive_exactly_sync(
    receiver: sync.Receiver, n: int, *, accept: bool = True, batch: int | None = None, timeout: float = 10.0
) -> list[ReceivedMessage]:
    """``receive_exactly`` for the blocking facade (from a thread with no running event loop)."""
    return asyncio.run(receive_exactly(_Waiting(receiver), n, accept=accept, batch=batch, timeout=timeout))
