"""Deliveries for a receiver that reads decimals only as Service Bus writes them
(docs/protocol.md#decimals).

The broker keeps a message as it came, so an application property that is an AMQP decimal
is delivered in the standard layout its sender wrote (IEEE 754 BID): what every AMQP 1.0
reader expects. Service Bus delivers such a property in another layout
(:mod:`amqplink.sbwire.decimals`), and the official Python SDK reads only that one: a
standard decimal128 makes its decoder fail, and the message, delivered, never reaches the
application (azure-servicebus 7.15: ``peek_messages`` raises, ``receive_messages`` returns
nothing and the message stays locked). For that receiver
(:func:`amqplink.sbwire.decimals.reads_servicebus_decimals`), and for it only, the broker
writes the decimal application properties of each delivery and peek as Service Bus does.
:mod:`.storable` has refused, at the transfer, every decimal that layout cannot hold.
"""

from __future__ import annotations

from typing import Any

from amqplink.broker.namespace.envelope import Envelope, split_message
from amqplink.codec.decode import decode
from amqplink.codec.types import Decimal32, Decimal64, Decimal128
from amqplink.message import Message
from amqplink.protocol.definitions import ApplicationProperties, Properties
from amqplink.sbwire.decimals import servicebus_decimal128

__all__ = ["in_response", "servicebus_decimals"]

_DECIMALS = frozenset((Decimal32, Decimal64, Decimal128))


def servicebus_decimals(payload: bytes, envelope: Envelope | None = None) -> bytes:
    """``payload`` (a delivery of ``envelope``'s message, or any encoded message when
    ``envelope`` is None) with its decimal application properties in Service Bus's layout;
    ``payload`` itself when it has none."""
    if envelope is None:
        envelope = split_message(payload)
    app = envelope.application_properties
    if not app or _DECIMALS.isdisjoint(map(type, app.values())):
        return payload
    written = {key: servicebus_decimal128(v) if type(v) in _DECIMALS else v for key, v in app.items()}
    raw = envelope.props_raw
    section, end = decode(raw, 0)
    out = bytearray(raw[:end] if type(section) is Properties else b"")
    ApplicationProperties(written)._amqp_encode(out)
    head = len(payload) - len(raw) - len(envelope.body)  # what the delivery writes before them
    return b"".join((payload[:head], out, payload[head + len(raw) :]))


def in_response(response: Message) -> Message:
    """A ``$management`` response whose messages (``peek-message``,
    ``receive-by-sequence-number``: ``{"messages": [{"message": <payload>}...]}``) have their
    decimal application properties in Service Bus's layout."""
    body: Any = response.body
    items = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(items, list):
        return response
    for item in items:
        payload = item.get("message") if isinstance(item, dict) else None
        if isinstance(payload, bytes):
            item["message"] = servicebus_decimals(payload)
    return response
