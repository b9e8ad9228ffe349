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

from amqplink.codec.decode import DEFAULT_LIMITS, decode, value_decoders
from amqplink.codec.errors import DecodeError, EncodeError
from amqplink.codec.layouts import MapLayouts, MapMaker, StructBuilder, map_entries, map_maker
from amqplink.codec.types import (
    Array,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
)
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

__all__ = ["BodyType", "Message", "data_section_header"]

BodyType = str  # "data", "sequence", "sequences", "value"

M = TypeVar("M", bound="Message")

PARTITION_KEY = Symbol("x-opt-partition-key")

_DATA8 = b"\x00\x53\x75\xa0"
_DATA32 = b"\x00\x53\x75\xb0"
_DATA32_WORD = int.from_bytes(_DATA32, "big")
_DATA32_PACK = struct.Struct(">II").pack  # _DATA32 as a word, then the size: the vbin32 section header
_VIEW_COPY_LIMIT = 64 * 1024
_DATA8_HEADERS = tuple(_DATA8 + bytes((n,)) for n in range(256))
_ID_ONLY_MAX = 252
"""The longest UTF-8 message-id whose one-field properties list still fits a list8."""
_ID_ONLY_HEADS = tuple(b"\x00\x53\x73\xc0" + bytes((n + 3, 1, 0xA1, n)) for n in range(_ID_ONLY_MAX + 1))
"""A properties section of a message-id of ``n`` UTF-8 bytes and nothing else, up to the id:
a list8 of one str8 field, ``00 53 73 c0 <size> 01 a1 <n>``, size = n + 3 <= 255."""
_OTHER_PROPERTIES = attrgetter(*(name for name in Properties.__match_args__ if name != "message_id"))
_NO_OTHER_PROPERTIES = (None,) * (len(Properties.__match_args__) - 1)
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
_NOT_SIMPLE = (dict, list, tuple, Array, Described)
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
                ids = _id_only_properties(properties)
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
                if not isinstance(key, str):
                    raise EncodeError(f"application property keys must be strings, not {type(key).__name__}")
                if isinstance(value, _NOT_SIMPLE):
                    raise EncodeError(
                        f"application property {key!r} is a {type(value).__name__}: values must be simple types"
                        " (3.2.5: no map, list or array)"
                    )
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
        # _decode_common, inline (once per message received), then the generic decoder
        if type(buf) is bytes and _decode_learned(msg, buf, n):
            return msg
        msg.header = msg.delivery_annotations = msg.message_annotations = None
        msg.properties = msg.application_properties = msg.footer = None
        if type(buf) is not bytes or not _decode_unlearned(msg, buf, n):
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

    __hash__ = None  # type: ignore[assignment]

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


def _id_only_properties(properties: Properties) -> bytes | None:
    """The encoded properties section when it holds a short string message-id and nothing
    else (what every ServiceBusMessage has); None for any other properties."""
    message_id = properties.message_id
    if type(message_id) is not str or _OTHER_PROPERTIES(properties) != _NO_OTHER_PROPERTIES:
        return None
    raw = message_id.encode()
    n = len(raw)
    if n > _ID_ONLY_MAX:
        return None
    return b"".join((_ID_ONLY_HEADS[n], raw))


# -- the single-pass decoder for the usual shapes ----------------------------------------
# The single pass reads the sections 3.2 lists in their order, each with a smallulong
# descriptor and one data body; an amqp-sequence or amqp-value body, a repeated data
# section, a symbolic or long-form descriptor... are left to the generic decoder.
_VALUE_DECODERS = value_decoders()
_unpack_size = struct.Struct(">I").unpack_from
_unpack_data_head = struct.Struct(">4sI").unpack_from
_CTX_TEMPLATE = DEFAULT_LIMITS._template
_HEADER_FIELDS: dict[bytes, tuple[Any, ...]] = {}
"""Header list8 encodings seen -> their checked fields: a broker sends few distinct headers."""
HEADER_CACHE_MAX = 64
"""Distinct headers remembered; past this, headers are decoded each time."""


