"""``amqplink roundtrip``: a plain round trip through the embedded broker (or any broker by URL).

Without ``--url`` the broker is the embedded Service Bus namespace (queues made on
first use, locks, sequence numbers), as the rest of the product targets.

Sends ``count`` messages pipelined with outcomes, receives them back in peek-lock
mode with accept, and checks that every message arrived exactly once.
"""

from __future__ import annotations

from typing import Any

from amqplink.aio.url import parse_url
from amqplink.broker import Broker
from amqplink.commands.receive import run_receive
from amqplink.commands.send import run_send

__all__ = ["run_roundtrip"]


async def run_roundtrip(
    url: str | None,
    address: str,
    *,
    count: int,
    size: int,
    progress: bool | None = None,
    summary: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Round-trip ``count`` messages; ``url=None`` starts the embedded broker in-process.

    ``summary`` (default: a new dict) holds ``sent``, ``accepted`` and ``received``
    so far while the run goes, for a caller that is interrupted.
    """
    result = summary if summary is not None else {}
    target = parse_url(url).url if url else "embedded Service Bus namespace"
    result.update(command="roundtrip", broker=target, sent=0, accepted=0, received=0)
    sent: dict[str, Any] = {}
    got: dict[str, Any] = {}

    def so_far() -> None:
        result.update(
            sent=sent.get("sent", 0), accepted=sent.get("outcomes", {}).get("accepted", 0), received=got.get("count", 0)
        )

    broker: Broker | None = None
    if url is None:
        broker = await Broker(servicebus=True).start()
        url = broker.url
    try:
        await run_send(url, address, count=count, size=size, progress=progress, summary=sent)
        so_far()
        await run_receive(url, address, count=count, progress=progress, idle_timeout=10.0, summary=got)
    finally:
        so_far()
        if broker is not None:
            await broker.stop()
    result.update(
        lost=count - got["count"],
        send_messages_per_second=sent["messages_per_second"],
        receive_messages_per_second=got["messages_per_second"],
        ok=result["accepted"] == count and got["count"] == count,
    )
    return result
