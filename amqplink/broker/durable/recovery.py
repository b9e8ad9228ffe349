"""Reading a journal file back, and telling a torn last write from damage. The file's
layout (:data:`MAGIC`, then frames: :data:`FRAME`, :func:`frame_head`) is stated here, where
it is checked; :mod:`.journal` writes through it.

The writer appends one frame per batch and flushes it (``fdatasync``) before it writes
the next (:mod:`.journal`), so a crash or a power cut can tear only the last write: the
bytes from the first frame that does not check to the end of the file hold no valid frame.
Those bytes are a *torn tail*: nothing in them was acknowledged, and they are dropped.
A frame that does not check *followed by a valid one* cannot come from a crash: the file
was damaged after it was written (a flipped bit, an overwritten block), and the batches
after the damage hold acknowledged work. Such a file is *corrupt*: the broker refuses to
start on it, naming the file and the offset, and changes nothing;
``amqplink broker-store DIR --salvage`` (:func:`salvage`) repairs it, keeping a copy.

A frame at offset ``o`` is valid when its length is not zero, its body lies inside the
file and its CRC-32 matches (a frame of eight zero bytes, as an empty batch or zeros a
file system left, checks but carries nothing: it never counts as a later valid frame).
The damage in the last batch (nothing valid after it) cannot be told from a torn write
and is dropped as one.
"""

from __future__ import annotations

import binascii
import os
import re
import struct
from dataclasses import dataclass, field

from amqplink import AMQPLinkError
from amqplink.broker.durable.records import KINDS, RecordError, State

__all__ = [
    "FRAME",
    "MAGIC",
    "CorruptJournal",
    "Scan",
    "StoreError",
    "frame_head",
    "next_frame",
    "salvage",
    "scan",
    "sync_directory",
    "unused",
]

MAGIC = b"amqplink-jrnl-1\n"
"""The first bytes of every journal file (format version 1)."""
FRAME = struct.Struct(">II")
"""A batch's frame head: the body's length, its CRC-32."""


def frame_head(body: bytes) -> bytes:
    """The frame head of the batch ``body`` (:data:`FRAME`), which :func:`scan` checks."""
    return FRAME.pack(len(body), binascii.crc32(body))

_KIND = re.compile(b"[" + re.escape(KINDS) + b"]")
"""A byte that may start a batch's body (the kind of its first record)."""


class StoreError(AMQPLinkError, OSError):
    """The data directory cannot be used (names the file and what to do)."""


class CorruptJournal(StoreError):
    """A journal damaged before its end: valid batches follow a frame that does not check."""

    def __init__(self, path: str, offset: int, resume: int) -> None:
        directory = os.path.dirname(path) or "."
        super().__init__(
            f"{path!r} is damaged at offset {offset}: the batch there does not check, but valid batches follow"
            f" from offset {resume} (not a torn write: the file changed after it was written). Nothing was"
            f" changed. Run `amqplink broker-store {directory} --salvage` to keep a copy and read back every"
            " valid batch (the damaged bytes are lost), or restore the directory from a backup"
        )
        self.path, self.offset, self.resume = path, offset, resume


@dataclass
class Scan:
    """What :func:`scan` found in one journal file."""

    path: str
    valid: int
    """The length of its valid prefix (where a torn tail is cut)."""
    size: int
    """The file's length."""
    skipped: list[tuple[int, int]] = field(default_factory=list)
    """(offset, length) of the damaged stretches passed over (``salvage=True`` only)."""

    @property
    def torn(self) -> int:
        """Bytes of a torn last write after the valid prefix (0: none)."""
        return self.size - self.valid


def scan(path: str, state: State, *, salvage: bool = False) -> Scan:
    """Replay the journal ``path`` into ``state``. A torn tail is left out (:attr:`Scan.torn`);
    damage before the end raises :class:`CorruptJournal` (``salvage``: it is passed over to
    the next valid frame and noted in :attr:`Scan.skipped`). Reads only: the file is not changed."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(MAGIC):
        what = "empty" if not data else "not an amqplink journal"
        raise StoreError(
            f"{path!r} is {what}; nothing was changed. If it is not the broker's, move it out of the directory"
            " (the journal before it, if any, is then read); else move the directory away to start empty"
        )
    view = memoryview(data)
    pos, end = len(MAGIC), len(data)
    found = Scan(path, pos, end)
    while pos < end:
        if pos + FRAME.size <= end:
            length, crc = FRAME.unpack_from(view, pos)
            body = view[pos + FRAME.size : pos + FRAME.size + length]
            if len(body) == length and binascii.crc32(body) == crc:
                try:
                    state.apply(body)
                except RecordError as exc:
                    if salvage:  # (what it applied before the record that does not parse stays)
                        found.skipped.append((pos, FRAME.size + length))
                        pos += FRAME.size + length
                        found.valid = pos
                        continue
                    raise StoreError(
                        f"{path!r}: the batch at offset {pos}: {exc}; nothing was changed. Run `amqplink"
                        f" broker-store {os.path.dirname(path) or '.'} --salvage` to keep a copy and read back the"
                        " other batches, or move the directory away to start empty"
                    ) from None
                pos += FRAME.size + length
                found.valid = pos
                continue
        resume = next_frame(view, pos + 1)
        if resume is None:
            break  # a torn tail
        if not salvage:
            raise CorruptJournal(path, pos, resume)
        found.skipped.append((pos, resume - pos))
        pos = resume
        found.valid = pos
    return found


def next_frame(view: memoryview, start: int) -> int | None:
    """The offset of the first valid, non-empty frame at or after ``start`` (None: none)."""
    end = len(view)
    unpack, crc32 = FRAME.unpack_from, binascii.crc32
    for match in _KIND.finditer(view, start + FRAME.size):  # (in C: the bytes that may start a body)
        at = match.start() - FRAME.size
        length, crc = unpack(view, at)
        if 0 < length <= end - match.start() and crc32(view[match.start() : match.start() + length]) == crc:
            return at
    return None


def salvage(path: str) -> dict[str, object]:
    """Rewrite the journal ``path`` with every valid batch it holds, passing over damaged
    stretches and a torn tail; the original is kept as ``path + ".damaged"`` (numbered if
    that exists). What is lost is said: the byte ranges skipped. The caller holds the
    directory's lock."""
    state = State()
    found = scan(path, state, salvage=True)
    with open(path, "rb") as f:
        data = f.read()
    kept = unused(path + ".damaged")
    with open(kept, "xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    pieces = [data[: len(MAGIC)]]
    pos = len(MAGIC)
    for offset, length in found.skipped:
        pieces.append(data[pos:offset])
        pos = offset + length
    pieces.append(data[pos : found.valid])
    tmp = path + ".salvage.tmp"
    with open(tmp, "wb") as f:
        f.write(b"".join(pieces))
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)
    sync_directory(os.path.dirname(path) or ".")
    lost = [*found.skipped, *([(found.valid, found.torn)] if found.torn else [])]
    return {
        "journal": path,
        "copy": kept,
        "lost_bytes": [{"offset": offset, "length": length} for offset, length in lost],
        "lost": (
            "the batches in these byte ranges: messages sent and settlements confirmed in them are gone"
            " (a completed message may come back; an acknowledged send may be missing)"
            if lost
            else "nothing"
        ),
        "messages": sum(len(m) for m in state.messages.values()),
    }


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
