"""The local queue's directory, written: appends (one frame and one ``fdatasync`` per
commit), acknowledgements, compaction, and the lock that keeps one writer per directory.

Synchronous and single-threaded: the asyncio side (:mod:`.queue`) runs every call on one
worker thread, so the index (:attr:`LocalQueueFile.pending`) changes only there. Every
write goes through :class:`FileIO`, the seam the crash tests cut at each point.

The file format is :mod:`.records`'; how it is read back, and why a torn tail is left
in place while damage is refused, is :mod:`.segments`'.
"""

from __future__ import annotations

import errno
import heapq
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat

from amqplink.servicebus.localqueue.errors import LocalQueueInUseError
from amqplink.servicebus.localqueue.records import MAGIC, frame, pack_ack, pack_header, pack_stored, stored_size
from amqplink.servicebus.localqueue.segments import Entry, Recovered, read_directory, segment_name

__all__ = ["COMPACT_MIN_BYTES", "FRAME_TARGET", "FileIO", "LocalQueueFile", "Stored"]

COMPACT_MIN_BYTES = 4 << 20
"""The segments are compacted once the bytes no longer needed reach this and the live bytes."""
FRAME_TARGET = 1 << 20
"""A compaction's copy is written in frames of about this many bytes."""
MAX_SEGMENTS = 16
"""More segment files than this (each restart after a torn write adds one) are compacted."""
LOCK_NAME = "lock"


@dataclass(frozen=True, slots=True)
class Stored:
    """One message to store: its entity, its ordering key and its encoded bytes."""

    entity: str
    key: str
    message: bytes

    @property
    def size(self) -> int:
        """The bytes its record takes (what counts against ``max_bytes``)."""
        return stored_size(self.entity, self.key, len(self.message))


