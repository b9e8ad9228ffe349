"""The journal file: append-only, one framed batch per group commit, compacted by
rewriting the live state into a new file that atomically replaces the old one.

Layout of ``journal-NNNNNNNN.log`` (:mod:`.recovery`): a 16-byte header naming its format,
then batches, each a frame ``length (u32) | crc32 (u32) | number (u64) | records``
(:mod:`.records`), numbered 1, 2, 3 ... A batch is one
sequential append (``os.writev`` of the frame's head and body, in pieces of at most
:data:`WRITE_CHUNK`) and one ``os.fdatasync``, whatever it holds; both let go of the GIL
(each time the writer thread takes it back it may have to wait for the event loop, so
it does so as few times as it can; why pieces and not one ``O_DSYNC`` write, and why a
journal rather than a database: docs/durability.md#decisions).

Beside it, the recovery point (:mod:`.checkpoint`): how much of it is known committed,
written by the writer thread after a ``fdatasync`` at most once a second (:meth:`Journal.checkpoint`).

Recovery (:mod:`.recovery`) reads the newest file from the start. Bytes after the last
valid frame, past the recovery point, with no valid frame after them are a torn last write:
nothing in them was acknowledged (callbacks run only after the flush), so they are dropped,
and cut off once everything else was read back, so that later batches follow valid ones.
A frame that does not check followed by a valid one, a batch out of its place, a file
shorter than its recovery point or damaged before it is damage: the broker refuses to
start, naming the file and the offset, and changes nothing. Nothing is removed or cut before
the newest file was read back whole (a stray or empty newer file is refused the same way,
the good one kept).

Compaction (:meth:`Journal.compact`): the whole live state, as records, is written to
``journal-<N+1>.log.tmp``, flushed, renamed to ``journal-<N+1>.log`` (atomic) and
the directory flushed; then the recovery point names the new file; only then are older
files removed. A crash at any point
leaves either the old file complete (the ``.tmp`` is removed once it was read back) or
the new one complete (older files are removed then): recovery reads only the newest. It
needs room for a copy of the live state: when the disk has less free (``statvfs``), it is
put off (logged once) and the journal keeps growing by appends, which need room for one
batch only. A journal of an earlier format (1) is compacted into the current one with the
first batch written after it was opened (:attr:`Journal.upgrade_due`).

A record costs one ``struct.pack`` on the event loop (a run of messages stored together,
as a batch transfer's are, one for the run: :func:`.records.messages_records`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from amqplink.broker.durable import checkpoint
from amqplink.broker.durable.records import State
from amqplink.broker.durable.recovery import (
    CURRENT,
    MAGIC,
    RecoveryPoint,
    Scan,
    StoreError,
    frame_head,
    scan,
    sync_directory,
)

__all__ = [
    "COMPACT_FACTOR",
    "COMPACT_HEADROOM",
    "COMPACT_MIN_BYTES",
    "LOCK_NAME",
    "MAGIC",
    "Journal",
    "Recovered",
    "StoreError",
    "journal_files",
    "journal_name",
    "read_only",
    "recover",
    "replay",
    "take_lock",
]

log = logging.getLogger(__name__)

LOCK_NAME = "LOCK"
"""The file under ``--data-dir`` a running broker holds locked (one broker per directory)."""
COMPACT_MIN_BYTES = 64 << 20
"""A journal smaller than this is never compacted."""
COMPACT_FACTOR = 2
"""A journal is compacted once it is this many times larger than its live state was when
last compacted (so each byte is rewritten at most about once on average)."""
COMPACT_HEADROOM = 1 << 20
"""Bytes a compaction leaves free beyond its copy (else it is put off)."""
WRITE_CHUNK = 1 << 20
"""Bytes one ``os.write`` of a batch writes at most."""
_NAME = re.compile(r"journal-(\d{8})\.log")


def journal_files(directory: str) -> list[tuple[int, str]]:
    """(number, path) of the journal files in ``directory``, oldest first."""
    found = []
    for name in os.listdir(directory):
        match = _NAME.fullmatch(name)
        if match is not None:
            found.append((int(match.group(1)), os.path.join(directory, name)))
    return sorted(found)


def journal_name(directory: str, number: int) -> str:
    """The path of journal file ``number`` (its generation: one more with each compaction)."""
    return os.path.join(directory, f"journal-{number:08d}.log")


def replay(path: str, state: State) -> tuple[int, int]:
    """Replay the journal file ``path`` into ``state``, its recovery point not checked:
    (length of its valid prefix, file length); :class:`~.recovery.CorruptJournal` if it is
    damaged before its end."""
    found = scan(path, state)
    return found.valid, found.size


@dataclass
class Recovered:
    """What :func:`recover` read back: the newest journal, and the files older than it."""

    number: int
    found: Scan
    older: list[tuple[int, str]] = field(default_factory=list)


def recover(directory: str, state: State) -> Recovered | None:
    """Replay the newest journal of ``directory`` into ``state``, checked against its recovery
    point (:mod:`.checkpoint`); None when there is no journal (and no recovery point says one
    was committed). Raises :class:`StoreError` naming the file when it cannot be read back
    whole; reads only."""
    point = checkpoint.read(directory)
    files = journal_files(directory)
    number, path = files[-1] if files else (0, journal_name(directory, 1))
    expected = checkpoint.applies(directory, point, number, path)
    if not files:
        return None
    found = scan(path, state, point=expected, point_file=os.path.join(directory, checkpoint.NAME))
    if point is None:
        checkpoint.missing(directory, found)
    elif expected is None:
        checkpoint.older(point, path)
    return Recovered(number, found, files[:-1])


def read_only(directory: str) -> tuple[str, State]:
    """The newest journal of ``directory`` and what it holds, read without taking the
    directory's lock or changing anything (a running broker may be writing it)."""
    state = State()
    recovered = recover(directory, state)
    if recovered is None:
        raise StoreError(f"{directory!r} holds no amqplink journal")
    return recovered.found.path, state


