"""The AMQP 1.0 message (spec 3.2) as a Python object, and its encoding as transfer payload.

    "The body consists of one of the following three choices: one or more data
    sections, one or more amqp-sequence sections, or a single amqp-value section." (3.2)

Sections are kept as the generated section classes (``Header``, ``Properties``)
and plain dicts (annotations, application properties, footer), created only when
used. Friendly names map onto them: ``message_id``, ``content_type``,
``session_id`` (group-id, as Service Bus calls it), ``ttl`` in seconds (header
ttl is milliseconds on the wire), ``partition_key`` (the message annotation
``x-opt-partition-key``)...

Body rules:

* bytes-like -> one data section (the decimal types, bytes underneath, are
  values); ``body_type="data"`` with a list of bytes-likes
  -> one data section each;
* ``body_type="sequence"`` with a list -> one amqp-sequence section;
  ``body_type="sequences"`` with a list of lists -> one amqp-sequence section each;
* anything else (or ``body_type="value"``) -> one amqp-value section; a message
  with no body encodes an amqp-value of null, as 3.2 requires a body section.

A decoded message gives back the same shapes: one data section -> ``bytes``,
several -> a list of ``bytes``; a message without a body section -> ``None``.
"""

from __future__ import annotations

import datetime as _dt
import struct
import uuid
from collections.abc import Callable
from operator import attrgetter
from typing import Any, ClassVar, TypeVar

from amqplink.codec.decode import decode
from amqplink.codec.errors import DecodeError, EncodeError
from amqplink.codec.types import (
    Decimal32,
    Decimal64,
    Decimal128,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
)
from amqplink.message._decode import decode_learned, decode_unlearned
from amqplink.message._id_only import ID_ONLY_HEADS, ID_ONLY_MAX, id_only_properties, id_only_properties_at
from amqplink.message.application import application_property_error
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

__all__ = [
    "DATA8_HEAD",
    "DATA32_HEAD",
    "ID_ONLY_HEADS",
    "ID_ONLY_MAX",
    "BodyType",
    "Message",
    "data_section_header",
    "id_only_properties_at",
]
# ID_ONLY_HEADS, ID_ONLY_MAX: the encoded properties section of a message-id alone, up to the
# id's bytes, by the id's length (at most ID_ONLY_MAX UTF-8 bytes): what the encoder writes
# for a message whose properties are its id, for writers that assemble messages themselves
# (the PySpark sink); id_only_properties_at: its reader, for readers that walk a payload
# themselves (the broker's envelope). Kept in amqplink.message._id_only.

BodyType = str  # "data", "sequence", "sequences", "value"

M = TypeVar("M", bound="Message")

PARTITION_KEY = Symbol("x-opt-partition-key")

DATA8_HEAD = b"\x00\x53\x75\xa0"
"""A data section's descriptor and vbin8 constructor (3.2.6); the size follows in one byte."""
DATA32_HEAD = b"\x00\x53\x75\xb0"
"""A data section's descriptor and vbin32 constructor; the size follows in four bytes."""
_DATA8 = DATA8_HEAD
_DATA32 = DATA32_HEAD
_DATA32_WORD = int.from_bytes(_DATA32, "big")
_DATA32_PACK = struct.Struct(">II").pack  # _DATA32 as a word, then the size: the vbin32 section header
_VIEW_COPY_LIMIT = 64 * 1024
_unpack_data_head = struct.Struct(">4sI").unpack_from
_DATA8_HEADERS = tuple(_DATA8 + bytes((n,)) for n in range(256))
_OTHER_HEADER = attrgetter(*(name for name in Header.__match_args__ if name != "durable"))
_NO_OTHER_HEADER = (None,) * (len(Header.__match_args__) - 1)


def _header_bytes(durable: bool) -> bytes:
    out = bytearray()
    Header(durable=durable)._amqp_encode(out)
    return bytes(out)


_DURABLE_ONLY_HEADERS = {None: b"", True: _header_bytes(True), False: _header_bytes(False)}
"""A header section that holds ``durable`` and nothing else, encoded (none: no section)."""

# Order of the sections in a message (3.2): header, delivery-annotations,
# message-annotations, properties, application-properties, body, footer.
_RANK: dict[type, int] = {
    Header: 0,
    DeliveryAnnotations: 1,
    MessageAnnotations: 2,
    Properties: 3,
    ApplicationProperties: 4,
    Data: 5,
    AmqpSequence: 5,
    AmqpValue: 5,
    Footer: 6,
}
# bytes underneath, but AMQP values of their own: an amqp-value body, not a data section.
_TYPED_BYTES = (Decimal32, Decimal64, Decimal128)


