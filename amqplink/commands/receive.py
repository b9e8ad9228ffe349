"""``amqplink receive``: receive N messages, settling them in peek-lock mode."""

from __future__ import annotations

import time
from typing import Any

from amqplink.aio import connect
from amqplink.aio.receiver import ReceiverMode
from amqplink.commands.progress import Progress

__all__ = ["run_receive"]


async def run_receive(
    url: str,
    address: str,
    *,
    count: int,
    mode: ReceiverMode = "peek-lock",
    prefetch: int = 1000,
    idle_timeout: float = 10.0,
    progress: bool | None = None,
    summary: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Receive up to ``count`` messages; stop early after ``idle_timeout`` s without one.

    ``summary`` (default: a new dict) is filled in as the run goes — ``count``
    received (and, in peek-lock mode, accepted) so far — so a caller that is
    interrupted can still report it.
    """
    bar = Progress(f"receive {address}", count, enabled=progress)
    result = summary if summary is not None else {}
    result.update(command="receive", address=address, count=0, requested=count, mode=mode, body_bytes=0)
    received = 0
    payload_bytes = 0
    async with await connect(url) as conn:
        receiver = await conn.create_receiver(address, mode=mode, prefetch=prefetch)
        started = time.perf_counter()
        while received < count:
            batch = await receiver.receive(min(count - received, max(1, prefetch)), timeout=idle_timeout)
            if not batch:
                break
            if mode == "peek-lock":
                await receiver.accept(*batch)
            received += len(batch)
            payload_bytes += sum(len(m.body) if isinstance(m.body, bytes | bytearray) else 0 for m in batch)
            result.update(count=received, body_bytes=payload_bytes)
            bar.advance(len(batch))
        seconds = time.perf_counter() - started
        await receiver.close()
    bar.finish()
    result.update(
        seconds=round(seconds, 3),
        messages_per_second=round(received / seconds, 1) if seconds > 0 else None,
        complete=received == count,
    )
    return result
