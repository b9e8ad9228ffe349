"""The message annotations and application properties Service Bus reads and stamps.

docs/protocol.md#annotations-and-properties: the broker stamps every delivery with
``x-opt-sequence-number`` (long), ``x-opt-enqueued-time`` (timestamp),
``x-opt-locked-until`` (timestamp, peek-lock) and ``x-opt-enqueue-sequence-number``; a
sender sets ``x-opt-partition-key``, ``x-opt-via-partition-key`` and
``x-opt-scheduled-enqueue-time``; a dead-lettered message carries the application
properties ``DeadLetterReason`` and ``DeadLetterErrorDescription``.
"""

from __future__ import annotations

from amqplink.codec.types import Symbol

__all__ = [
    "DEAD_LETTER_ERROR_DESCRIPTION",
    "DEAD_LETTER_REASON",
    "DEADLETTER_SOURCE",
    "ENQUEUED_TIME",
    "ENQUEUE_SEQUENCE_NUMBER",
    "LOCKED_UNTIL",
    "LOCK_TOKEN",
    "MESSAGE_STATE",
    "PARTITION_ID",
    "PARTITION_KEY",
    "SCHEDULED_ENQUEUE_TIME",
    "SEQUENCE_NUMBER",
    "VIA_PARTITION_KEY",
]

SEQUENCE_NUMBER = Symbol("x-opt-sequence-number")
ENQUEUED_TIME = Symbol("x-opt-enqueued-time")
LOCKED_UNTIL = Symbol("x-opt-locked-until")
ENQUEUE_SEQUENCE_NUMBER = Symbol("x-opt-enqueue-sequence-number")
SCHEDULED_ENQUEUE_TIME = Symbol("x-opt-scheduled-enqueue-time")
DEADLETTER_SOURCE = Symbol("x-opt-deadletter-source")
LOCK_TOKEN = Symbol("x-opt-lock-token")
"""A delivery annotation: the lock token as an AMQP uuid (RFC byte order)."""
MESSAGE_STATE = Symbol("x-opt-message-state")
"""0 active, 1 deferred, 2 scheduled."""
PARTITION_KEY = Symbol("x-opt-partition-key")
VIA_PARTITION_KEY = Symbol("x-opt-via-partition-key")
PARTITION_ID = Symbol("x-opt-partition-id")
DEAD_LETTER_REASON = "DeadLetterReason"
DEAD_LETTER_ERROR_DESCRIPTION = "DeadLetterErrorDescription"
