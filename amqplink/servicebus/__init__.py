"""Azure Service Bus semantics on top of the asyncio client.

The public names mirror azure-servicebus 7.x. This package is being built up in
layers; so far: connection strings, SAS tokens and credentials, the exceptions
(``amqplink.servicebus.exceptions``), the retry policy, CBS and ``$management``.
"""

from __future__ import annotations

from amqplink.servicebus.connection_string import (
    ConnectionStringError,
    ServiceBusConnectionString,
    parse_connection_string,
)
from amqplink.servicebus.credentials import AzureNamedKey, AzureNamedKeyCredential, AzureSasCredential

__all__ = [
    "AzureNamedKey",
    "AzureNamedKeyCredential",
    "AzureSasCredential",
    "ConnectionStringError",
    "ServiceBusConnectionString",
    "parse_connection_string",
]
