"""The asyncio management REST client, with ``azure.servicebus.aio.management``'s names.

The models and errors are those of :mod:`amqplink.servicebus.management`; the client runs on
aiohttp, imported when its first request is made (importing this module needs no aiohttp).
"""

from __future__ import annotations

from amqplink.servicebus.aio.management._client import ServiceBusAdministrationClient

__all__ = ["ServiceBusAdministrationClient"]
