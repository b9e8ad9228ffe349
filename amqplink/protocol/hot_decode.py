"""Straight-line decoders for the performatives a busy link reads most: transfer and
disposition.

They read the shapes peers send in the steady state (a described list8 whose fields
are null or in their short encodings: smalluint/uint0/uint, true/false, vbin8) and
return ``None`` for anything else (list32, an aborted transfer, a delivery state on a
transfer, an unusual encoding...), so the caller falls back to the generic,
table-driven decoder, which also owns every error message. Whatever they return
equals what the generic decoder returns for the same bytes (property-tested and
fuzzed against it in ``tests/protocol/test_hot_decode.py``).

Written out field by field on purpose: a loop over field kinds costs as much as the
generic decoder it is meant to skip.
"""

from __future__ import annotations

from typing import Any

from amqplink.codec.decode import decode
from amqplink.codec.errors import DecodeError
from amqplink.codec.types import UInt
from amqplink.protocol.definitions import Accepted, Disposition, Released, Transfer

__all__ = ["decode_disposition", "decode_performative", "decode_transfer"]

# described list8: 00 53 <code> c0 <size> <count> <fields>; size counts count + fields,
# so a list8 performative ends at most 5 + 255 bytes in.
_MAX_HEAD = 5 + 255
_SMALL_UINTS = tuple(UInt(i) for i in range(256))
_UINT0 = _SMALL_UINTS[0]
# An outcome with no fields, as a 4-byte described list0: 00 53 <code> 45.
_EMPTY_OUTCOMES = {0x24: Accepted, 0x26: Released}


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


def _head(body: bytes | memoryview) -> bytes:
    return body if type(body) is bytes else bytes(body[:_MAX_HEAD])


def decode_transfer(body: bytes | memoryview) -> tuple[Transfer, int] | None:
    """A transfer frame body's performative and the payload's offset, or None.

    Reads handle, delivery-id, delivery-tag, message-format, settled and more; a
    transfer with any later field (rcv-settle-mode, state, resume, aborted,
    batchable) is left to the generic decoder.
    """
    try:
        buf = _head(body)
        if buf[0] or buf[1] != 0x53 or buf[2] != 0x14 or buf[3] != 0xC0:
            return None
        end = 5 + buf[4]
        count = buf[5]
        if not 1 <= count <= 6 or end > len(buf):
            return None
        pos = 6
        c = buf[pos]  # handle (mandatory)
        if c == 0x52:
            handle = _SMALL_UINTS[buf[pos + 1]]
            pos += 2
        elif c == 0x43:
            handle = _UINT0
            pos += 1
        elif c == 0x70:
            handle = UInt(int.from_bytes(buf[pos + 1 : pos + 5], "big"))
            pos += 5
        else:
            return None
        delivery_id = tag = message_format = settled = None
        more = False
        if count > 1:
            c = buf[pos]
            if c == 0x52:
                delivery_id = _SMALL_UINTS[buf[pos + 1]]
                pos += 2
            elif c == 0x70:
                delivery_id = UInt(int.from_bytes(buf[pos + 1 : pos + 5], "big"))
                pos += 5
            elif c == 0x43:
                delivery_id = _UINT0
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
        if count > 3:
            c = buf[pos]
            if c == 0x43:
                message_format = _UINT0
                pos += 1
            elif c == 0x52:
                message_format = _SMALL_UINTS[buf[pos + 1]]
                pos += 2
            elif c == 0x70:
                message_format = UInt(int.from_bytes(buf[pos + 1 : pos + 5], "big"))
                pos += 5
            elif c == 0x40:
                pos += 1
            else:
                return None
        if count > 4:
            c = buf[pos]
            if c == 0x42:
                settled = False
            elif c == 0x41:
                settled = True
            elif c != 0x40:
                return None
            pos += 1
        if count > 5:
            c = buf[pos]
            if c == 0x41:
                more = True
            elif c != 0x42 and c != 0x40:
                return None
            pos += 1
    except IndexError:
        return None
    if pos != end:
        return None
    t = Transfer.__new__(Transfer)
    t.handle = handle
    t.delivery_id = delivery_id
    t.delivery_tag = tag
    t.message_format = message_format
    t.settled = settled
    t.more = more
    t.rcv_settle_mode = None
    t.state = None
    t.resume = False
    t.aborted = False
    t.batchable = False
    return t, end


def decode_disposition(body: bytes | memoryview) -> Disposition | None:
    """A disposition frame body's performative (nothing may follow it), or None."""
    try:
        buf = _head(body)
        if buf[0] or buf[1] != 0x53 or buf[2] != 0x15 or buf[3] != 0xC0:
            return None
        end = 5 + buf[4]
        count = buf[5]
        if not 2 <= count <= 6 or end != len(body):
            return None
        c = buf[6]  # role (mandatory)
        if c == 0x41:
            role = True
        elif c == 0x42:
            role = False
        else:
            return None
        c = buf[7]  # first (mandatory)
        if c == 0x52:
            first = _SMALL_UINTS[buf[8]]
            pos = 9
        elif c == 0x70:
            first = UInt(int.from_bytes(buf[8:12], "big"))
            pos = 12
        elif c == 0x43:
            first = _UINT0
            pos = 8
        else:
            return None
        last = state = None
        settled = batchable = False
        if count > 2:
            c = buf[pos]
            if c == 0x52:
                last = _SMALL_UINTS[buf[pos + 1]]
                pos += 2
            elif c == 0x70:
                last = UInt(int.from_bytes(buf[pos + 1 : pos + 5], "big"))
                pos += 5
            elif c == 0x43:
                last = _UINT0
                pos += 1
            elif c == 0x40:
                pos += 1
            else:
                return None
        if count > 3:
            c = buf[pos]
            if c == 0x41:
                settled = True
            elif c != 0x42 and c != 0x40:
                return None
            pos += 1
        if count > 4:
            if buf[pos] == 0x40:
                pos += 1
            else:
                outcome = _EMPTY_OUTCOMES.get(buf[pos + 2]) if buf[pos + 1] == 0x53 else None
                if outcome is not None and buf[pos] == 0 and buf[pos + 3] == 0x45:
                    state = outcome()
                    pos += 4
                else:
                    state, pos = decode(buf, pos)
        if count > 5:
            c = buf[pos]
            if c == 0x41:
                batchable = True
            elif c != 0x42 and c != 0x40:
                return None
            pos += 1
    except (IndexError, DecodeError):
        return None
    if pos != end:
        return None
    d = Disposition.__new__(Disposition)
    d.role = role
    d.first = first
    d.last = last
    d.settled = settled
    d.state = state
    d.batchable = batchable
    return d
