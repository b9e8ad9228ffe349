"""Straight-line decoders for the performatives a busy link reads most: transfer and
disposition.

They read the shapes peers send in the steady state (a described list8 whose fields
are null or in their short encodings: smalluint/uint0/uint, true/false, vbin8) and
return ``None`` for anything else (list32, an aborted transfer, a delivery state on a
transfer, an unusual encoding...), so the caller falls back to the generic,
table-driven decoder, which also owns every error message. Whatever they return
equals what the generic decoder returns for the same bytes (property-tested and
fuzzed against it in ``tests/engine/test_hot_decode.py``).

Written out field by field on purpose: a loop over a table of field kinds costs as
much as the generic decoder it is meant to skip.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from amqplink.codec.decode import decode
from amqplink.codec.errors import DecodeError
from amqplink.codec.types import UInt
from amqplink.protocol.definitions import Accepted, Disposition, Released, Transfer

__all__ = [
    "TransferFields",
    "decode_disposition",
    "decode_performative",
    "decode_transfer",
    "TransferLayout",
    "scan_like",
    "scan_transfer",
    "transfer_layout",
    "transfer_from_fields",
]

# described list8: 00 53 <code> c0 <size> <count> <fields>; size counts count + fields,
# so a list8 performative ends at most 5 + 255 bytes in.
_MAX_HEAD = 5 + 255
_SMALL_UINTS = tuple(UInt(i) for i in range(256))
_UINT0 = _SMALL_UINTS[0]
# An outcome with no fields, as a 4-byte described list0: 00 53 <code> 45 (one instance each).
_EMPTY_OUTCOMES = {0x24: Accepted(), 0x26: Released()}
_U32 = struct.Struct(">I").unpack_from
_TRANSFER_LIST8 = b"\x00\x53\x14\xc0"  # a transfer (0x14) as a described list8
_DISPOSITION_LIST8 = b"\x00\x53\x15\xc0"  # a disposition (0x15) as a described list8


def _transfer_tails() -> list[dict[bytes, tuple[int | None, bool | None, bool]]]:
    """For each field count (0 to 6), the encodings of a transfer's message-format, settled
    and more that :func:`scan_transfer` reads (null, uint0, smalluint; null, true, false) ->
    their values; fields beyond the count take their defaults (None, None, False)."""
    formats = [(b"\x40", None), (b"\x43", 0), *((bytes((0x52, v)), v) for v in range(256))]
    settles: list[tuple[bytes, bool | None]] = [(b"\x40", None), (b"\x41", True), (b"\x42", False)]
    mores = [(b"\x40", False), (b"\x41", True), (b"\x42", False)]
    tables: list[dict[bytes, tuple[int | None, bool | None, bool]]] = [{b"": (None, None, False)} for _ in range(4)]
    tables.append({f: (fv, None, False) for f, fv in formats})
    tables.append({f + s: (fv, sv, False) for f, fv in formats for s, sv in settles})
    tables.append({f + s + m: (fv, sv, mv) for f, fv in formats for s, sv in settles for m, mv in mores})
    return tables


_TAILS = _transfer_tails()


def decode_performative(body: bytes | memoryview) -> tuple[Any, int]:
    """A frame body's performative and the offset of its payload (2.3.2).

    Transfers and dispositions first try the straight-line decoders; everything
    else, and whatever they decline, goes to the generic decoder.
    """
    code = body[2] if len(body) > 3 else -1
    if code == 0x14:
        fast = decode_transfer(body)
        if fast is not None:
            return fast
    elif code == 0x15:
        disposition = decode_disposition(body)
        if disposition is not None:
            return disposition, len(body)
    return decode(body)


class _Decline(Exception):
    """A field in an encoding these decoders leave to the generic one."""


def _uint(buf: bytes, pos: int) -> tuple[UInt | None, int]:
    """A uint field (smalluint, uint0, uint) or null, and the offset after it."""
    c = buf[pos]
    if c == 0x52:
        return _SMALL_UINTS[buf[pos + 1]], pos + 2
    if c == 0x70:
        return UInt(int.from_bytes(buf[pos + 1 : pos + 5], "big")), pos + 5
    if c == 0x43:
        return _UINT0, pos + 1
    if c == 0x40:
        return None, pos + 1
    raise _Decline


def _bool(buf: bytes, pos: int) -> bool | None:
    """A boolean field in its one-byte forms (true, false) or null."""
    c = buf[pos]
    if c == 0x42:
        return False
    if c == 0x41:
        return True
    if c == 0x40:
        return None
    raise _Decline


TransferFields = tuple[int, int | None, bytes | None, int | None, bool | None, bool, int]
"""What :func:`scan_transfer` reads: handle, delivery-id, delivery-tag, message-format,
settled (``None``: null or absent), more, and the payload's offset."""


