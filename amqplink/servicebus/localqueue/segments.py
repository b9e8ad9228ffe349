"""Reading the local queue's directory back: every segment file scanned, a torn last write
told from damage, replaced segments (a compaction's originals) left out.

The writer (:mod:`.store`) appends one frame per commit and ``fdatasync``\\ s it before any
sender is told its message is stored, so a crash can tear only the last frame of the
segment being appended to: the bytes from the first frame that does not check to the end
of the file then hold no valid frame. That *torn tail* held nothing acknowledged; it is
left in place (the file is never truncated: new commits go to a new segment) and not read.
A frame that does not check *followed by a valid one*, a frame that checks but does not
parse, or a record that breaks the log's order cannot come from a crash: the segment is
*damaged*, and :class:`~.errors.LocalQueueCorruptError` refuses it, naming the file and
the offset, with nothing changed.

A compaction writes the live records into a new segment (under a temporary name, synced,
then renamed) whose header names the segments it replaces; those are deleted afterwards.
A crash between the rename and the deletions leaves both: the replaced ones are skipped.
"""

from __future__ import annotations

import binascii
import mmap
import os
import re
from collections import deque
from dataclasses import dataclass, field

from amqplink.servicebus.localqueue.errors import LocalQueueCorruptError
from amqplink.servicebus.localqueue.records import FRAME, MAGIC, Ack, Header, RecordError, Stored, parse, stored_size

__all__ = ["Entry", "Recovered", "SegmentScan", "read_directory", "segment_name", "segment_numbers"]

_NAME = re.compile(r"lq-(\d{8})\.log\Z")
_KINDS = frozenset(b"SAH")


def segment_name(number: int) -> str:
    """The file name of segment ``number`` in the queue's directory."""
    return f"lq-{number:08d}.log"


def segment_numbers(directory: str) -> list[int]:
    """The numbers of the segment files in ``directory``, in order."""
    found = (_NAME.match(name) for name in os.listdir(directory))
    return sorted(int(m.group(1)) for m in found if m is not None)


@dataclass(slots=True)
class Entry:
    """A stored message not yet forwarded: where its bytes are."""

    id: int
    stored_at: float
    key: str
    segment: int
    offset: int
    length: int
    size: int
    """What it counts against ``max_bytes`` (its record's length)."""


@dataclass
class SegmentScan:
    number: int
    path: str
    size: int
    valid: int
    """The end of the valid frames (a torn tail follows up to :attr:`size`)."""
    header: Header


@dataclass
class Recovered:
    """What a directory holds: the messages not yet forwarded, per entity in id order."""

    pending: dict[str, deque[Entry]] = field(default_factory=dict)
    segments: list[SegmentScan] = field(default_factory=list)
    """The live segments, in order."""
    replaced: list[str] = field(default_factory=list)
    """Paths of segments a later compaction copied (safe to delete)."""
    next_id: int = 1

    @property
    def torn(self) -> int:
        """Bytes of torn last writes (in any live segment)."""
        return sum(s.size - s.valid for s in self.segments)

    @property
    def file_bytes(self) -> int:
        """The bytes of every segment read, valid or not."""
        return sum(s.size for s in self.segments)


def _damaged(path: str, offset: int, why: str) -> LocalQueueCorruptError:
    directory = os.path.dirname(path) or "."
    return LocalQueueCorruptError(
        f"the local queue file {path!r} is damaged at offset {offset} ({why}). Nothing was changed and nothing"
        f" is read from the directory until it is repaired: see what it holds with `amqplink local-queue"
        f" {directory}`, or move the directory away (keep it: it holds messages not yet forwarded)",
        path=path,
        offset=offset,
    )


def _frame_at(view: memoryview, pos: int, end: int) -> bytes | None:
    """The body of the frame at ``pos`` if it checks (a frame of eight zero bytes, as a file
    system may leave after a crash, does not), else None."""
    if pos + FRAME.size > end:
        return None
    length, crc = FRAME.unpack_from(view, pos)
    if length == 0 or pos + FRAME.size + length > end:
        return None
    body = bytes(view[pos + FRAME.size : pos + FRAME.size + length])
    return body if binascii.crc32(body) == crc else None


