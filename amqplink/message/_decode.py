"""The single-pass decoder of :meth:`amqplink.message.Message.decode` for the usual shapes.

The single pass reads the sections 3.2 lists in their order, each with a smallulong
descriptor and one data body; an amqp-sequence or amqp-value body, a repeated data
section, a symbolic or long-form descriptor... are left to the generic, section-by-section
decoder (``Message._decode_sections``). Heads it has read are learned (:class:`_Head`) and
the next payload with the same leading bytes has its head unpacked at once.

Private to :mod:`amqplink.message`: :func:`decode_learned` and :func:`decode_unlearned`
(the two halves of :func:`decode_common`) are what ``Message.decode`` calls.
"""

from __future__ import annotations

import struct
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from amqplink.codec.decode import decode, section_context, value_decoders
from amqplink.codec.errors import DecodeError
from amqplink.codec.layouts import MapLayouts, MapMaker, StructBuilder, map_entries, map_maker
from amqplink.message._id_only import id_only_properties_at
from amqplink.protocol.definitions import Header, Properties

if TYPE_CHECKING:
    from amqplink.message import Message

__all__ = ["HEADER_CACHE_MAX", "HEAD_KEY", "HEAD_LAYOUTS_MAX", "HEADS_PER_KEY", "decode_common", "decode_learned",
           "decode_unlearned"]

_VALUE_DECODERS = value_decoders()
_unpack_size = struct.Struct(">I").unpack_from
_CTX_TEMPLATE = section_context()
"""The single pass reads section values directly: in data mode, as the generic decoder reads them."""
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
HEADS_PER_KEY = 8
"""Heads learned (or found unlearnable) per key; past this, other heads with the key are read
section by section."""
_HEADER_VALUES = attrgetter(*Header.__match_args__)


class _Head:
    """A learned message head: header, delivery and message annotations, an id-only properties section and
    application properties, each optional, then the descriptor and constructor of a data
    section, in one struct (``StructBuilder``): the header is all skeleton (its field values
    kept), a map is made by its layout's maker (:func:`~amqplink.codec.layouts.map_maker`),
    the message-id is a UTF-8 field, the data's size a field; the body's bytes start where
    the struct ends (:attr:`size`)."""

    __slots__ = ("annotations", "application", "body", "delivery", "header", "properties", "size", "skeleton", "unpack")

    def __init__(self) -> None:
        self.header: tuple[Any, ...] | None = None
        self.delivery: MapMaker | None = None
        """Delivery annotations (a peek-locked Service Bus delivery's lock token)."""
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
        elif code == 0x71:
            head.delivery = _map_layout(fields, buf, at, stop, msg.delivery_annotations or {})
            if head.delivery is None:
                return None
        elif code == 0x72:
            head.annotations = _map_layout(fields, buf, at, stop, msg.message_annotations or {})
            if head.annotations is None:
                return None
        elif code == 0x73:
            if id_only_properties_at(buf, at) is None:
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


def decode_common(msg: Message, buf: bytes, n: int) -> bool:
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
    skeleton has its head unpacked at once (:func:`decode_learned`).
    """
    if decode_learned(msg, buf, n):
        return True
    msg.header = msg.delivery_annotations = msg.message_annotations = None
    msg.properties = msg.application_properties = msg.footer = None
    return decode_unlearned(msg, buf, n)


def decode_learned(msg: Message, buf: bytes, n: int) -> bool:
    """:func:`decode_common` of a payload that starts with a learned head: every section of
    ``msg`` set, and True; False if no learned head matches or the rest is not a footer
    (``msg`` may then hold some sections: the caller sets them all again)."""
    heads = _HEADS.get(buf[:HEAD_KEY])
    if heads is None:
        return False
    for index, head in enumerate(heads):
        if head is None:
            continue
        try:
            fields: tuple[Any, ...] = head.unpack(buf, 0)
        except struct.error:  # the payload is shorter than the head
            continue
        if fields[0::2] != head.skeleton:
            continue
        if index:  # the next payload is most likely laid out as this one: it is tried first
            # (a swap keeps the list's length whatever another thread does meanwhile; a race can
            # at worst put one head in two places, and the head it replaced is read section by section)
            heads[0], heads[index] = head, heads[0]
        start = head.size
        end = start + fields[head.body]
        try:
            footer = None if end == n else _footer(buf, end, n)
            # The head sections from the unpacked fields (a message-id or a map's string
            # that is not UTF-8 raises UnicodeDecodeError).
            msg.header = None if head.header is None else Header(*head.header)
            delivery = head.delivery
            msg.delivery_annotations = None if delivery is None else delivery(fields)
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


def decode_unlearned(msg: Message, buf: bytes, n: int) -> bool:
    """:func:`decode_common` section by section (``msg``'s sections all None before), the
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
        read = id_only_properties_at(buf, pos)
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
