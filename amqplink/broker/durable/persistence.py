"""A namespace kept in a data directory: every entity's messages, settlements, schedules,
deferrals, dead letters, session state and duplicate-detection ids.

:class:`Persistence` opens the directory, reads it back into the namespace's
entities (their indexes are rebuilt by :meth:`Entity.recover`) and from then on
records every change through a :class:`~amqplink.broker.durable.commit.GroupCommit`.
The server settles a transfer (or answers a request) only in
:meth:`Persistence.after_commit`, i.e. once what it caused is on disk.

It also keeps the namespace's entity definitions: queues, topics and subscriptions
made, changed or deleted at run time (the management REST API) come back on start;
an entity the configuration defines is made from the configuration, as it says.
"""

from __future__ import annotations

import logging
import math
import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from amqplink.broker.durable import definitions
from amqplink.broker.durable.commit import Committed, GroupCommit, entity_key
from amqplink.broker.durable.journal import Journal, StoreError
from amqplink.broker.durable.records import (
    MESSAGE,
    RESET_RECORD,
    State,
    Touched,
    definitions_record,
    duplicate_record,
    entity_record,
    message_records,
    messages_records,
    purge_record,
    sequence_record,
    session_record,
    stored_message,
)
from amqplink.broker.durable.recovery import scan
from amqplink.broker.namespace.duplicates import DuplicateDetector
from amqplink.broker.namespace.entity import Entity
from amqplink.broker.namespace.envelope import Envelope
from amqplink.broker.namespace.interface import MessagingEntity
from amqplink.broker.namespace.namespace import (
    AnyQueue,
    AnySubscription,
    Namespace,
    PartitionedQueue,
    Queue,
    Topic,
)
from amqplink.broker.namespace.store import MemoryStore, MessageState, StoredMessage
from amqplink.codec.decode import decode
from amqplink.codec.encode import encode

__all__ = ["DurableStore", "Persistence", "StoreError"]

log = logging.getLogger(__name__)

DUPLICATE_PURGE_INTERVAL = 60.0
"""Seconds between purges of duplicate-detection ids that left their window."""


class DurableStore(MemoryStore):
    """An entity's messages in memory, each change also recorded for the disk.

    A message with a new sequence number (above :attr:`written`) is in no batch yet: the
    store records nothing for it, but hands the pending batch, when it is taken, every
    message it took since the batch before as it is then (:meth:`_write_fresh`, the numbers
    from the first of them to :attr:`high`). Until then its changes need no record and
    its removal none at all; only the messages some batch wrote go through the pending
    batch's changes (:attr:`GroupCommit.ops`)."""

    __slots__ = ("_commits", "_entity", "_first", "_key", "_write", "high", "written")

    def __init__(self, entity: int, commits: GroupCommit) -> None:
        super().__init__()
        self._entity = entity
        self._key = entity_key(entity)
        self._commits = commits
        self._write = self._write_fresh  # bound once: not one method object per batch
        self.high = 0
        """The highest sequence number ever stored here."""
        self.written = 0
        """The highest sequence number some batch handed to the writer covers: a message above it
        is in no batch yet (its store writes it with the next)."""
        self._first = 0
        """The first sequence number above :attr:`written` stored since (0: none yet)."""

    def load(self, message: StoredMessage) -> None:
        """Take a message read from disk (nothing is written)."""
        super().append(message)
        self.high = self.written = max(self.high, message.sequence_number)

    def recovered(self, next_sequence: int) -> None:
        """Everything read back is written; new messages are numbered from ``next_sequence`` on."""
        self.high = self.written = next_sequence - 1

    def append(self, message: StoredMessage) -> None:
        """Store a message in memory and have the next batch write it (a message put back that
        was written already is written again)."""
        _memory_append(self, message)  # (not super(): no proxy object per message)
        seq = message.sequence_number
        if seq > self.high:
            self.high = seq
            if not self._first:  # the first since the last batch: the next one writes them
                self._first = seq
                self._commits.fresh(self._write)
        elif seq <= self.written:  # (a message put back: above, the next batch writes it anyway)
            self._commits.insert(self._key | seq, message)

    def append_run(self, messages: list[StoredMessage]) -> None:
        """:meth:`append` each of ``messages`` (in increasing sequence order), in one go when they
        are all new (the usual case: a run sent together): the next batch writes them all."""
        first = messages[0].sequence_number
        if first <= self.high:  # (a message put back among them: one by one)
            for message in messages:
                self.append(message)
            return
        self._append_after(messages)
        self.high = messages[-1].sequence_number
        if not self._first:
            self._first = first
            self._commits.fresh(self._write)

    def _write_fresh(self, out: list[bytes] | None) -> None:
        """:data:`~.commit.FreshWriter`: the messages stored since the batch before (those
        still here, as they are now) and the next sequence number; then they count as written."""
        if out is not None and self._first:
            messages_records(out, self._entity, map(self.get, range(self._first, self.high + 1)))
            out.append(sequence_record(self._entity, self.high + 1))
        self.written = self.high
        self._first = 0

    def remove(self, sequence_number: int) -> StoredMessage | None:
        """Remove a message; one already written gets a ``D`` record in the next batch."""
        message = _memory_remove(self, sequence_number)
        if message is not None and sequence_number <= self.written:  # (above: never written)
            self._commits.delete(self._key | sequence_number)
        return message

    def update(self, message: StoredMessage, *, envelope: bool = False) -> None:
        seq = message.sequence_number
        if seq <= self.written:  # (above: the next batch writes it as it is then)
            self._commits.update(self._key | seq, message, envelope)


