"""The AMQP error conditions Service Bus answers with (docs/protocol.md#error-conditions).

Plain strings (an ``Error``'s condition is compared as text on both sides); the
``amqp:*`` ones are the spec's, the ``com.microsoft:*`` ones Service Bus's own. The
client maps each to an exception (:data:`amqplink.servicebus.errors.ERROR_TABLE`); the
broker raises them (:mod:`amqplink.broker.namespace.errors`).
"""

from __future__ import annotations

__all__ = [
    "ARGUMENT_ERROR",
    "ARGUMENT_OUT_OF_RANGE",
    "AUTH_FAILED",
    "CONNECTION_FORCED",
    "CONTAINER_CLOSE",
    "DEAD_LETTER",
    "DECODE_ERROR",
    "DETACH_FORCED",
    "ENTITY_ALREADY_EXISTS",
    "ENTITY_DISABLED",
    "INTERNAL_ERROR",
    "MESSAGE_LOCK_LOST",
    "MESSAGE_NOT_FOUND",
    "MESSAGE_SIZE_EXCEEDED",
    "NOT_ALLOWED",
    "NOT_FOUND",
    "OPERATION_CANCELLED",
    "PRECONDITION_FAILED",
    "RESOURCE_LIMIT_EXCEEDED",
    "SERVER_BUSY",
    "SESSION_CANNOT_BE_LOCKED",
    "SESSION_LOCK_LOST",
    "TIMEOUT",
    "UNAUTHORIZED",
]

# Service Bus's own
SERVER_BUSY = "com.microsoft:server-busy"
TIMEOUT = "com.microsoft:timeout"
OPERATION_CANCELLED = "com.microsoft:operation-cancelled"
CONTAINER_CLOSE = "com.microsoft:container-close"
SESSION_CANNOT_BE_LOCKED = "com.microsoft:session-cannot-be-locked"
MESSAGE_LOCK_LOST = "com.microsoft:message-lock-lost"
SESSION_LOCK_LOST = "com.microsoft:session-lock-lost"
MESSAGE_NOT_FOUND = "com.microsoft:message-not-found"
ENTITY_DISABLED = "com.microsoft:entity-disabled"
ENTITY_ALREADY_EXISTS = "com.microsoft:entity-already-exists"
ARGUMENT_ERROR = "com.microsoft:argument-error"
ARGUMENT_OUT_OF_RANGE = "com.microsoft:argument-out-of-range"
AUTH_FAILED = "com.microsoft:auth-failed"
PRECONDITION_FAILED = "com.microsoft:precondition-failed"
DEAD_LETTER = "com.microsoft:dead-letter"
"""The condition of a ``rejected`` outcome that dead-letters (not an error: a settlement)."""

# the spec's, as Service Bus uses them
NOT_FOUND = "amqp:not-found"
DECODE_ERROR = "amqp:decode-error"
"""A message that is not valid AMQP (refused at the sender, never stored)."""
NOT_ALLOWED = "amqp:not-allowed"
UNAUTHORIZED = "amqp:unauthorized-access"
MESSAGE_SIZE_EXCEEDED = "amqp:link:message-size-exceeded"
RESOURCE_LIMIT_EXCEEDED = "amqp:resource-limit-exceeded"
INTERNAL_ERROR = "amqp:internal-error"
CONNECTION_FORCED = "amqp:connection:forced"
DETACH_FORCED = "amqp:link:detach-forced"
