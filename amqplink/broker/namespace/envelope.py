"""A stored message split at its body: small head sections decoded, the body kept as bytes.

The broker reads what routing, filters and sessions need (header, message
annotations, properties, application properties) and never decodes the body: the
bytes from the first body section to the end (body and footer) are kept verbatim.
To deliver, it re-encodes only the header (delivery-count) and the message
annotations (the ``x-opt-*`` stamps), then appends the properties and
application-properties sections as they arrived and the body bytes.
:meth:`Envelope.deliver` is that path made cheap for every delivery: the header's
bytes come from a small cache, the message's own annotations are encoded once, and
the stamps are packed straight into the annotations map.

Delivery annotations a sender puts on a message are kept, as Service Bus keeps them (the
SDK's ``test_message_inner_amqp_properties`` reads them back), though 3.2.2 makes them "for the
next hop only": :attr:`Envelope.delivery_annotations`, in memory and in the journal's records
(:meth:`Envelope.head`). A delivery carries the broker's own too: ``x-opt-lock-token`` (the
lock token, a uuid) on a peek-lock delivery, merged into the sender's map; a receive-and-delete
one carries the sender's map, or an empty one (docs/protocol.md#annotations-and-properties).
Without the sender's, both are constants but for the token's 16 bytes, which a batch has
converted in one go (:func:`~amqplink.sbwire.lock_token.rfc_order`).

A message sent is checked whole before it is stored: "the body consists of one of:
one or more data sections, one or more amqp-sequence sections, or a single amqp-value
section", then at most a footer (3.2). One that is not valid AMQP is refused
(:class:`DecodeError`, the sender's outcome ``amqp:decode-error``) rather than stored
and then failing at every receiver. The usual message, one data section of binary,
is checked where :func:`body_only` already looks at its first bytes: its length must
run to the end of the payload; any other body is decoded (:func:`check_body`). A valid
message whose head the broker could not write back as it came, or keep as Service Bus
does, is refused too (:mod:`.storable`, from :func:`split_message`).
"""

from __future__ import annotations

import math
import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from amqplink.broker.namespace.storable import check_annotations, check_application_properties, check_properties
from amqplink.codec.decode import decode
from amqplink.codec.encode import encode_map, encode_symbol
from amqplink.codec.errors import DecodeError
from amqplink.codec.types import Long, Symbol, Timestamp, UInt
from amqplink.message import id_only_properties_at as _id_only_properties
from amqplink.protocol.definitions import (
    AmqpSequence,
    AmqpValue,
    ApplicationProperties,
    Data,
    DeliveryAnnotations,
    Footer,
    Header,
    MessageAnnotations,
    Properties,
)
from amqplink.sbwire.annotations import (
    ENQUEUE_SEQUENCE_NUMBER,
    ENQUEUED_TIME,
    LOCK_TOKEN,
    LOCKED_UNTIL,
    SCHEDULED_ENQUEUE_TIME,
    SEQUENCE_NUMBER,
)
from amqplink.sbwire.formats import PING_CONTENT_TYPE
from amqplink.sbwire.lock_token import rfc_order

__all__ = [
    "DA_EMPTY",
    "DA_LOCKED",
    "ENQUEUED_TIME",
    "ENQUEUE_SEQUENCE_NUMBER",
    "HEADER_CACHE_MAX",
    "LOCKED_UNTIL",
    "SEQUENCE_NUMBER",
    "Envelope",
    "as_text",
    "Sent",
    "bodies_only",
    "body_only",
    "check_body",
    "deliver_all",
    "delivery_stamps",
    "split_message",
    "timestamp",
    "ttl_ms",
]

HEADER_CACHE_MAX = 1024
"""Distinct encoded headers :meth:`Envelope.deliver` keeps (cleared when full)."""

