"""The demo's consumer: peek-lock receivers with automatic lock renewal and a de-duplicating
id window, checking which rows arrived.

Each message carries its row number in the application property ``row`` or at the start
of its body (``<row>:``). A message whose
id the :class:`Deduplicator` saw already is a duplicate (completed, counted, not
processed); a row seen twice under different ids would be a real duplicate and is
counted apart (``twice``; it must stay 0).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from amqplink.servicebus import ServiceBusReceiveMode
from amqplink.servicebus.aio import AutoLockRenewer, ServiceBusClient, ServiceBusReceiver
from amqplink.servicebus.message import ServiceBusReceivedMessage
from amqplink.servicebus.replication import Deduplicator

__all__ = ["Consumed", "consume"]

RECEIVERS = 2
BATCH = 500


@dataclass
class Consumed:
    """What the consumer saw: rows (after de-duplication), duplicates removed, rows seen twice."""

    rows: set[int] = field(default_factory=set)
    received: int = 0
    duplicates: int = 0
    twice: int = 0
    unreadable: int = 0
    seconds: float = 0.0


def _row(message: ServiceBusReceivedMessage) -> int | None:
    """The row number: the application property ``row``, else what opens the body (``<row>:``)."""
    properties = message.application_properties or {}
    value = properties.get(b"row", properties.get("row"))
    if value is None:
        value = str(message).split(":", 1)[0]  # the body as text
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


async def _receive(
    receiver: ServiceBusReceiver,
    dedup: Deduplicator,
    seen: Consumed,
    expected: int,
    idle: float,
    on_progress: Callable[[Consumed], None],
) -> None:
    loop = asyncio.get_running_loop()
    last = loop.time()
    while len(seen.rows) < expected and loop.time() - last < idle:
        batch = await receiver.receive_messages(max_message_count=BATCH, max_wait_time=1.0)
        if not batch:
            continue
        last = loop.time()
        for message in batch:
            seen.received += 1
            if dedup.seen(str(message.message_id)):
                seen.duplicates += 1
                continue
            row = _row(message)
            if row is None:
                seen.unreadable += 1
            elif row in seen.rows:
                seen.twice += 1
            else:
                seen.rows.add(row)
        await asyncio.gather(*(receiver.complete_message(m) for m in batch))
        on_progress(seen)


async def consume(
    connection_string: str,
    queue: str,
    expected: int,
    *,
    idle: float = 15.0,
    on_progress: Callable[[Consumed], None] = lambda _: None,
) -> Consumed:
    """Receive from ``queue`` until ``expected`` distinct rows arrived (then briefly more, to
    catch extra copies) or nothing came for ``idle`` seconds."""
    seen = Consumed()
    loop = asyncio.get_running_loop()
    started = loop.time()
    with Deduplicator(max_count=max(2 * expected, 1000), window=3600) as dedup:
        async with (
            ServiceBusClient.from_connection_string(connection_string) as client,
            AutoLockRenewer(max_lock_renewal_duration=600) as renewer,
        ):
            receivers = [
                client.get_queue_receiver(
                    queue,
                    receive_mode=ServiceBusReceiveMode.PEEK_LOCK,
                    prefetch_count=BATCH,
                    auto_lock_renewer=renewer,
                )
                for _ in range(RECEIVERS)
            ]
            try:
                await asyncio.gather(*(_receive(r, dedup, seen, expected, idle, on_progress) for r in receivers))
                seen.seconds = loop.time() - started
                # Extra copies arrive after the last row: a short look for them.
                await asyncio.gather(*(_receive(r, dedup, seen, expected + 1, 1.0, on_progress) for r in receivers))
            finally:
                for receiver in receivers:
                    await receiver.close()
    return seen
