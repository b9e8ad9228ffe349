"""A namespace kept in a data directory: every entity's messages, settlements, schedules,
deferrals, dead letters, session state and duplicate-detection ids.

:class:`Persistence` opens the directory, reads it back into the namespace's
entities (their indexes are rebuilt by :meth:`Entity.recover`) and from then on
records every change through a :class:`~amqplink.broker.durable.commit.GroupCommit`.
The server settles a transfer (or answers a request) only in
:meth:`Persistence.after_commit`, i.e. once what it caused is on disk.
"""

from __future__ import annotations

import logging
import math
import os
import time
import uuid
from typing import Any

from amqplink.broker.durable.commit import STATE_CODES, Committed, GroupCommit
from amqplink.broker.durable.database import Database, StoreError
from amqplink.broker.namespace.duplicates import DuplicateDetector
from amqplink.broker.namespace.entity import Entity
from amqplink.broker.namespace.envelope import Envelope, split_message
from amqplink.broker.namespace.namespace import Namespace, Queue, Subscription, Topic
from amqplink.broker.namespace.store import MemoryStore, MessageState, StoredMessage
from amqplink.codec.decode import decode
from amqplink.codec.encode import encode
from amqplink.codec.errors import DecodeError

__all__ = ["DurableStore", "Persistence", "StoreError"]

log = logging.getLogger(__name__)

_STATES = {code: state for state, code in STATE_CODES.items()}
DUPLICATE_PURGE_INTERVAL = 60.0
"""Seconds between purges of duplicate-detection ids that left their window."""


class DurableStore(MemoryStore):
    """An entity's messages in memory, each change also recorded for the disk."""

    __slots__ = ("_commits", "_entity", "_next_sequence", "high")

    def __init__(self, entity: int, commits: GroupCommit) -> None:
        super().__init__()
        self._entity = entity
        self._commits = commits
        self._next_sequence = self._next  # bound once: not one method object per message
        self.high = 0
        """The highest sequence number ever stored here."""

    def load(self, message: StoredMessage) -> None:
        """Take a message read from disk (nothing is written)."""
        super().append(message)
        self.high = max(self.high, message.sequence_number)

    def append(self, message: StoredMessage) -> None:
        super().append(message)
        seq = message.sequence_number
        fresh = seq > self.high
        if fresh:
            self.high = seq
            self._commits.sequence(self._entity, self._next_sequence)
        self._commits.insert(self._entity, message, fresh)

    def _next(self) -> int:
        return self.high + 1

    def remove(self, sequence_number: int) -> StoredMessage | None:
        message = super().remove(sequence_number)
        if message is not None:
            self._commits.delete(self._entity, sequence_number)
        return message

    def update(self, message: StoredMessage, *, envelope: bool = False) -> None:
        self._commits.update(self._entity, message, envelope)