class FileIO:
    """Every change the local queue makes to its files, one method each (the tests' seam)."""

    def write(self, fd: int, data: bytes) -> None:
        """Write all of ``data`` at the file position."""
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    def sync(self, fd: int) -> None:
        """Flush the file's data to the disk (``fdatasync``)."""
        os.fdatasync(fd) if hasattr(os, "fdatasync") else os.fsync(fd)

    def truncate(self, fd: int, size: int) -> None:
        """Cut the file to ``size`` bytes."""
        os.ftruncate(fd, size)

    def replace(self, source: str, target: str) -> None:
        """Rename ``source`` over ``target`` (atomic)."""
        os.replace(source, target)

    def unlink(self, path: str) -> None:
        """Remove a file."""
        os.unlink(path)

    def sync_directory(self, directory: str) -> None:
        """Flush the directory's entries (after a rename or a new file)."""
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _lock(directory: str) -> int:
    """Hold ``directory``'s lock file (``flock``); :class:`LocalQueueInUseError` if taken."""
    fd = os.open(os.path.join(directory, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        import fcntl
    except ImportError:  # (no flock on this platform: one writer is the user's to ensure)
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
        os.close(fd)
        if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            raise
        raise LocalQueueInUseError(
            f"the local queue {directory!r} is in use by another client (process {holder}); one client per"
            " directory: give each process a directory of its own"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


class LocalQueueFile:
    """One local queue directory, open for writing (``max_bytes``: what the messages not yet
    forwarded may take at most). Opening it takes its lock, reads it back
    (:func:`~.segments.read_directory`) and removes what a crash left behind: a
    compaction's temporary file, segments a finished compaction replaced."""

    def __init__(
        self,
        directory: str,
        max_bytes: int,
        *,
        io: FileIO | None = None,
        compact_min_bytes: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.io = io or FileIO()
        self.compact_min_bytes = COMPACT_MIN_BYTES if compact_min_bytes is None else compact_min_bytes
        self.clock = clock
        os.makedirs(directory, mode=0o700, exist_ok=True)
        self._lock_fd = _lock(directory)
        self._fds: dict[int, int] = {}
        """Segment number -> a descriptor to read (and, for the last one, append to)."""
        self._broken = False
        """A failed write could not be undone: the next frame goes to a new segment."""
        try:
            found = read_directory(directory)
            self._clean(found)
            self.pending = found.pending
            """Entity -> its messages not yet forwarded, oldest first."""
            self.next_id = found.next_id
            self.live_bytes = sum(e.size for queue in found.pending.values() for e in queue)
            self.file_bytes = found.file_bytes
            self.torn = found.torn
            """Bytes of torn last writes found at open (left in place, not read)."""
            for scan in found.segments:
                self._fds[scan.number] = os.open(scan.path, os.O_RDWR | os.O_APPEND)
            last = found.segments[-1] if found.segments else None
            if last is not None and last.valid == last.size:
                self._append, self._end = last.number, last.size
            else:  # none yet, or the last one ends in a torn write: appends go to a new one
                self._new_segment((last.number if last else 0) + 1, replaces=0)
            self._compact_if_due()
        except BaseException:
            self.close()
            raise

    # -- opening ------------------------------------------------------------------------
    def _clean(self, found: Recovered) -> None:
        for name in os.listdir(self.directory):
            if name.endswith(".tmp"):  # a compaction that did not finish
                self.io.unlink(os.path.join(self.directory, name))
        for path in found.replaced:
            self.io.unlink(path)
        if found.replaced:
            self.io.sync_directory(self.directory)

    def _create(self, number: int, header: bytes, frames: Iterable[bytes]) -> str:
        """Write a segment whole under a temporary name, sync it, rename it into place."""
        path = os.path.join(self.directory, segment_name(number))
        temporary = path + ".tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            self.io.write(fd, MAGIC + frame(header))
            for data in frames:
                self.io.write(fd, data)
            self.io.sync(fd)
        finally:
            os.close(fd)
        self.io.replace(temporary, path)
        self.io.sync_directory(self.directory)
        return path

    def _new_segment(self, number: int, *, replaces: int, frames: Iterable[bytes] = ()) -> None:
        path = self._create(number, pack_header(number, self.next_id, replaces), frames)
        self._fds[number] = os.open(path, os.O_RDWR | os.O_APPEND)
        self._append, self._end = number, os.path.getsize(path)
        self.file_bytes += self._end

    # -- state --------------------------------------------------------------------------
    @property
    def depth(self) -> int:
        """Messages stored and not yet forwarded."""
        return sum(len(queue) for queue in self.pending.values())

    def oldest(self) -> float | None:
        """When the oldest message not yet forwarded was stored (None: none)."""
        return min((queue[0].stored_at for queue in self.pending.values()), default=None)

    @property
    def segments(self) -> int:
        """Segment files open."""
        return len(self._fds)

    # -- appending ----------------------------------------------------------------------
    def append(self, groups: Sequence[Sequence[Stored]]) -> list[bool]:
        """Store each group whole or not at all: in one frame, synced before this returns.
        A group that would take the live bytes past ``max_bytes`` is left out (False);
        the others are stored (True). An ``OSError`` stores none of them."""
        room = self.max_bytes - self.live_bytes
        taken: list[bool] = []
        records: list[bytes] = []
        entries: list[tuple[str, Entry]] = []
        now = self.clock()
        next_id = self.next_id
        offset = self._end + 8  # (the frame's head)
        for group in groups:
            size = sum(item.size for item in group)
            if size > room or not group:
                taken.append(not group)
                continue
            room -= size
            taken.append(True)
            for item in group:
                record = pack_stored(next_id, now, item.entity, item.key, item.message)
                at = offset + len(record) - len(item.message)
                entries.append((item.entity, Entry(next_id, now, item.key, self._append, at, len(item.message),
                                                   item.size)))  # fmt: skip
                records.append(record)
                offset += len(record)
                next_id += 1
        if records:
            self._write(frame(b"".join(records)))
            self.next_id = next_id
            for entity, entry in entries:
                self.pending.setdefault(entity, deque()).append(entry)
                self.live_bytes += entry.size
        return taken

    def _write(self, data: bytes) -> None:
        """Append one frame and sync it. A failed write is undone (our own bytes, never
        acknowledged); if even that fails, later frames go to a new segment, so that no
        valid frame ever follows the broken one."""
        if self._broken:
            self._new_segment(self._append + 1, replaces=0)
            self._broken = False
        fd = self._fds[self._append]
        try:
            self.io.write(fd, data)
            self.io.sync(fd)
        except OSError:
            try:
                self.io.truncate(fd, self._end)
            except OSError:
                self._broken = True
            raise
        self._end += len(data)
        self.file_bytes += len(data)

    # -- forwarding -----------------------------------------------------------------------
    def batch(self, entity: str, max_count: int, max_bytes: int) -> list[tuple[int, bytes]]:
        """The oldest messages of ``entity`` not yet forwarded (at least one if any, up to
        ``max_count`` and about ``max_bytes``): (record id, encoded message)."""
        out: list[tuple[int, bytes]] = []
        total = 0
        for entry in self.pending.get(entity, ()):
            if out and (len(out) >= max_count or total + entry.length > max_bytes):
                break
            out.append((entry.id, os.pread(self._fds[entry.segment], entry.length, entry.offset)))
            total += entry.length
        return out

    def ack(self, entity: str, up_to: int) -> None:
        """Every message of ``entity`` with a record id up to ``up_to`` was forwarded: written
        (and synced), dropped from :attr:`pending`; the segments compacted when due."""
        queue = self.pending.get(entity)
        if not queue or queue[0].id > up_to:
            return
        self._write(frame(pack_ack(entity, up_to)))
        while queue and queue[0].id <= up_to:
            self.live_bytes -= queue.popleft().size
        if not queue:
            del self.pending[entity]
        self._compact_if_due()

    def _compact_if_due(self) -> None:
        """Compact once the bytes no longer needed reach the live bytes (and
        ``compact_min_bytes``): the copying costs at most what was acknowledged since the
        last one; or once there are more than :data:`MAX_SEGMENTS` (restarts after crashes)."""
        dead = self.file_bytes - self.live_bytes
        if dead >= max(self.compact_min_bytes, self.live_bytes) or len(self._fds) > MAX_SEGMENTS:
            self.compact()

    def _live_in_order(self) -> Iterator[tuple[str, Entry]]:
        """Every pending entry, by record id (the entities' queues merged)."""
        queues = [zip(repeat(entity), queue) for entity, queue in self.pending.items()]
        yield from heapq.merge(*queues, key=lambda pair: pair[1].id)

    def compact(self) -> None:
        """Copy the live records into a new segment that replaces every older one, then
        delete those (a crash in between leaves them to be skipped and deleted at open)."""
        number = self._append + 1
        new_offsets: list[tuple[Entry, int]] = []

        def frames() -> Iterator[bytes]:
            chunk: list[bytes] = []
            size = 0
            offset = len(MAGIC) + 8 + len(pack_header(0, 0, 0)) + 8  # (after the header frame, in the frame)
            for entity, entry in self._live_in_order():
                message = os.pread(self._fds[entry.segment], entry.length, entry.offset)
                record = pack_stored(entry.id, entry.stored_at, entity, entry.key, message)
                new_offsets.append((entry, offset + size + len(record) - len(message)))
                chunk.append(record)
                size += len(record)
                if size >= FRAME_TARGET:
                    yield frame(b"".join(chunk))
                    offset += size + 8
                    chunk, size = [], 0
            if chunk:
                yield frame(b"".join(chunk))

        old = dict(self._fds)
        path = self._create(number, pack_header(number, self.next_id, number - 1), frames())
        for entry, offset in new_offsets:
            entry.segment, entry.offset = number, offset
        self._fds = {number: os.open(path, os.O_RDWR | os.O_APPEND)}
        self._append, self._end = number, os.path.getsize(path)
        self.file_bytes = self._end
        for segment, fd in old.items():
            os.close(fd)
            self.io.unlink(os.path.join(self.directory, segment_name(segment)))
        self.io.sync_directory(self.directory)

    # -- closing ------------------------------------------------------------------------
    def close(self) -> None:
        """Close the files and release the lock (nothing is written: closing and a crash
        leave the same directory)."""
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)
        lock, self._lock_fd = getattr(self, "_lock_fd", -1), -1
        if lock >= 0:
            os.close(lock)