def _header(buf: bytes, pos: int, n: int) -> tuple[Header, int]:
    """The header section whose list8 constructor is at ``pos``, from the cache when seen before."""
    end = pos + 2 + buf[pos + 1]
    key = buf[pos:end] if end <= n else b""
    fields = _HEADER_FIELDS.get(key)
    if fields is None:
        value, end = _VALUE_DECODERS[0xC0](buf, pos + 1, 1, _CTX_TEMPLATE.copy())
        header = Header._amqp_decode(value)
        if len(_HEADER_FIELDS) < HEADER_CACHE_MAX:
            _HEADER_FIELDS[key] = (
                header.durable,
                header.priority,
                header.ttl,
                header.first_acquirer,
                header.delivery_count,
            )
        return header, end
    return Header(*fields), end


class _Uncommon(Exception):
    """The single pass does not read this payload: the generic decoder does."""


_NOT_READ = (_Uncommon, DecodeError, UnicodeDecodeError, IndexError, struct.error)
"""What the single pass raises on a payload it leaves to the generic decoder: a shape it
does not read (``_Uncommon``), a value the codec's readers refuse (``DecodeError``), text
that is not UTF-8, a section or size field running past the bytes (``IndexError``,
``struct.error``). Anything else is a bug and propagates (no silent fallback)."""


_LAYOUTS = {code: MapLayouts() for code in (0x71, 0x72, 0x74, 0x78)}
"""The map layouts met in delivery annotations, message annotations, application properties
and footers (by section code): a broker stamps every message's annotations alike."""


def _map_section(buf: bytes, pos: int, code: int) -> tuple[dict[Any, Any], int]:
    """The map of the section ``code`` whose descriptor starts at ``pos``; ``_Uncommon`` if it is no map."""
    value, end = _LAYOUTS[code].read(buf, pos + 3)
    if type(value) is not dict:
        raise _Uncommon
    return value, end


def _id_only_properties_at(buf: bytes, pos: int) -> tuple[Properties, int] | None:
    """The properties section at ``pos`` if it is the one :func:`_id_only_properties` writes
    (a message-id of valid UTF-8 and nothing else), and the offset after it; else None."""
    size = buf[pos + 7]
    end = pos + 8 + size
    if size > _ID_ONLY_MAX or end > len(buf) or not buf.startswith(_ID_ONLY_HEADS[size], pos):
        return None
    try:
        return Properties(buf[pos + 8 : end].decode()), end
    except UnicodeDecodeError:  # the generic decoder reports it
        return None


def _data_span(buf: bytes, pos: int, n: int) -> tuple[int, int] | None:
    """Where the bytes of the data section at ``pos`` (vbin8 or vbin32, within ``buf[:n]``) lie."""
    c = buf[pos + 3]
    if c == 0xB0:
        start = pos + 8
        end = start + _unpack_size(buf, pos + 4)[0]
    elif c == 0xA0:
        start = pos + 5
        end = start + buf[pos + 4]
    else:
        return None
    return (start, end) if end <= n else None


def _section_code(buf: bytes, pos: int) -> int:
    """The section code of the smallulong descriptor at ``pos`` (``00 53 <code>``); -1 if there is none."""
    return buf[pos + 2] if buf[pos] == 0 and buf[pos + 1] == 0x53 else -1


HEAD_KEY = 8
"""Leading bytes of a payload that key the layouts of its head (the sections before the
body): always skeleton, as no value field of a head starts before its 9th byte (a section's
descriptor and constructor take 4, a map's size and count 2, its first key and value
constructor 2 or more; an id-only properties section's list head 4)."""
HEAD_LAYOUTS_MAX = 64
"""Distinct head keys remembered; past this, heads with a new key are read section by section."""
HEADS_PER_KEY = 4
"""Heads learned (or found unlearnable) per key; past this, other heads with the key are read
section by section."""
_HEADER_VALUES = attrgetter(*Header.__match_args__)