_BODY_OR_FOOTER = frozenset((0x75, 0x76, 0x77, 0x78))
_BINARY_BODY_HEADS = tuple(bytes((0, 0x53, code, width)) for code in (0x75, 0x77) for width in (0xA0, 0xB0))
"""The first four bytes of a message that is only its body and whose first section is a data
(or amqp-value) section of binary, vbin8 or vbin32 (described by a smallulong): the sent
message :func:`body_only` takes when that binary runs to the end of the payload."""
_ORDER = {Header: 0, DeliveryAnnotations: 1, MessageAnnotations: 2, Properties: 3, ApplicationProperties: 4}
_MAX_TIMESTAMP_MS = 253402300799999  # 9999-12-31T23:59:59.999, .NET's DateTime.MaxValue


def _symbol_bytes(name: Symbol) -> bytes:
    out = bytearray()
    encode_symbol(out, name)
    return bytes(out)


# The stamps of a delivery, packed in one go: key, long (0x81) or timestamp (0x83), value.
# The first key and its constructor end the annotations' template (see Envelope.template);
# the struct packs the rest, each later key with its constructor as one constant field.
# No ``x-opt-enqueue-sequence-number``: Service Bus sets it on auto-forwarded messages only ("the
# sequence number that had first been assigned to the message at its original point of
# submission", the SDK's ``enqueued_sequence_number``), not on a message sent to the entity
# it is received from (the SDK's backcompat tests' encoded sizes, taken from Service Bus).
_K_SEQ, _K_ENQ, _K_LOCK = map(_symbol_bytes, (SEQUENCE_NUMBER, ENQUEUED_TIME, LOCKED_UNTIL))
_SEQ_KEY, _ENQ_KEY, _LOCK_KEY = _K_SEQ + b"\x81", _K_ENQ + b"\x83", _K_LOCK + b"\x83"
_STAMPS = struct.Struct(f">q{len(_ENQ_KEY)}sq")
_LOCKED_STAMPS = struct.Struct(f">q{len(_ENQ_KEY)}sq{len(_LOCK_KEY)}sq")
_STAMP_KEYS = frozenset((SEQUENCE_NUMBER, ENQUEUED_TIME, LOCKED_UNTIL))
_MAP8 = struct.Struct(">BBB")
_MAP32 = struct.Struct(">BII")
_ANNOTATIONS_DESCRIPTOR = b"\x00\x53\x72"
_DELIVERY_ANNOTATIONS_DESCRIPTOR = b"\x00\x53\x71"
_K_LOCK_TOKEN = _symbol_bytes(LOCK_TOKEN) + b"\x98"  # then the uuid's 16 bytes
DA_LOCKED = _DELIVERY_ANNOTATIONS_DESCRIPTOR + _MAP8.pack(0xC1, 1 + len(_K_LOCK_TOKEN) + 16, 2) + _K_LOCK_TOKEN
"""A peek-lock delivery's delivery-annotations, ``{x-opt-lock-token: uuid}``, up to the uuid's 16 bytes."""
DA_EMPTY = _DELIVERY_ANNOTATIONS_DESCRIPTOR + _MAP8.pack(0xC1, 1, 0)
"""A receive-and-delete delivery's delivery-annotations: an empty map, as Service Bus sends."""
_MAX_SECONDS = 253402300799  # _MAX_TIMESTAMP_MS in seconds: later times are clamped
_headers: dict[tuple[Any, ...], bytes] = {}
_INF = math.inf
_MAX_UINT = 0xFFFFFFFF
_locked_heads: dict[int | None, bytes] = {}
"""What a locked first delivery of a message with no header or annotations of its own starts
with, by the time to live its header carries (:func:`_first_locked_head`)."""


