"""``amqplink send``: pipelined sending of N messages of a given size."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

from amqplink.aio import connect
from amqplink.commands.progress import Progress
from amqplink.message import Message

__all__ = ["run_send"]


async def run_send(
    url: str,
    address: str,
    *,
    count: int,
    size: int,
    settled: bool = False,
    in_flight: int = 1000,
    progress: bool | None = None,
    summary: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Send ``count`` messages of ``size`` bytes; return counts, seconds and msg/s.

    ``summary`` (default: a new dict) is filled in as the run goes — ``sent`` and
    ``outcomes`` so far — so a caller that is interrupted can still report it.
    """
    outcomes: Counter[str] = Counter()
    result = summary if summary is not None else {}
    result.update(
        command="send",
        address=address,
        count=count,
        size=size,
        mode="settled" if settled else "unsettled",
        sent=0,
        outcomes=outcomes,
    )
    bar = Progress(f"send {address}", count, enabled=progress)
    body = bytes(size)
    async with await connect(url) as conn:
        sender = await conn.create_sender(
            address, settle_mode="settled" if settled else "unsettled", max_in_flight=in_flight
        )

        def record(future: asyncio.Future[Any]) -> None:
            if future.cancelled():
                outcomes["cancelled"] += 1
            elif future.exception() is not None:
                outcomes["failed"] += 1
            else:
                outcomes[type(future.result()).__name__.lower()] += 1
            bar.advance()

        started = time.perf_counter()
        for i in range(count):
            future = await sender.send_nowait(Message(body, message_id=i))
            result["sent"] = i + 1
            if settled:
                bar.advance()
            else:
                future.add_done_callback(record)
        await sender.wait_settled()
        seconds = time.perf_counter() - started
        await sender.close()
    bar.finish()
    if settled:
        outcomes["settled"] = count
    result.update(
        outcomes=dict(outcomes),
        seconds=round(seconds, 3),
        messages_per_second=round(count / seconds, 1) if seconds > 0 else None,
    )
    return result