def scan_transfer(body: bytes | memoryview) -> TransferFields | None:
    """A transfer frame body's fields as plain values (no ``Transfer`` built), or None.

    Reads handle, delivery-id, delivery-tag, message-format, settled and more; a
    transfer with any later field (rcv-settle-mode, state, resume, aborted,
    batchable), a null handle or an encoding outside the short forms is declined.
    Straight-line on purpose: this runs once per message received.
    """
    buf = body if type(body) is bytes else bytes(body[:_MAX_HEAD])
    delivery_id = tag = None
    try:
        if buf[:4] != _TRANSFER_LIST8:
            return None
        end = 5 + buf[4]
        count = buf[5]
        if not 1 <= count <= 6 or end > len(buf):
            return None
        c = buf[6]
        if c == 0x52:
            handle = buf[7]
            pos = 8
        elif c == 0x43:
            handle = 0
            pos = 7
        elif c == 0x70:
            handle = _U32(buf, 7)[0]
            pos = 11
        else:
            return None  # a null handle too: the generic decoder names the error
        if count > 1:
            c = buf[pos]
            if c == 0x70:
                delivery_id = _U32(buf, pos + 1)[0]
                pos += 5
            elif c == 0x52:
                delivery_id = buf[pos + 1]
                pos += 2
            elif c == 0x43:
                delivery_id = 0
                pos += 1
            elif c == 0x40:
                pos += 1
            else:
                return None
        if count > 2:
            c = buf[pos]
            if c == 0xA0:
                tag_end = pos + 2 + buf[pos + 1]
                tag = buf[pos + 2 : tag_end]
                pos = tag_end
            elif c == 0x40:
                pos += 1
            else:
                return None
        if pos > end:
            return None
        # message-format, settled and more, in one look-up of their bytes
        tail = _TAILS[count].get(buf[pos:end])
        if tail is None:
            if count < 4 or buf[pos] != 0x70 or pos + 5 > end:
                return None
            flags = _TAILS[count].get(b"\x43" + buf[pos + 5 : end])  # the flags after a uint
            if flags is None:
                return None
            tail = (_U32(buf, pos + 1)[0], flags[1], flags[2])
    except (IndexError, struct.error):
        return None
    return handle, delivery_id, tag, tail[0], tail[1], tail[2], end


TransferLayout = tuple[int, Callable[[Any], tuple[Any, ...]], tuple[bytes, bytes, bytes], tuple[int, int, int, int]]
"""How :func:`transfer_layout` found a transfer's delivery-id and delivery-tag laid out: the
end of the performative; what unpacks a performative of that layout into the bytes up to
the delivery-id's value, the delivery-id, the tag's constructor and size, the tag, and the
bytes after the tag; the three runs of bytes it must have as the transfer it was read
from; and (for tests) where the delivery-id's value starts and ends, and the tag's."""


def transfer_layout(body: bytes | memoryview) -> TransferLayout | None:
    """How a transfer that :func:`scan_transfer` reads lays out its fields, for
    :func:`scan_like`; None for one it does not read, or with a delivery-id of fixed
    value (uint0, null) or no delivery-tag."""
    buf = body if type(body) is bytes else bytes(body[:_MAX_HEAD])
    if scan_transfer(buf) is None or buf[5] < 3:
        return None
    c = buf[6]
    id_at = 8 if c == 0x52 else 7 if c == 0x43 else 11  # after the handle: smalluint, uint0, uint
    c = buf[id_at]
    if c == 0x70:
        id_end = id_at + 5
    elif c == 0x52:
        id_end = id_at + 2
    else:
        return None
    if buf[id_end] != 0xA0:
        return None
    tag_at = id_end + 2
    tag_end = tag_at + buf[id_end + 1]
    end = 5 + buf[4]
    value = "I" if c == 0x70 else "B"
    unpack = _layout_struct(f">{id_at + 1}s{value}2s{tag_end - tag_at}s{end - tag_end}s")
    same = (buf[: id_at + 1], buf[id_end:tag_at], buf[tag_end:end])
    return end, unpack, same, (id_at + 1, id_end, tag_at, tag_end)


