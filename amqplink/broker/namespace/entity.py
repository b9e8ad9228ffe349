"""A queue, a subscription or a dead-letter queue: messages, peek-lock, TTL, deferral, schedule.

Time is always passed in (``now``, seconds since the epoch); nothing here sleeps
or owns a timer. :meth:`Entity.tick` applies what time decides (expired locks,
scheduled messages, expired messages, expired session locks); every other method
calls it first, so a caller that only ticks now and then still sees exact rules.

Service Bus rules kept here:

* peek-lock: an exclusive lock for the entity's lock duration; when it expires the
  message comes back and its next delivery carries delivery-count + 1; settling
  after that is ``com.microsoft:message-lock-lost``;
* "when the delivery count exceeds MaxDeliveryCount the message is moved to the DLQ"
  with ``DeadLetterReason=MaxDeliveryCountExceeded``;
* TTL: an expired message is never delivered; with DeadLetteringOnMessageExpiration
  it goes to the DLQ with reason ``TTLExpiredException``;
* deferred messages are only retrievable by sequence number.
"""

from __future__ import annotations

import heapq
import logging
import math
import os
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from amqplink.broker.config import EntityProperties
from amqplink.broker.namespace.envelope import Envelope, delivery_stamps
from amqplink.broker.namespace.errors import (
    MESSAGE_LOCK_LOST,
    MESSAGE_NOT_FOUND,
    NOT_ALLOWED,
    RESOURCE_LIMIT_EXCEEDED,
    EntityError,
)
from amqplink.broker.namespace.sessions import SessionTable
from amqplink.broker.namespace.store import MemoryStore, MessageState, MessageStore, StoredMessage
from amqplink.codec.types import Long, Symbol

if TYPE_CHECKING:
    from amqplink.broker.namespace.partitioned import Partitions

__all__ = [
    "DEAD_LETTER_REASON",
    "DEAD_LETTER_DESCRIPTION",
    "Entity",
]

log = logging.getLogger(__name__)

DEAD_LETTER_REASON = "DeadLetterReason"
DEAD_LETTER_DESCRIPTION = "DeadLetterErrorDescription"
MAX_DELIVERY_COUNT_EXCEEDED = "MaxDeliveryCountExceeded"
TTL_EXPIRED = "TTLExpiredException"
LOCK_TAG_MASK = 0xFFFF
"""The low bits of a lock token that carry its entity's :attr:`Entity.lock_tag`."""
TOKEN_POOL = 256
"""Lock tokens' random bits read from the OS at once (one ``os.urandom`` call, which lets
other threads such as the durable store's writer take the GIL, per this many locks)."""
LOCK_EXPIRY_SLACK = 1024
"""Settled locks' entries the lock-expiry heap may keep beyond twice the live locks
before it is rebuilt (settling leaves its entry behind until then)."""

MESSAGE_STATE = Symbol("x-opt-message-state")
# Service Bus's message state annotation: 0 active, 1 deferred, 2 scheduled.
_STATE_CODE = {MessageState.AVAILABLE: 0, MessageState.LOCKED: 0, MessageState.DEFERRED: 1, MessageState.SCHEDULED: 2}

DeadLetterSink = Callable[[Envelope, float], None]

_pool: list[int] = []


def _random_bits() -> int:
    """128 random bits from the OS, read :data:`TOKEN_POOL` tokens' worth at a time."""
    if not _pool:
        raw = os.urandom(16 * TOKEN_POOL)
        _pool.extend(int.from_bytes(raw[i : i + 16], "big") for i in range(0, len(raw), 16))
    return _pool.pop()


