"""Group commit: the changes of one event-loop turn (or of the time the previous commit
took) become one transaction on a writer thread; then the callbacks waiting on them run.

The event loop never touches the disk. A change is recorded in the pending batch
(a dict by row, so a message stored and completed before its batch is written costs
nothing at all); when the loop has nothing more to do in this turn the batch goes to
the writer thread, and while it is being written the next one fills. Batches are
written in order, so a callback runs only after every change recorded before it is
on disk.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable

from amqplink.broker.durable.database import SEQ_BITS, Batch, Database, row_key
from amqplink.broker.namespace.store import MessageState, StoredMessage

__all__ = ["STATE_CODES", "Committed", "GroupCommit"]

log = logging.getLogger(__name__)

STATE_CODES = {MessageState.AVAILABLE: 0, MessageState.LOCKED: 1, MessageState.DEFERRED: 2, MessageState.SCHEDULED: 3}

Committed = Callable[[BaseException | None], None]
"""Called on the event loop once the changes recorded before it are written (or failed)."""

_INSERT, _UPDATE, _DELETE = 0, 1, 2

LAZY_WRITE_DELAY = 0.05
"""Seconds a change nobody waits for (a lock taken: the delivery count) may stay pending,
so that the completion which usually follows replaces it before it is written."""


class GroupCommit:
    """The loop's side of the writer: records changes, hands batches over, runs callbacks."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self._ops: dict[int, tuple[int, StoredMessage | None]] = {}
        """Row key -> (what, message): the pending batch's message changes, coalesced."""
        self._fresh: set[int] = set()
        """Row keys inserted in the pending batch that no earlier batch wrote."""
        self._extra = Batch()
        self._sequences: dict[int, Callable[[], int]] = {}
        self._callbacks: list[Committed] = []
        self._in_flight = False
        self._scheduled = False
        self._lazy: asyncio.TimerHandle | None = None
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: asyncio.Event | None = None
        self._queue: queue.SimpleQueue[tuple[Batch, list[Committed]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._write, name="amqplink-store-writer", daemon=True)
        self._thread.start()

    # -- recording (event loop) ---------------------------------------------------
    def insert(self, entity: int, message: StoredMessage, fresh: bool) -> None:
        """A message stored (``fresh``: under a sequence number never written before)."""
        key = row_key(entity, message.sequence_number)
        self._ops[key] = (_INSERT, message)
        if fresh:
            self._fresh.add(key)
        self.kick()

    def update(self, entity: int, message: StoredMessage, envelope: bool) -> None:
        """A message's state (``envelope``: also its bytes) changed."""
        key = row_key(entity, message.sequence_number)
        if key not in self._ops:
            self._ops[key] = (_INSERT if envelope else _UPDATE, message)
            if envelope:
                self.kick()
            elif self._lazy is None and not self._scheduled and self._loop is not None:
                self._lazy = self._loop.call_later(LAZY_WRITE_DELAY, self.kick)
        elif envelope:
            self._ops[key] = (_INSERT, message)

    def delete(self, entity: int, sequence_number: int) -> None:
        key = row_key(entity, sequence_number)
        if key in self._fresh:  # never written: nothing to delete
            self._fresh.discard(key)
            del self._ops[key]
            return
        self._ops[key] = (_DELETE, None)
        self.kick()

    def sequence(self, entity: int, next_sequence: Callable[[], int]) -> None:
        """Write the entity's next sequence number (as ``next_sequence()`` tells it then) with this batch."""
        if entity not in self._sequences:
            self._sequences[entity] = next_sequence
            self.kick()

    @property
    def extra(self) -> Batch:
        """The pending batch's other rows (entities, session state, duplicate ids): append, then :meth:`kick`."""
        return self._extra

    def after_commit(self, callback: Committed) -> None:
        """Run ``callback`` once everything recorded so far is written."""
        self._callbacks.append(callback)
        self.kick()

    def kick(self) -> None:
        """Have the pending batch written at the end of this loop turn (or after the one in flight)."""
        if self._scheduled or self._in_flight:
            return
        if self._loop is None:
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:  # before the broker runs: written with the first batch in it
                return
        self._scheduled = True
        self._loop.call_soon(self._flush)

    # -- handing over -------------------------------------------------------------
    def _take(self) -> Batch:
        batch, self._extra = self._extra, Batch()
        codes = STATE_CODES
        for key, (what, msg) in self._ops.items():
            if what == _DELETE or msg is None:
                batch.deletes.append((key,))
                continue
            state = (
                codes[msg.state], msg.delivery_count, int(msg.deferred), msg.enqueued_at, msg.expires_at,
                msg.scheduled_at,
            )  # fmt: skip
            if what == _INSERT:
                batch.inserts.append((key, key >> SEQ_BITS, msg.sequence_number, *state, msg.envelope))
            else:
                batch.updates.append((*state, key))
        batch.sequences = [(next_sequence(), entity) for entity, next_sequence in self._sequences.items()]
        self._ops = {}
        self._fresh = set()
        self._sequences = {}
        return batch

    def _flush(self) -> None:
        self._scheduled = False
        if self._lazy is not None:
            self._lazy.cancel()
            self._lazy = None
        if self._in_flight or not (self._ops or self._callbacks or self._sequences or _has_rows(self._extra)):
            return
        callbacks, self._callbacks = self._callbacks, []
        self._in_flight = True
        self._queue.put((self._take(), callbacks))

    def _write(self) -> None:
        """The writer thread: one transaction per batch, in order."""
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch, callbacks = item
            error: BaseException | None = None
            try:
                self.database.apply(batch)
            except Exception as exc:
                log.error("the broker's store %r could not write a batch: %s", self.database.path, exc)
                error = exc
            assert self._loop is not None
            try:
                self._loop.call_soon_threadsafe(self._committed, callbacks, error)
            except RuntimeError:  # the loop is closed: nobody waits any more
                return

    def _committed(self, callbacks: list[Committed], error: BaseException | None) -> None:
        self._in_flight = False
        for callback in callbacks:
            try:
                callback(error)
            except Exception:
                log.exception("a callback after a store commit failed")
        if self._ops or self._callbacks or self._sequences or _has_rows(self._extra):
            self._flush()  # it filled while the last one was written: no need to wait a turn
        elif self._idle is not None:
            self._idle.set()

    async def close(self) -> None:
        """Write what is pending, stop the writer thread, close the file."""
        if self._closed:
            return
        self._closed = True
        while self._in_flight or self._ops or self._callbacks or self._sequences or _has_rows(self._extra):
            self._idle = asyncio.Event()
            if not self._in_flight:
                self._flush()
            await self._idle.wait()
        await asyncio.to_thread(self._stop)  # closing checkpoints the WAL: not on the loop

    def close_now(self) -> None:
        """Stop without an event loop (nothing was recorded, or the loop is gone)."""
        if not self._closed:
            self._closed = True
            self._stop()

    def _stop(self) -> None:
        self._queue.put(None)
        self._thread.join()
        self.database.close()


def _has_rows(batch: Batch) -> bool:
    return bool(batch.entities or batch.sessions or batch.duplicates or batch.purge_duplicates_before is not None)
