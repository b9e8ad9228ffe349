"""The asyncio Service Bus API, as ``azure.servicebus.aio``: port code by changing the import.

from amqplink.servicebus import ServiceBusMessage
from amqplink.servicebus.aio import ServiceBusClient

async with ServiceBusClient.from_connection_string(conn_str) as client:
    async with client.get_queue_sender("orders") as sender:
        await sender.send_messages(ServiceBusMessage("hello"))
"""

from __future__ import annotations

from amqplink.servicebus.client import ServiceBusClient
from amqplink.servicebus.localqueue import (
    LocalQueueCorruptError,
    LocalQueueError,
    LocalQueueFullError,
    LocalQueueOptions,
    LocalQueueState,
)
from amqplink.servicebus.lock_renewer import AutoLockRenewer
from amqplink.servicebus.paired import BacklogQueueError, PairedNamespaceOptions, PairedState
from amqplink.servicebus.receiver import ServiceBusReceiver
from amqplink.servicebus.replication import DedupCounters, Deduplicator, ReplicationError
from amqplink.servicebus.replication.receiver import DeduplicatingReceiver
from amqplink.servicebus.replication.senders import ActiveReplicationSender, PassiveReplicationSender
from amqplink.servicebus.sender import ServiceBusSender
from amqplink.servicebus.session import ServiceBusSession
from amqplink.servicebus.transaction import ServiceBusTransaction

__all__ = [
    "ActiveReplicationSender",
    "AutoLockRenewer",
    "BacklogQueueError",
    "LocalQueueCorruptError",
    "LocalQueueError",
    "LocalQueueFullError",
    "LocalQueueOptions",
    "LocalQueueState",
    "DedupCounters",
    "DeduplicatingReceiver",
    "Deduplicator",
    "PairedNamespaceOptions",
    "PairedState",
    "PassiveReplicationSender",
    "ReplicationError",
    "ServiceBusClient",
    "ServiceBusReceiver",
    "ServiceBusSender",
    "ServiceBusSession",
    "ServiceBusTransaction",
]
