"""Group commit: the changes of one event-loop turn become one batch handed to a writer
thread, which writes every batch handed over while it was busy as one append and one
flush (pipelined group commit); then the callbacks waiting on them run.

The event loop never touches the disk. A change is recorded in the pending batch
(a dict by message: later changes of a message replace earlier ones); a message stored
since the last batch is not recorded at all: its store hands the batch the messages it
took since then, as they are when the batch is taken (:meth:`GroupCommit.fresh`), so a
message stored and completed in the same turn costs nothing at all. At the end of the
loop turn the batch goes to the writer thread's queue, whether or not a write is under
way, so neither side waits for the other: the writer takes everything queued at once,
and the loop never waits for a commit to hand over the next one. Batches are written
in order, so a callback runs only after every change recorded before it is on disk; a
batch that records nothing is not written at all (its callbacks only wait for the ones
before it, and are refused with one that failed).

A write that fails (a full disk) leaves the journal as it was before it (it is cut back)
and takes back everything not yet on disk: the writer refuses every batch queued behind
the failed one (they would follow a gap) until the loop has seen the failure; the loop
then takes the pending batch too, and hands the records of all those batches to
:attr:`GroupCommit.roll_back` (the owner makes the messages, session states and duplicate
ids they touched what the journal holds), refuses their callbacks, and lets the writer go
on. So a refused send, settlement or request leaves nothing behind, in memory or on disk,
and the next batch that fits is written (no room for anything more is needed).

The writer thread also keeps the journal's recovery point (:mod:`.checkpoint`): the journal
writes it after a batch once a second has passed since the last, and the writer, idle
after a batch, wakes within that second to write it (:meth:`.journal.Journal.checkpoint_wait`),
so the loop never waits for it.

Records are packed on the loop, by :mod:`.records`' writers (one ``struct.pack`` per
change, the message's bytes as the envelope holds them); the writer thread only joins them, appends and
flushes, all of which let go of the GIL, so the two threads hardly contend for it.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import queue
import threading
from collections.abc import Callable

from amqplink.broker.durable import journal as _journal
from amqplink.broker.durable.journal import Journal
from amqplink.broker.durable.records import (
    STATE_CODES,
    atomic_record,
    changed_record,
    gone_record,
    message_records,
    messages_records,
    sequence_record,
)
from amqplink.broker.namespace.store import MessageState, StoredMessage

__all__ = [
    "DRAINING_COMPACT_FACTOR",
    "LIVE_CHECK_BYTES",
    "STATE_CODES",
    "Committed",
    "FreshWriter",
    "GroupCommit",
    "entity_key",
    "message_records",
    "messages_records",
]
"""``STATE_CODES`` and the message records' writers are :mod:`.records`' (where every record
kind is written and read); they stay importable from here, where they were before."""

log = logging.getLogger(__name__)

Committed = Callable[[BaseException | None], None]
"""Called on the event loop once the changes recorded before it are written (or failed)."""
FreshWriter = Callable[[list[bytes] | None], None]
"""A store's messages taken since the last batch: appends their records to the list given
(None: a compaction wrote the whole state); then they count as written (:meth:`GroupCommit.fresh`)."""

_KEY_BITS = 64
"""A pending change is keyed by ``entity << 64 | sequence number``: an int, which the garbage
collector does not track (a tuple per change made it run about three times as often)."""
_SEQ_MASK = (1 << _KEY_BITS) - 1

LIVE_CHECK_BYTES = 1 << 20
"""Once a journal could be compacted but is mostly live, the live state is measured again
after it has grown this much (measuring visits every entity)."""

DRAINING_COMPACT_FACTOR = 8
"""While the live state shrinks from one measure to the next (a backlog being drained), a
compaction waits, getting cheaper with every message settled, until the journal is this many
times larger than the live state (rewriting a backlog that is about to be settled is wasted)."""

LAZY_WRITE_DELAY = 0.05
"""Seconds a change nobody waits for (a lock taken: the delivery count) may stay pending,
so that the completion which usually follows replaces it before it is written."""


class GroupCommit:
    """The loop's side of the writer: records changes, hands batches over, runs callbacks."""

    def __init__(self, journal: Journal, *, compact_min_bytes: int | None = None) -> None:
        self.journal = journal
        self.compact_min_bytes = _journal.COMPACT_MIN_BYTES if compact_min_bytes is None else compact_min_bytes
        """Journal size below which it is never compacted (default :data:`~.journal.COMPACT_MIN_BYTES`)."""
        self.snapshot: Callable[[], list[bytes]] | None = None
        """The records of the whole live state (set by the owner): what a compaction writes."""
        self.live_bytes: Callable[[], int] | None = None
        """About how many bytes the live state takes in the journal (set by the owner): a journal
        is compacted only once it is :data:`~.journal.COMPACT_FACTOR` times that (a journal that
        is mostly live, as while a backlog builds up, gains nothing from being rewritten)."""
        self._check_at = 0
        self._live_seen = 0
        """What :attr:`live_bytes` said when last asked."""
        """Journal size below which :attr:`live_bytes` is not asked again."""
        self.before_take: Callable[[], None] | None = None
        """Called before a batch is taken (the owner records what it kept back until then)."""
        self.ops: dict[int, StoredMessage | None] = {}
        """Key (:func:`entity_key` ``| sequence number``) -> the message stored or changed (``None``:
        gone): the pending batch's changes, coalesced. The same dict for ever (cleared when taken)."""
        self._state_only: set[int] = set()
        """Keys of :attr:`ops` whose message's state changed but not its bytes (written without them)."""
        self._fresh: list[FreshWriter] = []
        """The stores that took messages since the last batch (:meth:`fresh`)."""
        self._extra: list[bytes] = []
        self._sequences: dict[int, Callable[[], int]] = {}
        self._callbacks: list[Committed] = []
        self.taken = 0
        """How many batches were handed to the writer: a callback registered while it stays the
        same runs after everything recorded until it changes is written (callers group the
        work of one commit, as the transfers to settle, behind one callback that way)."""
        self._in_flight = 0
        """Batches handed to the writer whose callbacks have not run yet."""
        self._records: collections.deque[list[bytes]] = collections.deque()
        """The records of the batches in flight, oldest first (what a failed write takes back)."""
        self._batches_handed = 0
        """Batches handed to the writer so far (its results come back in this order)."""
        self._done = 0
        """Batches whose results came back."""
        self.last_error: BaseException | None = None
        """The outcome of the last batch written (None: it was)."""
        self._taken_back = 0
        """Batches up to this one (of :attr:`_batches_handed`) were taken back after a failed write: their
        refusals need no other roll-back."""
        self.roll_back: Callable[[list[list[bytes]]], None] | None = None
        """Set by the owner: make what the records of these batches (none of them written) changed
        what the journal holds (called on the loop while the writer waits)."""
        self._scheduled = False
        self._lazy: asyncio.TimerHandle | None = None
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wait_for_bind = False
        self._idle: asyncio.Event | None = None
        self._queue: queue.SimpleQueue[_Batch | str | None] = queue.SimpleQueue()
        self._refusing: BaseException | None = None
        """(writer thread) A write failed: the batches behind it are refused until the loop took
        them back (:data:`_RESUME`)."""
        self._thread = threading.Thread(target=self._write, name="amqplink-store-writer", daemon=True)
        self._thread.start()

    # -- recording (event loop) ---------------------------------------------------
    def fresh(self, writer: FreshWriter) -> None:
        """A store took a message, the first since the batch before: ``writer`` appends the
        records of what it took since then when the pending batch is taken. (Such a message
        is in no batch yet: its changes until then need no record of their own, and its
        removal none at all.)"""
        self._fresh.append(writer)
        if not self._scheduled:
            self.kick()

    def insert(self, key: int, message: StoredMessage, next_sequence: Callable[[], int] | None = None) -> None:
        """A message stored under ``key`` (:func:`entity_key` ``| sequence number``);
        ``next_sequence`` when its number is new (the entity's next number, as it tells it
        when the batch is taken, is written too)."""
        self.ops[key] = message
        if next_sequence is not None:
            entity = key >> _KEY_BITS
            if entity not in self._sequences:
                self._sequences[entity] = next_sequence
        if self._state_only:
            self._state_only.discard(key)
        if not self._scheduled:
            self.kick()

    def update(self, key: int, message: StoredMessage, envelope: bool) -> None:
        """A message's state (``envelope``: also its bytes) changed."""
        if key not in self.ops:
            self.ops[key] = message
            if envelope:
                self.kick()
                return
            self._state_only.add(key)
            if self._lazy is None and not self._scheduled and self._loop is not None:
                self._lazy = self._loop.call_later(LAZY_WRITE_DELAY, self.kick)
        elif envelope:
            self.ops[key] = message
            self._state_only.discard(key)

    def delete(self, key: int) -> None:
        """The message under ``key`` is gone."""
        self.ops[key] = None
        if self._state_only:
            self._state_only.discard(key)
        if not self._scheduled:
            self.kick()

    def record(self, record: bytes) -> None:
        """Write another record (entity id, session state, duplicate id, definitions) with the pending batch."""
        self._extra.append(record)
        self.kick()

    def carry(self, records: list[bytes]) -> None:
        """Write ``records`` with the next batch (taken back from a failed one; not a batch of
        their own, so that a full disk is not tried again and again for them alone)."""
        self._extra[:0] = records

    def after_commit(self, callback: Committed) -> None:
        """Run ``callback`` once everything recorded so far is written."""
        self._callbacks.append(callback)
        if not self._scheduled:
            self.kick()

    def atomic(self, apply: Callable[[], None]) -> None:
        """Run ``apply`` so that what it records (as any change is recorded) is written as one
        ``A`` record of its own (:func:`~.records.atomic_record`): all of it, or after a crash
        none (a transaction's commit). What was recorded before it is handed over first, as
        the batch before; the callbacks ``apply`` registers, and those registered after it,
        run once the record is written (or refused: a failed write takes it back whole)."""
        if self._pending:
            self._flush()
        apply()
        if self._pending:
            self._flush(atomic=True)

    def wait_for_bind(self) -> None:
        """Hand nothing to the writer until :meth:`bind` names the loop that runs the store:
        an owner made in one event loop and run in another (a broker built in a coroutine and
        served from its own thread) must not have its first batch scheduled on the loop that
        happened to be running when it was built. What is recorded meanwhile goes with the
        first batch after :meth:`bind`."""
        self._wait_for_bind = True

    def bind(self) -> None:
        """(On the loop that runs the store.) Schedule batches on this loop from now on."""
        self._wait_for_bind = False
        self._loop = asyncio.get_running_loop()
        if self._pending:
            self.kick()

    def kick(self) -> None:
        """Have the pending batch handed to the writer at the end of this loop turn."""
        if self._scheduled:
            return
        if self._loop is None:
            if self._wait_for_bind:
                return
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:  # before the broker runs: written with the first batch in it
                return
        self._scheduled = True
        self._loop.call_soon(self._flush)

    # -- handing over -------------------------------------------------------------
    def _take(self) -> list[bytes]:
        records = self._extra
        for writer in self._fresh:
            writer(records)
        append = records.append
        state_only = self._state_only
        # The changes of consecutive keys (consecutive sequence numbers) as runs, each one record:
        # the deletes from key ``gone`` up to ``gone_end``; the state changes from ``changed`` up to
        # ``changed_end``, their fields the same as ``first``'s (kept in locals). Each key is in
        # one change only, so the order of the records does not matter.
        gone = gone_end = changed = changed_end = -1
        first: StoredMessage | None = None
        state, count, deferred, enqueued, expires, at = MessageState.AVAILABLE, 0, False, 0.0, 0.0, None
        for key, msg in self.ops.items():
            if msg is None:
                if key != gone_end:
                    if gone_end >= 0:
                        append(_gone(gone, gone_end))
                    gone = key
                gone_end = key + 1
            elif key not in state_only:
                message_records(records, key >> _KEY_BITS, msg)
            elif (
                key == changed_end
                and msg.state is state
                and msg.delivery_count == count
                and msg.deferred == deferred
                and msg.enqueued_at == enqueued
                and msg.expires_at == expires
                and msg.scheduled_at == at
            ):
                changed_end += 1
            else:
                if changed_end >= 0:
                    append(_changed(changed, changed_end, first))
                changed, changed_end, first = key, key + 1, msg
                state, count, deferred, at = msg.state, msg.delivery_count, msg.deferred, msg.scheduled_at
                enqueued, expires = msg.enqueued_at, msg.expires_at
        if gone_end >= 0:
            append(_gone(gone, gone_end))
        if changed_end >= 0:
            append(_changed(changed, changed_end, first))
        for entity, next_sequence in self._sequences.items():
            append(sequence_record(entity, next_sequence()))
        self._clear()
        return records

    def _clear(self) -> None:
        self.ops.clear()
        self._state_only.clear()
        self._fresh = []
        self._sequences.clear()
        self._extra = []

    def _flush(self, *, atomic: bool = False) -> None:
        self._scheduled = False
        if self._lazy is not None:
            self._lazy.cancel()
            self._lazy = None
        if self.before_take is not None:
            self.before_take()
        if not self._pending:
            return
        callbacks, self._callbacks = self._callbacks, []
        self.taken += 1
        self._in_flight += 1
        self._batches_handed += 1
        snapshot = self.snapshot() if self.snapshot is not None and self._compaction_due() else None
        # (A compaction carries the batch's own records too: written instead if it cannot be made.)
        records = self._take()
        if atomic and records:
            records = atomic_record(records)
        self._records.append(records)
        self._queue.put((snapshot, records, callbacks))

    def _compaction_due(self) -> bool:
        journal = self.journal
        if journal.upgrade_due:  # (a file of an earlier format: rewritten in the current one)
            return True
        if journal.size < self._check_at or not journal.compaction_due(self.compact_min_bytes):
            return False
        if self.live_bytes is not None:
            live = self.live_bytes()
            draining, self._live_seen = live < self._live_seen, live
            factor = DRAINING_COMPACT_FACTOR if draining else _journal.COMPACT_FACTOR
            if journal.size < factor * live:
                self._check_at = journal.size + LIVE_CHECK_BYTES
                return False
        return True

    @property
    def idle(self) -> bool:
        """Nothing recorded waits to be written, and no batch handed over waits for its callbacks."""
        return not self._in_flight and not self._pending

    @property
    def _pending(self) -> bool:
        return bool(self.ops or self._callbacks or self._fresh or self._sequences or self._extra)

    def _write(self) -> None:
        """The writer thread: everything queued meanwhile as one append and one flush, in order."""
        get, get_nowait = self._queue.get, self._queue.get_nowait
        wait_for = self.journal.checkpoint_wait
        while True:
            wait = wait_for()
            try:
                item = get() if wait is None else get(timeout=wait)
            except queue.Empty:  # idle since the last batch: its recovery point is due
                self._checkpoint()
                continue
            batches: list[_Batch | str] = []
            while item is not None:  # take what else is queued (without giving up the GIL)
                batches.append(item)
                try:
                    item = get_nowait()
                except queue.Empty:
                    break
            if batches and not self._write_batches(batches):
                return
            if item is None:  # (close: everything before it is written)
                return

    def _write_batches(self, batches: list[_Batch | str]) -> bool:
        """Write ``batches`` (consecutive appends merged into one) and post each one's callbacks
        and outcome to the loop in one call; False once the loop is closed."""
        results: list[tuple[list[Committed], BaseException | None]] = []
        merged: list[bytes] = []
        waiting: list[list[Committed]] = []
        """The callbacks of the batches merged into ``merged``, not written yet."""
        for batch in batches:
            if batch is _RESUME:
                self._settle(merged, waiting, results)
                self._refusing = None  # the loop took back what the failed write held
                continue
            assert not isinstance(batch, str)
            snapshot, records, done = batch
            if snapshot is not None:
                self._settle(merged, waiting, results)
                results.append((done, self._compact(snapshot, records)))
                continue
            merged += records
            waiting.append(done)
        self._settle(merged, waiting, results)
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(self._committed, results)
        except RuntimeError:  # the loop is closed: nobody waits any more
            return False
        return True

    def _settle(
        self,
        merged: list[bytes],
        waiting: list[list[Committed]],
        results: list[tuple[list[Committed], BaseException | None]],
    ) -> None:
        """Append ``merged`` and note its outcome for each of the batches ``waiting``; both are
        emptied. Nothing to write: nothing done, and no error unless a write before failed and
        is not taken back yet (what these batches answer may rest on what it held: a duplicate
        accepted for a message that write was to store)."""
        if not waiting:
            return
        error = self._append(merged) if merged else self._refusing
        results += [(done, error) for done in waiting]
        merged.clear()
        waiting.clear()

    def _append(self, records: list[bytes]) -> BaseException | None:
        if self._refusing is not None:  # records after a failed write would follow a gap
            return self._refusing
        return self._written(self.journal.append, records)

    def _compact(self, snapshot: list[bytes], records: list[bytes]) -> BaseException | None:
        """Replace the journal by ``snapshot``; when that cannot be done, append ``records``."""
        if self._refusing is not None:
            return self._refusing
        try:
            compacted = self.journal.compact(snapshot)
        except Exception:  # (the journal logs what it can; anything else: appended instead)
            log.exception("the broker's store %r could not be compacted", self.journal.directory)
            compacted = False
        if compacted:
            log.info("store %s compacted to %d bytes", self.journal.path, self.journal.size)
            return None
        return self._append(records) if records else None

    def _written(self, write: Callable[[list[bytes]], None], records: list[bytes]) -> BaseException | None:
        """``write(records)``; the error (logged, and refusing what follows) if it failed."""
        try:
            write(records)
        except Exception as exc:
            self._refusing = exc
            self._write_failed(exc)
            return exc
        return None

    def _checkpoint(self) -> None:
        """(writer thread) Write the journal's recovery point (its failures are the journal's to log)."""
        try:
            self.journal.checkpoint()
        except Exception:
            log.exception("the broker's store %r could not write its recovery point", self.journal.directory)

    def _write_failed(self, exc: BaseException) -> None:
        log.error(
            "the broker's store %r could not write a batch: %s; the operations waiting on it are refused"
            " with amqp:internal-error and have no effect (check the disk)", self.journal.directory, exc,
        )  # fmt: skip

    def _committed(self, results: list[tuple[list[Committed], BaseException | None]]) -> None:
        for callbacks, error in results:
            records = self._records.popleft()
            self._in_flight -= 1
            self._done += 1
            if error is not None and self._done > self._taken_back:
                callbacks = [*callbacks, *self._take_back(records)]
            for callback in callbacks:
                try:
                    callback(error)
                except Exception:
                    log.exception("a callback after a store commit failed")
            self.last_error = error
        if self._idle is not None and not self._in_flight:
            self._idle.set()

    def _take_back(self, failed: list[bytes]) -> list[Committed]:
        """A write failed: everything not on disk is taken back (the batches behind it, which
        the writer refuses, and the pending one); the callbacks of the pending one (refused
        with the rest)."""
        if self.before_take is not None:
            self.before_take()
        callbacks, self._callbacks = self._callbacks, []
        self.taken += 1  # (callbacks registered from now on wait for a batch of their own)
        batches = [failed, *self._records, self._take()]
        self._taken_back = self._batches_handed
        if self.roll_back is not None:
            try:
                self.roll_back(batches)
            except Exception:
                log.exception("the broker's store %r could not take back a failed write", self.journal.directory)
        self._queue.put(_RESUME)
        return callbacks

    async def close(self) -> None:
        """Write what is pending, stop the writer thread, close the file."""
        if self._closed:
            return
        self._closed = True
        self._loop = asyncio.get_running_loop()  # (records made before the loop ran may be all there is)
        if self.before_take is not None:
            self.before_take()
        while self._in_flight or self._pending:
            self._idle = asyncio.Event()
            self._flush()
            await self._idle.wait()
            if self.last_error is not None:  # (taken back: the disk is full; not tried for ever)
                log.error("the broker's store %r was closed without what its last batch held", self.journal.directory)
                break
        await asyncio.to_thread(self._stop)  # joins the writer thread: not on the loop

    def close_now(self) -> None:
        """Stop without an event loop (nothing was recorded, or the loop is gone)."""
        if not self._closed:
            self._closed = True
            self._stop()

    def _stop(self) -> None:
        self._queue.put(None)
        self._thread.join()
        self.journal.close()


def _gone(start: int, end: int) -> bytes:
    """The record of the messages under the keys from ``start`` up to ``end`` gone."""
    return gone_record(start >> _KEY_BITS, start & _SEQ_MASK, end - start)


def _changed(start: int, end: int, msg: StoredMessage | None) -> bytes:
    """The record of the state changes of the messages under the keys from ``start`` up to
    ``end``, their fields now ``msg``'s."""
    assert msg is not None
    return changed_record(start >> _KEY_BITS, start & _SEQ_MASK, end - start, msg)


def entity_key(entity: int) -> int:
    """The high bits of the keys of an entity's messages in :attr:`GroupCommit.ops`."""
    return entity << _KEY_BITS


_Batch = tuple[list[bytes] | None, list[bytes], list[Committed]]
"""(the live state's records when it is a compaction, the batch's records, callbacks): one
batch handed to the writer thread."""
_RESUME = "resume"
"""Handed to the writer after a failed write was taken back: write what follows again."""