def _message_id(value: Any) -> Any:
    """message-id is one of ulong, uuid, binary, string (3.2.11-3.2.14)."""
    if value is None or isinstance(value, str | uuid.UUID | ULong):
        return value
    if isinstance(value, bool):
        raise ValueError("a message id cannot be a boolean")
    if isinstance(value, int):
        return ULong(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise ValueError(f"a message id must be str, int, uuid.UUID or bytes, not {type(value).__name__}")


def _timestamp(value: Any) -> Timestamp | None:
    if value is None or isinstance(value, Timestamp):
        return value
    if isinstance(value, _dt.datetime):
        return Timestamp.from_datetime(value)
    raise ValueError(f"a time must be a datetime or a Timestamp, not {type(value).__name__}")


def _datetime(value: Any) -> _dt.datetime | None:
    return None if value is None else Timestamp(value).to_datetime()


def _symbol(value: Any) -> Symbol | None:
    return None if value is None else Symbol(value)


def _opt(kind: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else kind(v)


def _ttl_in(seconds: Any) -> UInt | None:
    if seconds is None:
        return None
    ms = round(float(seconds) * 1000)
    if not 0 <= ms <= 0xFFFFFFFF:
        raise ValueError(f"ttl must be between 0 and {0xFFFFFFFF / 1000:.0f} seconds, not {seconds}")
    return UInt(ms)


def _ttl_out(ms: Any) -> float | None:
    return None if ms is None else int(ms) / 1000


def _identity(value: Any) -> Any:
    return value


def _section_field(
    section: str,
    factory: type,
    field: str,
    to_wire: Callable[[Any], Any] = _identity,
    from_wire: Callable[[Any], Any] = _identity,
    doc: str = "",
) -> property:
    """A friendly property reading and writing ``field`` of the ``section`` object."""

    def get(self: Message) -> Any:
        obj = getattr(self, section)
        return None if obj is None else from_wire(getattr(obj, field))

    def set_(self: Message, value: Any) -> None:
        obj = getattr(self, section)
        if obj is None:
            if value is None:
                return
            obj = factory()
            setattr(self, section, obj)
        setattr(obj, field, to_wire(value))

    return property(get, set_, doc=doc or f"The {section} section's {field.replace('_', '-')} field.")


class Message:
    """An AMQP message: body, header, annotations, properties, application properties, footer."""

    __slots__ = (
        "_body",
        "_body_type",
        "application_properties",
        "delivery_annotations",
        "footer",
        "header",
        "message_annotations",
        "properties",
    )

    _FRIENDLY: ClassVar[tuple[str, ...]] = (
        "message_id", "user_id", "to", "subject", "reply_to", "correlation_id", "content_type",
        "content_encoding", "absolute_expiry_time", "creation_time", "group_id", "group_sequence",
        "reply_to_group_id", "session_id", "reply_to_session_id", "durable", "priority", "ttl",
        "first_acquirer", "delivery_count", "partition_key",
    )  # fmt: skip

    def __init__(
        self,
        body: Any = None,
        *,
        body_type: BodyType | None = None,
        header: Header | None = None,
        delivery_annotations: dict[Any, Any] | None = None,
        message_annotations: dict[Any, Any] | None = None,
        properties: Properties | None = None,
        application_properties: dict[str, Any] | None = None,
        footer: dict[Any, Any] | None = None,
        **friendly: Any,
    ) -> None:
        self.header = header
        self.delivery_annotations = delivery_annotations
        self.message_annotations = message_annotations
        self.properties = properties
        self.application_properties = application_properties
        self.footer = footer
        self._set_body(body, body_type)
        for name, value in friendly.items():
            if name not in self._FRIENDLY:
                raise TypeError(f"Message() got an unexpected keyword argument {name!r}")
            if value is not None:
                setattr(self, name, value)

    @classmethod
    def of_data(cls: type[M], body: bytes, properties: Properties | None = None) -> M:
        """A message of ``properties`` and one data section holding ``body`` (exactly
        ``bytes``): what ``Message(body, properties=properties)`` makes, without its checks."""
        msg = cls.__new__(cls)
        msg.header = msg.delivery_annotations = msg.message_annotations = None
        msg.application_properties = msg.footer = None
        msg.properties = properties
        msg._body, msg._body_type = body, "data"
        return msg

    # -- body -------------------------------------------------------------------------
    def _set_body(self, body: Any, body_type: BodyType | None) -> None:
        if body_type is None:
            is_data = isinstance(body, bytes | bytearray | memoryview) and not isinstance(body, _TYPED_BYTES)
            body_type = "data" if is_data else "value"
        if body_type == "data":
            if isinstance(body, bytes | bytearray | memoryview):
                body = bytes(body) if type(body) is not bytes else body
            elif isinstance(body, list) and all(isinstance(b, bytes | bytearray | memoryview) for b in body):
                body = [bytes(b) for b in body]
            else:
                raise ValueError("body_type='data' needs bytes or a list of bytes")
        elif body_type == "sequence":
            if not isinstance(body, list):
                raise ValueError("body_type='sequence' needs a list")
        elif body_type == "sequences":
            if not (isinstance(body, list) and body and all(isinstance(s, list) for s in body)):
                raise ValueError("body_type='sequences' needs a non-empty list of lists")
        elif body_type != "value":
            raise ValueError(f"body_type must be 'data', 'sequence', 'sequences' or 'value', not {body_type!r}")
        self._body = body
        self._body_type = body_type

    @property
    def body(self) -> Any:
        """The body: bytes, a list of bytes, a list (sequence), or any AMQP value."""
        return self._body

    @body.setter
    def body(self, value: Any) -> None:
        self._set_body(value, None)

    @property
    def body_type(self) -> BodyType:
        """How the body is carried: "data", "sequence", "sequences" or "value"."""
        return self._body_type

    # -- friendly names ---------------------------------------------------------------
    message_id = _section_field("properties", Properties, "message_id", _message_id)
    user_id = _section_field("properties", Properties, "user_id", _opt(bytes))
    to = _section_field("properties", Properties, "to")
    subject = _section_field("properties", Properties, "subject")
    reply_to = _section_field("properties", Properties, "reply_to")
    correlation_id = _section_field("properties", Properties, "correlation_id", _message_id)
    content_type = _section_field("properties", Properties, "content_type", _symbol)
    content_encoding = _section_field("properties", Properties, "content_encoding", _symbol)
    absolute_expiry_time = _section_field(
        "properties", Properties, "absolute_expiry_time", _timestamp, _datetime, "When the message expires (UTC)."
    )
    creation_time = _section_field(
        "properties", Properties, "creation_time", _timestamp, _datetime, "When the message was made (UTC)."
    )
    group_id = _section_field("properties", Properties, "group_id")
    group_sequence = _section_field("properties", Properties, "group_sequence", _opt(UInt))
    reply_to_group_id = _section_field("properties", Properties, "reply_to_group_id")
    session_id = _section_field("properties", Properties, "group_id", doc="Service Bus session id (group-id).")
    reply_to_session_id = _section_field(
        "properties", Properties, "reply_to_group_id", doc="Service Bus reply-to session id (reply-to-group-id)."
    )
    durable = _section_field("header", Header, "durable")
    priority = _section_field("header", Header, "priority", _opt(UByte))
    ttl = _section_field("header", Header, "ttl", _ttl_in, _ttl_out, "Time to live in seconds (header ttl).")
    first_acquirer = _section_field("header", Header, "first_acquirer")
    delivery_count = _section_field("header", Header, "delivery_count", _opt(UInt))

    @property
    def partition_key(self) -> str | None:
        """The Service Bus partition key: message annotation ``x-opt-partition-key``."""
        anns = self.message_annotations
        return None if not anns else anns.get(PARTITION_KEY)

    @partition_key.setter
    def partition_key(self, value: str | None) -> None:
        if value is None:
            if self.message_annotations:
                self.message_annotations.pop(PARTITION_KEY, None)
            return
        if self.message_annotations is None:
            self.message_annotations = {}
        self.message_annotations[PARTITION_KEY] = str(value)

    # -- encoding ---------------------------------------------------------------------
    def encode(self) -> bytes:
        """The message's sections, encoded: the payload of a transfer."""
        body = self._body
        if (
            type(body) is bytes
            and self._body_type == "data"
            and not self.message_annotations
            and not self.application_properties
            and not self.delivery_annotations
            and not self.footer
        ):
            # Fast path, byte for byte what encode_into writes: a header with durable only
            # (or none), properties with a message id only (or none), one data section.
            n = len(body)
            section = _DATA8_HEADERS[n] if n < 256 else _DATA32_PACK(_DATA32_WORD, n)  # data_section_header
            header = self.header
            properties = self.properties
            if header is None and properties is None:
                return section + body
            head = _durable_only_header(header)
            if head is not None:
                if properties is None:
                    return b"".join((head, section, body))
                ids = id_only_properties(properties)
                if ids is not None:
                    return b"".join((head, ids, section, body))
        out = bytearray()
        self.encode_into(out)
        return bytes(out)

    def encode_into(self, out: bytearray) -> None:
        """Append the encoded sections to ``out``."""
        self._encode_head(out)
        body, kind = self._body, self._body_type
        if kind == "data":
            for chunk in body if isinstance(body, list) else (body,):
                out += data_section_header(len(chunk))
                out += chunk
        elif kind == "sequence":
            AmqpSequence(body)._amqp_encode(out)
        elif kind == "sequences":
            for seq in body:
                AmqpSequence(seq)._amqp_encode(out)
        else:
            AmqpValue(body)._amqp_encode(out)
        if self.footer:
            Footer(_symbol_keys(self.footer))._amqp_encode(out)

    def encode_with_data(self, chunks: list[bytes]) -> bytes:
        """This message's sections with ``chunks`` as its body, one data section each,
        whatever its own body is ("one or more data sections", 3.2): a batch envelope's
        payload without copying the chunks into a body first."""
        head = bytearray()
        self._encode_head(head)
        parts: list[bytes | bytearray] = [head]
        append = parts.append
        for chunk in chunks:
            append(data_section_header(len(chunk)))
            append(chunk)
        if self.footer:
            footer = bytearray()
            Footer(_symbol_keys(self.footer))._amqp_encode(footer)
            append(footer)
        return b"".join(parts)

    def _encode_head(self, out: bytearray) -> None:
        """Append the sections before the body (3.2: header ... application-properties)."""
        header = self.header
        if header is not None and not _empty(header, Header.__slots__):
            header._amqp_encode(out)
        if self.delivery_annotations:
            DeliveryAnnotations(_symbol_keys(self.delivery_annotations))._amqp_encode(out)
        if self.message_annotations:
            MessageAnnotations(_symbol_keys(self.message_annotations))._amqp_encode(out)
        properties = self.properties
        if properties is not None and not _empty(properties, Properties.__slots__):
            properties._amqp_encode(out)
        app = self.application_properties
        if app:
            for key, value in app.items():
                problem = application_property_error(key, value)
                if problem is not None:
                    raise EncodeError(problem)
            ApplicationProperties(app)._amqp_encode(out)

    # -- decoding ---------------------------------------------------------------------
    @classmethod
    def decode(cls: type[M], payload: bytes | bytearray | memoryview) -> M:
        """Decode a transfer payload; a malformed one raises ``DecodeError`` naming the section."""
        msg = cls.__new__(cls)
        n = len(payload)
        if n >= 8 and payload[2] == 0x75:  # a data section first (00 53 75)
            # Fast path: exactly one data section (its bytes copied once, from a view too),
            # its descriptor and constructor and the four bytes after them read at once.
            prefix, size = _unpack_data_head(payload, 0)
            if prefix == _DATA32:
                start = 8 if size == n - 8 else 0
            else:  # vbin8: the size is the first of the four bytes
                start = 5 if prefix == _DATA8 and size >> 24 == n - 5 else 0
            if start:
                msg.header = msg.delivery_annotations = msg.message_annotations = None
                msg.properties = msg.application_properties = msg.footer = None
                msg._body, msg._body_type = bytes(payload[start:]), "data"
                return msg
        buf: Any = payload
        if type(buf) is not bytes and n <= _VIEW_COPY_LIMIT:
            buf = bytes(buf)
        # _decode.decode_common, inline (once per message received), then the generic decoder
        if type(buf) is bytes and decode_learned(msg, buf, n):
            return msg
        msg.header = msg.delivery_annotations = msg.message_annotations = None
        msg.properties = msg.application_properties = msg.footer = None
        if type(buf) is not bytes or not decode_unlearned(msg, buf, n):
            msg._decode_sections(buf, n)
        return msg

    def _decode_sections(self, buf: Any, n: int) -> None:
        pos = 0
        last_rank = -1
        bodies: list[Any] = []
        body_kind: type | None = None
        while pos < n:
            start = pos
            section, pos = decode(buf, pos)
            kind = type(section)
            rank = _RANK.get(kind)
            if rank is None:
                raise DecodeError(f"a message holds a {kind.__name__}, which is not a message section", start)
            if rank < last_rank or (rank == last_rank and rank != 5):
                raise DecodeError(f"message section {kind.__name__} is out of order or repeated", start)
            last_rank = rank
            if rank == 5:
                if body_kind is not None and (kind is not body_kind or kind is AmqpValue):
                    raise DecodeError(
                        f"a message body mixes or repeats sections ({body_kind.__name__}, {kind.__name__})", start
                    )
                body_kind = kind
                bodies.append(section.value)
            elif kind is Header:
                self.header = section
            elif kind is Properties:
                self.properties = section
            elif kind is DeliveryAnnotations:
                self.delivery_annotations = _as_map(section.value, "delivery-annotations", start)
            elif kind is MessageAnnotations:
                self.message_annotations = _as_map(section.value, "message-annotations", start)
            elif kind is ApplicationProperties:
                self.application_properties = _as_map(section.value, "application-properties", start)
            else:
                self.footer = _as_map(section.value, "footer", start)
        if body_kind is Data:
            self._body, self._body_type = (bodies[0] if len(bodies) == 1 else bodies), "data"
        elif body_kind is AmqpSequence:
            self._body, self._body_type = (bodies[0], "sequence") if len(bodies) == 1 else (bodies, "sequences")
        else:
            self._body, self._body_type = (bodies[0] if bodies else None), "value"

    # -- comparison and display -------------------------------------------------------
    def _sections(self) -> tuple[Any, ...]:
        header = None if self.header is None or _empty(self.header, Header.__slots__) else self.header
        props = None if self.properties is None or _empty(self.properties, Properties.__slots__) else self.properties
        return (
            header,
            self.delivery_annotations or None,
            self.message_annotations or None,
            props,
            self.application_properties or None,
            self._body_type,
            self._body,
            self.footer or None,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return self._sections() == other._sections()

    __hash__ = None  # type: ignore[assignment]  # unhashable: it defines __eq__ and is mutable

    def __repr__(self) -> str:
        body = self._body
        if isinstance(body, bytes) and len(body) > 16:
            shown = f"{body[:16]!r}... ({len(body)} bytes)"
        else:
            text = repr(body)
            shown = text if len(text) <= 64 else text[:61] + "..."
        parts = [f"body={shown}"]
        for name in ("message_id", "subject", "session_id", "content_type", "partition_key"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={value!r}")
        if self.application_properties:
            parts.append(f"application_properties=<{len(self.application_properties)} keys>")
        return f"{type(self).__name__}({', '.join(parts)})"


def data_section_header(n: int) -> bytes:
    """The descriptor and binary constructor of a data section of ``n`` bytes (3.2.6: vbin8
    up to 255 bytes, else vbin32)."""
    if n < 256:
        return _DATA8_HEADERS[n]
    return _DATA32_PACK(_DATA32_WORD, n)


def _durable_only_header(header: Header | None) -> bytes | None:
    """The encoded header section when it holds at most ``durable`` (b"" when it holds
    nothing: no section); None for any other header."""
    if header is None:
        return b""
    durable = header.durable
    if (durable is not None and type(durable) is not bool) or _OTHER_HEADER(header) != _NO_OTHER_HEADER:
        return None
    return _DURABLE_ONLY_HEADERS[durable]


def _empty(section: Any, fields: tuple[str, ...]) -> bool:
    return all(getattr(section, f) is None for f in fields)


def _symbol_keys(annotations: dict[Any, Any]) -> dict[Any, Any]:
    """Annotation keys are symbols (3.2.10): plain str keys are sent as symbols."""
    if all(type(k) is Symbol or not isinstance(k, str) for k in annotations):
        return annotations
    return {Symbol(k) if isinstance(k, str) and type(k) is not Symbol else k: v for k, v in annotations.items()}


def _as_map(value: Any, what: str, offset: int) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise DecodeError(f"{what} must be a map, not {type(value).__name__}", offset)
    return value
