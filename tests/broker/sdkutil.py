"""A Service Bus broker on its own event loop thread, for the official (blocking) SDK."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig
from tests.conftest import broker_thread


@contextmanager
def running_broker(config: BrokerConfig | None = None, **kwargs: Any) -> Iterator[Broker]:
    """A broker serving a Service Bus namespace (``config``, or queues made on first use)."""
    with broker_thread(Broker(config, servicebus=True, **kwargs)) as broker:
        yield broker
