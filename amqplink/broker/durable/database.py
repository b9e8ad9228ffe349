"""The durable store's file: one SQLite database in WAL mode, written in batches.

Why SQLite rather than a hand-written append-only journal (``interop/bench_store.py``
measures both write paths): a journal appends and fsyncs faster on its own (about
2-5x here), but the broker is bound by its event loop and the commit latency, not by
the raw write path (a WAL commit is also one sequential append plus one fsync), and
SQLite already does what a journal would have to add by hand: it checksums every WAL
frame and drops a torn tail on open ("if the checksums do not match, the frame and
all later frames are ignored", sqlite.org/wal), makes one batch over many entities
atomic, compacts by checkpointing instead of rewriting live state from the event
loop, and leaves a file users can open with ``sqlite3``. Each batch is one
transaction (group commit), written with multi-row statements.

Tables: ``entities`` (path, next sequence number), ``messages`` (one row per stored
message, its state and its encoded bytes), ``session_state``, ``duplicates``
(message ids within the duplicate-detection window).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DB_NAME", "Batch", "Database", "MessageRow", "StoreError"]

log = logging.getLogger(__name__)

DB_NAME = "broker.sqlite3"
"""The file under ``--data-dir`` (with SQLite's ``-wal`` and ``-shm`` beside it)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entities(
    id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, next_sequence INTEGER NOT NULL DEFAULT 1);
