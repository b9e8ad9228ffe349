"""Azure Service Bus semantics on top of the asyncio client.

The public names mirror azure-servicebus 7.x. This package is being built up in
layers; for now it holds the pieces with no I/O: connection strings, SAS tokens and
credentials.
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
