"""The journal file: append-only, one framed batch per group commit, compacted by
rewriting the live state into a new file that atomically replaces the old one.

Layout of ``journal-NNNNNNNN.log``: :data:`MAGIC`, then batches, each a frame
``length (u32) | crc32 (u32) | records`` (:mod:`.records`). A batch is one
sequential append (``os.writev`` of the frame's head and body, in pieces of at most
:data:`WRITE_CHUNK`) and one ``os.fdatasync``, whatever it holds; both let go of the GIL
(each time the writer thread takes it back it may have to wait for the event loop, so
it does so as few times as it can). (Measured here: one
``O_DSYNC`` write of a whole 1-4 MiB batch cost 3-4 times the CPU of 1 MiB writes and
one ``fdatasync``.)

Recovery (:mod:`.recovery`) reads the newest file from the start. Bytes after the last
valid frame with no valid frame after them are a torn last write: nothing in them was
acknowledged (callbacks run only after the flush), so they are dropped, and cut off once
everything else was read back, so that later batches follow valid ones. A frame that does
not check followed by a valid one is damage: the broker refuses to start, naming the file
and the offset, and changes nothing. Nothing is removed or cut before the newest file was
read back whole (a stray or empty newer file is refused the same way, the good one kept).

Compaction (:meth:`Journal.compact`): the whole live state, as records, is written to
``journal-<N+1>.log.tmp``, flushed, renamed to ``journal-<N+1>.log`` (atomic) and
the directory flushed; only then are older files removed. A crash at any point
leaves either the old file complete (the ``.tmp`` is removed once it was read back) or
the new one complete (older files are removed then): recovery reads only the newest. It
needs room for a copy of the live state: when the disk has less free (``statvfs``), it is
put off (logged once) and the journal keeps growing by appends, which need room for one
batch only.

Why not SQLite (what the store used before; ``interop/bench_store.py``): each
message cost a B-tree insert and delete, 10 bound parameters and WAL page writes on
the writer thread with the GIL held, about 6 us of CPU per message on top of the
event loop's work; a record here is one ``struct.pack`` on the loop (a run of messages
stored together, as a batch transfer's are, one for the run: :func:`.records.messages_records`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
from collections.abc import Sequence

from amqplink.broker.durable.records import State
from amqplink.broker.durable.recovery import (
    MAGIC,
    CorruptJournal,
    Scan,
    StoreError,
    frame_head,
    salvage,
    scan,
    sync_directory,
    unused,
)

__all__ = [
    "COMPACT_FACTOR",
    "COMPACT_HEADROOM",
    "COMPACT_MIN_BYTES",
    "LOCK_NAME",
    "MAGIC",
    "Journal",
    "StoreError",
    "journal_files",
    "read_only",
    "replay",
    "salvage_directory",
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


def replay(path: str, state: State) -> tuple[int, int]:
    """Replay the journal file ``path`` into ``state``: (length of its valid prefix, file length);
    :class:`~.recovery.CorruptJournal` if it is damaged before its end."""
    found = scan(path, state)
    return found.valid, found.size


def read_only(directory: str) -> tuple[str, State]:
    """The newest journal of ``directory`` and what it holds, read without taking the
    directory's lock or changing anything (a running broker may be writing it)."""
    files = journal_files(directory)
    if not files:
        raise StoreError(f"{directory!r} holds no amqplink journal")
    path = files[-1][1]
    state = State()
    replay(path, state)
    return path, state


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