class Sent(Protocol):
    """A message as a producer's transfer brought it (an engine ``Delivery`` is one)."""

    @property
    def payload(self) -> bytes | memoryview:
        """The transfer's bytes: the encoded message."""

    @property
    def message_format(self) -> int:
        """The transfer's message-format (0, or Service Bus's batch format)."""


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
    template: tuple[bytes, bytes] | None = field(default=None, repr=False, compare=False)
    """The message annotations of its deliveries up to the stamps (descriptor, map head, the
    message's own entries) without and with a lock, made by the first :meth:`deliver` of a
    message that has annotations; empty when it carries a stamp itself (``annotations`` is
    not changed in place: ``with_*`` make copies)."""
    size: int = field(init=False, repr=False, compare=False)
    """Bytes this message holds in memory, near enough (properties and body)."""
    delivery_annotations: dict[Any, Any] | None = field(default=None, compare=False)
    """The sender's own delivery-annotations (None: it sent none, or an empty map)."""

    def __post_init__(self) -> None:
        self.size = len(self.props_raw) + len(self.body)

    @property
    def message_id(self) -> Any:
        """The message-id of its properties (None without one)."""
        return None if self.properties is None else self.properties.message_id

    @property
    def session_id(self) -> str | None:
        """Its group-id as text: the Service Bus session (None without one)."""
        group = None if self.properties is None else self.properties.group_id
        return None if group is None else str(group)

    @property
    def is_ping(self) -> bool:
        """Whether it is a paired client's ping (Service Bus's ping content type): accepted and not stored."""
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
        return Envelope(
            self.header, dict(self.annotations), properties, application_properties, bytes(out), self.body,
            delivery_annotations=self.delivery_annotations,
        )  # fmt: skip

    def with_annotations(self, updates: dict[Any, Any]) -> Envelope:
        """A copy with message annotations merged in (keys as symbols)."""
        annotations = dict(self.annotations)
        for key, value in updates.items():
            annotations[Symbol(key) if isinstance(key, str) else key] = value
        return Envelope(
            self.header, annotations, self.properties, self.application_properties, self.props_raw, self.body,
            delivery_annotations=self.delivery_annotations,
        )  # fmt: skip

    def encode(
        self,
        stamps: dict[Symbol, Any] | None = None,
        delivery_count: int | None = None,
        ttl: int | None = None,
        delivery_annotations: bytes | None = None,
    ) -> bytes:
        """The transfer payload: header (with ``delivery_count``, and ``ttl`` in ms when given:
        the time to live in force, :func:`ttl_ms`), ``delivery_annotations`` (a section's
        bytes; None: the sender's own, if any), annotations plus ``stamps``, the rest."""
        out = bytearray()
        h = self.header
        if delivery_count is not None or h is not None or ttl is not None:
            Header(
                durable=None if h is None else h.durable,
                priority=None if h is None else h.priority,
                ttl=UInt(ttl) if ttl is not None else (None if h is None else h.ttl),
                first_acquirer=None if h is None else h.first_acquirer,
                delivery_count=UInt(delivery_count)
                if delivery_count is not None
                else (None if h is None else h.delivery_count),
            )._amqp_encode(out)
        if delivery_annotations is None:
            if self.delivery_annotations is not None:
                DeliveryAnnotations(self.delivery_annotations)._amqp_encode(out)
        else:
            out += delivery_annotations
        if stamps:
            annotations = dict(self.annotations)
            annotations.update(stamps)
            MessageAnnotations(annotations)._amqp_encode(out)
        elif self.annotations:
            MessageAnnotations(self.annotations)._amqp_encode(out)
        out += self.props_raw
        out += self.body
        return bytes(out)

    def head(self) -> bytes:
        """What :meth:`encode` with no argument writes before ``props_raw`` and ``body`` (the header,
        the sender's delivery-annotations and the message-annotations sections; usually nothing):
        a store writes the three pieces as they are instead of joining them first."""
        h = self.header
        if h is None and not self.annotations and self.delivery_annotations is None:
            return b""
        out = bytearray()
        if h is not None:
            h._amqp_encode(out)
        if self.delivery_annotations is not None:
            DeliveryAnnotations(self.delivery_annotations)._amqp_encode(out)
        if self.annotations:
            MessageAnnotations(self.annotations)._amqp_encode(out)
        return bytes(out)

    def deliver(
        self,
        sequence_number: int,
        enqueued_at: float,
        locked_until: float | None,
        delivery_count: int,
        ttl: int | None = None,
        token: bytes | None = None,
    ) -> bytes:
        """The transfer payload of a delivery: as :meth:`encode` with the sequence number,
        enqueued time and (when locked) locked-until stamps, spliced into a template; ``ttl``
        (ms): the time to live in force, written in the header (:func:`ttl_ms`); ``token``:
        the lock token's uuid bytes (RFC order) for the delivery-annotations of a locked
        delivery, None for a receive-and-delete one (:data:`DA_LOCKED`, :data:`DA_EMPTY`, or
        the sender's own with the token merged in: :func:`_merged_delivery_annotations`)."""
        own = self.delivery_annotations
        if own is None:
            annotations = DA_EMPTY if token is None else DA_LOCKED + token
        else:
            annotations = _merged_delivery_annotations(own, token)
        template = _BARE if not self.annotations else self.template
        if template is None:
            template = self.template = _template(self.annotations)
        if not template[0]:  # the message carries a stamp itself: the general path merges it
            return self.encode(
                delivery_stamps(sequence_number, enqueued_at, locked_until), delivery_count, ttl, annotations
            )
        enqueued = int(enqueued_at * 1000) if enqueued_at < _MAX_SECONDS else _MAX_TIMESTAMP_MS
        if locked_until is None:
            prefix = template[0]
            stamps = _STAMPS.pack(sequence_number, _ENQ_KEY, enqueued)
        else:
            prefix = template[1]
            until = int(locked_until * 1000) if locked_until < _MAX_SECONDS else _MAX_TIMESTAMP_MS
            stamps = _LOCKED_STAMPS.pack(sequence_number, _ENQ_KEY, enqueued, _LOCK_KEY, until)
        if delivery_count == 0 and self.header is None and ttl is None:
            header = _FIRST_HEADER
        else:
            header = self._header(delivery_count, ttl)
        return b"".join((header, annotations, prefix, stamps, self.props_raw, self.body))

    def _header(self, delivery_count: int, ttl: int | None = None) -> bytes:
        h = self.header
        if ttl is None and h is not None:
            ttl = h.ttl
        key = (delivery_count, ttl) if h is None else (delivery_count, h.durable, h.priority, ttl, h.first_acquirer)
        raw = _headers.get(key)
        if raw is None:
            out = bytearray()
            Header(
                durable=None if h is None else h.durable,
                priority=None if h is None else h.priority,
                ttl=None if ttl is None else UInt(ttl),
                first_acquirer=None if h is None else h.first_acquirer,
                delivery_count=UInt(delivery_count),
            )._amqp_encode(out)
            raw = bytes(out)
            if len(_headers) >= HEADER_CACHE_MAX:
                _headers.clear()
            _headers[key] = raw
        return raw


