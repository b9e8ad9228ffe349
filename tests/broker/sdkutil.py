"""A Service Bus broker on its own event loop thread, for the official (blocking) SDK."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig


@contextmanager
def running_broker(config: BrokerConfig | None = None, **kwargs: Any) -> Iterator[Broker]:
    loop = asyncio.new_event_loop()
    broker = Broker(config, servicebus=True, **kwargs)
    thread = threading.Thread(target=loop.run_forever, name="sb-broker", daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(broker.start(), loop).result(10)
    try:
        yield broker
    finally:
        asyncio.run_coroutine_threadsafe(broker.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
