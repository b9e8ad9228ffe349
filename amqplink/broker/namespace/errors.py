"""The namespace's errors: one exception carrying the AMQP condition and the HTTP-like status.

The conditions are :mod:`amqplink.sbwire.conditions`' (re-exported here); status codes as
Service Bus answers them (docs/protocol.md#management-operations): 410 with
``com.microsoft:message-lock-lost`` for a lost lock, 404 with
``com.microsoft:message-not-found`` for unknown sequence numbers.
"""

from __future__ import annotations

from amqplink import AMQPLinkError
from amqplink.sbwire.conditions import (
    ARGUMENT_ERROR,
    DECODE_ERROR,
    INTERNAL_ERROR,
    MESSAGE_LOCK_LOST,
    MESSAGE_NOT_FOUND,
    MESSAGE_SIZE_EXCEEDED,
    NOT_ALLOWED,
    NOT_FOUND,
    RESOURCE_LIMIT_EXCEEDED,
    SERVER_BUSY,
    SESSION_CANNOT_BE_LOCKED,
    SESSION_LOCK_LOST,
    UNAUTHORIZED,
)

__all__ = [
    "ARGUMENT_ERROR",
    "DECODE_ERROR",
    "INTERNAL_ERROR",
    "MESSAGE_LOCK_LOST",
    "MESSAGE_NOT_FOUND",
    "MESSAGE_SIZE_EXCEEDED",
    "NOT_ALLOWED",
    "NOT_FOUND",
    "RESOURCE_LIMIT_EXCEEDED",
    "SERVER_BUSY",
    "SESSION_CANNOT_BE_LOCKED",
    "SESSION_LOCK_LOST",
    "UNAUTHORIZED",
    "EntityError",
]


_STATUS = {
    MESSAGE_LOCK_LOST: 410,
    SESSION_LOCK_LOST: 410,
    SESSION_CANNOT_BE_LOCKED: 410,
    MESSAGE_NOT_FOUND: 404,
    NOT_FOUND: 404,
    ARGUMENT_ERROR: 400,
    DECODE_ERROR: 400,
    NOT_ALLOWED: 400,
    UNAUTHORIZED: 401,
    MESSAGE_SIZE_EXCEEDED: 413,
    RESOURCE_LIMIT_EXCEEDED: 403,
    SERVER_BUSY: 503,
}


class EntityError(AMQPLinkError):
    """A request the namespace refuses: ``condition`` (AMQP symbol), ``status`` (int), description."""

    def __init__(self, condition: str, description: str) -> None:
        super().__init__(description)
        self.condition = condition
        self.description = description
        self.status = _STATUS.get(condition, 500)

    def __repr__(self) -> str:
        return f"EntityError({self.condition!r}, {self.description!r})"
