"""Frame layer (spec 2.3): protocol headers, the 8-byte frame header, frame bodies.

    "Frames are divided into three distinct areas: a fixed width frame header, a
    variable width extended header, and a variable width frame body." (2.3.1)

The reader keeps frames that arrive whole inside one read as zero-copy
``memoryview`` slices of that (immutable) ``bytes`` object; only a frame split across
reads is joined, once, when its last byte arrives.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from amqplink import AMQPLinkError

__all__ = [
    "AMQP_HEADER",
    "FRAME_TYPE_AMQP",
    "FRAME_TYPE_SASL",
    "FrameReader",
    "FramingError",
    "MIN_MAX_FRAME_SIZE",
    "SASL_HEADER",
    "split_frames",
    "write_disposition",
    "write_frame",
    "write_transfer",
    "write_usual_run",
]

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
FRAME_TYPE_AMQP = 0x00
FRAME_TYPE_SASL = 0x01
# "Prior to any explicit negotiation, the maximum frame size is 512
# (MIN-MAX-FRAME-SIZE)" (2.4.1)
MIN_MAX_FRAME_SIZE = 512
FRAME_HEADER_SIZE = 8

_HEADER = struct.Struct(">IBBH")
_SIZE = struct.Struct(">I")
_HEARTBEAT = _HEADER.pack(8, 2, FRAME_TYPE_AMQP, 0)


class FramingError(AMQPLinkError):
    """The byte stream cannot be split into valid frames (``amqp:connection:framing-error``)."""


def write_frame(
    out: bytearray,
    frame_type: int,
    channel: int,
    body: Any = None,
    payload: bytes | bytearray | memoryview | None = None,
) -> int:
    """Append one frame to ``out`` and return its size in bytes.

    ``body`` is a performative (an object with ``_amqp_encode``) or ``None`` for an
    empty frame; ``payload`` follows the performative (transfer frames only).
    """
    start = len(out)
    out += _HEADER.pack(0, 2, frame_type, channel)
    if body is not None:
        body._amqp_encode(out)
    if payload:
        out += payload
    size = len(out) - start
    _SIZE.pack_into(out, start, size)
    return size


_TRANSFER_HEAD = struct.Struct(">IBBHBBBBBB")  # frame header, 0x00 0x53 0x14, 0xc0 size count
_UINT = struct.Struct(">BI")


def _small_uint(value: int) -> bytes:
    if value == 0:
        return b"\x43"
    if value < 256:
        return bytes((0x52, value))
    return _UINT.pack(0x70, value)


_SMALL_UINTS = [_small_uint(v) for v in range(256)]
_TAG_HEADS = [bytes((0xA0, n)) for n in range(256)]  # vbin8 constructor and size


# The usual transfer in one pack: a handle below 256 (0x43, or 0x52 and the handle), a
# delivery-id of 256 or more (0x70 and four bytes), a tag of 8 bytes (the engine's) or 16
# (a Service Bus lock token), message format 0 (0x43) and the settled flag; after the frame
# header, descriptor and list8 head. By tag size: the structs for handle 0 and for another.
_USUAL = {
    n: (
        struct.Struct(f">IBBHBBBBBBBBIBB{n}sBB"),
        struct.Struct(f">IBBHBBBBBBBBBIBB{n}sBB"),
    )
    for n in (8, 16)
}


def write_transfer(
    out: bytearray,
    channel: int,
    handle: int,
    delivery_id: int,
    tag: bytes,
    message_format: int,
    settled: bool,
    payload: bytes | bytearray | memoryview,
) -> None:
    """Append a single-frame transfer (the hot path): the same bytes as
    ``write_frame(out, FRAME_TYPE_AMQP, channel, Transfer(handle, delivery_id, tag,
    message_format, settled), payload)``, assembled without building a ``Transfer``
    (``tag`` at most 255 bytes)."""
    n = len(tag)
    usual = _USUAL.get(n) if delivery_id >= 256 and handle < 256 and message_format == 0 else None
    if usual is not None:
        flag = 0x41 if settled else 0x42
        if handle:  # fields of 11 + n bytes: a list8 of size 12 + n
            out += usual[1].pack(
                25 + n + len(payload), 2, FRAME_TYPE_AMQP, channel, 0x00, 0x53, 0x14, 0xC0, 12 + n, 5,
                0x52, handle, 0x70, delivery_id, 0xA0, n, tag, 0x43, flag,
            )  # fmt: skip
        else:  # fields of 10 + n bytes
            out += usual[0].pack(
                24 + n + len(payload), 2, FRAME_TYPE_AMQP, channel, 0x00, 0x53, 0x14, 0xC0, 11 + n, 5,
                0x43, 0x70, delivery_id, 0xA0, n, tag, 0x43, flag,
            )  # fmt: skip
        out += payload
        return
    fields = b"".join(
        (
            _SMALL_UINTS[handle] if handle < 256 else _small_uint(handle),
            _SMALL_UINTS[delivery_id] if delivery_id < 256 else _UINT.pack(0x70, delivery_id),
            _TAG_HEADS[n],
            tag,
            _SMALL_UINTS[message_format] if message_format < 256 else _small_uint(message_format),
            b"\x41" if settled else b"\x42",
        )
    )
    size = len(fields)
    out += _TRANSFER_HEAD.pack(
        14 + size + len(payload), 2, FRAME_TYPE_AMQP, channel, 0x00, 0x53, 0x14, 0xC0, size + 1, 5
    )
    out += fields
    out += payload


_DISPOSITION_HEAD = struct.Struct(">IBBHBBBBBB")  # frame header, 0x00 0x53 0x15, 0xc0 size count


def write_disposition(
    out: bytearray, channel: int, role: bool, first: int, last: int, settled: bool, state: bytes
) -> None:
    """Append a disposition whose batchable is false and whose ``state`` is given encoded and
    not empty (the hot path: one accepted message): the same bytes as ``write_frame(out,
    FRAME_TYPE_AMQP, channel, Disposition(role, UInt(first), UInt(last) if last != first else
    None, settled, state))``, assembled without building a ``Disposition`` (2.7.6)."""
    fields = b"".join(
        (
            b"\x41" if role else b"\x42",
            _SMALL_UINTS[first] if first < 256 else _UINT.pack(0x70, first),
            b"\x40" if last == first else _SMALL_UINTS[last] if last < 256 else _UINT.pack(0x70, last),
            b"\x41" if settled else b"\x42",
            state,
        )
    )
    size = len(fields)
    out += _DISPOSITION_HEAD.pack(14 + size, 2, FRAME_TYPE_AMQP, channel, 0x00, 0x53, 0x15, 0xC0, size + 1, 5)
    out += fields


_RUN_PARTS: dict[tuple[int, int, int], tuple[Any, bytes, bytes, int]] = {}


def usual_transfer_parts(channel: int, handle: int, tag_size: int) -> tuple[Any, bytes, bytes, int] | None:
    """:func:`write_transfer`'s usual frame (a handle below 256, a delivery-id of 256 or more, a
    tag of 8 or 16 bytes, message format 0) on one link, taken apart for a run of deliveries:
    ``(pack, middle, tag_head, base)`` such that ``out += pack(base + len(payload), middle,
    delivery_id, tag_head, tag, SETTLED_TAIL if settled else UNSETTLED_TAIL)`` and then ``out +=
    payload`` append the same bytes as ``write_transfer`` for a ``tag`` of ``tag_size`` bytes;
    None when that frame is not the usual one (a handle of 256 or more, another tag size)."""
    key = (channel, handle, tag_size)
    parts = _RUN_PARTS.get(key)
    if parts is None:
        if handle >= 256 or tag_size not in _USUAL:
            return None
        handle_field = bytes((0x52, handle)) if handle else b"\x43"
        size = len(handle_field) + 5 + 2 + tag_size + 2  # handle, delivery-id, tag, format and settled
        middle = _HEADER.pack(0, 2, FRAME_TYPE_AMQP, channel)[4:] + bytes((0x00, 0x53, 0x14, 0xC0, size + 1, 5))
        middle += handle_field + b"\x70"
        pack = struct.Struct(f">I{len(middle)}sI2s{tag_size}sH").pack
        if len(_RUN_PARTS) >= 1024:
            _RUN_PARTS.clear()  # (links come and go: a bounded cache)
        parts = _RUN_PARTS[key] = (pack, middle, _TAG_HEADS[tag_size], 14 + size)
    return parts


def write_usual_run(
    out: bytearray,
    channel: int,
    handle: int,
    deliveries: Sequence[Any],
    count: int,
    first_id: int,
    max_frame_size: int,
    outgoing: dict[int, Any],
    unsettled: dict[int, Any],
    flush: Callable[[], None] | None,
) -> int:
    """Append up to ``count`` of ``deliveries`` (new, unsettled, message format 0) as usual
    frames (:func:`usual_transfer_parts`, from the first one's tag size) with delivery-ids
    ``first_id``, ``first_id + 1``...; how many. It stops before the first that takes
    another frame (another tag size, or more payload than one frame of ``max_frame_size``
    holds); none at all when the first does, or ``first_id`` is below 256 (another
    delivery-id encoding). Each delivery written gets its delivery-id and enters
    ``outgoing`` and ``unsettled`` under it. ``flush``, when given, runs once before the
    first frame (what must precede it: the session's queued dispositions). The caller
    keeps ``first_id + count`` within 2**32: the ids count up without wrapping."""
    first = deliveries[0]
    tag_size = len(first.tag)
    parts = _RUN_PARTS.get((channel, handle, tag_size)) or usual_transfer_parts(channel, handle, tag_size)
    room = max_frame_size - TRANSFER_OVERHEAD - tag_size
    if parts is None or first_id < 256 or len(first.payload) > room:
        return 0
    pack, middle, tag_head, base = parts
    if flush is not None:
        flush()
    delivery_id = first_id
    for delivery in deliveries[:count] if count < len(deliveries) else deliveries:
        tag, payload = delivery.tag, delivery.payload
        if len(tag) != tag_size or len(payload) > room:
            break  # another frame
        delivery.delivery_id = delivery_id
        outgoing[delivery_id] = delivery
        unsettled[delivery_id] = delivery
        out += pack(base + len(payload), middle, delivery_id, tag_head, tag, UNSETTLED_TAIL)
        out += payload
        delivery_id += 1
    return delivery_id - first_id


TRANSFER_OVERHEAD = FRAME_HEADER_SIZE + 56
"""Room a frame keeps for its header and a transfer performative, the tag excluded: a
whole delivery of up to ``max-frame-size - TRANSFER_OVERHEAD - len(tag)`` bytes takes one
frame, a larger one frames of that many bytes each."""

SETTLED_TAIL = 0x4341
"""Message format 0 (0x43) and settled true (0x41): a usual transfer's last two bytes."""
UNSETTLED_TAIL = 0x4342
"""Message format 0 and settled false (0x42)."""


def split_frames(data: bytes | bytearray) -> Iterator[tuple[int, int, bytes]]:
    """The frames this side wrote into ``data`` as ``(type, channel, body)`` (copies: for
    frame tracing), protocol headers skipped; stops at a frame that is not whole."""
    pos, end = 0, len(data)
    while pos + FRAME_HEADER_SIZE <= end:
        if data[pos : pos + 4] == b"AMQP":
            pos += 8  # a protocol header
            continue
        size, doff, frame_type, channel = _HEADER.unpack_from(data, pos)
        if size < FRAME_HEADER_SIZE or pos + size > end:
            return
        yield frame_type, channel, bytes(data[pos + doff * 4 : pos + size])
        pos += size


def heartbeat() -> bytes:
    """An empty AMQP frame: "a frame with no body ... used as a heartbeat" (2.4.5)."""
    return _HEARTBEAT


class FrameReader:
    """Splits an incoming byte stream into protocol headers and frames.

    ``max_frame_size`` is the largest frame this side accepts; a bigger one is a
    :class:`FramingError` (2.4.1: "a peer MUST NOT send frames larger than its
    partner can handle").
    """

    __slots__ = ("_buf", "_pos", "_tail", "_tail_len", "drained", "max_frame_size")

    def __init__(self, max_frame_size: int = MIN_MAX_FRAME_SIZE) -> None:
        self._buf: bytes = b""
        self._pos = 0
        self._tail: list[bytes] = []
        self._tail_len = 0
        self.max_frame_size = max_frame_size
        self.drained = True
        """True when the last :meth:`read_frames` returned every byte fed so far (no frame
        split across reads, none to reject): :meth:`read_frame` would find nothing, so a
        read that held whole frames only needs no second look (the sequential hot path)."""

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add bytes read from the transport."""
        if not data:
            return
        chunk = data if type(data) is bytes else bytes(data)
        if self._pos >= len(self._buf) and not self._tail:
            self._buf = chunk
            self._pos = 0
        else:
            self._tail.append(chunk)
            self._tail_len += len(chunk)

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as headers or frames."""
        return len(self._buf) - self._pos + self._tail_len

    def _ensure(self, n: int) -> bool:
        """Make at least ``n`` bytes available contiguously at ``_pos``."""
        have = len(self._buf) - self._pos
        if have >= n:
            return True
        if have + self._tail_len < n:
            return False
        parts = [self._buf[self._pos :]]
        parts.extend(self._tail)
        self._buf = b"".join(parts)
        self._pos = 0
        self._tail.clear()
        self._tail_len = 0
        return True

    def read_protocol_header(self) -> bytes | None:
        """The next 8 bytes, read as a protocol header, or ``None`` if not all there."""
        if not self._ensure(8):
            return None
        header = self._buf[self._pos : self._pos + 8]
        self._pos += 8
        return header

    def read_frames(self) -> list[tuple[int, int, memoryview]]:
        """The whole, valid frames at the front of what was read, as ``(type, channel,
        body)``; it stops at the first frame that is split across reads or invalid,
        which :meth:`read_frame` then joins or rejects."""
        buf = self._buf
        pos = self._pos
        end = len(buf)
        last = end - FRAME_HEADER_SIZE  # where the last whole header can start
        limit = self.max_frame_size
        unpack = _HEADER.unpack_from
        frames: list[tuple[int, int, memoryview]] = []
        if pos > last:
            self.drained = pos == end and not self._tail
            return frames
        append = frames.append
        view = memoryview(buf)
        while pos <= last:
            size, doff, frame_type, channel = unpack(buf, pos)
            start = pos + doff * 4
            after = pos + size
            # split across reads, too large, or a data offset outside the frame (read_frame's errors)
            if after > end or size > limit or doff < 2 or start > after:
                break
            append((frame_type, channel, view[start:after]))
            pos = after
        self._pos = pos
        self.drained = pos == end and not self._tail
        return frames

    def read_frame(self) -> tuple[int, int, memoryview] | None:
        """The next frame as ``(type, channel, body)``, or ``None`` if incomplete.

        ``body`` excludes the extended header; it is empty for a heartbeat.
        """
        if not self._ensure(FRAME_HEADER_SIZE):
            return None
        size, doff, frame_type, channel = _HEADER.unpack_from(self._buf, self._pos)
        if size < FRAME_HEADER_SIZE:
            raise FramingError(f"frame size {size} is smaller than the 8-byte header")
        if size > self.max_frame_size:
            raise FramingError(f"frame size {size} exceeds max-frame-size {self.max_frame_size}")
        if doff < 2 or doff * 4 > size:
            raise FramingError(f"data offset {doff} is invalid for a frame of {size} bytes")
        if not self._ensure(size):
            return None
        start = self._pos
        self._pos = start + size
        body = memoryview(self._buf)[start + doff * 4 : start + size]
        return frame_type, channel, body
