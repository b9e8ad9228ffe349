"""The durable client-side queue (seed 003: "the application can implement a durable
client-side queue to prevent message loss and to shield the sender from any transient
Service Bus errors").

    client = ServiceBusClient.from_connection_string(conn_str, local_queue=LocalQueueOptions("/var/lib/app/outbox"))

Modules: :mod:`.options` (the options value), :mod:`.records` (the file layout),
:mod:`.segments` (reading a directory back), :mod:`.store` (writing it: appends,
acknowledgements, compaction, the lock), :mod:`.queue` (a client's queue: group commit,
forwarding, state), :mod:`.sender` (where sends meet it), :mod:`.errors`.
"""

from __future__ import annotations

from amqplink.servicebus.localqueue.errors import (
    LocalQueueCorruptError,
    LocalQueueError,
    LocalQueueFullError,
    LocalQueueInUseError,
)
from amqplink.servicebus.localqueue.options import LocalQueueOptions
from amqplink.servicebus.localqueue.queue import EntityBacklog, LocalQueueState

__all__ = [
    "EntityBacklog",
    "LocalQueueCorruptError",
    "LocalQueueError",
    "LocalQueueFullError",
    "LocalQueueInUseError",
    "LocalQueueOptions",
    "LocalQueueState",
]