def _merged_delivery_annotations(own: dict[Any, Any], token: bytes | None) -> bytes:
    """The delivery-annotations section of a delivery of a message sent with ``own``: Service
    Bus's ``x-opt-lock-token`` (``token``, RFC order) merged into the sender's map (taking
    the place of one the sender set), or the sender's map alone on a receive-and-delete one."""
    merged = own if token is None else {**own, LOCK_TOKEN: uuid.UUID(bytes=token)}
    out = bytearray()
    DeliveryAnnotations(merged)._amqp_encode(out)
    return bytes(out)


def delivery_stamps(sequence_number: int, enqueued_at: float, locked_until: float | None) -> dict[Symbol, Any]:
    """The annotations Service Bus stamps on a delivered message (locked-until when locked)."""
    stamps: dict[Symbol, Any] = {
        SEQUENCE_NUMBER: Long(sequence_number),
        ENQUEUED_TIME: timestamp(enqueued_at),
    }
    if locked_until is not None:
        stamps[LOCKED_UNTIL] = timestamp(locked_until)
    return stamps


def _entries(annotations: dict[Any, Any]) -> tuple[bytes, int]:
    """A map's encoded entries and item count; count -1 when it holds one of the delivery stamps."""
    if not annotations:
        return b"", 0
    if not _STAMP_KEYS.isdisjoint(annotations):
        return b"", -1
    out = bytearray()
    encode_map(out, annotations)
    if out[0] == 0xC1:
        return bytes(out[3:]), out[2]
    return bytes(out[9:]), int.from_bytes(out[5:9], "big")


def _map_head(size: int, count: int) -> bytes:
    """A map's constructor, size and count for ``size`` bytes of ``count`` items (map8 or map32)."""
    return _MAP8.pack(0xC1, size + 1, count) if size < 255 and count < 256 else _MAP32.pack(0xD1, size + 4, count)