def _layout_struct(fmt: str) -> Callable[[Any], tuple[Any, ...]]:
    """The ``unpack_from`` of a struct of ``fmt`` (made once per layout seen)."""
    unpack = _layout_structs.get(fmt)
    if unpack is None:
        if len(_layout_structs) >= 256:
            _layout_structs.clear()
        unpack = _layout_structs[fmt] = struct.Struct(fmt).unpack_from
    return unpack


_layout_structs: dict[str, Callable[[Any], tuple[Any, ...]]] = {}


def scan_like(body: bytes | memoryview, layout: TransferLayout) -> tuple[int, bytes] | None:
    """The delivery-id and delivery-tag of a transfer laid out as ``layout`` says, with the
    same bytes as the transfer it was taken from everywhere else in the performative
    (so the same handle, message-format, settled and more, and the same end), or None.

    The transfers of a run from one sender mostly differ only there: this reads each
    of them in one unpack rather than field by field (:func:`scan_transfer`)."""
    _, unpack, same, _ = layout
    try:
        fields = unpack(body)
    except struct.error:
        return None  # shorter than the performative
    if fields[::2] != same:
        return None
    return fields[1], fields[3]


def _as_uint(value: int | None) -> UInt | None:
    if value is None:
        return None
    return _SMALL_UINTS[value] if value < 256 else UInt(value)


def transfer_from_fields(fields: TransferFields) -> Transfer:
    """The ``Transfer`` that :func:`scan_transfer`'s fields describe (as the generic decoder builds it)."""
    handle, delivery_id, tag, message_format, settled, more, _ = fields
    t = Transfer.__new__(Transfer)
    t.handle = _SMALL_UINTS[handle] if handle < 256 else UInt(handle)
    t.delivery_id = _as_uint(delivery_id)
    t.delivery_tag = tag
    t.message_format = _as_uint(message_format)
    t.settled = settled
    t.more = more
    t.rcv_settle_mode = None
    t.state = None
    t.resume = False
    t.aborted = False
    t.batchable = False
    return t


def decode_transfer(body: bytes | memoryview) -> tuple[Transfer, int] | None:
    """A transfer frame body's performative and the payload's offset, or None
    (the shapes :func:`scan_transfer` reads)."""
    fields = scan_transfer(body)
    if fields is None:
        return None
    return transfer_from_fields(fields), fields[6]


def decode_disposition(body: bytes | memoryview) -> Disposition | None:
    """A disposition frame body's performative (nothing may follow it), or None.

    Straight-line on purpose, as :func:`scan_transfer`: this runs once per settlement
    read (a receiver completing each message in turn sends one per message). An outcome
    with no fields (accepted, released) is the one shared instance of its class: they
    have no fields and no attributes to set (``__slots__ = ()``)."""
    buf = body if type(body) is bytes else bytes(body[:_MAX_HEAD])
    last = state = None
    settled: bool | None = False
    batchable: bool | None = False
    try:
        if buf[:4] != _DISPOSITION_LIST8:
            return None
        end = 5 + buf[4]
        count = buf[5]
        if not 2 <= count <= 6 or end != len(body):
            return None
        c = buf[6]
        if c == 0x41:
            role = True
        elif c == 0x42:
            role = False
        else:
            return None  # a null role too: the generic decoder names the error
        c = buf[7]
        if c == 0x52:
            first = _SMALL_UINTS[buf[8]]
            pos = 9
        elif c == 0x70:
            first = UInt(_U32(buf, 8)[0])
            pos = 12
        elif c == 0x43:
            first = _UINT0
            pos = 8
        else:
            return None
        if count > 2:
            if buf[pos] == 0x40:
                pos += 1
            else:
                last, pos = _uint(buf, pos)
        if count > 3:
            c = buf[pos]
            if c == 0x41:
                settled = True
            elif c != 0x42 and c != 0x40:
                return None  # (false and null: settled stays false)
            pos += 1
        if count > 4:
            if buf[pos] == 0x40:
                pos += 1
            else:
                outcome = _EMPTY_OUTCOMES.get(buf[pos + 2]) if buf[pos + 1] == 0x53 else None
                if outcome is not None and buf[pos] == 0 and buf[pos + 3] == 0x45:
                    state = outcome
                    pos += 4
                else:
                    state, pos = decode(buf, pos)
        if count > 5:
            batchable = _bool(buf, pos)
            pos += 1
    except (IndexError, struct.error, _Decline, DecodeError):
        return None
    if pos != end:
        return None
    d = Disposition.__new__(Disposition)
    d.role = role
    d.first = first
    d.last = last
    d.settled = settled or False
    d.state = state
    d.batchable = batchable or False
    return d
