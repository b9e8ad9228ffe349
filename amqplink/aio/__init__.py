"""asyncio client: the only layer that owns sockets and tasks.

async with await amqplink.aio.connect("amqp://localhost:5672") as conn:
    sender = await conn.create_sender("orders")
    outcome = await sender.send(amqplink.Message(b"hello"))
"""

from __future__ import annotations

from amqplink.aio.connection import Connection, connect
from amqplink.aio.errors import (
    AMQPError,
    AttachTimeout,
    ConnectionClosedError,
    LinkDetachedError,
    MessageRejected,
    MessageSizeExceededError,
    SessionEndedError,
    SettlementError,
)
from amqplink.aio.receiver import ReceivedMessage, Receiver, ReceiverMode
from amqplink.aio.sender import Outcome, Sender, SettleMode
from amqplink.aio.url import Endpoint, parse_url

__all__ = [
    "AMQPError",
    "AttachTimeout",
    "Connection",
    "ConnectionClosedError",
    "Endpoint",
    "LinkDetachedError",
    "MessageRejected",
    "MessageSizeExceededError",
    "Outcome",
    "ReceivedMessage",
    "Receiver",
    "ReceiverMode",
    "Sender",
    "SessionEndedError",
    "SettleMode",
    "SettlementError",
    "connect",
    "parse_url",
]
