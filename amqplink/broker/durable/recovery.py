"""Reading a journal file back, and telling a torn last write from damage. The file's
layout (a 16-byte header naming its format, then frames: :class:`Layout`, :func:`frame_head`)
is stated here, where it is checked; :mod:`.journal` writes through it.

Format 2 (written now): header :data:`MAGIC`; each batch a frame ``length (u32) | crc32
(u32) | number (u64) | records``, the CRC-32 over the number and the records, the numbers
1, 2, 3 ... in file order. So a batch names its place: a CRC-valid batch copied or moved
elsewhere in the file (duplicated, swapped) does not carry the number its place expects,
and is refused. Format 1 (:data:`MAGIC_V1`, written before): ``length | crc32 | records``,
no number; still read, with the rules it had (a batch out of place cannot be told there).

The writer appends one frame per batch and flushes it (``fdatasync``) before it writes
the next (:mod:`.journal`), so a crash or a power cut can tear only the last write: the
bytes from the first frame that does not check to the end of the file hold no valid frame.
Those bytes are a *torn tail*: nothing in them was acknowledged, and they are dropped.
A frame that does not check *followed by a valid one* cannot come from a crash: the file
was damaged after it was written (a flipped bit, an overwritten block), and the batches
after the damage hold acknowledged work. Such a file is *corrupt*: the broker refuses to
start on it, naming the file and the offset, and changes nothing;
``amqplink broker-store DIR --salvage`` (:mod:`.salvage`) repairs it, keeping a copy.

A torn tail can only follow the journal's *recovery point* (:class:`RecoveryPoint`, kept
beside it by :mod:`.checkpoint`): the length and last batch number known committed. A file
shorter than its recovery point, or damaged before it, was cut or changed after it was
written, whatever follows: refused the same way.

A frame at offset ``o`` is valid when its length is not zero, its body lies inside the
file and its CRC-32 matches (format 1: a frame of eight zero bytes, as an empty batch or
zeros a file system left, checks but carries nothing: it never counts as a later valid
frame). The damage in a last batch written after the recovery point (nothing valid after
it) cannot be told from a torn write and is dropped as one.
"""

from __future__ import annotations

import binascii
import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from amqplink import AMQPLinkError
from amqplink.broker.durable.records import KINDS, RecordError, State

__all__ = [
    "CURRENT",
    "LAYOUTS",
    "MAGIC",
    "MAGIC_V1",
    "V1",
    "CorruptJournal",
    "CutShort",
    "Layout",
    "OutOfPlace",
    "RecoveryPoint",
    "Scan",
    "StoreError",
    "frame_head",
    "frames",
    "layout_of",
    "next_frame",
    "salvage_hint",
    "scan",
    "sync_directory",
    "unused",
]

MAGIC = b"amqplink-jrnl-2\n"
"""The first 16 bytes of a journal file written now (format 2: numbered batches)."""
MAGIC_V1 = b"amqplink-jrnl-1\n"
"""The first 16 bytes of a journal file of format 1 (unnumbered batches), read still."""
_NUMBER = struct.Struct(">Q").pack
_crc32 = binascii.crc32


@dataclass(frozen=True)
class Layout:
    """One format of the journal file: its header and its frames' head."""

    version: int
    magic: bytes
    head: struct.Struct
    """The frame's head: length, CRC-32 (format 2: then the batch's number)."""
    numbered: bool
    """Whether each frame carries its batch's number (and its CRC covers it)."""

    def frame(self, body: bytes, number: int) -> bytes:
        """The head of the frame of batch ``number`` (the file's first is 1) holding ``body``."""
        if self.numbered:
            return self.head.pack(len(body), _crc32(body, _crc32(_NUMBER(number))), number)
        return self.head.pack(len(body), _crc32(body))

    def at(self, view: memoryview, pos: int) -> tuple[int, int] | None:
        """(body length, batch number: 0 in format 1) of the valid frame at ``pos``, None if
        there is none (format 1: an empty frame is valid; format 2: never)."""
        head = self.head
        start = pos + head.size
        if start > len(view):
            return None
        if self.numbered:
            length, crc, number = head.unpack_from(view, pos)
            if not 0 < length <= len(view) - start or _crc32(view[pos + 8 : start + length]) != crc:
                return None
            return length, number
        length, crc = head.unpack_from(view, pos)
        if length > len(view) - start or _crc32(view[start : start + length]) != crc:
            return None
        return length, 0


