"""A queue, a subscription or a dead-letter queue: messages, peek-lock, TTL, deferral, schedule.

Time is always passed in (``now``, seconds since the epoch); nothing here sleeps
or owns a timer. :meth:`Entity.tick` applies what time decides (expired locks,
scheduled messages, expired messages, expired session locks); every other method
whose answer time may change calls it first (settling: when the lock may have run
out), so a caller that only ticks now and then still sees exact rules.

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
import itertools
import logging
import math
import os
import struct
from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from amqplink.broker.config import EntityProperties
from amqplink.broker.namespace.envelope import Envelope, Sent, bodies_only, deliver_all, delivery_stamps, ttl_ms
from amqplink.broker.namespace.errors import (
    MESSAGE_LOCK_LOST,
    MESSAGE_NOT_FOUND,
    NOT_ALLOWED,
    RESOURCE_LIMIT_EXCEEDED,
    EntityError,
)
from amqplink.broker.namespace.sessions import SessionTable
from amqplink.broker.namespace.store import (
    LockToken,
    MemoryStore,
    MessageState,
    MessageStore,
    StoredMessage,
    lock_key,
    lock_text,
)
from amqplink.codec.types import Long
from amqplink.sbwire.annotations import MESSAGE_STATE, SCHEDULED_ENQUEUE_TIME

if TYPE_CHECKING:
    from amqplink.broker.namespace.interface import MessagingEntity
    from amqplink.broker.namespace.partitions import Partitions

__all__ = [
    "KEY_UNKNOWN",
    "DEAD_LETTER_REASON",
    "DEAD_LETTER_DESCRIPTION",
    "Entity",
    "Sent",
    "RETRY_FIRST",
    "RETRY_LAST",
    "dead_letter_refusal",
    "retry_wait",
]

_SIZE = attrgetter("size")
"""A message's :attr:`Envelope.size` (summed for a batch without a Python frame per message)."""


_NEVER = math.inf  # the expiry of a message with no time to live
_heappush = heapq.heappush  # (the hot paths: one global read, not two)


log = logging.getLogger(__name__)

_KEPT_PRUNE_AT = 1024
"""How many kept sequence numbers an entity holds at least before it drops those no longer stored."""

DEAD_LETTER_REASON = "DeadLetterReason"
DEAD_LETTER_DESCRIPTION = "DeadLetterErrorDescription"
MAX_DELIVERY_COUNT_EXCEEDED = "MaxDeliveryCountExceeded"
TTL_EXPIRED = "TTLExpiredException"
LOCK_TAG_MASK = 0xFFFF
"""The low bits of a lock token that carry its entity's :attr:`Entity.lock_tag`."""
TOKEN_POOL = 256
"""Lock tokens made at once from one ``os.urandom`` call (which lets other threads such as
the durable store's writer take the GIL), per this many locks."""
LOCK_EXPIRY_SLACK = 1024
"""Settled locks the lock-expiry heap may keep beyond twice the live locks before it is
rebuilt (settling leaves its lock behind until then)."""

# Service Bus's message state annotation: 0 active, 1 deferred, 2 scheduled.
_LOCKED = MessageState.LOCKED
_STATE_CODE = {MessageState.AVAILABLE: 0, MessageState.LOCKED: 0, MessageState.DEFERRED: 1, MessageState.SCHEDULED: 2}

DeadLetterSink = Callable[[Envelope, float], None]
"""Takes a dead-lettered message (its envelope, the time), or raises the
:class:`EntityError` that refused it, nothing stored (a full dead-letter queue)."""
RETRY_FIRST = 1.0
"""Seconds until a message the broker moves on its own (a scheduled message come due, an
expired one dead-lettered) that could not be placed is tried again, at first."""
RETRY_LAST = 60.0
"""Seconds between such tries at most (the wait doubles from :data:`RETRY_FIRST` up to this)."""


def retry_wait(waited: float) -> float:
    """The wait before the next try of a message held back ``waited`` seconds so far: as long
    again (the wait doubles), within :data:`RETRY_FIRST` and :data:`RETRY_LAST`."""
    return min(RETRY_LAST, max(RETRY_FIRST, waited))


KEY_UNKNOWN: Any = object()
"""The partition key the caller has not computed (None is "no key")."""

_pools: dict[int | None, list[bytes]] = {}
_VERSION_4 = bytes((b & 0x0F) | 0x40 for b in range(256))
_VARIANT_RFC = bytes((b & 0x3F) | 0x80 for b in range(256))
_order = itertools.count()
"""Ties in the lock-expiry heap (its entries' lists are never compared)."""