CREATE TABLE IF NOT EXISTS messages(
    key INTEGER PRIMARY KEY, entity INTEGER NOT NULL, seq INTEGER NOT NULL, state INTEGER NOT NULL,
    delivery_count INTEGER NOT NULL, deferred INTEGER NOT NULL, enqueued_at REAL NOT NULL,
    expires_at REAL, scheduled_at REAL, payload BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS session_state(
    entity INTEGER NOT NULL, session_id TEXT NOT NULL, state BLOB NOT NULL, PRIMARY KEY(entity, session_id));
CREATE TABLE IF NOT EXISTS duplicates(
    entity INTEGER NOT NULL, message_id BLOB NOT NULL, seen_at REAL NOT NULL, expires_at REAL NOT NULL,
    PRIMARY KEY(entity, message_id));
"""

ROWS_PER_STATEMENT = 1000
"""Rows one multi-row statement writes at most (10 columns: 10,000 of SQLite's 32,766 parameters)."""
STATEMENT_CACHE = 16
"""Compiled statements the connection keeps (multi-row ones are large)."""
_INSERT = ("INSERT OR REPLACE INTO messages VALUES ", "")
_UPDATE = (
    "UPDATE messages SET state = v.column1, delivery_count = v.column2, deferred = v.column3,"
    " enqueued_at = v.column4, expires_at = v.column5, scheduled_at = v.column6 FROM (VALUES ",
    ") AS v WHERE messages.key = v.column7",
)
_DELETE = ("DELETE FROM messages WHERE key IN (VALUES ", ")")

SEQ_BITS = 40
"""A message's row key is ``entity << SEQ_BITS`` plus the low ``SEQ_BITS`` bits of its
sequence number (:func:`row_key`); the whole number has a column of its own."""
_SEQ_MASK = (1 << SEQ_BITS) - 1


def row_key(entity: int, sequence_number: int) -> int:
    """The row key of a message: a partitioned entity's fragment numbers its messages from
    ``i << 48`` (its own entity id here), so only the low bits tell them apart, and the key
    stays within SQLite's 64-bit integers."""
    return entity << SEQ_BITS | (sequence_number & _SEQ_MASK)

MessageRow = tuple[int, int, int, int, int, float, float, float | None, bytes]
"""(entity, seq, state, delivery_count, deferred, enqueued_at, expires_at, scheduled_at, payload)."""


class StoreError(Exception):
    """The data directory cannot be used (names the file and what to do)."""


@dataclass(slots=True)
class Batch:
    """What one transaction writes. Rows are built on the event loop; payloads are
    encoded on the writer thread (``encode`` is called there)."""

    entities: list[tuple[int, str]] = field(default_factory=list)
    inserts: list[tuple[Any, ...]] = field(default_factory=list)
    """(key, entity, seq, state, delivery_count, deferred, enqueued_at, expires_at, scheduled_at, envelope)."""
    updates: list[tuple[Any, ...]] = field(default_factory=list)
    """(state, delivery_count, deferred, enqueued_at, expires_at, scheduled_at, key)."""
    deletes: list[tuple[int]] = field(default_factory=list)
    sequences: list[tuple[int, int]] = field(default_factory=list)
    sessions: list[tuple[int, str, bytes | None]] = field(default_factory=list)
    duplicates: list[tuple[int, bytes, float, float]] = field(default_factory=list)
    purge_duplicates_before: float | None = None


def _real(value: float) -> float | None:
    return None if value == math.inf else value


class Database:
    """The SQLite file: opened (and read) on the caller's thread, written by :meth:`apply`
    on the writer thread only."""

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = True) -> None:
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(os.fspath(directory), DB_NAME)
        try:
            # Few cached statements: a multi-row statement is compiled per row count.
            self._db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, cached_statements=STATEMENT_CACHE
            )
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open the broker's store {self.path!r}: {exc}") from None
        with self.reading():
            # One broker per directory: the first write takes a lock held until close, so a
            # second broker on the same directory fails at once instead of mixing its writes.
            self._db.execute("PRAGMA locking_mode=EXCLUSIVE")
            self._db.execute("PRAGMA journal_mode=WAL")
            # FULL: the WAL is fsynced at every commit (survives power loss); NORMAL: a
            # process crash loses nothing, a power cut may lose the last commits.
            self._db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")
            self._db.executescript(_SCHEMA)

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Turn SQLite's errors while opening or reading the file into a :class:`StoreError` naming it."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            self._db.close()
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise StoreError(
                    f"the broker's store {self.path!r} is in use by another broker: give each its own --data-dir"
                ) from None
            raise StoreError(
                f"cannot read the broker's store {self.path!r} ({exc}); move the directory away to start empty"
            ) from None

    # -- reading (at start) -------------------------------------------------------
    def entities(self) -> list[tuple[int, str, int]]:
        """(id, path, next sequence number) of every entity ever stored."""
        return list(self._db.execute("SELECT id, path, next_sequence FROM entities ORDER BY id"))

    def messages(self) -> Iterator[MessageRow]:
        """Every stored message, by entity and sequence number."""
        rows = self._db.execute(
            "SELECT entity, seq, state, delivery_count, deferred, enqueued_at, expires_at, scheduled_at, payload"
            " FROM messages ORDER BY key"
        )
        for row in rows:
            yield (*row[:6], math.inf if row[6] is None else row[6], row[7], row[8])

    def session_states(self) -> list[tuple[int, str, bytes]]:
        return list(self._db.execute("SELECT entity, session_id, state FROM session_state"))

    def duplicate_ids(self, now: float) -> list[tuple[int, bytes, float]]:
        """Ids still within their window, oldest first."""
        return list(
            self._db.execute(
                "SELECT entity, message_id, seen_at FROM duplicates WHERE expires_at > ? ORDER BY seen_at", (now,)
            )
        )

    # -- writing (writer thread) --------------------------------------------------
    def apply(self, batch: Batch) -> None:
        """Write one batch in one transaction (all of it or, on an error, none)."""
        db = self._db
        db.execute("BEGIN")
        try:
            if batch.entities:
                db.executemany("INSERT OR IGNORE INTO entities(id, path) VALUES (?, ?)", batch.entities)
            if batch.inserts:
                self._many(_INSERT, 10, [(*r[:7], _real(r[7]), r[8], r[9].encode()) for r in batch.inserts])
            if batch.updates:
                self._many(_UPDATE, 7, [(*r[:4], _real(r[4]), r[5], r[6]) for r in batch.updates])
            if batch.deletes:
                self._many(_DELETE, 1, batch.deletes)
            if batch.sequences:
                db.executemany("UPDATE entities SET next_sequence = ? WHERE id = ?", batch.sequences)
            for entity, session_id, state in batch.sessions:
                if state is None:
                    db.execute("DELETE FROM session_state WHERE entity = ? AND session_id = ?", (entity, session_id))
                else:
                    db.execute("INSERT OR REPLACE INTO session_state VALUES (?, ?, ?)", (entity, session_id, state))
            if batch.duplicates:
                db.executemany("INSERT OR REPLACE INTO duplicates VALUES (?, ?, ?, ?)", batch.duplicates)
            if batch.purge_duplicates_before is not None:
                db.execute("DELETE FROM duplicates WHERE expires_at <= ?", (batch.purge_duplicates_before,))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def _many(self, template: tuple[str, str], width: int, rows: list[tuple[Any, ...]]) -> None:
        """Run a statement over ``rows``, up to :data:`ROWS_PER_STATEMENT` rows per statement:
        SQLite lets go of the GIL once per statement, not once per row, so the event loop's
        thread and this one do not hand the GIL back and forth for every message."""
        db = self._db
        for start in range(0, len(rows), ROWS_PER_STATEMENT):
            chunk = rows[start : start + ROWS_PER_STATEMENT]
            one = "(" + ", ".join("?" * width) + ")"
            sql = template[0] + ", ".join([one] * len(chunk)) + template[1]
            db.execute(sql, [value for row in chunk for value in row])

    def close(self) -> None:
        self._db.close()