V1 = Layout(1, MAGIC_V1, struct.Struct(">II"), numbered=False)
CURRENT = Layout(2, MAGIC, struct.Struct(">IIQ"), numbered=True)
LAYOUTS = (CURRENT, V1)
"""Every format read, the current one first."""


def frame_head(body: bytes, number: int) -> bytes:
    """The frame head of batch ``number`` holding ``body`` in the current format, which :func:`scan` checks."""
    return CURRENT.frame(body, number)


_KIND = re.compile(b"[" + re.escape(KINDS) + b"]")
"""A byte that may start a batch's body (the kind of its first record)."""


@dataclass(frozen=True)
class RecoveryPoint:
    """How much of journal ``journal-<generation>.log`` is known committed: every batch up to
    number ``batch`` (0: none), ending at offset ``length`` (:mod:`.checkpoint` keeps it)."""

    generation: int
    length: int
    batch: int


class StoreError(AMQPLinkError, OSError):
    """The data directory cannot be used (names the file and what to do)."""


def salvage_hint(path: str, lost: str = "the damaged bytes are lost") -> str:
    """The end of a refusal: nothing changed, and how to repair the directory of ``path``."""
    return (
        f"Nothing was changed. Run `amqplink broker-store {os.path.dirname(path) or '.'} --salvage` to keep a"
        f" copy and read back every valid batch ({lost}), or restore the directory from a backup"
    )


class CorruptJournal(StoreError):
    """A journal damaged before its end (valid batches follow a frame that does not check) or
    before its recovery point (``resume`` None: nothing valid follows, but it was committed)."""

    def __init__(self, path: str, offset: int, resume: int | None, committed: int | None = None) -> None:
        if resume is not None:
            what = (
                f"the batch there does not check, but valid batches follow from offset {resume} (not a torn"
                " write: the file changed after it was written)"
            )
        else:
            what = (
                f"the batch there does not check, and its recovery point says {committed} bytes were committed"
                " (not a torn write, which only ever follows the recovery point: the file changed after it was"
                " written)"
            )
        super().__init__(f"{path!r} is damaged at offset {offset}: {what}. {salvage_hint(path)}")
        self.path, self.offset, self.resume = path, offset, resume


class CutShort(StoreError):
    """A journal shorter than its recovery point: committed batches were cut off."""

    def __init__(self, path: str, expected: int, found: int, point_file: str) -> None:
        super().__init__(
            f"{path!r} is {found} bytes long, but its recovery point ({point_file!r}) says {expected} bytes were"
            f" committed: the journal was cut short ({expected - found} committed bytes missing; not a torn write,"
            f" which only ever follows the recovery point). {salvage_hint(path, 'what was cut off is lost')}"
        )
        self.path, self.expected, self.found = path, expected, found


class OutOfPlace(StoreError):
    """A batch that checks but is not where it was written (its number is not the one expected)."""

    def __init__(self, path: str, offset: int, number: int, expected: int) -> None:
        super().__init__(
            f"{path!r}: the batch at offset {offset} checks but is batch #{number} where #{expected} was"
            " expected: a batch out of place (copied or moved after it was written; replayed, it could bring"
            f" back what later batches removed). {salvage_hint(path, 'batches put back in order, copies dropped')}"
        )
        self.path, self.offset, self.number, self.expected = path, offset, number, expected


@dataclass
class Scan:
    """What :func:`scan` found in one journal file."""

    path: str
    layout: Layout
    valid: int
    """The length of its valid prefix (where a torn tail is cut)."""
    size: int
    """The file's length."""
    batches: int = 0
    """The number of the last batch of the valid prefix (format 1: how many frames it holds)."""

    @property
    def torn(self) -> int:
        """Bytes of a torn last write after the valid prefix (0: none)."""
        return self.size - self.valid


