"""``spark.read.format("servicebus")``: the messages an entity holds, peeked (nothing locked,
settled or counted as a delivery), so a batch read is repeatable and leaves the entity as it
was.

Planning (on the driver's side) finds the sequence numbers there are with peeks:
``peek_messages(sequence_number=x, max_message_count=1)`` returns the first message at or
after ``x``, so the first one is one peek and the last one an exponential then binary
search (about twice log2 of the span, a few dozen peeks). A partitioned entity numbers each
fragment's messages apart (the fragment in the top 16 bits), so each fragment's span is
found and split on its own. The spans are split into ``numPartitions`` ranges (default
:data:`DEFAULT_PARTITIONS`); each task peeks its range, in pages of :data:`PAGE`.

A session entity is peeked session by session (Service Bus peeks a session's messages
through a receiver of that session, which locks the session for as long as the peek takes:
another consumer of that session waits meanwhile); the sessions are listed on the driver and
shared out among the tasks.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from amqplink.servicebus.aio import ServiceBusClient, ServiceBusReceiver
from amqplink.servicebus.constants import ServiceBusSubQueue
from amqplink.spark.credentials import make_async_client
from amqplink.spark.rows import to_arrow
from amqplink.spark.source_options import SourceConfig
from amqplink.sync import loop

__all__ = ["DEFAULT_PARTITIONS", "PAGE", "SequenceRange", "ServiceBusBatchReader", "last_at_or_before", "plan"]

DEFAULT_PARTITIONS = 4
PAGE = 1000
"""Messages per peek request."""
FRAGMENT_SHIFT = 48
"""A partitioned entity's sequence numbers carry the fragment in their top 16 bits."""


@dataclass(frozen=True)
class SequenceRange(InputPartition):
    """One task's share: sequence numbers ``first..last`` (inclusive), or the sessions named."""

    first: int = 0
    last: int = -1
    sessions: tuple[str, ...] = ()


First = Callable[[int], Awaitable[int | None]]
"""The sequence number of the first message at or after a sequence number, or None."""


async def last_at_or_before(first: First, low: int, bound: int) -> int:
    """The largest sequence number below ``bound`` (a message ``low`` exists, ``low < bound``):
    steps doubling from ``low`` until nothing is found, then halving."""
    step = 1
    while True:
        probe = low + step
        if probe >= bound:
            high = bound
            break
        found = await first(probe)
        if found is None or found >= bound:
            high = probe  # nothing in [probe, bound)
            break
        low = found
        step *= 2
    while high - low > 1:  # low exists; nothing in [high, bound)
        middle = (low + high) // 2
        found = await first(middle)
        if found is not None and found < high:
            low = found
        else:
            high = middle
    return low


async def spans(first: First, start: int, end: int | None) -> list[tuple[int, int]]:
    """``(first, last)`` sequence numbers of each fragment holding messages in ``[start, end]``."""
    out: list[tuple[int, int]] = []
    cursor = start
    limit = (end + 1) if end is not None else 1 << 64
    while cursor < limit:
        low = await first(cursor)
        if low is None or low >= limit:
            break
        fragment_end = min(limit, ((low >> FRAGMENT_SHIFT) + 1) << FRAGMENT_SHIFT)
        high = await last_at_or_before(first, low, fragment_end)
        out.append((low, high))
        cursor = fragment_end
    return out


def plan(found: list[tuple[int, int]], parts: int) -> list[SequenceRange]:
    """``found`` spans as at most ``parts`` ranges (a span split in proportion to its width)."""
    total = sum(last - first + 1 for first, last in found)
    ranges: list[SequenceRange] = []
    for first, last in found:
        share = max(1, round(parts * (last - first + 1) / total)) if total else 1
        width = math.ceil((last - first + 1) / share)
        ranges += [SequenceRange(lo, min(last, lo + width - 1)) for lo in range(first, last + 1, width)]
    return ranges


def _receiver(client: ServiceBusClient, config: SourceConfig, session_id: str | None = None) -> ServiceBusReceiver:
    path = config.path
    sub_queue = ServiceBusSubQueue.DEAD_LETTER if path.dead_letter else None
    options: dict[str, Any] = {"sub_queue": sub_queue}
    if session_id is not None:
        options["session_id"] = session_id
    if path.queue is not None:
        return client.get_queue_receiver(path.queue, **options)
    assert path.topic is not None and path.subscription is not None
    return client.get_subscription_receiver(path.topic, path.subscription, **options)


async def _plan(config: SourceConfig) -> list[SequenceRange]:
    parts = config.num_partitions or DEFAULT_PARTITIONS
    async with make_async_client(config) as client:
        if config.sessions:
            path = config.path
            if path.queue is not None:
                listed = client.list_queue_sessions(path.queue)
            else:
                assert path.topic is not None and path.subscription is not None
                listed = client.list_subscription_sessions(path.topic, path.subscription)
            sessions = sorted([session async for session in listed])
            return [SequenceRange(sessions=tuple(sessions[i::parts])) for i in range(min(parts, len(sessions)))]
        async with _receiver(client, config) as receiver:

            async def first(at: int) -> int | None:
                page = await receiver.peek_messages(1, sequence_number=max(1, at))
                return None if not page else int(page[0].sequence_number or 0)

            found = await spans(first, config.starting_sequence_number, config.ending_sequence_number)
    return plan(found, parts)


def _peek_range(receiver: ServiceBusReceiver, first: int, last: int | None) -> Iterator[list[Any]]:
    """The pages of messages ``first..last`` (None: to the end), peeked :data:`PAGE` at a time
    (one page in memory at a time)."""
    cursor = max(1, first)
    while True:
        page = loop.run(receiver.peek_messages(PAGE, sequence_number=cursor))
        kept = [m for m in page if last is None or int(m.sequence_number or 0) <= last]
        if kept:
            yield kept
        if not page or len(kept) < len(page):
            return
        cursor = int(page[-1].sequence_number or 0) + 1


def _pages(config: SourceConfig, part: SequenceRange) -> Iterator[list[Any]]:
    client = make_async_client(config)
    try:
        if not part.sessions:
            yield from _peek_range(_receiver(client, config), part.first, part.last)
        for session in part.sessions:
            receiver = _receiver(client, config, session)
            yield from _peek_range(receiver, config.starting_sequence_number, config.ending_sequence_number)
            loop.run(receiver.close())  # the session's lock let go at once
    finally:
        loop.run(client.close())


class ServiceBusBatchReader(DataSourceReader):
    """The batch source's reader (see the module); pickles with the config only."""

    def __init__(self, config: SourceConfig) -> None:
        self.config = config

    def __repr__(self) -> str:
        return f"ServiceBusBatchReader({self.config!r})"

    def partitions(self) -> Sequence[InputPartition]:
        ranges = loop.run(_plan(self.config))
        return ranges or [SequenceRange(1, 0)]  # nothing there: one task that finds nothing

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, SequenceRange)
        if partition.last < partition.first and not partition.sessions:
            return
        for page in _pages(self.config, partition):
            yield to_arrow(page, self.config.path.path)