class _Head:
    """A learned message head: header, message annotations, an id-only properties section and
    application properties, each optional, then the descriptor and constructor of a data
    section, in one struct (``StructBuilder``): the header is all skeleton (its field values
    kept), a map is made by its layout's maker (:func:`~amqplink.codec.layouts.map_maker`),
    the message-id is a UTF-8 field, the data's size a field; the body's bytes start where
    the struct ends (:attr:`size`)."""

    __slots__ = ("annotations", "application", "body", "header", "properties", "size", "skeleton", "unpack")

    def __init__(self) -> None:
        self.header: tuple[Any, ...] | None = None
        self.annotations: MapMaker | None = None
        self.properties = -1
        """The message-id's field index; -1: no properties section."""
        self.application: MapMaker | None = None
        self.body = 0
        """The data section's size field index."""
        self.unpack: Any = None
        self.size = 0
        self.skeleton: tuple[bytes, ...] = ()


_HEADS: dict[bytes, list[_Head | None]] = {}


def _map_layout(fields: StructBuilder, buf: bytes, start: int, end: int, value: dict[Any, Any]) -> MapMaker | None:
    """The maker of the map section ``buf[start:end]`` (its value ``value``) from the fields."""
    entries = map_entries(fields, buf, start + 3, end, value)
    return None if entries is None else map_maker(entries)


def _learn_head(msg: Message, buf: bytes, end: int, body: int) -> _Head | None:
    """The layout of the head ``buf[:end]``, read as ``msg``'s sections, and of the data
    section at ``end`` whose bytes start at ``body``; None if some section is not of a kind
    a head layout reads."""
    if msg.delivery_annotations is not None:
        return None
    starts = []
    pos = 0
    while pos < end:  # where each section starts (learning happens once per head)
        starts.append(pos)
        pos = decode(buf, pos)[1]
    if pos != end:
        return None
    head = _Head()
    fields = StructBuilder(buf, 0)
    section_ends = [*starts[1:], end]
    for at, stop in zip(starts, section_ends, strict=True):
        code = buf[at + 2]
        if code == 0x70:
            if buf[at + 3] != 0xC0:
                return None
            head.header = _HEADER_VALUES(msg.header)
        elif code == 0x72:
            head.annotations = _map_layout(fields, buf, at, stop, msg.message_annotations or {})
            if head.annotations is None:
                return None
        elif code == 0x73:
            if _id_only_properties_at(buf, at) is None:
                return None
            head.properties = fields.field(at + 8, f"{buf[at + 7]}s")
        else:
            head.application = _map_layout(fields, buf, at, stop, msg.application_properties or {})
            if head.application is None:
                return None
    head.body = fields.field(end + 4, "I" if buf[end + 3] == 0xB0 else "B")  # vbin32 or vbin8 (_data_span)
    packer, head.skeleton = fields.finish(body)
    head.unpack, head.size = packer.unpack_from, packer.size
    return head


def _decode_common(msg: Message, buf: bytes, n: int) -> bool:
    """Decode ``buf`` in one pass if it has the usual shape: header, annotations, properties,
    application properties, one data section, footer, in that order (3.2), each with a
    smallulong descriptor.

    It reads each section's value with the codec's own value readers, which check sizes,
    counts, limits, UTF-8 and duplicate keys (maps through :class:`MapLayouts`, which
    leave every map they do not know to those readers), and applies the same field checks
    as the generic path; it does not decide errors: on anything it does not accept it
    returns False, having set nothing the generic decoder will not overwrite, and the
    generic decoder then decodes the message or rejects it with its own ``DecodeError``.
    Only the decode errors of :data:`_NOT_READ` mean "not for the single pass"; any
    other exception is a bug and is raised.

    A head (the sections before the body, and the data section's own head) it has read so
    is learned (:class:`_Head`), and the next payload with the same leading bytes and
    skeleton has its head unpacked at once (:func:`_decode_learned`).
    """
    if _decode_learned(msg, buf, n):
        return True
    msg.header = msg.delivery_annotations = msg.message_annotations = None
    msg.properties = msg.application_properties = msg.footer = None
    return _decode_unlearned(msg, buf, n)


