"""Partition keys, applied client-side before a message leaves.

PROTOCOL.md: "Partition key: SessionId > PartitionKey > MessageId (only if duplicate
detection). PartitionKey != SessionId is an error." A message whose partition key
differs from its session id is refused here, before any byte is sent. A session message
without a partition key goes without one, as the SDK sends it (a partitioned entity files
it by its session id; receivers then see ``partition_key`` only where the broker stamps it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from amqplink.servicebus.message import ServiceBusMessage

__all__ = ["check_partition_key", "effective_partition_key"]


def effective_partition_key(
    session_id: str | None, partition_key: str | None, message_id: str | None, *, duplicate_detection: bool = False
) -> str | None:
    """The key that picks the partition: the session id, else the partition key, else (only
    with duplicate detection) the message id."""
    if session_id is not None:
        return session_id
    if partition_key is not None:
        return partition_key
    return message_id if duplicate_detection else None


def check_partition_key(message: ServiceBusMessage) -> None:
    """Refuse a partition key that differs from the session id.

    ``ValueError`` (as the SDK's ``partition_key`` setter raises) names both values.
    """
    inner = message._message
    session_id = inner.session_id
    if session_id is None:
        return
    partition_key = inner.partition_key
    if partition_key is not None and partition_key != session_id:
        raise ValueError(
            f"partition_key:{partition_key} cannot be set to a different value than session_id:{session_id}"
            " (Service Bus files a session's messages by the session id)"
        )