def _template(annotations: dict[Any, Any]) -> tuple[bytes, bytes]:
    """See :attr:`Envelope.template`."""
    entries, count = _entries(annotations)
    if count < 0:
        return b"", b""
    unlocked = _map_head(len(entries) + len(_SEQ_KEY) + _STAMPS.size, count + 4)
    locked = _map_head(len(entries) + len(_SEQ_KEY) + _LOCKED_STAMPS.size, count + 6)
    return (
        _ANNOTATIONS_DESCRIPTOR + unlocked + entries + _SEQ_KEY,
        _ANNOTATIONS_DESCRIPTOR + locked + entries + _SEQ_KEY,
    )


_BARE = _template({})
"""The template of a message without annotations of its own (most)."""
_EMPTY = Envelope(None, {}, None, None, b"", b"")
_FIRST_HEADER = _EMPTY._header(0)
"""The header of a first delivery of a message sent without one."""
_FIRST_LOCKED_HEAD = _FIRST_HEADER + DA_LOCKED
"""What a locked first delivery of a message with no header or annotations of its own
starts with, up to the lock token (the usual delivery: :func:`deliver_all`)."""
_LOCKED_DELIVERY = struct.Struct(f">16s{len(_BARE[1])}s{_LOCKED_STAMPS.format[1:]}")
"""The rest of that delivery's head: the lock token's 16 bytes (ending the delivery-annotations),
the message-annotations up to the stamps (:data:`_BARE`), then the stamps."""


def ttl_ms(enqueued_at: float, expires_at: float) -> int | None:
    """The time to live in force of a stored message, in ms, as a delivery's header carries
    it: the entity's default when the message set none, the message's own capped to the
    default otherwise (Service Bus: "when not set explicitly, the assumed value is the
    DefaultTimeToLive for the respective queue or topic. A message-level time-to-live value
    cannot be longer than the entity's time-to-live setting and it is silently adjusted if
    it does"). None when it never expires or is beyond the header's range (a uint of ms):
    the header then keeps what the message was sent with."""
    if expires_at == _INF:
        return None
    ms = int((expires_at - enqueued_at) * 1000 + 0.5)
    return ms if 0 < ms <= _MAX_UINT else None


def _first_locked_head(span: float) -> bytes:
    """:data:`_FIRST_LOCKED_HEAD` with the time to live of a message that lives ``span``
    seconds in its header (:func:`ttl_ms`; cached by ms, cleared when full)."""
    ttl = None if span == _INF else ttl_ms(0.0, span)
    head = _locked_heads.get(ttl)
    if head is None:
        if len(_locked_heads) >= HEADER_CACHE_MAX:
            _locked_heads.clear()
        head = _locked_heads[ttl] = _FIRST_LOCKED_HEAD if ttl is None else _EMPTY._header(0, ttl) + DA_LOCKED
    return head