class Entity:
    """One message source: a queue, a subscription, or the dead-letter queue of either."""

    partitions: Partitions | None = None
    """Set on a partitioned entity (:mod:`.partitioned`): its fragments' shared state."""

    def __init__(
        self,
        path: str,
        properties: EntityProperties,
        *,
        store: MessageStore | None = None,
        is_dead_letter_queue: bool = False,
        first_sequence: int = 1,
    ) -> None:
        self.path = path
        self.properties = properties
        self.is_dead_letter_queue = is_dead_letter_queue
        self.store: MessageStore = store if store is not None else MemoryStore()
        self.requires_session = properties.requires_session and not is_dead_letter_queue
        self.sessions = SessionTable(path, properties.lock_duration)
        self.dead_letter_sink: DeadLetterSink | None = None
        """Where dead-lettered messages go (set by the namespace: the DLQ or a forward target)."""
        self.on_timed: Callable[[Entity], None] | None = None
        """Told when the entity gains something for :meth:`tick` to do (the namespace's clock
        then visits it until :meth:`next_deadline` is infinite)."""
        self.listeners: list[Callable[[], None]] = []
        """Called when messages may have become available (after the change is complete)."""
        self.bytes = 0
        """Bytes of the messages held (bodies and properties), bounded by ``max_bytes``."""
        self.lock_tag: int | None = None
        """Carried in the low 16 bits of every lock token handed out (a fragment's index, so a
        partitioned entity finds the fragment of a settlement at once); None: plain uuid4."""
        self._next_sequence = first_sequence
        self._available: dict[str | None, list[int]] = {}
        self._locks: dict[uuid.UUID, int] = {}
        self._lock_expiry: list[tuple[float, int, uuid.UUID]] = []
        self._scheduled: list[tuple[float, int]] = []
        self._expiry: list[tuple[float, int]] = []

    def __repr__(self) -> str:
        return f"Entity({self.path!r}, messages={len(self.store)}, locked={len(self._locks)})"

    # -- adding -------------------------------------------------------------------
    def check_accept(self, envelopes: list[Envelope]) -> None:
        """Raise what storing these messages would raise (sessions, count, bytes), changing nothing."""
        if self.requires_session and any(e.session_id is None for e in envelopes):
            raise EntityError(
                NOT_ALLOWED,
                f"{self.path!r} requires sessions: set a session id on the message (properties.group-id)",
            )
        if len(self.store) + len(envelopes) > self.properties.max_messages:
            raise EntityError(
                RESOURCE_LIMIT_EXCEEDED,
                f"{self.path!r} holds {len(self.store)} messages, its limit of {self.properties.max_messages};"
                " receive some before sending more",
            )
        size = envelopes[0].size if len(envelopes) == 1 else sum(e.size for e in envelopes)
        if self.bytes + size > self.properties.max_bytes:
            raise EntityError(
                RESOURCE_LIMIT_EXCEEDED,
                f"{self.path!r} holds {self.bytes} bytes of messages, near its limit of {self.properties.max_bytes};"
                " receive some before sending more",
            )

    def accept(self, envelope: Envelope, now: float) -> int:
        """Store a sent message (scheduled if it has a future scheduled enqueue time); its sequence number."""
        self.check_accept([envelope])
        return self._store(envelope, now)

    def accept_all(self, envelopes: list[Envelope], now: float) -> None:
        """Store several sent messages, all or none (checked together first)."""
        self.check_accept(envelopes)
        for envelope in envelopes:
            self._store(envelope, now)

    def _store(self, envelope: Envelope, now: float) -> int:
        at = envelope.scheduled_enqueue_time()
        if at is not None and at > now:
            return self._schedule(envelope, at)
        return self._enqueue(envelope, now)

    def schedule(self, envelope: Envelope, at: float, now: float) -> int:
        """Hold a message until ``at``; its sequence number (for :meth:`cancel_scheduled`)."""
        self.check_accept([envelope])
        if at <= now:
            return self._enqueue(envelope, now)
        return self._schedule(envelope, at)

    def _new_sequence(self) -> int:
        seq = self._next_sequence
        self._next_sequence += 1
        return seq

    def _expires(self, envelope: Envelope, enqueued_at: float) -> float:
        if self.is_dead_letter_queue:
            return math.inf
        return enqueued_at + min(envelope.ttl(), self.properties.default_message_ttl)

    def _enqueue(self, envelope: Envelope, now: float) -> int:
        seq = self._new_sequence()
        msg = StoredMessage(seq, envelope, now, self._expires(envelope, now))
        self._add(msg)
        self._make_available(msg)
        if msg.expires_at != math.inf:
            heapq.heappush(self._expiry, (msg.expires_at, seq))
            self._timed()
        self._notify()
        return seq

    def _schedule(self, envelope: Envelope, at: float) -> int:
        seq = self._new_sequence()
        msg = StoredMessage(seq, envelope, at, self._expires(envelope, at), MessageState.SCHEDULED, scheduled_at=at)
        self._add(msg)
        heapq.heappush(self._scheduled, (at, seq))
        self._timed()
        return seq

    def cancel_scheduled(self, sequence_numbers: Iterable[int]) -> None:
        """Drop scheduled messages; 404 ``message-not-found`` if any is not scheduled here (none dropped)."""
        seqs = list(sequence_numbers)
        for seq in seqs:
            msg = self.store.get(seq)
            if msg is None or msg.state is not MessageState.SCHEDULED:
                raise EntityError(
                    MESSAGE_NOT_FOUND, f"no scheduled message with sequence number {seq} in {self.path!r}"
                )
        for seq in seqs:
            self._remove(seq)

    def _key(self, msg: StoredMessage) -> str | None:
        return msg.session_id if self.requires_session else None

    def _make_available(self, msg: StoredMessage) -> None:
        msg.state = MessageState.AVAILABLE
        msg.lock_token = None
        key = self._key(msg)
        heap = self._available.get(key)
        if heap is None:
            heap = self._available[key] = []
        heapq.heappush(heap, msg.sequence_number)
        self.store.update(msg)

    def _add(self, msg: StoredMessage) -> None:
        self.store.append(msg)
        self.bytes += msg.envelope.size

    def _remove(self, sequence_number: int) -> None:
        msg = self.store.remove(sequence_number)
        if msg is not None:
            self.bytes -= msg.envelope.size

    def _timed(self) -> None:
        if self.on_timed is not None:
            self.on_timed(self)

    def _notify(self) -> None:
        if self.listeners:
            for listener in list(self.listeners):  # a listener may remove itself
                listener()

    # -- time ---------------------------------------------------------------------
    def tick(self, now: float) -> None:
        """Apply what time decides: lock and session-lock expiry, scheduled messages, TTL."""
        changed = False
        locks = self._lock_expiry
        while locks and locks[0][0] <= now:
            _, seq, token = heapq.heappop(locks)
            msg = self.store.get(seq)
            if msg is not None and msg.lock_token == token and msg.locked_until <= now:
                log.debug("%s: lock on message %d expired", self.path, seq)
                self._unlock(msg, now)
                changed = True
        for session_id in self.sessions.expired(now):
            changed |= self._release_session_messages(session_id, now)
        scheduled = self._scheduled
        while scheduled and scheduled[0][0] <= now:
            at, seq = heapq.heappop(scheduled)
            msg = self.store.get(seq)
            if msg is not None and msg.state is MessageState.SCHEDULED:
                msg.scheduled_at = None
                msg.enqueued_at = at
                self._make_available(msg)
                if msg.expires_at != math.inf:
                    heapq.heappush(self._expiry, (msg.expires_at, seq))
                changed = True
        expiry = self._expiry
        while expiry and expiry[0][0] <= now:
            _, seq = heapq.heappop(expiry)
            msg = self.store.get(seq)
            if msg is not None and msg.state in (MessageState.AVAILABLE, MessageState.DEFERRED):
                self._expire(msg, now)
        if changed:
            self._notify()

    def next_deadline(self) -> float:
        """The earliest time :meth:`tick` has something to do (may be early, never late)."""
        heads = [h[0][0] for h in (self._lock_expiry, self._scheduled, self._expiry) if h]
        return min([*heads, self.sessions.next_expiry()])

    def _expire(self, msg: StoredMessage, now: float) -> None:
        if self.properties.dead_lettering_on_message_expiration and not self.is_dead_letter_queue:
            self._dead_letter(msg, TTL_EXPIRED, "The message expired and was dead lettered.", now)
        else:
            self._remove(msg.sequence_number)
            log.debug("%s: message %d expired", self.path, msg.sequence_number)

    def recover(self, next_sequence: int) -> None:
        """Index the messages a durable store brought back (call once, on an entity with no
        other messages): locks do not survive a restart, so a message that was locked is
        available again, its delivery count as taken with the lock (Service Bus does the same)."""
        self._next_sequence = max(self._next_sequence, next_sequence)
        for msg in self.store:
            self.bytes += msg.envelope.size
            seq = msg.sequence_number
            if msg.state is MessageState.SCHEDULED and msg.scheduled_at is not None:
                heapq.heappush(self._scheduled, (msg.scheduled_at, seq))
                continue
            if msg.deferred:
                msg.state = MessageState.DEFERRED
            else:
                msg.state = MessageState.AVAILABLE
                msg.lock_token = None
                heapq.heappush(self._available.setdefault(self._key(msg), []), seq)
            if msg.expires_at != math.inf:
                heapq.heappush(self._expiry, (msg.expires_at, seq))
        if self._scheduled or self._expiry:
            self._timed()
        if len(self.store):
            self._notify()

    # -- receiving ----------------------------------------------------------------
    def receive(
        self, now: float, *, lock: bool = True, session_id: str | None = None, owner: object | None = None
    ) -> StoredMessage | None:
        """The next available message (of ``session_id`` on a session entity), locked or removed.

        ``lock=False`` is receive-and-delete: the message leaves the entity. On a
        session entity the caller must hold the session (as ``owner``, when given).
        """
        self.tick(now)
        if self.requires_session and session_id is not None:
            self.sessions.held(session_id, now, owner)  # before anything changes: session-lock-lost
        heap = self._available.get(session_id if self.requires_session else None)
        while heap:
            seq = heapq.heappop(heap)
            msg = self.store.get(seq)
            if msg is None or msg.state is not MessageState.AVAILABLE:
                continue
            if msg.expires_at <= now:
                self._expire(msg, now)
                continue
            msg.delivery_count += 1
            if lock:
                self._lock(msg, now, session_id)
            else:
                self._remove(seq)
            return msg
        return None

    def restore(self, msg: StoredMessage) -> None:
        """Undo :meth:`receive` for a message that could not be handed over (the link
        refused its size): it comes back as it was, its delivery count unchanged."""
        msg.delivery_count -= 1
        self._release_lock(msg)
        if self.store.get(msg.sequence_number) is None:
            self._add(msg)  # receive-and-delete had removed it
        if msg.deferred:
            msg.state = MessageState.DEFERRED
            self.store.update(msg)
        else:
            self._make_available(msg)

    def _lock(self, msg: StoredMessage, now: float, session_id: str | None) -> None:
        tag = self.lock_tag
        # A version-4 GUID (as uuid4); a fragment's carries its tag in the last 16 random bits.
        raw = _random_bits()
        token = uuid.UUID(int=raw if tag is None else raw & ~LOCK_TAG_MASK | tag, version=4)
        msg.state = MessageState.LOCKED
        msg.lock_token = token
        self.store.update(msg)  # the delivery count taken with the lock survives a restart
        self._locks[token] = msg.sequence_number
        if self.requires_session and session_id is not None:
            msg.locked_until = self.sessions.held(session_id, now).locked_until
        else:
            msg.locked_until = now + self.properties.lock_duration
            self._push_lock_expiry(msg, token)

    def available_sessions(self, now: float) -> list[str]:
        """Sessions with available messages and no live lock, oldest message first."""
        self.tick(now)
        found = []
        for sid, heap in self._available.items():
            if sid is None or self.sessions.is_locked(sid, now):
                continue
            while heap:
                msg = self.store.get(heap[0])
                if msg is not None and msg.state is MessageState.AVAILABLE:
                    found.append((heap[0], sid))
                    break
                heapq.heappop(heap)
        return [sid for _, sid in sorted(found)]

    def peek(self, from_sequence: int, count: int, now: float, *, session_id: str | None = None) -> list[StoredMessage]:
        """Up to ``count`` messages from ``from_sequence`` on (of ``session_id`` if given), in order,
        any state; nothing is locked."""
        self.tick(now)
        out = []
        for msg in self.store:
            if (
                msg.sequence_number >= from_sequence
                and msg.expires_at > now
                and (session_id is None or msg.session_id == session_id)
            ):
                out.append(msg)
                if len(out) >= count:
                    break
        return out

    def receive_deferred(
        self,
        sequence_numbers: Iterable[int],
        now: float,
        *,
        lock: bool = True,
        session_id: str | None = None,
        owner: object | None = None,
    ) -> list[StoredMessage]:
        """Deferred messages by sequence number; 404 ``message-not-found`` if any is not deferred."""
        self.tick(now)
        if self.requires_session and session_id is not None:
            self.sessions.held(session_id, now, owner)
        picked = []
        for seq in sequence_numbers:
            msg = self.store.get(seq)
            if (
                msg is None
                or msg.state is not MessageState.DEFERRED
                or (self.requires_session and session_id is not None and msg.session_id != session_id)
            ):
                raise EntityError(MESSAGE_NOT_FOUND, f"no deferred message with sequence number {seq} in {self.path!r}")
            picked.append(msg)
        for msg in picked:
            msg.delivery_count += 1
            if lock:
                self._lock(msg, now, session_id)
            else:
                self._remove(msg.sequence_number)
        return picked

    # -- settling -----------------------------------------------------------------
    def holds_lock(self, token: uuid.UUID) -> bool:
        """Whether ``token`` names a lock this entity handed out (live or not yet noticed expired)."""
        return token in self._locks

    def locked(self, token: uuid.UUID, now: float) -> StoredMessage:
        """The message ``token`` locks; ``com.microsoft:message-lock-lost`` if the lock is gone."""
        self.tick(now)
        seq = self._locks.get(token)
        msg = None if seq is None else self.store.get(seq)
        if msg is None or msg.lock_token != token or msg.state is not MessageState.LOCKED:
            self._locks.pop(token, None)
            raise EntityError(
                MESSAGE_LOCK_LOST,
                f"the lock {token} on a message of {self.path!r} expired or was lost; receive it again",
            )
        if self.requires_session and msg.session_id is not None:
            self.sessions.held(msg.session_id, now)
        return msg

    def _release_lock(self, msg: StoredMessage) -> None:
        if msg.lock_token is not None:
            self._locks.pop(msg.lock_token, None)
        msg.lock_token = None

    def _push_lock_expiry(self, msg: StoredMessage, token: uuid.UUID) -> None:
        if len(self._lock_expiry) > 2 * len(self._locks) + LOCK_EXPIRY_SLACK:
            self._compact_lock_expiry()
        heapq.heappush(self._lock_expiry, (msg.locked_until, msg.sequence_number, token))
        self._timed()

    def _compact_lock_expiry(self) -> None:
        """Keep only the entries of live locks (amortised O(1) per lock taken)."""
        live = []
        get = self.store.get
        for entry in self._lock_expiry:
            until, seq, token = entry
            msg = get(seq)
            if msg is not None and msg.lock_token == token and msg.locked_until == until:
                live.append(entry)
        heapq.heapify(live)
        self._lock_expiry = live

    def complete(self, token: uuid.UUID, now: float) -> None:
        msg = self.locked(token, now)
        self._release_lock(msg)
        self._remove(msg.sequence_number)

    def abandon(self, token: uuid.UUID, now: float, annotations: dict[Any, Any] | None = None) -> None:
        """Give the message back (or to the DLQ once its delivery count reaches MaxDeliveryCount)."""
        msg = self.locked(token, now)
        if annotations:
            msg.envelope = msg.envelope.with_annotations(annotations)
            self.store.update(msg, envelope=True)
        self._unlock(msg, now)
        self._notify()

    def defer(self, token: uuid.UUID, now: float, annotations: dict[Any, Any] | None = None) -> None:
        msg = self.locked(token, now)
        if annotations:
            msg.envelope = msg.envelope.with_annotations(annotations)
            self.store.update(msg, envelope=True)
        self._release_lock(msg)
        msg.state = MessageState.DEFERRED
        msg.deferred = True
        self.store.update(msg)

    def dead_letter(
        self,
        token: uuid.UUID,
        now: float,
        reason: str | None = None,
        description: str | None = None,
        annotations: dict[Any, Any] | None = None,
        properties: dict[str, Any] | None = None,
    ) -> None:
        msg = self.locked(token, now)
        if annotations:
            msg.envelope = msg.envelope.with_annotations(annotations)
        self._release_lock(msg)
        self._dead_letter(msg, reason, description, now, properties)

    def renew_lock(self, token: uuid.UUID, now: float) -> float:
        """Extend a message lock by the lock duration from now; the new locked-until."""
        msg = self.locked(token, now)
        if self.requires_session and msg.session_id is not None:
            msg.locked_until = self.sessions.renew(msg.session_id, now)
            return msg.locked_until
        msg.locked_until = now + self.properties.lock_duration
        self._push_lock_expiry(msg, token)
        return msg.locked_until

    def release(self, tokens: Iterable[uuid.UUID], now: float) -> None:
        """Locks lost with their link or connection: the messages come back as after expiry."""
        changed = False
        for token in tokens:
            seq = self._locks.get(token)
            msg = None if seq is None else self.store.get(seq)
            if msg is not None and msg.lock_token == token:
                self._unlock(msg, now)
                changed = True
        if changed:
            self._notify()

    def expire_locks(self, now: float) -> int:
        """End every message and session lock now, as if each had run out (fault
        injection): the messages come back (or go to the DLQ) as after expiry. How many."""
        locked = [msg for msg in self.store if msg.state is MessageState.LOCKED]
        for msg in locked:
            self._unlock(msg, now)
        sessions = self.sessions.expire_all()
        if locked:
            self._notify()
        return len(locked) + sessions

    def _unlock(self, msg: StoredMessage, now: float) -> None:
        """A lock ended without settlement: back to available/deferred, or to the DLQ."""
        self._release_lock(msg)
        if not self.is_dead_letter_queue and msg.delivery_count >= self.properties.max_delivery_count:
            self._dead_letter(
                msg,
                MAX_DELIVERY_COUNT_EXCEEDED,
                f"Message could not be consumed after {self.properties.max_delivery_count} delivery attempts.",
                now,
            )
        elif msg.expires_at <= now:
            self._expire(msg, now)  # it expired while locked: now that the lock is gone
        elif msg.deferred:
            msg.state = MessageState.DEFERRED
            self.store.update(msg)
        else:
            self._make_available(msg)

    def _dead_letter(
        self,
        msg: StoredMessage,
        reason: str | None,
        description: str | None,
        now: float,
        properties: dict[str, Any] | None = None,
    ) -> None:
        self._remove(msg.sequence_number)
        updates: dict[str, Any] = dict(properties or {})
        if reason is not None:
            updates[DEAD_LETTER_REASON] = reason
        if description is not None:
            updates[DEAD_LETTER_DESCRIPTION] = description
        envelope = msg.envelope.with_application_properties(updates) if updates else msg.envelope
        sink = self.dead_letter_sink
        if sink is None:
            # A dead-letter queue's own messages stay in it.
            self._enqueue(envelope, now)
            return
        log.info("%s: message %d dead-lettered (%s)", self.path, msg.sequence_number, reason)
        sink(envelope, now)

    # -- sessions -----------------------------------------------------------------
    def _release_session_messages(self, session_id: str, now: float) -> bool:
        changed = False
        for msg in self.store:
            if msg.state is MessageState.LOCKED and msg.session_id == session_id:
                self._unlock(msg, now)
                changed = True
        return changed

    def accept_session(self, session_id: str | None, owner: object, now: float) -> tuple[str, float] | None:
        """Lock ``session_id`` (or the next available session) for ``owner``: (id, locked-until) or None."""
        if not self.requires_session:
            raise EntityError(NOT_ALLOWED, f"{self.path!r} does not require sessions; receive without a session")
        self.tick(now)
        if session_id is None:
            sessions = self.available_sessions(now)
            if not sessions:
                return None
            session_id = sessions[0]
        lock = self.sessions.lock(session_id, owner, now)
        self._timed()
        return session_id, lock.locked_until

    def close_session(self, session_id: str, owner: object, now: float) -> None:
        """The session receiver went away: its lock ends and its locked messages come back."""
        if self.sessions.release(session_id, owner) and self._release_session_messages(session_id, now):
            self._notify()

    # -- wire form ----------------------------------------------------------------
    def encode(self, msg: StoredMessage, *, peek: bool = False) -> bytes:
        """The message as delivered: Service Bus's annotations stamped, the body bytes untouched."""
        locked = msg.locked_until if msg.state is MessageState.LOCKED else None
        if not peek:
            # The header carries prior attempts: the count of deliveries before this one.
            return msg.envelope.deliver(msg.sequence_number, msg.enqueued_at, locked, max(0, msg.delivery_count - 1))
        stamps = delivery_stamps(msg.sequence_number, msg.enqueued_at, locked)
        stamps[MESSAGE_STATE] = Long(_STATE_CODE[msg.state])
        return msg.envelope.encode(stamps, msg.delivery_count)
