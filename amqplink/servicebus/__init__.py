"""Azure Service Bus semantics on top of the asyncio client, with azure-servicebus 7.x's names.

This package is the blocking API (as ``azure.servicebus``); :mod:`amqplink.servicebus.aio`
is the asyncio one (as ``azure.servicebus.aio``); the exceptions are in
:mod:`amqplink.servicebus.exceptions`. Port SDK code by changing the import::

    from amqplink.servicebus import ServiceBusClient, ServiceBusMessage

    with ServiceBusClient.from_connection_string(conn_str) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("hello"))
"""

from __future__ import annotations

from amqplink.servicebus.blocking import (
    AutoLockRenewer,
    ServiceBusClient,
    ServiceBusReceiver,
    ServiceBusSender,
    ServiceBusSession,
    ServiceBusTransaction,
)
from amqplink.servicebus.connection_string import (
    ConnectionStringError,
    ServiceBusConnectionString,
    parse_connection_string,
)
from amqplink.servicebus.constants import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusReceiveMode,
    ServiceBusSessionFilter,
    ServiceBusSubQueue,
    TransportType,
)
from amqplink.servicebus.credentials import AzureNamedKey, AzureNamedKeyCredential, AzureSasCredential
from amqplink.servicebus.localqueue import (
    LocalQueueCorruptError,
    LocalQueueError,
    LocalQueueFullError,
    LocalQueueOptions,
    LocalQueueState,
)
from amqplink.servicebus.message import (
    AmqpMessageBodyType,
    ServiceBusMessage,
    ServiceBusMessageBatch,
    ServiceBusMessageState,
    ServiceBusReceivedMessage,
)
from amqplink.servicebus.paired import BacklogQueueError, PairedNamespaceOptions, PairedState
from amqplink.servicebus.replication import DedupCounters, Deduplicator, ReplicationError
from amqplink.servicebus.replication.blocking import (
    ActiveReplicationSender,
    DeduplicatingReceiver,
    PassiveReplicationSender,
)

ServiceBusConnectionStringProperties = ServiceBusConnectionString
"""The SDK's name for a parsed connection string."""

__all__ = [
    "NEXT_AVAILABLE_SESSION",
    "ActiveReplicationSender",
    "AmqpMessageBodyType",
    "AutoLockRenewer",
    "AzureNamedKey",
    "AzureNamedKeyCredential",
    "AzureSasCredential",
    "BacklogQueueError",
    "LocalQueueCorruptError",
    "LocalQueueError",
    "LocalQueueFullError",
    "LocalQueueOptions",
    "LocalQueueState",
    "ConnectionStringError",
    "DedupCounters",
    "DeduplicatingReceiver",
    "Deduplicator",
    "PairedNamespaceOptions",
    "PairedState",
    "PassiveReplicationSender",
    "ReplicationError",
    "ServiceBusClient",
    "ServiceBusConnectionString",
    "ServiceBusConnectionStringProperties",
    "ServiceBusMessage",
    "ServiceBusMessageBatch",
    "ServiceBusMessageState",
    "ServiceBusReceiveMode",
    "ServiceBusReceivedMessage",
    "ServiceBusReceiver",
    "ServiceBusSender",
    "ServiceBusTransaction",
    "ServiceBusSession",
    "ServiceBusSessionFilter",
    "ServiceBusSubQueue",
    "TransportType",
    "parse_connection_string",
]