def deliver_all(messages: Sequence[Any], tags: Sequence[bytes] | None = None) -> list[bytes]:
    """:meth:`Envelope.deliver` of each stored message (a receiver's batch: objects with
    ``envelope``, ``sequence_number``, ``enqueued_at``, ``expires_at``, ``delivery_count``
    and ``locked_until``). ``tags``: the batch's lock tokens (their delivery-tags) when it
    is a peek-lock batch, each message locked (locked-until stamped, the token in the
    delivery-annotations); None: a receive-and-delete one. The header carries prior
    attempts: the count of deliveries before this one, and the time to live in force
    (:func:`ttl_ms`). A locked first
    delivery of a message with no header or annotations of its own (most) is assembled here,
    its common head made once per time to live."""
    out: list[bytes] = []
    if tags is None:
        for msg in messages:
            count = msg.delivery_count
            out.append(
                msg.envelope.deliver(
                    msg.sequence_number,
                    msg.enqueued_at,
                    None,
                    count - 1 if count > 0 else 0,
                    ttl_ms(msg.enqueued_at, msg.expires_at),
                )
            )
        return out
    append, join, pack, bare = out.append, b"".join, _LOCKED_DELIVERY.pack, _BARE[1]
    last_until: float | None = None
    until = 0
    last_span = _INF
    head = _FIRST_LOCKED_HEAD
    for msg, token in zip(messages, rfc_order(tags), strict=True):
        envelope = msg.envelope
        count = msg.delivery_count
        enqueued_at = msg.enqueued_at
        if (
            count != 1
            or envelope.annotations
            or envelope.header is not None
            or envelope.delivery_annotations is not None
        ):
            append(
                envelope.deliver(
                    msg.sequence_number,
                    enqueued_at,
                    msg.locked_until,
                    count - 1 if count > 0 else 0,
                    ttl_ms(enqueued_at, msg.expires_at),
                    token,
                )
            )
            continue
        span = msg.expires_at - enqueued_at  # (infinite: no time to live)
        if span != last_span:  # a batch's messages mostly share one time to live
            last_span = span
            head = _first_locked_head(span)
        locked_until = msg.locked_until
        if locked_until != last_until:  # a batch's locks share one locked-until
            last_until = locked_until
            until = int(locked_until * 1000) if locked_until < _MAX_SECONDS else _MAX_TIMESTAMP_MS
        enqueued = int(enqueued_at * 1000) if enqueued_at < _MAX_SECONDS else _MAX_TIMESTAMP_MS
        seq = msg.sequence_number
        stamps = pack(token, bare, seq, _ENQ_KEY, enqueued, _LOCK_KEY, until)
        append(join((head, stamps, envelope.props_raw, envelope.body)))
    return out


def _ms(seconds: float) -> int:
    return _MAX_TIMESTAMP_MS if seconds >= 253402300799 else int(seconds * 1000)


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


def check_body(buf: bytes, pos: int) -> int:
    """:class:`DecodeError` unless ``buf[pos:]`` is a valid body and footer: data sections (of
    binary), amqp-sequence sections (of lists) or one amqp-value, then at most a footer (a
    map), each section decoded whole (3.2). Returns where the body (and footer) ends.

    One leniency: delivery-annotations *after* the body. The official SDK's encoder (pyamqp,
    azure-servicebus 7.15 ``_encode.encode_payload``) writes them last, and Service Bus
    accepts such a message (the SDK's ``send_and_receive_amqp_annotated_message`` sample
    sends one): the body ends where they start, and :func:`split_message` keeps them as the
    message's delivery-annotations."""
    n = len(buf)
    kind: type | None = None
    footer = False
    while pos < n:
        start = pos
        section, pos = decode(buf, pos)
        t = type(section)
        if t is DeliveryAnnotations and (kind is not None or footer):
            _map(section.value, "the delivery-annotations", start)
            if pos != n:
                raise DecodeError("trailing delivery-annotations must be the message's last section", pos)
            return start
        if footer:
            raise DecodeError("the footer must be the message's last section", start)
        if t is Footer:
            _map(section.value, "the footer", start)
            footer = True
            continue
        if t is Data:
            if not isinstance(section.value, bytes):
                raise DecodeError("a data section must hold binary", start)
        elif t is AmqpSequence:
            if not isinstance(section.value, list):
                raise DecodeError("an amqp-sequence section must hold a list", start)
        elif t is not AmqpValue:
            raise DecodeError(f"expected a body section or the footer, not {t.__name__}", start)
        if kind is not None and (t is not kind or t is AmqpValue):
            raise DecodeError("a body is data sections, amqp-sequence sections or one amqp-value", start)
        kind = t
    return n