def _valid_after(view: memoryview, pos: int, end: int) -> int | None:
    """The offset of a frame that checks and parses after ``pos``, if there is one."""
    for candidate in range(pos + 1, end - FRAME.size):
        if view[candidate + FRAME.size] not in _KINDS:  # (a body starts with a record kind)
            continue
        body = _frame_at(view, candidate, end)
        if body is None:
            continue
        try:
            for _ in parse(body):
                pass
        except RecordError:
            continue
        return candidate
    return None


def _frames(path: str, view: memoryview, end: int) -> tuple[list[tuple[int, bytes]], int]:
    """The frames of a segment (offset, body) and the end of the valid ones."""
    frames: list[tuple[int, bytes]] = []
    pos = len(MAGIC)
    while pos < end:
        body = _frame_at(view, pos, end)
        if body is None:
            later = _valid_after(view, pos, end)
            if later is not None:
                raise _damaged(path, pos, f"the frame there does not check, but a valid one follows at {later}")
            return frames, pos  # a torn last write
        frames.append((pos, body))
        pos += FRAME.size + len(body)
    return frames, pos


def _scan(path: str, number: int) -> tuple[SegmentScan, list[tuple[int, bytes]]]:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < len(MAGIC):
            raise _damaged(path, 0, "it is shorter than a segment's first bytes")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                if bytes(view[: len(MAGIC)]) != MAGIC:
                    raise _damaged(path, 0, "it does not start as a local queue segment")
                frames, valid = _frames(path, view, size)
            finally:
                view.release()
    if not frames:
        raise _damaged(path, len(MAGIC), "it has no header frame")
    first_at, first = frames[0]
    try:
        records = list(parse(first))
    except RecordError as exc:
        raise _damaged(path, first_at, str(exc)) from None
    header = records[0] if len(records) == 1 else None
    if not isinstance(header, Header) or header.segment != number:
        raise _damaged(path, first_at, f"its first frame is not the header of segment {number}")
    return SegmentScan(number, path, size, valid, header), frames[1:]


def read_directory(directory: str) -> Recovered:
    """Read every segment of ``directory`` (nothing is changed; a missing directory is empty).
    :class:`LocalQueueCorruptError` for damage."""
    found = Recovered()
    if not os.path.isdir(directory):
        return found
    scans = [_scan(os.path.join(directory, segment_name(n)), n) for n in segment_numbers(directory)]
    replaced_up_to = max((scan.header.replaces for scan, _ in scans), default=0)
    last_id = 0
    for scan, frames in scans:
        if scan.number <= replaced_up_to:
            found.replaced.append(scan.path)
            continue
        found.segments.append(scan)
        found.next_id = max(found.next_id, scan.header.next_id)
        for at, body in frames:
            try:
                records = list(parse(body))
            except RecordError as exc:
                raise _damaged(scan.path, at, f"a frame that checks does not parse: {exc}") from None
            base = at + FRAME.size
            for record in records:
                if isinstance(record, Stored):
                    if record.id <= last_id:
                        raise _damaged(scan.path, at, f"record id {record.id} comes after id {last_id}")
                    last_id = record.id
                    size = stored_size(record.entity, record.key, record.message_length)
                    entry = Entry(record.id, record.stored_at, record.key, scan.number,
                                  base + record.message_offset, record.message_length, size)  # fmt: skip
                    found.pending.setdefault(record.entity, deque()).append(entry)
                elif isinstance(record, Ack):
                    queue = found.pending.get(record.entity)
                    while queue and queue[0].id <= record.up_to:
                        queue.popleft()
                    if queue is not None and not queue:
                        del found.pending[record.entity]
                else:
                    raise _damaged(scan.path, at, "a header in the middle of a segment")
        found.next_id = max(found.next_id, last_id + 1)
    return found