def take_lock(directory: str) -> int:
    """Lock ``directory`` for this process (one broker per data directory): the lock's fd."""
    lock = os.open(os.path.join(directory, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(lock)
        raise StoreError(
            f"the broker's store {directory!r} is in use by another broker: give each its own --data-dir"
        ) from None
    return lock


def remove_leftovers(directory: str) -> None:
    """Remove what an interrupted compaction or recovery point left: the ``.tmp`` files (the
    file read is whole without them)."""
    for name in os.listdir(directory):
        if name.endswith(".log.tmp") or name == checkpoint.NAME + ".tmp":
            os.unlink(os.path.join(directory, name))


class Journal:
    """One data directory's journal: read on the opening thread, written by the writer thread."""

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.directory = os.fspath(directory)
        self._fsync = fsync
        self._sync = os.fdatasync if fsync else _no_sync
        os.makedirs(self.directory, exist_ok=True)
        self._lock = take_lock(self.directory)
        self._broken: OSError | None = None
        self.space: int | None = None
        """Bytes this journal may still write, as if the disk had no more (None: as the disk
        has). A seam for fault tests: a write past it writes what fits, then fails with
        ``ENOSPC``, as on a full disk; set it again to free space."""
        self.clock: Callable[[], float] = time.monotonic
        """What :meth:`append` measures :data:`~.checkpoint.INTERVAL` with (a seam for tests)."""
        self.layout = CURRENT
        """The file's format: a file of an earlier one is appended to in its own until compacted."""
        self.batches = 0
        """The number of the last batch in the file (the next is one more)."""
        self.upgrade_due = False
        """The file is of an earlier format: compact it at the next batch (:meth:`compaction_due`)."""
        self._point: RecoveryPoint | None = None
        """The recovery point last written."""
        self._point_at = 0.0
        self._point_failed = False
        try:
            self.state = State()
            self._open()
        except BaseException:
            os.close(self._lock)
            raise
        self.base_size = self.size
        """The file's size right after it was made (its live state then)."""

    def _open(self) -> None:
        files = journal_files(self.directory)
        if os.path.exists(os.path.join(self.directory, "broker.sqlite3")) and not files:
            raise StoreError(
                f"{self.directory!r} holds an SQLite store of an earlier amqplink (broker.sqlite3), which this"
                " version does not read; move the directory away to start empty"
            )
        recovered = recover(self.directory, self.state)  # (raises, having changed nothing, if it cannot be read back)
        if recovered is None:
            remove_leftovers(self.directory)
            self.number, self._fd, self.size = 0, -1, 0
            self.path = journal_name(self.directory, 1)
            self._replace([])
            return
        # Read back: only now is anything removed or cut.
        found = recovered.found
        remove_leftovers(self.directory)
        for _, path in recovered.older:  # (superseded by a compaction that finished)
            os.unlink(path)
        self.number, self.path, self.layout = recovered.number, found.path, found.layout
        self.size, self.batches = found.valid, found.batches
        self.upgrade_due = found.layout is not CURRENT
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        if found.torn:
            self._cut(found)
        self.checkpoint()

    def _cut(self, found: Scan) -> None:
        log.warning(
            "%s: the last %d bytes (from offset %d) were a torn write (no valid batch after them) and are dropped",
            found.path, found.torn, found.valid,
        )  # fmt: skip
        os.ftruncate(self._fd, self.size)
        self._sync(self._fd)

    # -- the recovery point (writer thread) -----------------------------------------
    def checkpoint(self) -> None:
        """Write the recovery point: everything this journal wrote so far is committed. A
        failure is logged (once, until one succeeds) and the older point stays: it claims less."""
        point = RecoveryPoint(self.number, self.size, self.batches)
        self._point_at = self.clock()
        if point == self._point:
            return
        last = self._point
        lasts = last is None or last.generation != point.generation
        try:
            checkpoint.write(self.directory, point, sync=self._fsync, rename_lasts=lasts)
        except OSError as exc:
            if not self._point_failed:
                self._point_failed = True
                log.error(
                    "%s: the recovery point could not be written (%s): a cut of what was written since is not"
                    " told from a torn write until it is", self.path, exc,
                )  # fmt: skip
            return
        self._point, self._point_failed = point, False

    def checkpoint_wait(self) -> float | None:
        """Seconds until the recovery point is due (0: now; None: it covers everything written)."""
        point = self._point
        if point is not None and point.length == self.size and point.generation == self.number:
            return None
        return max(0.0, self._point_at + checkpoint.INTERVAL - self.clock())

    # -- writing (writer thread) --------------------------------------------------
    def append(self, records: Sequence[bytes]) -> None:
        """Write one batch and flush it to disk (nothing to write: nothing done); the recovery
        point too once :data:`~.checkpoint.INTERVAL` has passed since the last. On an error (a
        full disk) the file is cut back to the batches before, so that later batches do not
        follow a torn one; when even that fails, every later append fails too (the store
        refuses work rather than lose it)."""
        if self._broken is not None:
            raise StoreError(f"{self.path!r} could not be repaired after a failed write ({self._broken})")
        body = b"".join(records)
        if not body:
            return
        head = self.layout.frame(body, self.batches + 1)  # (binascii's CRC keeps the GIL: no hand-over)
        try:
            self._write_all(self._fd, head, body)
            self._sync(self._fd)
        except OSError:
            try:
                os.ftruncate(self._fd, self.size)
                self._sync(self._fd)
            except OSError as exc:
                self._broken = exc
            raise
        self.size += len(head) + len(body)
        self.batches += 1
        if self.clock() - self._point_at >= checkpoint.INTERVAL:
            self.checkpoint()

    def compact(self, records: Sequence[bytes]) -> bool:
        """Replace the journal by one holding only ``records`` (the whole live state, starting
        with a reset record); False when it was not (logged: the disk has no room for the copy,
        or making it failed), and the next compaction waits until the file has grown as much
        again. The journal is unchanged then: the caller appends what it had to write instead."""
        self.upgrade_due = False
        needed = sum(map(len, records)) + COMPACT_HEADROOM
        free = self._free_bytes()
        if free is not None and free < needed:
            reason: object = f"it needs {needed} bytes free for a copy of the live state, the disk has {free}"
        else:
            try:
                self._replace(records)
            except OSError as exc:
                reason = exc
            else:
                return True
        self.base_size = self.size
        log.warning(
            "%s: compaction put off (%s); the journal keeps growing by appends, which need room for one batch"
            " only, and compaction is tried again once it has grown to %d bytes",
            self.directory, reason, COMPACT_FACTOR * self.base_size,
        )  # fmt: skip
        return False

    def _free_bytes(self) -> int | None:
        """Bytes the broker may still write on the journal's file system (None: unknown)."""
        if self.space is not None:
            return self.space
        try:
            st = os.statvfs(self.directory)
        except OSError:
            return None
        return st.f_bavail * st.f_frsize

    def _replace(self, records: Sequence[bytes]) -> None:
        number = self.number + 1
        path = journal_name(self.directory, number)
        tmp = path + ".tmp"
        body = b"".join(records)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        head = MAGIC + frame_head(body, 1) if body else MAGIC
        try:
            self._write_all(fd, head, body)
            self._sync(fd)
            os.rename(tmp, path)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        try:
            self._sync_directory()
        except OSError as exc:  # the new name may not last: refuse work rather than write past it
            self._broken = exc
        old_fd, old_number = self._fd, self.number
        self._fd, self.number, self.path, self.layout = fd, number, path, CURRENT
        self.size = self.base_size = len(head) + len(body)
        self.batches = 1 if body else 0
        if self._broken is None:  # (the recovery point names the new file only once its name lasts)
            self.checkpoint()
        if old_fd >= 0:
            os.close(old_fd)
            try:  # (left behind, it is removed on the next start: only the newest file is read)
                os.unlink(journal_name(self.directory, old_number))
                self._sync_directory()
            except OSError as exc:
                log.warning("%s: the journal before compaction could not be removed: %s", self.directory, exc)

    def compaction_due(self, min_bytes: int = COMPACT_MIN_BYTES) -> bool:
        """Whether the file has grown enough past its live state to be rewritten."""
        return self.size >= max(min_bytes, COMPACT_FACTOR * self.base_size)

    def _sync_directory(self) -> None:
        if self._sync is not _no_sync:
            sync_directory(self.directory)

    def _write_all(self, fd: int, head: bytes, body: bytes) -> None:
        """:func:`_write_all`, within :attr:`space` when it is set."""
        if self.space is not None:
            size = len(head) + len(body)
            if size > self.space:
                fits, self.space = self.space, 0
                os.write(fd, (head + bytes(body))[:fits])
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self.space -= size
        _write_all(fd, head, body)

    def close(self) -> None:
        """Write the recovery point (a clean stop: everything written is committed), close the file and
        give up the directory's lock (another broker may then open it)."""
        if self._fd >= 0:
            self.checkpoint()
            os.close(self._fd)
            self._fd = -1
        os.close(self._lock)


def _write_all(fd: int, head: bytes, body: bytes) -> None:
    """Write ``head`` then ``body`` (no copy joining them), at most :data:`WRITE_CHUNK` of the body a call."""
    view = memoryview(body)
    done = os.writev(fd, [head, view[:WRITE_CHUNK]])
    while done < len(head):  # (a short write: regular files hardly ever do that)
        done += os.write(fd, head[done:])
    view = view[done - len(head) :]
    while view:
        view = view[os.write(fd, view[:WRITE_CHUNK]) :]


def _no_sync(fd: int) -> None:
    """``fsync=False``: tests that do not need durability."""