def split_message(payload: bytes, check: bool = False) -> Envelope:
    """Split an encoded message; :class:`DecodeError` if its head sections are malformed
    (``check``: or its body, :func:`check_body`: a message sent, not one read back)."""
    buf = payload
    envelope = body_only(buf)
    if envelope is not None:
        return envelope  # the common case: nothing to split (its one data section checked)
    n = len(buf)
    pos = 0
    header: Header | None = None
    annotations: dict[Any, Any] = {}
    properties: Properties | None = None
    app: dict[str, Any] | None = None
    delivery_annotations: dict[Any, Any] | None = None
    delivery_annotations_at = 0
    props_start: int | None = None
    last = -1
    annotations_at = app_at = 0
    properties_at = -1
    while pos < n:
        code = _descriptor_code(buf, pos)
        if code in _BODY_OR_FOOTER:
            break
        start = pos
        # A Service Bus client's properties hold a message-id only: read by the client
        # decoder's reader for that shape when it is the one (it declines anything else).
        known = _id_only_properties(buf, pos) if code == 0x73 and pos + 8 <= n and type(buf) is bytes else None
        section, pos = decode(buf, pos) if known is None else known
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
            annotations_at = start
        elif type(section) is DeliveryAnnotations:
            delivery_annotations = _map(section.value, "delivery-annotations", start)
            delivery_annotations_at = start
        elif type(section) is Properties:
            properties = section
            if known is None:  # (an id-only section's id is a string)
                properties_at = start
        elif type(section) is ApplicationProperties:
            app = _map(section.value, "application-properties", start)
            app_at = start
    props_raw = b"" if props_start is None else bytes(buf[props_start:pos])
    end = check_body(buf, pos) if check else n
    if end < n:  # delivery-annotations after the body (the official SDK writes them there)
        delivery_annotations_at = end
        delivery_annotations = decode(buf, end)[0].value
    if check:  # a message sent: kept only if every delivery can give it back as it came
        if annotations:
            check_annotations(annotations, annotations_at)
        if delivery_annotations:
            check_annotations(delivery_annotations, delivery_annotations_at, "delivery annotation")
        if properties is not None and properties_at >= 0:
            check_properties(properties, properties_at)
        if app:
            check_application_properties(app, app_at)
    return Envelope(
        header, annotations, properties, app, props_raw, bytes(buf[pos:end]),
        delivery_annotations=delivery_annotations or None,
    )  # fmt: skip


def body_only(payload: bytes | memoryview, message_format: int = 0, max_size: float = math.inf) -> Envelope | None:
    """The envelope of a message that is only its body, one data (or amqp-value) section of
    binary that runs to the end (most are), or None when it is any other message (sections
    before the body to split, another body to check: the general path, :func:`split_message`,
    decides). It is what ``Envelope(None, {}, None, None, b"", body)`` makes, without the
    dataclass's two calls (this runs once per message sent). None also for a sent message
    with a message-format other than 0 or larger than ``max_size`` (the entity's
    max-message-size)."""
    size = len(payload)
    if message_format or size > max_size:
        return None  # (before the copy of a view: a message too large is not copied)
    body = payload if type(payload) is bytes else bytes(payload)
    # the first section: a data or amqp-value section (smallulong descriptor) of vbin8 or vbin32 ...
    if not body.startswith(_BINARY_BODY_HEADS):
        return None
    # ... whose binary's length runs to the end of the message: a valid message, nothing after it
    # (a vbin32 cut short reads as a length below its own, "big" is from_bytes's default)
    if body[3] == 0xB0:
        if int.from_bytes(body[4:8]) != size - 8:
            return None
    elif size < 5 or body[4] != size - 5:
        return None
    envelope = _new_envelope(Envelope)
    envelope.header = None
    envelope.annotations = {}
    envelope.properties = None
    envelope.application_properties = None
    envelope.props_raw = b""
    envelope.body = body
    envelope.template = None
    envelope.size = size
    envelope.delivery_annotations = None
    return envelope


def bodies_only(sent: Sequence[Sent], max_size: float = math.inf) -> list[Envelope]:
    """:func:`body_only` of each message of a run (in arrival order), up to the first for
    which it is None."""
    envelopes: list[Envelope] = []
    append = envelopes.append
    for item in sent:  # (a Python loop: a Python function called from C's map costs more)
        envelope = body_only(item.payload, item.message_format, max_size)
        if envelope is None:
            break
        append(envelope)
    return envelopes


_new_envelope = object.__new__


def as_text(value: Any) -> Any:
    """``value``, with binary decoded as UTF-8 (the SDK sends some strings as binary)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    return value


def timestamp(seconds: float) -> Timestamp:
    """An AMQP timestamp (ms) for ``seconds`` since the epoch, clamped to the type's range."""
    return Timestamp(_ms(seconds))
