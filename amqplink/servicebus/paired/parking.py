"""How a message is parked in a backlog queue, and how the syphon restores it (seed 001).

"The following properties are cleared and added under a new alias": SessionId becomes
the application property ``x-ms-sessionid``, TimeToLive ``x-ms-timetolive`` (milliseconds,
as the header's ttl), and "the original destination path is also stored within the
message as a property named x-ms-path", so messages for many entities share one backlog
queue. Everything else (body, message id, other properties and the sender's annotations)
travels unchanged; the message id is kept, so the destination's duplicate detection
removes a message that the syphon forwarded twice.
"""

from __future__ import annotations

from typing import Any

from amqplink import AMQPLinkError
from amqplink.message import Message
from amqplink.protocol.definitions import Header
from amqplink.sbwire.annotations import DEADLETTER_SOURCE as X_OPT_DEAD_LETTER_SOURCE
from amqplink.sbwire.annotations import ENQUEUE_SEQUENCE_NUMBER as X_OPT_ENQUEUE_SEQUENCE_NUMBER
from amqplink.sbwire.annotations import ENQUEUED_TIME as X_OPT_ENQUEUED_TIME
from amqplink.sbwire.annotations import LOCK_TOKEN as X_OPT_LOCK_TOKEN
from amqplink.sbwire.annotations import LOCKED_UNTIL as X_OPT_LOCKED_UNTIL
from amqplink.sbwire.annotations import MESSAGE_STATE as X_OPT_MESSAGE_STATE
from amqplink.sbwire.annotations import PARTITION_ID as X_OPT_PARTITION_ID
from amqplink.sbwire.annotations import PARTITION_KEY as X_OPT_PARTITION_KEY
from amqplink.sbwire.annotations import SEQUENCE_NUMBER as X_OPT_SEQUENCE_NUMBER
from amqplink.servicebus.exceptions import MessageSizeExceededError
from amqplink.servicebus.message import ServiceBusMessage

__all__ = ["X_MS_PATH", "X_MS_SESSIONID", "X_MS_TIMETOLIVE", "NotParkedError", "park", "restore"]

X_MS_SESSIONID = "x-ms-sessionid"
X_MS_TIMETOLIVE = "x-ms-timetolive"
X_MS_PATH = "x-ms-path"

_BROKER_ANNOTATIONS = frozenset(
    {
        X_OPT_SEQUENCE_NUMBER,
        X_OPT_ENQUEUED_TIME,
        X_OPT_LOCKED_UNTIL,
        X_OPT_ENQUEUE_SEQUENCE_NUMBER,
        X_OPT_DEAD_LETTER_SOURCE,
        X_OPT_LOCK_TOKEN,
        X_OPT_MESSAGE_STATE,
        X_OPT_PARTITION_ID,
    }
)
"""Annotations the backlog queue's broker added; a restored message leaves without them."""


class NotParkedError(AMQPLinkError, ValueError):
    """A message received from a backlog queue that has no ``x-ms-path`` (not a parked one)."""


_SECTION_GROWTH = 3 + 9
"""Bytes an application-properties section may grow by besides its entries: its
descriptor (if it was absent) and a map header going from map8 to map32."""


def _added_size(key: str, value: str) -> int:
    """An upper bound of the bytes one more string key with a string (or long) value adds."""
    return _SECTION_GROWTH + 5 + len(key.encode()) + max(9, 5 + len(value.encode()))


def park(message: ServiceBusMessage, entity: str, max_size: int) -> ServiceBusMessage:
    """The backlog-queue form of ``message`` bound for ``entity``. Raises
    :class:`MessageSizeExceededError` if it no longer fits ``max_size`` bytes once the
    renamed properties are added (seed 001: "messages approach the 256-KB limit")."""
    encoded = message._message.encode()
    raw = Message.decode(encoded)  # a copy: the caller's message is never changed
    props: dict[Any, Any] = dict(raw.application_properties or {})
    added = _added_size(X_MS_PATH, entity)
    properties = raw.properties
    if properties is not None and properties.group_id is not None:
        props[X_MS_SESSIONID] = str(properties.group_id)
        added += _added_size(X_MS_SESSIONID, props[X_MS_SESSIONID])
        properties.group_id = None
        if raw.message_annotations:  # the partition key equals the session id: restored from it
            raw.message_annotations.pop(X_OPT_PARTITION_KEY, None)
    header = raw.header
    if header is not None and header.ttl is not None:
        props[X_MS_TIMETOLIVE] = int(header.ttl)
        added += _added_size(X_MS_TIMETOLIVE, "")
        header.ttl = None
    props[X_MS_PATH] = entity
    raw.application_properties = props
    if len(encoded) + added <= max_size:  # surely fits: no need to encode it to know
        return ServiceBusMessage._wrap(raw)
    size = len(raw.encode())
    if size > max_size:
        raise MessageSizeExceededError(
            f"the message ({size} bytes once parked with x-ms-path/x-ms-sessionid/x-ms-timetolive)"
            f" is larger than the backlog queue takes ({max_size} bytes); it was not sent. Send a smaller"
            " message, or retry once the primary entity is back.",
            entity=entity,
        )
    return ServiceBusMessage._wrap(raw)


def restore(parked: Message) -> tuple[str, ServiceBusMessage]:
    """The destination and original form of a message received from a backlog queue."""
    raw = Message.decode(parked.encode())  # a copy
    props: dict[Any, Any] = dict(raw.application_properties or {})
    path = props.pop(X_MS_PATH, None)
    if not isinstance(path, str) or not path:
        raise NotParkedError("the message has no x-ms-path application property: it was not parked by a paired client")
    session = props.pop(X_MS_SESSIONID, None)
    ttl = props.pop(X_MS_TIMETOLIVE, None)
    raw.application_properties = props or None
    raw.delivery_annotations = None
    if raw.message_annotations:
        kept = {k: v for k, v in raw.message_annotations.items() if k not in _BROKER_ANNOTATIONS}
        raw.message_annotations = kept or None
    header = raw.header
    if header is not None:
        header.delivery_count = None
        header.first_acquirer = None
    if ttl is not None:
        if header is None:
            header = raw.header = Header()
        header.ttl = int(ttl)
    restored = ServiceBusMessage._wrap(raw)
    if session is not None:
        restored.session_id = str(session)
    return path, restored