def _decode_learned(msg: Message, buf: bytes, n: int) -> bool:
    """:func:`_decode_common` of a payload that starts with a learned head: every section of
    ``msg`` set, and True; False if no learned head matches or the rest is not a footer
    (``msg`` may then hold some sections: the caller sets them all again)."""
    heads = _HEADS.get(buf[:HEAD_KEY])
    if heads is None:
        return False
    for head in heads:
        if head is None:
            continue
        try:
            fields: tuple[Any, ...] = head.unpack(buf, 0)
        except struct.error:  # the payload is shorter than the head
            continue
        if fields[0::2] != head.skeleton:
            continue
        start = head.size
        end = start + fields[head.body]
        try:
            footer = None if end == n else _footer(buf, end, n)
            # The head sections from the unpacked fields (a message-id or a map's string
            # that is not UTF-8 raises UnicodeDecodeError).
            msg.header = None if head.header is None else Header(*head.header)
            msg.delivery_annotations = None
            annotations = head.annotations
            msg.message_annotations = None if annotations is None else annotations(fields)
            msg.properties = None if head.properties < 0 else Properties(fields[head.properties].decode())
            application = head.application
            msg.application_properties = None if application is None else application(fields)
        except _NOT_READ:  # the generic decoder reports it
            return False
        msg.footer = footer
        msg._body, msg._body_type = buf[start:end], "data"
        return True
    return False


def _decode_unlearned(msg: Message, buf: bytes, n: int) -> bool:
    """:func:`_decode_common` section by section (``msg``'s sections all None before), the
    head learned when the payload is of the usual shape."""
    try:
        pos = _read_head_sections(msg, buf, n)
        span = _data_span(buf, pos, n) if _section_code(buf, pos) == 0x75 else None
        if span is None:
            return False  # no body, or not a data section: the generic rules apply
        start, end = span
        footer = _footer(buf, end, n)
        if pos >= HEAD_KEY:
            key = buf[:HEAD_KEY]
            heads = _HEADS.get(key)
            if heads is None and len(_HEADS) < HEAD_LAYOUTS_MAX:
                heads = _HEADS[key] = []
            if heads is not None and len(heads) < HEADS_PER_KEY:
                heads.append(_learn_head(msg, buf, pos, start))
    except _NOT_READ:  # the generic decoder reports it (_Uncommon: a shape it alone reads)
        return False
    msg.footer = footer
    msg._body, msg._body_type = buf[start:end], "data"
    return True


def _footer(buf: bytes, pos: int, n: int) -> dict[Any, Any] | None:
    """The footer section at ``pos`` that ends the payload ``buf[:n]`` (None if the payload
    ends at ``pos``); ``_Uncommon`` if anything else is there (another body section, a
    section out of order, a data section running past the payload)."""
    if pos == n:
        return None
    if pos > n or _section_code(buf, pos) != 0x78:
        raise _Uncommon
    footer, pos = _map_section(buf, pos, 0x78)
    if pos != n:
        raise _Uncommon
    return footer


def _read_head_sections(msg: Message, buf: bytes, n: int) -> int:
    """Read the head sections (header ... application properties) into ``msg``, each with
    the codec's readers; the offset after them. Raises whatever those readers raise."""
    table = _VALUE_DECODERS
    pos = 0
    header = delivery_anns = message_anns = properties = app = None
    code = _section_code(buf, pos)
    if code == 0x70:
        if buf[pos + 3] == 0xC0:
            header, pos = _header(buf, pos + 3, n)
        else:
            value, pos = table[buf[pos + 3]](buf, pos + 4, 1, _CTX_TEMPLATE.copy())
            header = Header._amqp_decode(value)
        code = _section_code(buf, pos)
    if code == 0x71:
        delivery_anns, pos = _map_section(buf, pos, code)
        code = _section_code(buf, pos)
    if code == 0x72:
        message_anns, pos = _map_section(buf, pos, code)
        code = _section_code(buf, pos)
    if code == 0x73:
        read = _id_only_properties_at(buf, pos)
        if read is None:
            value, pos = table[buf[pos + 3]](buf, pos + 4, 1, _CTX_TEMPLATE.copy())
            properties = Properties._amqp_decode(value)
        else:
            properties, pos = read
        code = _section_code(buf, pos)
    if code == 0x74:
        app, pos = _map_section(buf, pos, code)
    msg.header = header
    msg.delivery_annotations = delivery_anns
    msg.message_annotations = message_anns
    msg.properties = properties
    msg.application_properties = app
    return pos


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
