"""A stored message split at its body: small head sections decoded, the body kept as bytes.

The broker reads what routing, filters and sessions need (header, message
annotations, properties, application properties) and never decodes the body: the
bytes from the first body section to the end (body and footer) are kept verbatim.
To deliver, it re-encodes only the header (delivery-count) and the message
annotations (the ``x-opt-*`` stamps), then appends the properties and
application-properties sections as they arrived and the body bytes.

Delivery annotations are dropped: they are "for the next hop only" (3.2.2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from amqplink.codec.decode import decode
from amqplink.codec.errors import DecodeError
from amqplink.codec.types import Symbol, Timestamp, UInt
from amqplink.protocol.definitions import (
    ApplicationProperties,
    DeliveryAnnotations,
    Header,
    MessageAnnotations,
    Properties,
)

__all__ = ["Envelope", "as_text", "split_message", "timestamp"]

SCHEDULED_ENQUEUE_TIME = Symbol("x-opt-scheduled-enqueue-time")
PING_CONTENT_TYPE = "application/vnd.ms-servicebus-ping"

_BODY_OR_FOOTER = frozenset((0x75, 0x76, 0x77, 0x78))
_ORDER = {Header: 0, DeliveryAnnotations: 1, MessageAnnotations: 2, Properties: 3, ApplicationProperties: 4}


@dataclass(slots=True)
class Envelope:
    """One message as the broker keeps it."""

    header: Header | None
    annotations: dict[Any, Any]
    properties: Properties | None
    application_properties: dict[str, Any] | None
    props_raw: bytes
    """The properties and application-properties sections exactly as received."""
    body: bytes
    """Body sections and footer exactly as received."""

    @property
    def size(self) -> int:
        """Bytes this message holds in memory, near enough (properties and body)."""
        return len(self.props_raw) + len(self.body)

    @property
    def message_id(self) -> Any:
        return None if self.properties is None else self.properties.message_id

    @property
    def session_id(self) -> str | None:
        group = None if self.properties is None else self.properties.group_id
        return None if group is None else str(group)

    @property
    def is_ping(self) -> bool:
        p = self.properties
        return p is not None and p.content_type == PING_CONTENT_TYPE

    def ttl(self) -> float:
        """The message's own time to live in seconds (header ttl), or infinity."""
        h = self.header
        return math.inf if h is None or h.ttl is None else int(h.ttl) / 1000

    def scheduled_enqueue_time(self) -> float | None:
        """``x-opt-scheduled-enqueue-time`` in seconds since the epoch, if set."""
        value = self.annotations.get(SCHEDULED_ENQUEUE_TIME)
        if value is None:
            return None
        if hasattr(value, "timestamp"):
            return float(value.timestamp())
        return int(value) / 1000

    def with_application_properties(self, updates: dict[str, Any]) -> Envelope:
        """A copy whose application properties are updated (re-encodes properties, not the body)."""
        return self.with_head(self.properties, {**(self.application_properties or {}), **updates})

    def with_head(self, properties: Properties | None, application_properties: dict[str, Any]) -> Envelope:
        """A copy with these properties and application properties (re-encoded; the body kept)."""
        out = bytearray()
        if properties is not None:
            properties._amqp_encode(out)
        ApplicationProperties(application_properties)._amqp_encode(out)
        return Envelope(self.header, dict(self.annotations), properties, application_properties, bytes(out), self.body)

    def with_annotations(self, updates: dict[Any, Any]) -> Envelope:
        """A copy with message annotations merged in (keys as symbols)."""
        annotations = dict(self.annotations)
        for key, value in updates.items():
            annotations[Symbol(key) if isinstance(key, str) else key] = value
        return Envelope(
            self.header, annotations, self.properties, self.application_properties, self.props_raw, self.body
        )

    def encode(self, stamps: dict[Symbol, Any] | None = None, delivery_count: int | None = None) -> bytes:
        """The transfer payload: header (with ``delivery_count``), annotations plus ``stamps``, the rest."""
        out = bytearray()
        h = self.header
        if delivery_count is not None or h is not None:
            Header(
                durable=None if h is None else h.durable,
                priority=None if h is None else h.priority,
                ttl=None if h is None else h.ttl,
                first_acquirer=None if h is None else h.first_acquirer,
                delivery_count=UInt(delivery_count)
                if delivery_count is not None
                else (None if h is None else h.delivery_count),
            )._amqp_encode(out)
        if stamps:
            annotations = dict(self.annotations)
            annotations.update(stamps)
            MessageAnnotations(annotations)._amqp_encode(out)
        elif self.annotations:
            MessageAnnotations(self.annotations)._amqp_encode(out)
        out += self.props_raw
        out += self.body
        return bytes(out)


def _descriptor_code(buf: bytes, pos: int) -> int | None:
    """The numeric descriptor of the described value at ``pos`` (None if not a small-ulong/ulong one)."""
    if buf[pos] != 0 or pos + 2 >= len(buf):
        return None
    if buf[pos + 1] == 0x53:
        return buf[pos + 2]
    if buf[pos + 1] == 0x80 and pos + 10 <= len(buf):
        return int.from_bytes(buf[pos + 2 : pos + 10], "big")
    return None


def _map(value: Any, what: str, offset: int) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise DecodeError(f"{what} must be a map", offset)
    return value


def split_message(payload: bytes) -> Envelope:
    """Split an encoded message; :class:`DecodeError` if its head sections are malformed."""
    buf = payload
    n = len(buf)
    pos = 0
    header: Header | None = None
    annotations: dict[Any, Any] = {}
    properties: Properties | None = None
    app: dict[str, Any] | None = None
    props_start: int | None = None
    last = -1
    while pos < n:
        if _descriptor_code(buf, pos) in _BODY_OR_FOOTER:
            break
        start = pos
        section, pos = decode(buf, pos)
        rank = _ORDER.get(type(section))
        if rank is None:
            # a body section with an unusual descriptor encoding: keep the rest as body
            pos = start
            break
        if rank <= last:
            raise DecodeError(f"message section {type(section).__name__} is out of order or repeated", start)
        last = rank
        if rank >= 3 and props_start is None:
            props_start = start
        if type(section) is Header:
            header = section
        elif type(section) is MessageAnnotations:
            annotations = _map(section.value, "message-annotations", start)
        elif type(section) is Properties:
            properties = section
        elif type(section) is ApplicationProperties:
            app = _map(section.value, "application-properties", start)
    props_raw = b"" if props_start is None else bytes(buf[props_start:pos])
    return Envelope(header, annotations, properties, app, props_raw, bytes(buf[pos:]))


def as_text(value: Any) -> Any:
    """``value``, with binary decoded as UTF-8 (the SDK sends some strings as binary)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    return value


def timestamp(seconds: float) -> Timestamp:
    """An AMQP timestamp (ms) for ``seconds`` since the epoch, clamped to the type's range."""
    if seconds >= 253402300799:  # 9999-12-31, .NET's DateTime.MaxValue
        return Timestamp(253402300799999)
    return Timestamp(int(seconds * 1000))
