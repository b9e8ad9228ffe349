"""The id window of a de-duplicating consumer, usable on its own.

Seed 003 (active replication): "the receiver must maintain a list of messages that it
has already received" so that "the receiver processes the first copy of a message, and
the second copy is suppressed". :class:`Deduplicator` is that list, bounded two ways:
it remembers at most ``max_count`` ids, and forgets an id ``window`` seconds after it
was first seen. With ``path`` it also keeps the list in a small SQLite file (WAL, the
same bounds, pruned as it goes) so that a restarted consumer still knows what it saw.

The bounds are the trade-off: a copy that arrives more than ``window`` after the first,
or after ``max_count`` newer ids pushed the first out, is not recognised
(:attr:`Deduplicator.evicted` counts ids pushed out by the count bound before their
window ended; a non-zero value says ``max_count`` is too small for the traffic).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import sqlite3

__all__ = ["DEFAULT_MAX_COUNT", "DEFAULT_WINDOW", "DedupCounters", "Deduplicator"]

log = logging.getLogger(__name__)

DEFAULT_MAX_COUNT = 100_000
"""Ids remembered at most (about 10 MB of memory with 36-character ids)."""
DEFAULT_WINDOW = 600.0
"""Seconds an id is remembered: the longest expected delay between two copies."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS seen (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    at REAL NOT NULL
)
"""


class DedupCounters(NamedTuple):
    """What a :class:`Deduplicator` has done since it was created (not persisted)."""

    unique: int
    """Ids seen for the first time (within the window)."""
    duplicates_removed: int
    """Calls of :meth:`Deduplicator.seen` that answered True."""
    expired: int
    """Ids forgotten because their window ended."""
    evicted: int
    """Ids forgotten before their window ended, to stay within ``max_count``."""


class _Entry(NamedTuple):
    at: float
    seq: int


class Deduplicator:
    """Which message ids were seen in the last ``window`` seconds (at most ``max_count``).

    ``seen(id)`` answers whether ``id`` was recorded and not yet forgotten, and records it
    if not: the first call for an id answers False, later calls within the window True.
    An id is forgotten ``window`` seconds after its first sighting (a repeat does not
    extend it: the window bounds the delay between copies, as Service Bus's own
    duplicate-detection window does), or earlier when ``max_count`` newer ids arrived.

    ``clock`` gives seconds (default: wall-clock ``time.time``, so that the windows of a
    durable list still mean something after a restart); a clock stepping back does not
    reorder the list (an id's time is never before the previous id's).

    ``path``: keep the list in that SQLite file (created if missing; WAL journal). Each new
    id is committed before :meth:`seen` returns, so a consumer that crashes after
    processing a message still finds its id on restart. ``synchronous_full=True`` also
    makes the commit survive an OS crash or power loss (an fsync per id); by default
    (``synchronous=NORMAL``) it survives the process, not the machine. The file holds
    the same bounded list as memory: expired and evicted ids are deleted from it.

    Thread-safe. Use as a context manager or call :meth:`close` to close the file.
    """

    def __init__(
        self,
        max_count: int = DEFAULT_MAX_COUNT,
        window: float | dt.timedelta = DEFAULT_WINDOW,
        *,
        path: str | os.PathLike[str] | None = None,
        clock: Callable[[], float] = time.time,
        synchronous_full: bool = False,
    ) -> None:
        seconds = window.total_seconds() if isinstance(window, dt.timedelta) else float(window)
        if not isinstance(max_count, int) or max_count < 1:
            raise ValueError(f"Deduplicator max_count must be a positive int, not {max_count!r}")
        if not seconds > 0:
            raise ValueError(f"Deduplicator window must be positive seconds, not {window!r}")
        self.max_count = max_count
        self.window = seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._ids: OrderedDict[str, _Entry] = OrderedDict()
        self._last_at = float("-inf")
        self._next_seq = 1
        self._unique = self._duplicates = self._expired = self._evicted = 0
        self._db: sqlite3.Connection | None = None
        self.path = None if path is None else os.fspath(path)
        if self.path is not None:
            self._open(self.path, synchronous_full)

    # -- the one question -------------------------------------------------------------

    def seen(self, message_id: str) -> bool:
        """True if ``message_id`` was seen within the window (a duplicate); else record it."""
        key = _key(message_id)
        with self._lock, self._transaction():
            now = self._now()
            self._expire(now)
            return self._seen(key, now)

    def seen_many(self, message_ids: Iterable[str]) -> list[bool]:
        """:meth:`seen` for each id in turn (a repeat within the batch is a duplicate), at one
        clock reading and in one SQLite transaction (one commit for the batch)."""
        keys = [_key(message_id) for message_id in message_ids]
        with self._lock, self._transaction():
            now = self._now()
            self._expire(now)
            return [self._seen(key, now) for key in keys]

    def __contains__(self, message_id: object) -> bool:
        """Whether the id is remembered, without recording it."""
        if not isinstance(message_id, str):
            return False
        with self._lock, self._transaction():
            self._expire(self._now())
            return message_id in self._ids

    def forget(self, message_id: str) -> bool:
        """Forget one id (a message whose processing failed and will come again); True if it was known."""
        key = _key(message_id)
        with self._lock, self._transaction():
            entry = self._ids.pop(key, None)
            if entry is None:
                return False
            if self._db is not None:
                self._db.execute("DELETE FROM seen WHERE seq = ?", (entry.seq,))
            return True

    def __len__(self) -> int:
        with self._lock, self._transaction():
            self._expire(self._now())
            return len(self._ids)

    @property
    def counters(self) -> DedupCounters:
        """Unique ids, duplicates removed, ids expired and evicted, since creation."""
        with self._lock:
            return DedupCounters(self._unique, self._duplicates, self._expired, self._evicted)

    @property
    def duplicates_removed(self) -> int:
        """How many times :meth:`seen` answered True."""
        return self._duplicates

    def __repr__(self) -> str:
        where = f", path={self.path!r}" if self.path is not None else ""
        return f"Deduplicator(max_count={self.max_count}, window={self.window:g}{where}, remembered={len(self._ids)})"

    # -- bookkeeping -------------------------------------------------------------------

    def _now(self) -> float:
        self._last_at = max(self._last_at, float(self._clock()))
        return self._last_at

    def _transaction(self) -> AbstractContextManager[object]:
        """The SQLite file's transaction for one call (committed at its end), if there is a file."""
        return self._db if self._db is not None else contextlib.nullcontext()

    def _seen(self, key: str, now: float) -> bool:
        if key in self._ids:
            self._duplicates += 1
            return True
        self._record(key, now)
        return False

    def _record(self, key: str, now: float) -> None:
        seq = self._next_seq
        self._next_seq += 1
        self._ids[key] = _Entry(now, seq)
        self._unique += 1
        dropped = 0
        while len(self._ids) > self.max_count:
            self._ids.popitem(last=False)
            dropped += 1
        self._evicted += dropped
        if self._db is not None:
            self._db.execute("INSERT OR REPLACE INTO seen (seq, id, at) VALUES (?, ?, ?)", (seq, key, now))
            if dropped:
                self._delete_before(next(iter(self._ids.values())).seq)

    def _expire(self, now: float) -> None:
        dropped = 0
        while self._ids:
            entry = next(iter(self._ids.values()))
            if now - entry.at < self.window:
                break
            self._ids.popitem(last=False)
            dropped += 1
        if dropped:
            self._expired += dropped
            if self._db is not None:
                self._delete_before(next(iter(self._ids.values())).seq if self._ids else self._next_seq)

    def _delete_before(self, seq: int) -> None:
        assert self._db is not None
        self._db.execute("DELETE FROM seen WHERE seq < ?", (seq,))

    # -- the file ----------------------------------------------------------------------

    def _open(self, path: str, synchronous_full: bool) -> None:
        import sqlite3

        try:
            db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise OSError(f"Deduplicator cannot open its SQLite file {path!r}: {exc}") from exc
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={'FULL' if synchronous_full else 'NORMAL'}")
            db.execute(_SCHEMA)
            rows = db.execute("SELECT seq, id, at FROM seen ORDER BY seq").fetchall()
        except sqlite3.Error as exc:
            db.close()
            raise OSError(f"Deduplicator cannot use {path!r} (not its SQLite file?): {exc}") from exc
        db.isolation_level = "DEFERRED"  # `with db:` then makes one transaction per call
        for seq, key, at in rows:
            self._ids[key] = _Entry(float(at), int(seq))
            self._last_at = max(self._last_at, float(at))
            self._next_seq = max(self._next_seq, int(seq) + 1)
        self._db = db
        with db:  # pruned to the bounds of this run
            self._expire(self._now())
            excess = len(self._ids) - self.max_count
            if excess > 0:  # max_count lowered since the file was written
                for _ in range(excess):
                    self._ids.popitem(last=False)
                self._evicted += excess
                self._delete_before(next(iter(self._ids.values())).seq)
        log.info("Deduplicator: %d ids remembered from %s", len(self._ids), path)

    def close(self) -> None:
        """Close the SQLite file (the in-memory list stays usable, no longer durable)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __enter__(self) -> Deduplicator:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _key(message_id: object) -> str:
    if not isinstance(message_id, str) or not message_id:
        raise TypeError(f"Deduplicator ids are non-empty strings, not {message_id!r}")
    return message_id
