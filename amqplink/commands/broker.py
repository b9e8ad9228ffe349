"""``amqplink broker``: run the embedded broker until interrupted."""

from __future__ import annotations

import asyncio
import logging

from amqplink.broker import Broker

__all__ = ["run_broker"]

log = logging.getLogger(__name__)


async def run_broker(host: str, port: int, *, ready: asyncio.Event | None = None) -> None:
    """Serve on ``host:port`` until cancelled; prints the URL once listening."""
    broker = Broker()
    try:
        await broker.start(host, port)
    except OSError as exc:
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    print(f"amqplink broker listening on amqp://{host}:{broker.port}", flush=True)
    if ready is not None:
        ready.set()
    try:
        await asyncio.Event().wait()
    finally:
        await broker.stop()