def layout_of(path: str, data: bytes) -> Layout:
    """The format of the journal ``data`` (the file ``path``) by its header; :class:`StoreError`
    if it is none (empty; not a journal; a damaged header, valid batches following it)."""
    for layout in LAYOUTS:
        if data.startswith(layout.magic):
            return layout
    if not data:
        what = "empty"
    elif guess_layout(data) is not None:
        raise StoreError(
            f"{path!r}: its 16-byte header is damaged (it names no journal format) but valid batches follow."
            f" {salvage_hint(path, 'the header is rewritten')}"
        )
    else:
        what = "not an amqplink journal"
    raise StoreError(
        f"{path!r} is {what}; nothing was changed. If it is not the broker's, move it out of the directory"
        " (the journal before it, if any, is then read); else move the directory away to start empty"
    )


def guess_layout(data: bytes) -> Layout | None:
    """The format whose valid batches ``data`` holds after its 16-byte header, whatever the
    header says (the current one first); None when it holds none."""
    view = memoryview(data)
    for layout in LAYOUTS:
        if next_frame(view, len(layout.magic), layout) is not None:
            return layout
    return None


def scan(path: str, state: State, *, point: RecoveryPoint | None = None, point_file: str = "") -> Scan:
    """Replay the journal ``path`` into ``state``. A torn tail after ``point`` (the recovery
    point it must reach, ``point_file`` where it is kept) is left out (:attr:`Scan.torn`);
    damage before the end, or before ``point``, raises (:class:`CorruptJournal`,
    :class:`CutShort`, :class:`OutOfPlace`, :class:`StoreError`). Reads only: the file is not changed."""
    with open(path, "rb") as f:
        data = f.read()
    if point is not None and len(data) < point.length:
        raise CutShort(path, point.length, len(data), point_file)
    layout = layout_of(path, data)
    view = memoryview(data)
    pos, end = len(layout.magic), len(data)
    limit = -1 if point is None else point.length
    at_limit = 0 if pos == limit else None
    """The number of the batch that ends at ``limit`` (None: none does, so far)."""
    numbered, head, number = layout.numbered, layout.head.size, 0
    while pos < end:
        got = layout.at(view, pos)
        if got is None:
            resume = next_frame(view, pos + 1, layout)
            if resume is not None:
                raise CorruptJournal(path, pos, resume)
            break  # a torn tail (if it is after the recovery point: below)
        length, found = got
        if numbered and found != number + 1:
            raise OutOfPlace(path, pos, found, number + 1)
        try:
            state.apply(view[pos + head : pos + head + length])
        except RecordError as exc:
            raise StoreError(f"{path!r}: the batch at offset {pos}: {exc}. {salvage_hint(path)}") from None
        pos += head + length
        number += 1
        if pos == limit:
            at_limit = number
    if point is not None:
        if pos < point.length:
            raise CorruptJournal(path, pos, None, point.length)
        if at_limit != point.batch:
            there = "no batch ends there" if at_limit is None else f"batch #{at_limit} ends there"
            raise StoreError(
                f"{path!r} does not match its recovery point ({point_file!r}): that says batch #{point.batch}"
                f" ends at offset {point.length}, but {there} (the file was changed or replaced after it was"
                f" written). {salvage_hint(path)}"
            )
    return Scan(path, layout, pos, end, number)


def next_frame(view: memoryview, start: int, layout: Layout = CURRENT) -> int | None:
    """The offset of the first valid, non-empty frame at or after ``start`` (None: none)."""
    head = layout.head.size
    for match in _KIND.finditer(view, start + head):  # (in C: the bytes that may start a body)
        got = layout.at(view, match.start() - head)
        if got is not None and got[0] > 0:
            return match.start() - head
    return None


def frames(view: memoryview, layout: Layout) -> Iterator[tuple[int, int, int]]:
    """(offset, body length, number) of every valid, non-empty frame of the journal ``view``
    in file order, damaged stretches between them passed over (what a salvage keeps)."""
    pos, end, head = len(layout.magic), len(view), layout.head.size
    while pos < end:
        got = layout.at(view, pos)
        if got is None or got[0] == 0:
            resume = next_frame(view, pos + 1, layout)
            if resume is None:
                return
            pos = resume
            continue
        yield pos, got[0], got[1]
        pos += head + got[0]


def unused(path: str) -> str:
    """``path``, or ``path.N`` for the first N such a file does not exist yet."""
    candidate, n = path, 1
    while os.path.exists(candidate):
        candidate, n = f"{path}.{n}", n + 1
    return candidate


def sync_directory(directory: str) -> None:
    """Flush ``directory``'s entries (a rename, a removal) to disk."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