def salvage_directory(directory: str) -> dict[str, object]:
    """``broker-store DIR --salvage``: make a damaged data directory readable again, keeping a
    copy of what it changes (``*.damaged``) and saying what is lost. A newest file that is not a
    journal (empty, stray) is moved aside when an older journal is there (which is then read);
    a corrupt journal is rewritten with every valid batch (:func:`~.recovery.salvage`).
    Refused while a broker holds the directory."""
    lock = take_lock(directory)
    try:
        files = journal_files(directory)
        if not files:
            raise StoreError(f"{directory!r} holds no amqplink journal")
        moved: list[dict[str, str]] = []
        while True:
            path = files[-1][1]
            try:
                scan(path, State())
            except CorruptJournal:
                return {"moved_aside": moved, **salvage(path)}
            except StoreError:
                if len(files) == 1:
                    return {"moved_aside": moved, **salvage(path)}
                kept = unused(path + ".damaged")
                os.rename(path, kept)
                sync_directory(directory)
                moved.append({"file": path, "kept_as": kept})
                files.pop()
                continue
            return {"moved_aside": moved, "journal": path, "lost": "nothing" if not moved else "the files moved aside"}
    finally:
        os.close(lock)


def _name(directory: str, number: int) -> str:
    return os.path.join(directory, f"journal-{number:08d}.log")


class Journal:
    """One data directory's journal: read on the opening thread, written by the writer thread."""

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.directory = os.fspath(directory)
        self._sync = os.fdatasync if fsync else _no_sync
        os.makedirs(self.directory, exist_ok=True)
        self._lock = take_lock(self.directory)
        self._broken: OSError | None = None
        self.space: int | None = None
        """Bytes this journal may still write, as if the disk had no more (None: as the disk
        has). A seam for fault tests: a write past it writes what fits, then fails with
        ``ENOSPC``, as on a full disk; set it again to free space."""
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
        if not files:
            self._remove_leftovers([])
            self.number, self._fd, self.size = 0, -1, 0
            self.path = _name(self.directory, 1)
            self._replace([])
            return
        self.number, self.path = files[-1]
        found = scan(self.path, self.state)  # (raises, having changed nothing, if it cannot be read back)
        # Read back: only now is anything removed or cut.
        self._remove_leftovers(files[:-1])
        self.size = found.valid
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        if found.torn:
            self._cut(found)

    def _remove_leftovers(self, older: list[tuple[int, str]]) -> None:
        """Remove what a compaction left: its ``.tmp`` (interrupted: the file read is whole) and
        the files it superseded (it finished: only the newest is read)."""
        for name in os.listdir(self.directory):
            if name.endswith(".log.tmp"):
                os.unlink(os.path.join(self.directory, name))
        for _, path in older:
            os.unlink(path)

    def _cut(self, found: Scan) -> None:
        log.warning(
            "%s: the last %d bytes (from offset %d) were a torn write (no valid batch after them) and are dropped",
            found.path, found.torn, found.valid,
        )  # fmt: skip
        os.ftruncate(self._fd, self.size)
        self._sync(self._fd)

    # -- writing (writer thread) --------------------------------------------------
    def append(self, records: Sequence[bytes]) -> None:
        """Write one batch and flush it to disk. On an error (a full disk) the file is cut back
        to the batches before, so that later batches do not follow a torn one; when even that
        fails, every later append fails too (the store refuses work rather than lose it)."""
        if self._broken is not None:
            raise StoreError(f"{self.path!r} could not be repaired after a failed write ({self._broken})")
        body = b"".join(records)
        head = frame_head(body)  # (binascii's CRC keeps the GIL: no hand-over)
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

    def compact(self, records: Sequence[bytes]) -> bool:
        """Replace the journal by one holding only ``records`` (the whole live state, starting
        with a reset record); False when it was not (logged: the disk has no room for the copy,
        or making it failed), and the next compaction waits until the file has grown as much
        again. The journal is unchanged then: the caller appends what it had to write instead."""
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
        path = _name(self.directory, number)
        tmp = path + ".tmp"
        body = b"".join(records)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        head = MAGIC + frame_head(body) if body else MAGIC
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
        self._fd, self.number, self.path = fd, number, path
        self.size = self.base_size = len(head) + len(body)
        if old_fd >= 0:
            os.close(old_fd)
            try:  # (left behind, it is removed on the next start: only the newest file is read)
                os.unlink(_name(self.directory, old_number))
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
        """Close the file and give up the directory's lock (another broker may then open it)."""
        if self._fd >= 0:
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