class Persistence:
    """One data directory serving one namespace."""

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.directory = os.fspath(directory)
        database = Database(directory, fsync=fsync)
        with database.reading():
            self._read(database)
        self.commits = GroupCommit(database)
        count = sum(len(m) for m in self._messages.values())
        log.info("store %s: %d messages in %d entities read back", database.path, count, len(self._ids))

    def _read(self, database: Database) -> None:
        self._ids: dict[str, int] = {}
        self._next_sequence: dict[int, int] = {}
        for eid, path, next_sequence in database.entities():
            self._ids[path] = eid
            self._next_sequence[eid] = next_sequence
        self._messages: dict[int, list[StoredMessage]] = {}
        dropped = 0
        for eid, seq, state, count, deferred, enqueued, expires, scheduled, payload in database.messages():
            try:
                envelope = split_message(payload)
            except DecodeError:
                dropped += 1
                continue
            msg = StoredMessage(seq, envelope, enqueued, expires, _STATES[state], count, bool(deferred))
            msg.scheduled_at = scheduled
            self._messages.setdefault(eid, []).append(msg)
        if dropped:
            log.error("%s: %d stored messages could not be decoded and were left out", database.path, dropped)
        self._states: dict[int, dict[str, bytes]] = {}
        for eid, session_id, blob in database.session_states():
            self._states.setdefault(eid, {})[session_id] = blob
        now = time.time()
        self._duplicates: dict[int, list[tuple[Any, float]]] = {}
        for eid, raw, seen_at in database.duplicate_ids(now):
            self._duplicates.setdefault(eid, []).append((decode(raw)[0], seen_at))
        self._purged_at = now

    # -- wiring -------------------------------------------------------------------
    def attach(self, namespace: Namespace) -> None:
        """Read the stored state into ``namespace``'s entities and keep every later change."""
        for queue in namespace.queues.values():
            self._added(queue)
        for topic in namespace.topics.values():
            self._added(topic)
            for sub in topic.subscriptions.values():
                self._added(sub)
        namespace.on_entity_added = self._added
        # Queues made on first use in an earlier run come back (with their messages); a
        # queue is known by its dead-letter queue (a topic has none).
        if namespace.auto_create:
            for path in list(self._ids):
                is_queue = f"{path}/$deadletterqueue" in self._ids
                if is_queue and path not in namespace.queues and path not in namespace.topics:
                    namespace.resolve(path)
        left = [path for path, eid in self._ids.items() if eid in self._messages]
        if left:
            log.warning(
                "store %s keeps messages of entities this configuration has not: %s", self.directory, sorted(left)
            )

    def _entity_id(self, path: str) -> int:
        key = path.lower()
        eid = self._ids.get(key)
        if eid is None:
            eid = self._ids[key] = max(self._ids.values(), default=0) + 1
            self.commits.extra.entities.append((eid, key))
            self.commits.kick()
        return eid

    def _added(self, entity: Queue | Topic | Subscription) -> None:
        if isinstance(entity, Topic):
            eid = self._entity_id(entity.path)
            for msg in self._messages.pop(eid, []):
                if msg.scheduled_at is not None:
                    entity.load_scheduled(msg.sequence_number, msg.scheduled_at, msg.envelope)
            entity.next_sequence = self._next_sequence.pop(eid, 1)
            topic = entity
            entity.on_scheduled = lambda seq, at, envelope: self._topic_scheduled(topic, eid, seq, at, envelope)
            self._duplicates_of(eid, entity.duplicates)
            self._fragment_duplicates(entity)
            return
        eid = self._attach_entity(entity)
        self._attach_entity(entity.dead_letter_queue)
        if isinstance(entity, Queue):
            self._duplicates_of(eid, entity.duplicates)
            self._fragment_duplicates(entity)

    def _fragment_duplicates(self, entity: Queue | Topic) -> None:
        """A partitioned entity detects duplicates per fragment: each detector is kept
        under its fragment's id (``path#i``)."""
        partitions = entity.partitions
        if partitions is not None and partitions.duplicates is not None:
            for i, detector in enumerate(partitions.duplicates):
                self._duplicates_of(self._entity_id(f"{entity.path}#{i}"), detector)

    def _attach_entity(self, entity: Entity) -> int:
        fragments: list[Entity] | None = getattr(entity, "fragments", None)
        if fragments is not None:
            # A partitioned entity: each fragment is its own store and failure domain
            # (seed 002), kept under the id of ``path#i``.
            for i, fragment in enumerate(fragments):
                self._attach_store(fragment, self._entity_id(f"{entity.path}#{i}"))
            return self._entity_id(entity.path)
        return self._attach_store(entity, self._entity_id(entity.path))

    def _attach_store(self, entity: Entity, eid: int) -> int:
        store = DurableStore(eid, self.commits)
        for msg in self._messages.pop(eid, []):
            store.load(msg)
        entity.store = store
        entity.recover(max(self._next_sequence.pop(eid, 1), store.high + 1))
        entity.sessions.state.update(self._states.pop(eid, {}))
        entity.sessions.on_state = lambda sid, state: self._session_state(eid, sid, state)
        return eid

    def _duplicates_of(self, eid: int, detector: DuplicateDetector | None) -> None:
        remembered = self._duplicates.pop(eid, [])
        if detector is None:
            return
        for message_id, seen_at in remembered:
            detector.remember(message_id, seen_at)
        window = detector.window
        detector.on_seen = lambda message_id, now: self._duplicate(eid, message_id, now, window)

    # -- recording ----------------------------------------------------------------
    def _topic_scheduled(self, topic: Topic, eid: int, seq: int, at: float, envelope: Envelope | None) -> None:
        if envelope is None:
            self.commits.delete(eid, seq)
            return
        msg = StoredMessage(seq, envelope, at, math.inf, MessageState.SCHEDULED, scheduled_at=at)
        self.commits.insert(eid, msg, False)
        self.commits.sequence(eid, lambda: topic.next_sequence)

    def _session_state(self, eid: int, session_id: str, state: bytes | None) -> None:
        self.commits.extra.sessions.append((eid, session_id, state))
        self.commits.kick()

    def _duplicate(self, eid: int, message_id: Any, now: float, window: float) -> None:
        if isinstance(message_id, uuid.UUID | str | bytes | int):
            extra = self.commits.extra
            extra.duplicates.append((eid, encode(message_id), now, now + window))
            if now - self._purged_at >= DUPLICATE_PURGE_INTERVAL:
                self._purged_at = now
                extra.purge_duplicates_before = now
        self.commits.kick()

    def after_commit(self, callback: Committed) -> None:
        """Run ``callback`` (on the loop) once every change so far is on disk."""
        self.commits.after_commit(callback)

    async def close(self) -> None:
        """Write what is pending and close the file."""
        await self.commits.close()
