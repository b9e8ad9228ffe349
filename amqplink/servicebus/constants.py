"""The SDK's enums and constants (``azure.servicebus``'s names and values)."""

from __future__ import annotations

import enum
from typing import TypeVar

__all__ = [
    "NEXT_AVAILABLE_SESSION",
    "ServiceBusReceiveMode",
    "ServiceBusSessionFilter",
    "ServiceBusSubQueue",
    "TransportType",
]


E = TypeVar("E", bound="SdkStrEnum")


def _lenient(cls: type[E], value: object) -> E | None:
    """The SDK's enums are case-insensitive: ``"PEEK_LOCK"`` and ``"peeklock"`` both name PEEK_LOCK."""
    text = str(value).lower().replace("_", "")
    return next((m for m in cls if m.value == text), None)


class SdkStrEnum(str, enum.Enum):  # noqa: UP042 -- StrEnum changes str(), the SDK keeps Class.MEMBER
    """A ``str`` enum whose ``str()`` is ``Class.MEMBER``, as the SDK's (``str, Enum`` with
    azure-core's ``CaseInsensitiveEnumMeta``); compares equal to its value."""


class ServiceBusReceiveMode(SdkStrEnum):
    """PEEK_LOCK: settle each message (locked meanwhile); RECEIVE_AND_DELETE: gone on delivery."""

    PEEK_LOCK = "peeklock"
    RECEIVE_AND_DELETE = "receiveanddelete"

    @classmethod
    def _missing_(cls, value: object) -> ServiceBusReceiveMode | None:
        return _lenient(cls, value)


class ServiceBusSubQueue(SdkStrEnum):
    """A receiver's sub-queue: the dead-letter queue or the transfer dead-letter queue."""

    DEAD_LETTER = "deadletter"
    TRANSFER_DEAD_LETTER = "transferdeadletter"

    @classmethod
    def _missing_(cls, value: object) -> ServiceBusSubQueue | None:
        return _lenient(cls, value)


class ServiceBusSessionFilter(enum.Enum):
    """``NEXT_AVAILABLE``: lock whichever session the broker offers."""

    NEXT_AVAILABLE = 0


NEXT_AVAILABLE_SESSION = ServiceBusSessionFilter.NEXT_AVAILABLE


class TransportType(enum.Enum):
    """``Amqp``: AMQP over TCP (5671, or 5672 without TLS); ``AmqpOverWebsocket``: AMQP in
    WebSocket messages at ``wss://HOST:443/$servicebus/websocket``
    (:mod:`amqplink.servicebus.transport`)."""

    Amqp = 1
    AmqpOverWebsocket = 2


SUB_QUEUE_SUFFIX = {
    ServiceBusSubQueue.DEAD_LETTER: "/$DeadLetterQueue",
    ServiceBusSubQueue.TRANSFER_DEAD_LETTER: "/$Transfer/$DeadLetterQueue",
}
