"""The local queue's file layout, written and read in this one place.

A segment file is :data:`MAGIC`, then frames. A frame is :data:`FRAME` (the body's length
and its CRC-32) and the body: records back to back, each starting with its kind byte. One
frame is written per commit, so a commit is stored whole or (a torn write) not at all.

=========  ====================================================================
kind       fields (big-endian)
=========  ====================================================================
``H``      header, the first frame of every segment, alone: the segment's number,
           the next record id, and the highest segment number this one replaces
           (a compaction's copy; 0: none)
``S``      a stored message: record id, stored-at (Unix seconds, float), the entity,
           the ordering key (session id or partition key; empty: none), the encoded
           AMQP message
``A``      an acknowledgement: every record of the entity with an id up to this one
           was forwarded (forwarding goes in id order per entity)
=========  ====================================================================

:func:`parse` checks every length against the body: a frame whose CRC matches but whose
records do not parse was not written by this version, and is refused as damage.
"""

from __future__ import annotations

import binascii
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from amqplink import AMQPLinkError

__all__ = [
    "FRAME",
    "MAGIC",
    "Ack",
    "Header",
    "RecordError",
    "Stored",
    "frame",
    "pack_ack",
    "pack_header",
    "pack_stored",
    "parse",
    "stored_size",
]

MAGIC = b"amqplink-localq-1\n"
"""The first bytes of every segment file (format version 1)."""
FRAME = struct.Struct(">II")
"""A frame's head: the body's length, its CRC-32."""

_HEADER = struct.Struct(">cQQQ")
_STORED = struct.Struct(">cQdHHI")
_ACK = struct.Struct(">cQH")
MAX_NAME = 0xFFFF
"""Bytes an entity path or an ordering key may take (UTF-8)."""


class RecordError(AMQPLinkError, ValueError):
    """A frame's body that does not parse (what was wrong, and where in the body)."""


@dataclass(frozen=True, slots=True)
class Header:
    segment: int
    next_id: int
    replaces: int
    """Segments numbered up to this one are copied into this one (a compaction); 0: none."""


@dataclass(frozen=True, slots=True)
class Stored:
    id: int
    stored_at: float
    entity: str
    key: str
    message_offset: int
    """Where the message's bytes start in the frame's body."""
    message_length: int


@dataclass(frozen=True, slots=True)
class Ack:
    entity: str
    up_to: int


def frame(body: bytes) -> bytes:
    """``body`` with its frame head."""
    return FRAME.pack(len(body), binascii.crc32(body)) + body


def pack_header(segment: int, next_id: int, replaces: int) -> bytes:
    """A segment's header record: its number, the next record id, the segment it replaces (compaction)."""
    return _HEADER.pack(b"H", segment, next_id, replaces)


def _name(text: str, what: str) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) > MAX_NAME:
        raise ValueError(f"the {what} is too long for the local queue ({len(raw)} bytes, at most {MAX_NAME})")
    return raw


def pack_stored(record_id: int, stored_at: float, entity: str, key: str, message: bytes) -> bytes:
    """A stored-message record: its id, when it was stored, its entity, its ordering key and the encoded message."""
    e, k = _name(entity, "entity path"), _name(key, "ordering key")
    return _STORED.pack(b"S", record_id, stored_at, len(e), len(k), len(message)) + e + k + message


def stored_size(entity: str, key: str, message_length: int) -> int:
    """The bytes one stored record takes (what counts against ``max_bytes``)."""
    return _STORED.size + len(entity.encode("utf-8")) + len(key.encode("utf-8")) + message_length


def pack_ack(entity: str, up_to: int) -> bytes:
    """An acknowledgement record: ``entity``'s messages up to record id ``up_to`` were forwarded."""
    e = _name(entity, "entity path")
    return _ACK.pack(b"A", up_to, len(e)) + e


def _text(body: bytes, start: int, length: int, what: str) -> str:
    try:
        return body[start : start + length].decode("utf-8")
    except UnicodeDecodeError:
        raise RecordError(f"the {what} at body offset {start} is not UTF-8") from None


def parse(body: bytes) -> Iterator[Header | Stored | Ack]:
    """The records of one frame's body, in order; :class:`RecordError` for anything else."""
    pos, end = 0, len(body)
    while pos < end:
        kind = body[pos : pos + 1]
        if kind == b"S":
            if pos + _STORED.size > end:
                raise RecordError(f"a stored record cut short at body offset {pos}")
            _, record_id, stored_at, elen, klen, mlen = _STORED.unpack_from(body, pos)
            start = pos + _STORED.size
            stop = start + elen + klen + mlen
            if stop > end:
                raise RecordError(f"a stored record's lengths run past the frame at body offset {pos}")
            entity = _text(body, start, elen, "entity path")
            key = _text(body, start + elen, klen, "ordering key")
            if not entity or stored_at != stored_at:  # (NaN is not a time)
                raise RecordError(f"a stored record without an entity or a time at body offset {pos}")
            yield Stored(record_id, stored_at, entity, key, start + elen + klen, mlen)
            pos = stop
        elif kind == b"A":
            if pos + _ACK.size > end:
                raise RecordError(f"an acknowledgement cut short at body offset {pos}")
            _, up_to, elen = _ACK.unpack_from(body, pos)
            start = pos + _ACK.size
            if start + elen > end or elen == 0:
                raise RecordError(f"an acknowledgement's entity runs past the frame at body offset {pos}")
            yield Ack(_text(body, start, elen, "entity path"), up_to)
            pos = start + elen
        elif kind == b"H":
            if pos + _HEADER.size > end:
                raise RecordError(f"a header cut short at body offset {pos}")
            _, segment, next_id, replaces = _HEADER.unpack_from(body, pos)
            yield Header(segment, next_id, replaces)
            pos += _HEADER.size
        else:
            raise RecordError(f"an unknown record kind {kind!r} at body offset {pos}")