_memory_append = MemoryStore.append
_memory_remove = MemoryStore.remove


class _Unrecorded:
    """A durable store's messages changed without recording anything (a failed write taken
    back: what it is made is what the journal holds already)."""

    __slots__ = ("_store", "get")

    def __init__(self, store: DurableStore) -> None:
        self._store = store
        self.get = store.get

    def append(self, message: StoredMessage) -> None:
        _memory_append(self._store, message)

    def append_run(self, messages: list[StoredMessage]) -> None:
        for message in messages:
            _memory_append(self._store, message)

    def remove(self, sequence_number: int) -> StoredMessage | None:
        return _memory_remove(self._store, sequence_number)

    def update(self, message: StoredMessage, *, envelope: bool = False) -> None:
        """Nothing to record."""

    def __len__(self) -> int:
        return len(self._store)

    def __iter__(self) -> Iterator[StoredMessage]:
        return iter(self._store)


class Persistence:
    """One data directory serving one namespace."""

    def __init__(
        self, directory: str | os.PathLike[str], *, fsync: bool = True, compact_min_bytes: int | None = None
    ) -> None:
        self.directory = os.fspath(directory)
        journal = Journal(directory, fsync=fsync)
        state, journal.state = journal.state, State()
        try:
            self._read(state, journal.path)
        except BaseException:
            journal.close()
            raise
        self.commits = GroupCommit(journal, compact_min_bytes=compact_min_bytes)
        self.commits.snapshot = self._snapshot
        self.commits.before_take = self._write_definitions
        self.commits.live_bytes = self._live_bytes
        self.commits.roll_back = self.roll_back
        self.after_commit: Callable[[Committed], None] = self.commits.after_commit
        """Run a callback (on the loop) once every change so far is on disk."""
        self._namespace: Namespace | None = None
        self._entities: dict[int, Entity] = {}
        """Entity id -> the entity (or fragment) whose store it is: what a compaction rewrites."""
        self._topics: dict[int, Topic] = {}
        self._topic_schedules: dict[int, dict[int, tuple[float, Envelope]]] = {}
        self._seen: dict[int, dict[bytes, tuple[float, float]]] = {}
        """Entity id -> encoded duplicate-detection id -> (seen at, expires at)."""
        self._detectors: dict[int, DuplicateDetector] = {}
        self._definitions_dirty = False
        count = sum(len(m) for m in self._messages.values())
        log.info("store %s: %d messages in %d entities read back", journal.path, count, len(self._ids))

    def _read(self, state: State, path: str) -> None:
        self._ids: dict[str, int] = {p: eid for eid, p in state.entities.items()}
        self._next_sequence = state.next_sequence
        self._messages: dict[int, list[StoredMessage]] = {}
        dropped = 0
        for eid, messages in state.messages.items():
            kept = self._messages[eid] = []
            for seq in sorted(messages):
                msg = stored_message(seq, messages[seq])
                if msg is None:
                    dropped += 1
                    continue
                kept.append(msg)
        if dropped:
            log.error("%s: %d stored messages could not be decoded and were left out", path, dropped)
        self._states = state.sessions
        now = time.time()
        self._duplicates: dict[int, list[tuple[bytes, float, float]]] = {}
        for (eid, raw), (seen_at, expires) in sorted(state.duplicates.items(), key=lambda item: item[1][0]):
            if expires > now:
                self._duplicates.setdefault(eid, []).append((raw, seen_at, expires))
        self._purged_at = now
        self._definitions = state.definitions

    # -- wiring -------------------------------------------------------------------
    def attach(self, namespace: Namespace) -> None:
        """Read the stored state into ``namespace``'s entities and keep every later change."""
        self._namespace = namespace
        for queue in namespace.queues.values():
            self._added(queue)
        for topic in namespace.topics.values():
            self._added(topic)
            for sub in topic.subscriptions.values():
                self._added(sub)
        namespace.on_entity_added = self._added
        if self._definitions is not None:
            definitions.restore(namespace, self._definitions)
        namespace.on_definitions_changed = self._definitions_changed
        self._definitions_changed()
        left = [path for path, eid in self._ids.items() if eid in self._messages]
        if left:
            log.warning(
                "store %s keeps messages of entities this configuration has not: %s", self.directory, sorted(left)
            )

    def _definitions_changed(self) -> None:
        """An entity was made, changed or deleted: the definitions are written with the next
        batch (many entities made on first use in one loop turn cost one document)."""
        self._definitions_dirty = True
        self.commits.kick()

    def _write_definitions(self) -> None:
        """(before each batch is taken)"""
        if not self._definitions_dirty or self._namespace is None:
            return
        self._definitions_dirty = False
        document = definitions.dump(self._namespace)
        if document != self._definitions:
            self._definitions = document
            self.commits.record(definitions_record(document))

    def _entity_id(self, path: str) -> int:
        key = path.lower()
        eid = self._ids.get(key)
        if eid is None:
            eid = self._ids[key] = max(self._ids.values(), default=0) + 1
            self.commits.record(entity_record(eid, key))
        return eid

    def _added(self, entity: AnyQueue | Topic | AnySubscription) -> None:
        if isinstance(entity, Topic):
            eid = self._entity_id(entity.path)
            self._topics[eid] = entity
            schedule = self._topic_schedules.setdefault(eid, {})
            for msg in self._messages.pop(eid, []):
                if msg.scheduled_at is not None:
                    entity.load_scheduled(msg.sequence_number, msg.scheduled_at, msg.envelope)
                    schedule[msg.sequence_number] = (msg.scheduled_at, msg.envelope)
            entity.next_sequence = self._next_sequence.pop(eid, 1)
            topic = entity
            entity.on_scheduled = lambda seq, at, envelope: self._topic_scheduled(topic, eid, seq, at, envelope)
            self._duplicates_of(eid, entity.duplicates)
            self._fragment_duplicates(entity)
            return
        eid = self._attach_entity(entity)
        self._attach_entity(entity.dead_letter_queue)
        if isinstance(entity, Queue | PartitionedQueue):
            self._duplicates_of(eid, entity.duplicates)
            self._fragment_duplicates(entity)

    def _fragment_duplicates(self, entity: AnyQueue | Topic) -> None:
        """A partitioned entity detects duplicates per fragment: each detector is kept
        under its fragment's id (``path#i``)."""
        partitions = entity.partitions
        if partitions is not None and partitions.duplicates is not None:
            for i, detector in enumerate(partitions.duplicates):
                self._duplicates_of(self._entity_id(f"{entity.path}#{i}"), detector)

    def _attach_entity(self, entity: MessagingEntity) -> int:
        if entity.partitions is None:  # its one fragment is itself, kept under its path
            (itself,) = entity.fragments
            return self._attach_store(itself, self._entity_id(entity.path))
        # A partitioned entity: each fragment is its own store and failure domain
        # (seed 002), kept under the id of ``path#i``.
        for i, fragment in enumerate(entity.fragments):
            self._attach_store(fragment, self._entity_id(f"{entity.path}#{i}"))
        return self._entity_id(entity.path)

    def _attach_store(self, entity: Entity, eid: int) -> int:
        store = DurableStore(eid, self.commits)
        for msg in self._messages.pop(eid, []):
            store.load(msg)
        entity.store = store
        next_sequence = max(self._next_sequence.pop(eid, 1), store.high + 1)
        store.recovered(next_sequence)  # (what a compaction writes as the next number)
        entity.recover(next_sequence)
        entity.sessions.state.update(self._states.pop(eid, {}))
        entity.sessions.on_state = lambda sid, state: self._session_state(eid, sid, state)
        self._entities[eid] = entity
        return eid

    def _duplicates_of(self, eid: int, detector: DuplicateDetector | None) -> None:
        remembered = self._duplicates.pop(eid, [])
        if detector is None:
            return
        self._detectors[eid] = detector
        seen = self._seen.setdefault(eid, {})
        for raw, seen_at, expires in remembered:
            detector.remember(decode(raw)[0], seen_at)
            seen[raw] = (seen_at, expires)
        detector.on_seen = lambda message_id, now: self._duplicate(eid, message_id, now, detector)

    # -- recording ----------------------------------------------------------------
    def _topic_scheduled(self, topic: Topic, eid: int, seq: int, at: float, envelope: Envelope | None) -> None:
        schedule = self._topic_schedules.setdefault(eid, {})
        if envelope is None:
            schedule.pop(seq, None)
            self.commits.delete(entity_key(eid) | seq)  # (written for nothing if it never was: harmless)
            return
        schedule[seq] = (at, envelope)
        self.commits.insert(entity_key(eid) | seq, _scheduled(seq, at, envelope), lambda: topic.next_sequence)

    def _session_state(self, eid: int, session_id: str, state: bytes | None) -> None:
        self.commits.record(session_record(eid, session_id, state))

    def _duplicate(self, eid: int, message_id: Any, now: float, detector: DuplicateDetector) -> None:
        if isinstance(message_id, uuid.UUID | str | bytes | int):
            raw = encode(message_id)
            expires = now + detector.window
            seen = self._seen.setdefault(eid, {})
            seen.pop(raw, None)  # (seen again after it left the window: now the newest)
            seen[raw] = (now, expires)
            if len(seen) > detector.limit:  # as many as the detector remembers, the oldest forgotten first
                del seen[next(iter(seen))]
            self.commits.record(duplicate_record(eid, raw, now, expires))
            if now - self._purged_at >= DUPLICATE_PURGE_INTERVAL:
                self._purged_at = now
                for seen in self._seen.values():
                    for key in [k for k, (_, expires) in seen.items() if expires <= now]:
                        del seen[key]
                self.commits.record(purge_record(now))
        self.commits.kick()

    # -- a failed write taken back ------------------------------------------------------
    def roll_back(self, batches: list[list[bytes]]) -> None:
        """:attr:`GroupCommit.roll_back`: the records of ``batches`` were not written; the
        messages, scheduled messages, session states and duplicate ids they touched are made
        what the journal holds (read back for them alone), so that what was refused has no
        effect. Entity ids and definitions are written again with the next batch."""
        touched = Touched()
        walk = State(touched=touched, only=set())
        for records in batches:
            walk.apply(b"".join(records))
        disk = State(only=touched.messages)
        scan(self.commits.journal.path, disk)
        for eid, seq in touched.messages:
            fields = disk.messages.get(eid, {}).get(seq)
            entity = self._entities.get(eid)
            if entity is not None:
                store = entity.store
                assert isinstance(store, DurableStore)
                entity.roll_back(seq, None if fields is None else stored_message(seq, fields), _Unrecorded(store))
            elif eid in self._topics:
                kept = None if fields is None else stored_message(seq, fields)
                at = None if kept is None else kept.scheduled_at
                schedule = self._topic_schedules.setdefault(eid, {})
                if kept is None or at is None:
                    schedule.pop(seq, None)
                    self._topics[eid].roll_back_scheduled(seq, None)
                else:
                    schedule[seq] = (at, kept.envelope)
                    self._topics[eid].roll_back_scheduled(seq, (at, kept.envelope))
        for eid, sid in touched.sessions:
            entity = self._entities.get(eid)
            if entity is not None:
                blob = disk.sessions.get(eid, {}).get(sid)
                if blob is None:
                    entity.sessions.state.pop(sid, None)
                else:
                    entity.sessions.state[sid] = blob
        self._roll_back_duplicates(touched, disk)
        self.commits.carry(touched.carried)
        log.warning(
            "store %s: a failed write was taken back (%d messages, %d session states, %d duplicate ids made what"
            " the journal holds)", self.directory, len(touched.messages), len(touched.sessions),
            len(touched.duplicates),
        )  # fmt: skip

    def _roll_back_duplicates(self, touched: Touched, disk: State) -> None:
        """Forget the duplicate-detection ids recorded by refused sends (a retry is no duplicate).
        An id is recorded only when it is not within its window, so the detector forgets it
        even when the journal holds an older sighting (one whose window has ended)."""
        for eid, raw in touched.duplicates:
            kept = disk.duplicates.get((eid, raw))
            seen = self._seen.get(eid)
            if seen is None:
                continue
            if kept is not None:
                seen[raw] = kept
            else:
                seen.pop(raw, None)
            detector = self._detectors.get(eid)
            if detector is not None:
                detector.forget(decode(raw)[0])

    def _live_bytes(self) -> int:
        """The live messages' bytes and record heads (what a compaction would write, near enough)."""
        stored = sum(e.bytes + MESSAGE.size * len(e.store) for e in self._entities.values())
        return stored + sum(t.scheduled_bytes + MESSAGE.size * t.scheduled_count for t in self._topics.values())

    def _snapshot(self) -> list[bytes]:
        """The records of everything kept now (a compaction writes them in place of the journal).
        Made on the event loop, in time proportional to the live messages; compactions are spaced
        so that this stays a fraction of what the writes since the last one cost
        (docs/durability.md#decisions)."""
        records = [RESET_RECORD, *(entity_record(eid, path) for path, eid in self._ids.items())]
        if self._definitions is not None:
            records.append(definitions_record(self._definitions))
        for eid, entity in self._entities.items():
            store = entity.store
            assert isinstance(store, DurableStore)
            records.append(sequence_record(eid, store.high + 1))
            messages_records(records, eid, store)
            for sid, blob in entity.sessions.state.items():
                records.append(session_record(eid, sid, blob))
        for eid, topic in self._topics.items():
            records.append(sequence_record(eid, topic.next_sequence))
            for seq, (at, envelope) in self._topic_schedules.get(eid, {}).items():
                message_records(records, eid, _scheduled(seq, at, envelope))
        now = time.time()
        for eid, seen in self._seen.items():
            for raw, (seen_at, expires) in seen.items():
                if expires > now:
                    records.append(duplicate_record(eid, raw, seen_at, expires))
        return records

    async def close(self) -> None:
        """Write what is pending and close the file."""
        await self.commits.close()


def _scheduled(seq: int, at: float, envelope: Envelope) -> StoredMessage:
    """A message scheduled on a topic, as kept (the topic keeps its schedule itself)."""
    return StoredMessage(seq, envelope, at, math.inf, MessageState.SCHEDULED, scheduled_at=at)
