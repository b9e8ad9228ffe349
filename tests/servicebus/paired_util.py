"""Two embedded namespaces for paired-namespace tests: a primary, and a secondary that
serves the management REST API (for the backlog queues)."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from amqplink.broker import Broker
from amqplink.servicebus import PairedNamespaceOptions, ServiceBusReceiveMode
from amqplink.servicebus.aio import ServiceBusClient, ServiceBusSender
from amqplink.servicebus.message import ServiceBusReceivedMessage

FAST = {"retry_total": 1, "retry_backoff_factor": 0.02, "retry_backoff_max": 0.05, "timeout": 5}
"""Client retry settings that keep a failing send short."""


@asynccontextmanager
async def namespaces(**primary: Any) -> AsyncIterator[tuple[Broker, Broker]]:
    """(primary, secondary) on this loop; ``primary`` keywords go to the primary's Broker."""
    primary.setdefault("servicebus", True)
    async with Broker(**primary) as first, Broker(servicebus=True, http_port=0) as second:
        yield first, second


def options(secondary: Broker, **kwargs: Any) -> PairedNamespaceOptions:
    """Options for ``secondary`` with test-sized intervals (overridable)."""
    values: dict[str, Any] = {
        "backlog_queue_count": 3,
        "failover_interval": dt.timedelta(seconds=0.3),
        "ping_primary_interval": dt.timedelta(seconds=0.2),
        "management_endpoint": f"https://127.0.0.1:{secondary.http_port}/",
        "connection_verify": secondary.http_ca,
        "syphon_wait": dt.timedelta(seconds=1),
        "seed": 0,
    }
    values.update(kwargs)
    return PairedNamespaceOptions(secondary.connection_string, **values)


def paired_client(primary: Broker, secondary: Broker, **kwargs: Any) -> ServiceBusClient:
    return ServiceBusClient.from_connection_string(
        primary.connection_string, paired_namespace=options(secondary, **kwargs), **FAST
    )


def stored(broker: Broker, queue: str) -> int:
    entities = broker.namespace.queues
    return len(entities[queue.lower()].store) if queue.lower() in entities else 0


async def drain(conn_str: str, queue: str, expected: int, timeout: float = 30.0) -> list[ServiceBusReceivedMessage]:
    """Receive (and delete) messages from ``queue`` of the namespace ``conn_str`` until
    ``expected`` came or the deadline passed, then once more briefly (to catch extra
    copies); the list received."""
    got: list[ServiceBusReceivedMessage] = []
    async with (
        ServiceBusClient.from_connection_string(conn_str) as client,
        client.get_queue_receiver(queue, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver,
    ):
        deadline = asyncio.get_running_loop().time() + timeout
        while len(got) < expected and asyncio.get_running_loop().time() < deadline:
            got += await receiver.receive_messages(max_message_count=1000, max_wait_time=1)
        got += await receiver.receive_messages(max_message_count=1000, max_wait_time=0.2)  # nothing more
    return got


@asynccontextmanager
async def plain_sender(broker: Broker, queue: str) -> AsyncIterator[ServiceBusSender]:
    """A sender of a plain (unpaired) client of ``broker``."""
    async with (
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
        client.get_queue_sender(queue) as sender,
    ):
        yield sender


async def send_until_parked(sender: ServiceBusSender, message: Any, timeout: float = 10.0) -> None:
    """Send; while the failover timer runs a failed send raises: send again until it
    succeeds (parked once failover engages) or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            await sender.send_messages(message)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.02)


def syphoned(client: ServiceBusClient) -> int:
    """The client's syphon counter (0 for a client without a pairing)."""
    state = client.paired_state
    return 0 if state is None else state.syphoned