def _fresh_tokens(tag: int | None) -> list[bytes]:
    """:data:`TOKEN_POOL` new lock tokens: version-4 GUIDs (as ``uuid4``) in .NET byte order,
    the last 16 random bits replaced by ``tag`` when given."""
    raw = bytearray(os.urandom(16 * TOKEN_POOL))
    # .NET order swaps the first three fields: the version nibble is in byte 7, the variant in 8.
    raw[7::16] = raw[7::16].translate(_VERSION_4)
    raw[8::16] = raw[8::16].translate(_VARIANT_RFC)
    if tag is not None:  # the GUID's low 16 bits are its last two bytes in either order
        raw[14::16] = bytes((tag >> 8,)) * TOKEN_POOL
        raw[15::16] = bytes((tag & 0xFF,)) * TOKEN_POOL
    return list(_SPLIT_TOKENS(raw))


_SPLIT_TOKENS = struct.Struct("16s" * TOKEN_POOL).unpack
""":data:`TOKEN_POOL` tokens of 16 bytes each from their bytes, in one call."""


class Entity:
    """One message source: a queue, a subscription, or the dead-letter queue of either; also
    each fragment of a partitioned one (:mod:`.partitioned`). It satisfies
    :class:`~.interface.MessagingEntity`."""

    partitions: Partitions | None = None
    """None: an entity holds its messages itself (:class:`~.interface.MessagingEntity`)."""

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
        self.owner_dead_letter_queue: MessagingEntity | None = None
        """A fragment's: the dead-letter queue of its partitioned entity (a fragment has none
        of its own), where a send's plan dead-letters what this fragment could not place."""
        self._kept: set[int] = set()
        """Messages time would have dead-lettered that the dead-letter queue refused: kept
        here, tried again (each warned of once). Those that leave otherwise (completed) are
        pruned once the set doubles past what the last pruning left (at least
        :data:`_KEPT_PRUNE_AT`), so it stays bounded by the store."""
        self._kept_prune_at = _KEPT_PRUNE_AT
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
        self._locks: dict[bytes, int] = {}
        """Sequence numbers by lock token (:func:`~.store.lock_key`)."""
        self._lock_expiry: list[tuple[float, int, list[int], list[bytes]]] = []
        """Locks taken together, by the time they run out: their sequence numbers and tokens."""
        self._lock_expiry_count = 0
        """Locks in :attr:`_lock_expiry` (settled ones stay until a pass or a rebuild)."""
        self._scheduled: list[tuple[float, int]] = []
        self._expiry: list[tuple[float, int, int]] = []
        """Messages by the time they expire: (expires at, first sequence number, end), a
        message or a run of them stored together (:meth:`enqueue_bodies`)."""

    def __repr__(self) -> str:
        return f"Entity({self.path!r}, messages={len(self.store)}, locked={len(self._locks)})"

    @property
    def fragments(self) -> tuple[Entity]:
        """The entities holding the messages: this one alone (it is not partitioned)."""
        return (self,)

    # -- adding -------------------------------------------------------------------
    def check_accept(self, envelopes: list[Envelope], coming: int = 0, coming_bytes: int = 0) -> None:
        """Raise what storing these messages would raise (sessions, count, bytes), changing
        nothing. ``coming``, ``coming_bytes``: messages (and their bytes) on their way here
        besides these, checked already (the other copies of a send's plan)."""
        if self.requires_session and any(e.session_id is None for e in envelopes):
            raise EntityError(
                NOT_ALLOWED,
                f"{self.path!r} requires sessions: set a session id on the message (properties.group-id)",
            )
        if len(self.store) + coming + len(envelopes) > self.properties.max_messages:
            raise EntityError(
                RESOURCE_LIMIT_EXCEEDED,
                f"{self.path!r} holds {len(self.store)} messages{_besides(coming)}, its limit of"
                f" {self.properties.max_messages}; receive some before sending more",
            )
        size = envelopes[0].size if len(envelopes) == 1 else sum(map(_SIZE, envelopes))
        if self.bytes + coming_bytes + size > self.properties.max_bytes:
            raise EntityError(
                RESOURCE_LIMIT_EXCEEDED,
                f"{self.path!r} holds {self.bytes} bytes of messages{_besides(coming_bytes)}, near its limit of"
                f" {self.properties.max_bytes}; receive some before sending more",
            )

    def accept(self, envelope: Envelope, now: float) -> int:
        """Store a sent message (scheduled if it has a future scheduled enqueue time); its sequence number."""
        if (
            (self.requires_session and envelope.session_id is None)
            or len(self.store) >= self.properties.max_messages
            or self.bytes + envelope.size > self.properties.max_bytes
        ):
            self.check_accept([envelope])  # raises the refusal that applies
        if envelope.annotations:  # _store, inline (once per message sent)
            at = envelope.scheduled_enqueue_time()
            if at is not None and at > now:
                return self._schedule(envelope, at)
        return self._enqueue(envelope, now)

    def accept_all(self, envelopes: list[Envelope], now: float, key: Any = KEY_UNKNOWN) -> None:
        """Store several sent messages, all or none (checked together first). ``key``: their
        partition key (None: none) when the caller knows it (a partitioned entity uses it)."""
        if len(envelopes) == 1:
            self.accept(envelopes[0], now)
            return
        self.check_accept(envelopes)
        if not self.requires_session:
            for envelope in envelopes:
                if envelope.header is not None or (
                    envelope.annotations and SCHEDULED_ENQUEUE_TIME in envelope.annotations
                ):
                    break
            else:  # (a batch's messages, mostly) the same time to live, none scheduled: stored as one run
                self.enqueue_bodies(envelopes, now)
                if self.listeners:
                    self._notify()
                return
        for envelope in envelopes:
            self._store(envelope, now)

    def fit(self, envelopes: list[Envelope]) -> int:
        """How many of ``envelopes`` (messages that are only a body), in order, :meth:`accept`
        stores one after another before it refuses one (``max_messages``, ``max_bytes``):
        a message is refused when the entity holds its limit of messages, or when its size
        would take the bytes held beyond their limit."""
        properties = self.properties
        left = properties.max_messages - len(self.store)
        bytes_left = properties.max_bytes - self.bytes
        count = 0
        for envelope in envelopes:
            if count >= left or envelope.size > bytes_left:
                break
            bytes_left -= envelope.size
            count += 1
        return count

    def accept_bodies(self, sent: Sequence[Sent], now: float) -> int:
        """Store the messages of ``sent`` (in arrival order) that are only a body
        (:func:`bodies_only`, within max-message-size) as :meth:`accept` stores each, until
        one that is not, or that it would refuse (:meth:`fit`): how many were stored. The
        caller sends that one and those after it one at a time (:meth:`accept` refuses a
        message at the very one that breaks a limit). The run is stored in one go
        (:meth:`enqueue_bodies`), and the listeners told once, after it."""
        if self.requires_session:
            return 0  # no session id: accept refuses each
        envelopes = bodies_only(sent, self.properties.max_message_size)
        if not envelopes:
            return 0
        count = self.fit(envelopes)
        if count:
            self.enqueue_bodies(envelopes if count == len(envelopes) else envelopes[:count], now)
            if self.listeners:
                self._notify()
        return count

    def _store(self, envelope: Envelope, now: float) -> int:
        if envelope.annotations:
            at = envelope.scheduled_enqueue_time()
            if at is not None and at > now:
                return self._schedule(envelope, at)
        return self._enqueue(envelope, now)

    def schedule(self, envelope: Envelope, at: float, now: float) -> int:
        """Hold a message until ``at``; its sequence number (for :meth:`cancel_scheduled`).
        An entity that forwards holds it even when due (the namespace forwards it on its
        next tick, as it does each scheduled message that becomes active)."""
        self.check_accept([envelope])
        if at <= now and not self.properties.forward_to:
            return self._enqueue(envelope, now)
        return self._schedule(envelope, at)

    def skip_sequence(self) -> int:
        """A sequence number no message gets (Service Bus answers a duplicate's schedule-message
        with one). A durable store does not write it: after a restart with no message stored
        since, the number may be given again."""
        return self._new_sequence()

    def _new_sequence(self) -> int:
        seq = self._next_sequence
        self._next_sequence += 1
        return seq

    def _expires(self, envelope: Envelope, enqueued_at: float) -> float:
        if self.is_dead_letter_queue:
            return math.inf
        default = self.properties.default_message_ttl
        # without a header the message's own ttl is infinite: the entity's default applies
        return enqueued_at + (default if envelope.header is None else min(envelope.ttl(), default))

    def _enqueue(self, envelope: Envelope, now: float) -> int:
        seq = self._next_sequence
        self._next_sequence = seq + 1
        # _expires, inline for a message with no header (the entity's default ttl)
        if envelope.header is None and not self.is_dead_letter_queue:
            expires_at = now + self.properties.default_message_ttl
        else:
            expires_at = self._expires(envelope, now)
        self.store.append(StoredMessage(seq, envelope, now, expires_at))  # _add, inline; stored available
        self.bytes += envelope.size
        key = envelope.session_id if self.requires_session else None
        heap = self._available.get(key)
        if heap is None:
            heap = self._available[key] = []
        _heappush(heap, seq)
        if expires_at != _NEVER:
            _heappush(self._expiry, (expires_at, seq, seq + 1))
            self._timed()
        if self.listeners:
            self._notify()
        return seq

    def enqueue_bodies(self, envelopes: list[Envelope], now: float) -> None:
        """:meth:`_enqueue` for each of ``envelopes`` (without a header, so that the entity's
        default time to live applies to each, and not scheduled; in an entity that does not
        require sessions), at one ``now``: consecutive sequence numbers, one expiry for them
        all (one entry of the expiry heap), the store appended in one call. The listeners
        are the caller's to tell; the caller has checked that they fit (:meth:`fit`:
        :meth:`accept_bodies`, or a partitioned entity storing its share of a run here)."""
        first = seq = self._next_sequence
        expires_at = self._expires(envelopes[0], now)  # no header: the same for each
        messages: list[StoredMessage] = []
        append = messages.append
        size = 0
        for envelope in envelopes:
            append(StoredMessage(seq, envelope, now, expires_at))  # stored available
            size += envelope.size
            seq += 1
        self._next_sequence = seq
        self.store.append_run(messages)
        self.bytes += size
        heap = self._available.get(None)
        if heap is None:
            heap = self._available[None] = []
        # Every sequence number in the heap was given out before ``first``: each new one is
        # above them all, so appended in order the list is still a heap (heappush's result).
        heap += range(first, seq)
        if expires_at != _NEVER:
            _heappush(self._expiry, (expires_at, first, seq))
            self._timed()

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
        msg.lock = None
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
            _, _, seqs, tokens = heapq.heappop(locks)
            self._lock_expiry_count -= len(seqs)
            for seq, token in zip(seqs, tokens, strict=True):
                msg = self.store.get(seq)
                if msg is not None and msg.lock == token and msg.locked_until <= now:
                    log.debug("%s: lock on message %d expired", self.path, seq)
                    self._unlock(msg, now)
                    changed = True
        for session_id in self.sessions.expired(now):
            self._release_session_messages(session_id, now)
            changed = True  # a free session: a receiver waiting for the next one may take it
        scheduled = self._scheduled
        while scheduled and scheduled[0][0] <= now:
            at, seq = heapq.heappop(scheduled)
            msg = self.store.get(seq)
            if msg is not None and msg.state is MessageState.SCHEDULED:
                msg.scheduled_at = None
                msg.enqueued_at = at
                self._make_available(msg)
                if msg.expires_at != math.inf:
                    heapq.heappush(self._expiry, (msg.expires_at, seq, seq + 1))
                changed = True
        expiry = self._expiry
        while expiry and expiry[0][0] <= now:
            _, first, end = heapq.heappop(expiry)
            for seq in range(first, end):
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
            if self._dead_letter(msg, TTL_EXPIRED, "The message expired and was dead lettered.", now) is not None:
                # Kept (never received: it expired), tried again as the wait grows.
                seq = msg.sequence_number
                heapq.heappush(self._expiry, (now + retry_wait(now - msg.expires_at), seq, seq + 1))
                self._timed()
        else:
            self._remove(msg.sequence_number)
            log.debug("%s: message %d expired", self.path, msg.sequence_number)

    def recover(self, next_sequence: int) -> None:
        """Index the messages a durable store brought back (call once, on an entity with no
        other messages): locks do not survive a restart, so a message that was locked is
        available again, its delivery count as taken with the lock (Service Bus does the same)."""
        self._next_sequence = max(self._next_sequence, next_sequence)
        for msg in self.store:
            self._index(msg, queued=False)
        if self._scheduled or self._expiry:
            self._timed()
        if len(self.store):
            self._notify()

    def _index(self, msg: StoredMessage, queued: bool) -> None:
        """Index a message read back from a store (:meth:`recover`); ``queued``: its sequence
        number is in the available heap already (not pushed twice: it would be picked twice)."""
        self.bytes += msg.envelope.size
        seq = msg.sequence_number
        if msg.state is MessageState.SCHEDULED and msg.scheduled_at is not None:
            heapq.heappush(self._scheduled, (msg.scheduled_at, seq))
            return
        if msg.deferred:
            msg.state = MessageState.DEFERRED
        else:
            msg.state = MessageState.AVAILABLE
            msg.lock = None
            if not queued:
                heapq.heappush(self._available.setdefault(self._key(msg), []), seq)
        if msg.expires_at != math.inf:
            heapq.heappush(self._expiry, (msg.expires_at, seq, seq + 1))

    def roll_back(self, seq: int, kept: StoredMessage | None, store: MessageStore) -> None:
        """Make message ``seq`` what the durable store holds (``kept``, as read back; None:
        nothing): a write that failed is taken back. ``store`` is this entity's store, changed
        without recording anything. A lock on the message is lost (as on a restart)."""
        msg = store.get(seq)
        queued = False
        if msg is not None:
            queued = msg.state is MessageState.AVAILABLE  # (its heap entry stays, skipped if it is gone)
            self._release_lock(msg)
            store.remove(seq)
            self.bytes -= msg.envelope.size
        if kept is not None:
            store.append(kept)
            self._index(kept, queued)
            self._timed()
            self._notify()

    # -- receiving ----------------------------------------------------------------
    def receive(
        self, now: float, *, lock: bool = True, session_id: str | None = None, owner: object | None = None
    ) -> StoredMessage | None:
        """The next available message (of ``session_id`` on a session entity), locked or removed.

        ``lock=False`` is receive-and-delete: the message leaves the entity. On a
        session entity the caller must hold the session (as ``owner``, when given).
        """
        found = self.receive_many(now, 1, lock=lock, session_id=session_id, owner=owner)
        return found[0] if found else None

    def receive_many(
        self, now: float, count: int, *, lock: bool = True, session_id: str | None = None, owner: object | None = None
    ) -> list[StoredMessage]:
        """Up to ``count`` next available messages, as :meth:`receive` one after another would
        give them (at one time ``now``: time is applied once, the locks taken together)."""
        self.tick(now)
        if self.requires_session and session_id is not None:
            self.sessions.held(session_id, now, owner)  # before anything changes: session-lock-lost
        return self._take(now, count, lock, session_id)

    def _take(self, now: float, count: int, lock: bool, session_id: str | None) -> list[StoredMessage]:
        """:meth:`receive_many` after its checks (time applied, the session held)."""
        out = self.pick(now, count, lock, session_id)
        if lock and out:
            self.lock_messages(out, now, session_id)
        return out

    def pick(self, now: float, count: int, lock: bool, session_id: str | None) -> list[StoredMessage]:
        """:meth:`_take` before the locks: the messages picked (receive-and-delete: removed).
        The caller applies time first (:meth:`tick`) and checks the session lock; a
        partitioned entity picks from several fragments so, then locks each one's together
        (:meth:`lock_messages`)."""
        out: list[StoredMessage] = []
        heap = self._available.get(session_id if self.requires_session else None)
        get = self.store.get
        available = MessageState.AVAILABLE
        left = count
        while heap and left > 0:
            seq = heapq.heappop(heap)
            msg = get(seq)
            if msg is None or msg.state is not available:
                continue
            if msg.expires_at <= now:
                self._expire(msg, now)
                continue
            msg.delivery_count += 1
            out.append(msg)
            left -= 1
            if not lock:
                self._remove(seq)
        return out

    def hold(self, msg: StoredMessage, at: float) -> None:
        """Put back a message a receive-and-delete took (:meth:`pick`) that could not be
        handed on, scheduled for ``at`` under its own sequence number: the clock's next try of
        a forward that its destination and the dead-letter queue both refused. Its delivery
        count keeps the try (a forwarding entity has no receiver: it counts the tries)."""
        msg.state = MessageState.SCHEDULED
        msg.scheduled_at = at
        msg.lock = None
        self._add(msg)
        heapq.heappush(self._scheduled, (at, msg.sequence_number))
        self._timed()

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

    def lock_messages(self, messages: list[StoredMessage], now: float, session_id: str | None) -> None:
        """Lock ``messages`` (taken at ``now``): a new token each, until one lock duration from
        now (a session's messages: until the session lock ends)."""
        pool = _pools.get(self.lock_tag)
        if pool is None:
            pool = _pools[self.lock_tag] = []
        session = self.requires_session and session_id is not None
        until = (
            self.sessions.held(session_id, now).locked_until  # type: ignore[arg-type]  # str: `session` says session_id is set
            if session
            else now + self.properties.lock_duration
        )
        count = len(messages)
        while len(pool) < count:
            pool += _fresh_tokens(self.lock_tag)
        tokens = pool[len(pool) - count :]  # a new token each (none used before: see _fresh_tokens)
        del pool[len(pool) - count :]
        for msg, token in zip(messages, tokens, strict=True):
            msg.state = _LOCKED
            msg.lock = token
            msg.locked_until = until
        store = self.store
        if type(store) is not MemoryStore:  # (MemoryStore.update does nothing)
            for msg in messages:
                store.update(msg)  # the delivery count taken with the lock survives a restart
        seqs = [msg.sequence_number for msg in messages]
        self._locks.update(zip(tokens, seqs, strict=True))
        if not session:
            self._push_lock_expiry(until, seqs, tokens)

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
            if not lock:
                self._remove(msg.sequence_number)
        if lock and picked:
            self.lock_messages(picked, now, session_id)
        return picked

    # -- settling -----------------------------------------------------------------
    def holds_lock(self, token: LockToken) -> bool:
        """Whether ``token`` names a lock this entity handed out (live or not yet noticed expired)."""
        return lock_key(token) in self._locks

    def holds_locks(self, keys: list[bytes]) -> bool:
        """Whether each of ``keys`` (lock tokens as :func:`~.store.lock_key` keys them) is one
        :meth:`holds_lock` finds: the check of a partitioned entity's settlements, one call
        per fragment."""
        return self._locks.keys() >= set(keys)

    def locked(self, token: LockToken, now: float) -> StoredMessage:
        """The message ``token`` locks; ``com.microsoft:message-lock-lost`` if the lock is gone."""
        key = lock_key(token)
        seq = self._locks.get(key)
        msg = None if seq is None else self.store.get(seq)
        session = self.requires_session and msg is not None and msg.session_id is not None
        if session or msg is None or msg.locked_until <= now:
            self.tick(now)  # what time decided first (a session's lock ends with the session)
        if msg is None or msg.lock != key or msg.state is not MessageState.LOCKED:
            self._locks.pop(key, None)
            raise EntityError(
                MESSAGE_LOCK_LOST,
                f"the lock {lock_text(token)} on a message of {self.path!r} expired or was lost; receive it again",
            )
        if session:
            self.sessions.held(msg.session_id, now)  # type: ignore[arg-type]  # str: `session` says it is set
        return msg

    def _release_lock(self, msg: StoredMessage) -> None:
        if msg.lock is not None:
            self._locks.pop(msg.lock, None)
        msg.lock = None

    def _push_lock_expiry(self, until: float, seqs: list[int], tokens: list[bytes]) -> None:
        """Locks (``seqs[i]`` by ``tokens[i]``) that run out together at ``until``."""
        if self._lock_expiry_count > 2 * len(self._locks) + LOCK_EXPIRY_SLACK:
            self._compact_lock_expiry()
        heapq.heappush(self._lock_expiry, (until, next(_order), seqs, tokens))
        self._lock_expiry_count += len(seqs)
        self._timed()

    def _compact_lock_expiry(self) -> None:
        """Keep only the entries of live locks (amortised O(1) per lock taken)."""
        live = []
        get = self.store.get
        for until, _, seqs, tokens in self._lock_expiry:
            kept_seqs, kept_tokens = [], []
            for seq, token in zip(seqs, tokens, strict=True):
                msg = get(seq)
                if msg is not None and msg.lock == token and msg.locked_until == until:
                    kept_seqs.append(seq)
                    kept_tokens.append(token)
            if kept_seqs:
                live.append((until, next(_order), kept_seqs, kept_tokens))
        heapq.heapify(live)
        self._lock_expiry = live
        self._lock_expiry_count = sum(len(entry[2]) for entry in live)

    def complete(self, token: LockToken, now: float) -> None:
        """End the message ``token`` locks: it leaves the entity; ``com.microsoft:message-lock-lost``
        if the lock is gone."""
        refusals = self.complete_all((token,), now)
        if refusals:
            raise refusals[0]

    def complete_all(self, tokens: Sequence[LockToken], now: float) -> dict[int, EntityError]:
        """:meth:`complete` each of ``tokens`` in turn; the refusals by index (empty: all done)."""
        refusals: dict[int, EntityError] = {}
        locks, get, remove = self._locks, self.store.get, self.store.remove
        plain = not self.requires_session
        freed = 0
        try:
            for i, token in enumerate(tokens):
                key = token if type(token) is bytes else lock_key(token)
                seq = locks.get(key)
                if seq is not None and plain:
                    # The hot path: a live lock (what :meth:`locked` finds without a tick) on a
                    # message outside any session, so nothing but this lock to end.
                    msg = get(seq)
                    if msg is not None and msg.lock == key and msg.locked_until > now and msg.state is _LOCKED:
                        del locks[key]
                        msg.lock = None
                        if remove(seq) is not None:  # _remove, inline
                            freed += msg.envelope.size
                        continue
                try:
                    msg = self.locked(token, now)
                except EntityError as exc:
                    refusals[i] = exc
                    continue
                self._release_lock(msg)
                self._remove(msg.sequence_number)
        finally:  # the bytes of those completed here, however the loop ends
            self.bytes -= freed
        return refusals

    def abandon(
        self, token: LockToken, now: float, annotations: dict[Any, Any] | None = None, *, counted: bool = True
    ) -> None:
        """Give the message back (or to the DLQ once its delivery count reaches MaxDeliveryCount).

        ``counted=False``: a ``released`` outcome, which is not a delivery attempt (AMQP 1.0
        3.4.4: "the delivery-count of the header of the released Message MUST NOT be
        incremented"); the count this delivery took is given back."""
        msg = self.locked(token, now)
        if annotations:
            msg.envelope = msg.envelope.with_annotations(annotations)
            self.store.update(msg, envelope=True)
        if not counted:
            _uncount(msg)
        self._unlock(msg, now)
        self._notify()

    def defer(self, token: LockToken, now: float, annotations: dict[Any, Any] | None = None) -> None:
        """Set the locked message aside (DEFERRED): it is received again only by its sequence number; its lock ends."""
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
        token: LockToken,
        now: float,
        reason: str | None = None,
        description: str | None = None,
        annotations: dict[Any, Any] | None = None,
        properties: dict[str, Any] | None = None,
    ) -> None:
        """Move the locked message to the dead-letter queue; refused (``amqp:not-allowed``, the
        lock kept) in a dead-letter queue: "you can't dead-letter a message from a DLQ"
        (Service Bus's documentation)."""
        msg = self.locked(token, now)
        if self.is_dead_letter_queue:
            raise dead_letter_refusal(self.path)
        kept = msg.envelope
        if annotations:
            msg.envelope = msg.envelope.with_annotations(annotations)
        refused = self._dead_letter(msg, reason, description, now, properties, told=True)
        if refused is not None:  # (a full dead-letter queue): the receiver is told, the lock kept
            msg.envelope = kept
            raise refused

    def renew_lock(self, token: LockToken, now: float) -> float:
        """Extend a message lock by the lock duration from now; the new locked-until."""
        msg = self.locked(token, now)
        if self.requires_session and msg.session_id is not None:
            msg.locked_until = self.sessions.renew(msg.session_id, now)
            return msg.locked_until
        msg.locked_until = now + self.properties.lock_duration
        self._push_lock_expiry(msg.locked_until, [msg.sequence_number], [lock_key(token)])
        return msg.locked_until

    def release(self, tokens: Iterable[LockToken], now: float, *, counted: bool = True) -> None:
        """End these locks now: the messages come back as after expiry (``counted=False``: with
        the delivery count they had before this delivery, as for a ``released`` outcome)."""
        changed = False
        for token in tokens:
            key = lock_key(token)
            seq = self._locks.get(key)
            msg = None if seq is None else self.store.get(seq)
            if msg is not None and msg.lock == key:
                if not counted:
                    _uncount(msg)
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
        if (
            not self.is_dead_letter_queue
            and msg.delivery_count >= self.properties.max_delivery_count
            and self._dead_letter(
                msg,
                MAX_DELIVERY_COUNT_EXCEEDED,
                f"Message could not be consumed after {self.properties.max_delivery_count} delivery attempts.",
                now,
            )
            is None
        ):
            return  # dead-lettered (refused by a full dead-letter queue: kept as below, tried at its next unlock)
        if msg.expires_at <= now:
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
        *,
        told: bool = False,
    ) -> EntityError | None:
        """Move ``msg`` to the dead letters (:attr:`dead_letter_sink`); what refused it (a
        full dead-letter queue), ``msg`` kept as it is, in its state: Service Bus loses no
        message for a full dead-letter queue. A refusal is warned of once per message (not
        at all when ``told``: a receiver's dead-letter, refused to it)."""
        seq = msg.sequence_number
        updates: dict[str, Any] = dict(properties or {})
        if reason is not None:
            updates[DEAD_LETTER_REASON] = reason
        if description is not None:
            updates[DEAD_LETTER_DESCRIPTION] = description
        envelope = msg.envelope.with_application_properties(updates) if updates else msg.envelope
        sink = self.dead_letter_sink
        if sink is None:
            # A dead-letter queue's own messages stay in it.
            self._remove(seq)
            self._enqueue(envelope, now)
            return None
        try:
            sink(envelope, now)
        except EntityError as exc:
            if not told and seq not in self._kept:
                if len(self._kept) >= self._kept_prune_at:  # (those since completed: gone)
                    self._kept = {kept for kept in self._kept if self.store.get(kept) is not None}
                    self._kept_prune_at = max(_KEPT_PRUNE_AT, 2 * len(self._kept))  # (amortised)
                self._kept.add(seq)
                what = "%s: message %d could not be dead-lettered (%s): kept, tried again (%s)"
                log.warning(what, self.path, seq, reason, exc)
            return exc
        self._release_lock(msg)
        self._remove(seq)
        if self._kept and seq in self._kept:
            self._kept.discard(seq)
            log.info("%s: message %d kept for its dead-letter queue was dead-lettered (%s)", self.path, seq, reason)
        else:
            log.info("%s: message %d dead-lettered (%s)", self.path, seq, reason)
        return None

    # -- sessions -----------------------------------------------------------------
    def _release_session_messages(self, session_id: str, now: float, *, counted: bool = True) -> bool:
        changed = False
        for msg in self.store:
            if msg.state is MessageState.LOCKED and msg.session_id == session_id:
                if not counted:
                    _uncount(msg)
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
        """The session receiver went away: its lock ends and its locked messages come back with
        the delivery count they had (closing is not a delivery attempt: Service Bus counts an
        expired lock or an abandon, and the session's lock did neither); listeners are told:
        a receiver waiting for the next available session may take it."""
        if self.sessions.release(session_id, owner):
            self._release_session_messages(session_id, now, counted=False)
            self._notify()

    # -- wire form ----------------------------------------------------------------
    def encode(self, msg: StoredMessage, *, peek: bool = False) -> bytes:
        """The message as delivered: Service Bus's annotations stamped, the body bytes untouched."""
        if not peek and not msg.deferred:
            return self.encode_all((msg,), None if msg.state is not _LOCKED else [msg.lock])[0]  # type: ignore[list-item]  # bytes: a LOCKED message has its lock
        locked = msg.locked_until if msg.state is MessageState.LOCKED else None
        stamps = delivery_stamps(msg.sequence_number, msg.enqueued_at, locked)
        # A deferred message stays deferred while a receive_deferred_messages lock holds it
        # (Service Bus reports its state as Deferred to that receiver and to peeks).
        stamps[MESSAGE_STATE] = Long(_STATE_CODE[MessageState.DEFERRED] if msg.deferred else _STATE_CODE[msg.state])
        count = msg.delivery_count if peek else (msg.delivery_count - 1 if msg.delivery_count > 0 else 0)
        return msg.envelope.encode(stamps, count, ttl_ms(msg.enqueued_at, msg.expires_at))

    def encode_all(self, messages: Sequence[StoredMessage], tags: Sequence[bytes] | None = None) -> list[bytes]:
        """:meth:`encode` (not ``peek``) of each message (a receiver's batch), in order;
        ``tags``: their lock tokens, for a peek-lock batch (the delivery-annotations carry them)."""
        return deliver_all(messages, tags)


def _besides(coming: int) -> str:
    """What a refusal adds about ``coming`` more on their way (the other copies of one send)."""
    return f" (and {coming} more on their way from the same send)" if coming else ""


def dead_letter_refusal(path: str) -> EntityError:
    """Why a message of the dead-letter queue ``path`` cannot be dead-lettered: "you can't
    dead-letter a message from a DLQ" (Service Bus's documentation); the lock is kept."""
    return EntityError(
        NOT_ALLOWED,
        f"{path!r} is a dead-letter queue: its messages cannot be dead-lettered again;"
        " complete the message (or resend a copy to the main entity)",
    )


def _uncount(msg: StoredMessage) -> None:
    """Give back the delivery count the current delivery took (it was not an attempt)."""
    if msg.delivery_count > 0:
        msg.delivery_count -= 1
