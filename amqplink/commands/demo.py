"""``amqplink demo``: the main job against the embedded broker (or any broker by URL).

Sends ``count`` messages pipelined with outcomes, receives them back in peek-lock
mode with accept, and checks that every message arrived exactly once.
"""

from __future__ import annotations

from typing import Any

from amqplink.aio.url import parse_url
from amqplink.broker import Broker
from amqplink.commands.receive import run_receive
from amqplink.commands.send import run_send

__all__ = ["run_demo"]


async def run_demo(
    url: str | None, address: str, *, count: int, size: int, progress: bool | None = None
) -> dict[str, Any]:
    """Round-trip ``count`` messages; ``url=None`` starts the embedded broker in-process."""
    broker: Broker | None = None
    if url is None:
        broker = await Broker().start()
        url = broker.url
    try:
        sent = await run_send(url, address, count=count, size=size, progress=progress)
        got = await run_receive(url, address, count=count, progress=progress, idle_timeout=10.0)
    finally:
        if broker is not None:
            await broker.stop()
    accepted = sent["outcomes"].get("accepted", 0)
    return {
        "command": "demo",
        "broker": "embedded" if broker is not None else parse_url(url).url,
        "sent": count,
        "accepted": accepted,
        "received": got["count"],
        "lost": count - got["count"],
        "send_messages_per_second": sent["messages_per_second"],
        "receive_messages_per_second": got["messages_per_second"],
        "ok": accepted == count and got["count"] == count,
    }
