"""Partitioned queues, topics and subscriptions (seed 002, "Partitioned queues and topics").

"Each partitioned queue or topic consists of multiple fragments. Each fragment is stored
in a different messaging store and handled by a different message broker." Here a
fragment is an ordinary :class:`Entity` with its own store (the class a queue that is not
partitioned is), and :class:`PartitionedEntity` holds them: it is no :class:`Entity`
itself, but satisfies the same :class:`~.interface.MessagingEntity`, each call sent to
the fragment (or fragments) the rules below name. :class:`Partitions` is what an entity
and its dead-letter queue (and, for a topic, every subscription) share: the fragment
count, which fragments are down, and the rules that pick a fragment.

Rules, each kept in one place:

* the partition key (:meth:`Partitions.key`): "SessionId ... else PartitionKey ... else
  MessageId if RequiresDuplicateDetection"; "If the PartitionKey property is set to a
  value different from the SessionId property, Service Bus returns an invalid operation
  exception" (``com.microsoft:argument-error`` here, not retryable);
* a key pins the message to one fragment (a stable hash, so a restart keeps it); "if
  the fragment is temporarily unavailable, Service Bus returns an error": the send fails
  with ``amqp:internal-error`` and "The service was unable to process the request;
  please retry the operation", which is what Service Bus answers for a pinned send to a
  partition it cannot reach (Azure/azure-service-bus-go#178); the SDKs retry it;
* no key: "round robin ... If the chosen fragment is unavailable, Service Bus assigns
  the message to another fragment", so the send still succeeds;
* a batch is stored in one fragment, so its messages must share one key ("Batching
  brokered messages with distinct SessionId, PartitionKey, or MessageId is not
  supported for an entity with partitioning", ``com.microsoft:argument-error``);
* sequence numbers: "For partitioned entities, the topmost 16 bits reflect the
  partition identifier" (fragment ``i`` numbers from ``i << 48``); a request naming a
  sequence number goes to the fragment its top bits name;
* duplicate detection is per fragment ("all copies of the same message are handled by
  the same message broker");
* receiving "queries all fragments" and returns the first message found (fairly: the
  search starts after the fragment that answered last); a down fragment is skipped;
* peek reads one fragment at a time, so it "may return fewer messages than asked";
  callers loop from the last sequence number + 1, as the SDKs do;
* a session lives in its key's fragment: its messages, its lock and its state.

A fragment taken down (:meth:`Partitions.set_down`, or
:meth:`~amqplink.broker.namespace.namespace.Namespace.set_fragment_down`) keeps its
messages; receives skip it, and every request that needs it (a pinned send, settling a
message it holds, a deferred receive, a session in it) fails with ``amqp:internal-error``
until it is up again. The broker's own moves (dead-lettering, expiry) still reach it.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from itertools import chain, zip_longest
from typing import Any

from amqplink.broker.config import EntityProperties
from amqplink.broker.namespace.entity import KEY_UNKNOWN, LOCK_TAG_MASK, DeadLetterSink, Entity, Sent
from amqplink.broker.namespace.envelope import Envelope, bodies_only
from amqplink.broker.namespace.errors import (
    INTERNAL_ERROR,
    MESSAGE_LOCK_LOST,
    MESSAGE_NOT_FOUND,
    EntityError,
)
from amqplink.broker.namespace.partitions import DOWN_CONDITIONS, RETRY, SEQUENCE_SHIFT, Partitions, fragment_of
from amqplink.broker.namespace.sessions import SessionLock
from amqplink.broker.namespace.store import LockToken, MessageState, StoredMessage, lock_key, lock_text
from amqplink.sbwire.annotations import PARTITION_KEY

__all__ = [
    "DOWN_CONDITIONS",
    "PARTITION_KEY",
    "SEQUENCE_SHIFT",
    "PartitionedEntity",
    "Partitions",
    "fragment_of",
    "partitioned_dead_letter_queue",
    "partitions_for",
]

log = logging.getLogger(__name__)

class _Store:
    """The fragments' stores seen as one: counts, iteration in sequence order, lookups and
    removal by sequence number (each in the fragment its top bits name)."""

    def __init__(self, fragments: list[Entity]) -> None:
        self._fragments = fragments

    def _of(self, sequence_number: int) -> Entity | None:
        i = fragment_of(sequence_number)
        return self._fragments[i] if 0 <= i < len(self._fragments) else None

    def remove(self, sequence_number: int) -> StoredMessage | None:
        fragment = self._of(sequence_number)
        return None if fragment is None else fragment.store.remove(sequence_number)

    def get(self, sequence_number: int) -> StoredMessage | None:
        fragment = self._of(sequence_number)
        return None if fragment is None else fragment.store.get(sequence_number)

    def __len__(self) -> int:
        return sum(len(f.store) for f in self._fragments)

    def __iter__(self) -> Iterator[StoredMessage]:
        # Fragment i's numbers are all below fragment i+1's: concatenation is sequence order.
        for fragment in self._fragments:
            yield from fragment.store


class _SessionState(MutableMapping[str, bytes]):
    """Session state by session id, kept in the session's fragment."""

    def __init__(self, owner: PartitionedEntity) -> None:
        self._owner = owner

    def __getitem__(self, session_id: str) -> bytes:
        return self._owner.session_fragment(session_id).sessions.state[session_id]

    def __setitem__(self, session_id: str, value: bytes) -> None:
        self._owner.session_fragment(session_id).sessions.state[session_id] = value

    def __delitem__(self, session_id: str) -> None:
        del self._owner.session_fragment(session_id).sessions.state[session_id]

    def __iter__(self) -> Iterator[str]:
        for fragment in self._owner.fragments:
            yield from fragment.sessions.state

    def __len__(self) -> int:
        return sum(len(f.sessions.state) for f in self._owner.fragments)


class _Sessions:
    """:class:`~.interface.SessionView` of a partitioned entity: each call goes to the
    session's fragment (its lock and state live there)."""

    def __init__(self, owner: PartitionedEntity) -> None:
        self._owner = owner
        self.state = _SessionState(owner)

    def set_state(self, session_id: str, state: bytes | None, now: float | None = None) -> None:
        self._owner.session_fragment(session_id).sessions.set_state(session_id, state, now)

    @property
    def updated(self) -> dict[str, float]:
        """When each session's state was last set, over every fragment."""
        return {sid: at for fragment in self._owner.fragments for sid, at in fragment.sessions.updated.items()}

    def is_locked(self, session_id: str, now: float) -> bool:
        return self._owner.session_fragment(session_id).sessions.is_locked(session_id, now)

    def held(self, session_id: str, now: float, owner: object | None = None) -> SessionLock:
        return self._owner.session_fragment(session_id).sessions.held(session_id, now, owner)

    def renew(self, session_id: str, now: float, owner: object | None = None) -> float:
        fragment = self._owner.session_fragment(session_id, "renewing a session lock")
        return fragment.sessions.renew(session_id, now, owner)


class PartitionedEntity:
    """A queue, subscription or dead-letter queue made of fragments; receivers see one entity.

    It is no :class:`Entity`: it holds ``fragments`` (fragment ``i`` is ``fragment(i)``,
    an ordinary :class:`Entity` with its own store, the class a plain entity is) and sends
    each call of :class:`~.interface.MessagingEntity` to the fragment, or the fragments,
    the rules above name. ``partitions`` is the state it shares with its dead-letter queue
    (and a topic's other subscriptions): :meth:`Partitions.set_down` takes a fragment down.
    """

    def __init__(
        self,
        path: str,
        properties: EntityProperties,
        partitions: Partitions,
        *,
        is_dead_letter_queue: bool = False,
    ) -> None:
        self.path = path
        self.properties = properties
        """The entity's settings (the namespace sets each fragment's too: they are alike)."""
        self.is_dead_letter_queue = is_dead_letter_queue
        self.requires_session = properties.requires_session and not is_dead_letter_queue
        self.partitions = partitions
        self.listeners: list[Callable[[], None]] = []
        """Called when messages may have become available: every fragment's listeners are
        this one list, so a wake-up from any fragment reaches every receiver."""
        self.dead_letter_sink: DeadLetterSink | None = None
        """Where the fragments' dead letters go (set by the namespace, as on any entity)."""
        self._on_timed: Callable[[Entity], None] | None = None
        self.fragments = [  # the class a plain entity is; numbered from (i << 48) + 1
            Entity(
                path, properties, is_dead_letter_queue=is_dead_letter_queue, first_sequence=(i << SEQUENCE_SHIFT) + 1
            )
            for i in range(partitions.count)
        ]
        for index, fragment in enumerate(self.fragments):
            fragment.lock_tag = index  # a settlement's token names its fragment (see _by_token)
            fragment.listeners = self.listeners
            if not is_dead_letter_queue:
                fragment.dead_letter_sink = self._fragment_dead_letter
        self._store = _Store(self.fragments)
        self.sessions = _Sessions(self)
        self._next_receive = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r}, fragments={len(self.fragments)}, messages={len(self.store)})"

    @property
    def store(self) -> _Store:
        """The fragments' stores seen as one: counts, iteration, lookups by sequence number."""
        return self._store

    @store.setter
    def store(self, value: object) -> None:
        raise TypeError(f"{self.path!r} is partitioned: give each of its fragments (.fragments) a store of its own")

    @property
    def bytes(self) -> int:
        """Bytes held by all fragments."""
        return sum(f.bytes for f in self.fragments)

    def fragment(self, index: int) -> Entity:
        """Fragment ``index`` (0-based)."""
        return self.fragments[index]

    @property
    def on_timed(self) -> Callable[[Entity], None] | None:
        """Told of a fragment with a new deadline (set on every fragment: no hop through here)."""
        return self._on_timed

    @on_timed.setter
    def on_timed(self, value: Callable[[Entity], None] | None) -> None:
        self._on_timed = value
        for fragment in self.fragments:
            fragment.on_timed = value

    def _notify(self) -> None:
        for listener in list(self.listeners):  # a listener may remove itself
            listener()

    def _fragment_dead_letter(self, envelope: Envelope, now: float) -> None:
        """A fragment's dead-letter sink: the entity's; refused (the fragment keeps the
        message) when the namespace wired none, as when its dead-letter queue is full."""
        sink = self.dead_letter_sink
        if sink is None:
            raise EntityError(INTERNAL_ERROR, f"{self.path!r} has no dead-letter queue wired")
        sink(envelope, now)

    def session_fragment(self, session_id: str, what: str | None = None) -> Entity:
        """The fragment a session lives in; ``amqp:internal-error`` if it is down and ``what`` needs it."""
        index = self.partitions.index(session_id)
        if what is not None:
            self.partitions.require_up(index, what)
        return self.fragments[index]

    def _by_sequence(self, sequence_number: int, what: str) -> Entity:
        index = fragment_of(sequence_number)
        if not 0 <= index < len(self.fragments):
            raise EntityError(MESSAGE_NOT_FOUND, f"no message with sequence number {sequence_number} in {self.path!r}")
        self.partitions.require_up(index, what)
        return self.fragments[index]

    def _by_token(self, token: LockToken, what: str | None) -> Entity:
        """The fragment holding the lock ``token`` (the one its low 16 bits name, else any);
        ``amqp:internal-error`` if it is down and ``what`` needs it; lock-lost if none holds it."""
        if type(token) is not bytes:
            token = lock_key(token)
        if len(token) == 16:
            index = (token[14] << 8 | token[15]) & LOCK_TAG_MASK  # the GUID's low 16 bits: see Entity.lock_tag
            if index < len(self.fragments):
                fragment = self.fragments[index]
                if fragment.holds_lock(token):
                    if what is not None and self.partitions.down[index]:
                        self.partitions.require_up(index, what)
                    return fragment
        for index, fragment in enumerate(self.fragments):
            if fragment.holds_lock(token):
                if what is not None:
                    self.partitions.require_up(index, what)
                return fragment
        raise self._lock_lost(token)

    def _lock_lost(self, token: LockToken) -> EntityError:
        """The refusal of a lock token no fragment holds."""
        return EntityError(
            MESSAGE_LOCK_LOST,
            f"the lock {lock_text(token)} on a message of {self.path!r} expired or was lost; receive it again",
        )

    # -- adding -----------------------------------------------------------------------
    def check_accept(self, envelopes: list[Envelope], key: Any = KEY_UNKNOWN) -> None:
        """Refuse what storing would: a keyed batch is checked against its fragment; a keyless
        one needs a fragment that is up and can take it all. ``key``: theirs when known."""
        self.fragment_for(envelopes, key)

    def fragment_for(
        self,
        envelopes: list[Envelope],
        key: Any = KEY_UNKNOWN,
        *,
        start: int = 0,
        check: Callable[[Entity, list[Envelope]], None] = Entity.check_accept,
    ) -> int:
        """The fragment that can store ``envelopes`` together, as :meth:`check_accept` finds
        it: the one their key pins (``key``: theirs when known; whether it is up is the
        sender's check, :meth:`Partitions.admit`, not the broker's own moves'), else the first
        fragment from ``start`` that is up and that ``check`` passes. ``check(fragment,
        envelopes)`` raises the fragment's refusal (:meth:`Entity.check_accept`; a send's plan
        counts what it has put there already); the last refusal is raised when none takes them."""
        partitions = self.partitions
        if key is KEY_UNKNOWN:
            key = partitions.key(envelopes[0]) if envelopes else None
        if key is not None:
            index = partitions.index(key)
            check(self.fragments[index], envelopes)
            return index
        refused: EntityError | None = None
        for index in partitions.up_from(start):
            try:
                check(self.fragments[index], envelopes)
                return index
            except EntityError as exc:
                refused = exc
        if refused is not None:
            raise refused
        raise EntityError(INTERNAL_ERROR, f"{RETRY} Every fragment of {self.path!r} is unavailable; retry later")

    def accept(self, envelope: Envelope, now: float) -> int:
        """Store in the key's fragment, or the next fragment (round robin) that is up and has room."""
        return self._accept(envelope, self.partitions.key(envelope), now)

    def accept_keyless(self, envelope: Envelope, now: float) -> int:
        """Store a sent message with no partition key (:meth:`Partitions.key` is None) in the
        next fragment (round robin) that is up and has room; ``amqp:internal-error`` when all are down."""
        partitions = self.partitions
        index = partitions.round_robin()
        if partitions.down[index]:  # round_robin picks a down fragment only when all are
            raise EntityError(INTERNAL_ERROR, f"{RETRY} Every fragment of {self.path!r} is unavailable; retry later")
        try:
            return self.fragments[index].accept(envelope, now)
        except EntityError:
            return self._accept(envelope, None, now)  # full: the others in turn

    def accept_bodies(self, sent: Sequence[Sent], now: float) -> int:
        """:meth:`Entity.accept_bodies` for a partitioned queue: each message of ``sent`` that
        is only a body (so has no partition key) goes where :meth:`accept_keyless` puts it
        when the next fragment of the round robin is up and has room (:meth:`Entity.fit`),
        until one that is not such a message or that its fragment does not take (the round
        robin left where it was): how many were stored. The caller sends that one and those
        after it one at a time. Each fragment stores its share of the run in one go
        (:meth:`Entity.enqueue_bodies`); the listeners are told once, after them all."""
        partitions = self.partitions
        if any(partitions.down):
            return 0  # round_robin passes over a fragment that is down: accept_keyless decides
        if self.requires_session:
            return 0  # no session id: accept refuses each
        envelopes = bodies_only(sent, self.properties.max_message_size)
        if not envelopes:
            return 0
        fragments = self.fragments
        count = partitions.count
        start = partitions._next  # round_robin, inline: every fragment is up
        # The message at ``k`` of the run goes to fragment ``(start + k) % count``: the
        # fragment ``turn`` places after ``start`` gets the messages at turn, turn + count, ...
        shares = [envelopes[turn::count] for turn in range(count)]
        stop = len(envelopes)  # the first message its fragment refuses (if any)
        for turn, share in enumerate(shares):
            if share:
                taken = fragments[(start + turn) % count].fit(share)
                if taken < len(share) and taken * count + turn < stop:
                    stop = taken * count + turn
        if not stop:
            return 0
        for turn, share in enumerate(shares):
            if turn < stop:
                taken = (stop - turn + count - 1) // count  # its messages before ``stop``
                fragments[(start + turn) % count].enqueue_bodies(share if taken == len(share) else share[:taken], now)
        partitions._next = (start + stop) % count
        self._notify()
        return stop

    def _accept(self, envelope: Envelope, key: Any, now: float) -> int:
        partitions = self.partitions
        if key is not None:
            return self.fragments[partitions.index(key)].accept(envelope, now)
        refused: EntityError | None = None
        for _ in range(partitions.count):
            fragment = self.fragments[partitions.round_robin()]
            try:
                return fragment.accept(envelope, now)
            except EntityError as exc:
                refused = exc
        assert refused is not None
        raise refused

    def accept_all(self, envelopes: list[Envelope], now: float, key: Any = KEY_UNKNOWN) -> None:
        """Each message to its fragment through :meth:`accept` (all or none: checked first).
        ``key``: their partition key when the caller has it (:meth:`Partitions.admit`)."""
        partitions = self.partitions
        if key is KEY_UNKNOWN:
            key = partitions.key(envelopes[0]) if envelopes else None
        if len(envelopes) != 1 or key is not None or all(partitions.down):
            self.check_accept(envelopes, key)
        # One keyless message needs no check first: the round robin passes over a refusing fragment.
        for envelope in envelopes:
            self._accept(envelope, key, now)

    def schedule(self, envelope: Envelope, at: float, now: float) -> int:
        """Schedule in the fragment the message's key pins (round robin without a key)."""
        partitions = self.partitions
        key = partitions.key(envelope)
        if key is None:
            return self.fragments[partitions.round_robin()].schedule(envelope, at, now)
        index = partitions.pinned(key)
        return self.fragments[index].schedule(partitions.stamp(envelope), at, now)

    def cancel_scheduled(self, sequence_numbers: Iterable[int]) -> None:
        """Cancel in each message's fragment (the top bits of its sequence number); all checked first."""
        groups = self._groups(sequence_numbers, MessageState.SCHEDULED, "cancelling scheduled messages")
        for index, seqs in groups.items():
            self.fragments[index].cancel_scheduled(seqs)

    def _groups(self, sequence_numbers: Iterable[int], state: MessageState, what: str) -> dict[int, list[int]]:
        """Sequence numbers by fragment, each checked to be in ``state`` first (all or nothing)."""
        groups: dict[int, list[int]] = {}
        for seq in sequence_numbers:
            fragment = self._by_sequence(seq, what)
            msg = fragment.store.get(seq)
            if msg is None or msg.state is not state:
                raise EntityError(
                    MESSAGE_NOT_FOUND, f"no {state.value} message with sequence number {seq} in {self.path!r}"
                )
            groups.setdefault(fragment_of(seq), []).append(seq)
        return groups

    # -- time -------------------------------------------------------------------------
    def tick(self, now: float) -> None:
        """:meth:`Entity.tick` of every fragment."""
        for fragment in self.fragments:
            fragment.tick(now)

    def next_deadline(self) -> float:
        """The earliest deadline of the fragments."""
        return min(f.next_deadline() for f in self.fragments)

    # -- receiving --------------------------------------------------------------------
    def receive(
        self, now: float, *, lock: bool = True, session_id: str | None = None, owner: object | None = None
    ) -> StoredMessage | None:
        """:meth:`receive_many` of one: the next message of the fragments that are up."""
        found = self.receive_many(now, 1, lock=lock, session_id=session_id, owner=owner)
        return found[0] if found else None

    def receive_many(
        self, now: float, count: int, *, lock: bool = True, session_id: str | None = None, owner: object | None = None
    ) -> list[StoredMessage]:
        """Messages of the fragments that are up, one from each in turn, starting after the
        one that answered last (as many single receives would find them)."""
        if self.requires_session and session_id is not None:
            index = self.partitions.index(session_id)
            if self.partitions.is_down(index):
                return []  # the session's messages are out of reach until its fragment is up
            return self.fragments[index].receive_many(now, count, lock=lock, session_id=session_id, owner=owner)
        fragments, down = self.fragments, self.partitions.down
        total = len(fragments)
        for fragment in fragments:
            fragment.tick(now)
        groups: dict[int, list[StoredMessage]] = {}  # each fragment locks its own together
        start = self._next_receive
        order = [i for i in range(start, total) if not down[i]] + [i for i in range(start) if not down[i]]
        out: list[StoredMessage] = []
        rounds = count // len(order) if order else 0
        exhausted = False
        if rounds > 1:
            # The first ``rounds`` turns of the one-at-a-time search below take at most one
            # message per fragment each: the same messages as one pick of ``rounds`` per fragment.
            taken = [(i, fragments[i].pick(now, rounds, lock, session_id)) for i in order]
            if all(len(found) == rounds for _, found in taken):
                # Every fragment had enough: turn by turn, the last answer from the last fragment.
                for answers in zip(*(found for _, found in taken), strict=True):
                    out += answers
                last = order[-1]
                self._next_receive = last + 1 if last + 1 < total else 0
            else:
                # Turn by turn over the fragments that gave any (zip_longest's gaps: a
                # fragment out of messages), the last answer from the last fragment that
                # gave as many as the longest answer.
                answered = [(index, found) for index, found in taken if found]
                longest = max((len(found) for _, found in answered), default=0)
                if answered:
                    turns = chain.from_iterable(zip_longest(*(found for _, found in answered)))
                    out = [msg for msg in turns if msg is not None]
                    last = next(index for index, found in reversed(answered) if len(found) == longest)
                    self._next_receive = last + 1 if last + 1 < total else 0
                # Each fragment gave fewer than asked, so has none left: the one-at-a-time
                # search below would find none.
                exhausted = longest < rounds
            groups = {index: found for index, found in taken if found}
        index, misses = start, 0
        while not exhausted and len(out) < count and misses < total:
            if not down[index] and (found := fragments[index].pick(now, 1, lock, session_id)):
                out += found
                group = groups.get(index)
                if group is None:
                    groups[index] = found
                else:
                    group += found
                misses = 0
                self._next_receive = index + 1 if index + 1 < total else 0
            else:
                misses += 1
            index = index + 1 if index + 1 < total else 0
        if lock:
            for index, group in groups.items():
                fragments[index].lock_messages(group, now, session_id)
        return out

    def restore(self, msg: StoredMessage) -> None:
        """:meth:`Entity.restore` in the message's fragment."""
        self.fragments[fragment_of(msg.sequence_number)].restore(msg)

    def peek(self, from_sequence: int, count: int, now: float, *, session_id: str | None = None) -> list[StoredMessage]:
        """Messages of one fragment only: the first (by sequence number) with any at or after
        ``from_sequence``; so fewer than ``count`` may come back while more remain."""
        partitions = self.partitions
        if session_id is not None:
            index = partitions.index(session_id)
            if partitions.is_down(index):
                return []
            return self.fragments[index].peek(from_sequence, count, now, session_id=session_id)
        start = max(0, fragment_of(from_sequence))
        for index in range(start, len(self.fragments)):
            if partitions.is_down(index):
                continue
            low = from_sequence if index == start else index << SEQUENCE_SHIFT
            found = self.fragments[index].peek(low, count, now)
            if found:
                return found
        return []

    def receive_deferred(
        self,
        sequence_numbers: Iterable[int],
        now: float,
        *,
        lock: bool = True,
        session_id: str | None = None,
        owner: object | None = None,
    ) -> list[StoredMessage]:
        """Deferred messages from their fragments, in the order asked for; all checked first."""
        seqs = list(sequence_numbers)
        groups = self._groups(seqs, MessageState.DEFERRED, "receiving deferred messages")
        found: dict[int, StoredMessage] = {}
        for index, group in groups.items():
            for msg in self.fragments[index].receive_deferred(
                group, now, lock=lock, session_id=session_id, owner=owner
            ):
                found[msg.sequence_number] = msg
        return [found[seq] for seq in seqs if seq in found]

    # -- settling ---------------------------------------------------------------------
    def holds_lock(self, token: LockToken) -> bool:
        """Whether any fragment handed out the lock ``token``."""
        return any(f.holds_lock(token) for f in self.fragments)

    def locked(self, token: LockToken, now: float) -> StoredMessage:
        """The message ``token`` locks, from the fragment holding it."""
        return self._by_token(token, "reading a locked message").locked(token, now)

    def complete(self, token: LockToken, now: float) -> None:
        """:meth:`complete_all` of one token; its refusal raised."""
        refusals = self.complete_all((token,), now)
        if refusals:
            raise refusals[0]

    def complete_all(self, tokens: Sequence[LockToken], now: float) -> dict[int, EntityError]:
        """Each fragment completes its own tokens together (in their order); the refusals by
        index, in index order, as one :meth:`complete` after another would make them."""
        refusals: dict[int, EntityError] = {}
        fragments = self.fragments
        held = self._held_groups(tokens)
        if held is not None:  # the usual: no token for the one-at-a-time rules below
            where: dict[LockToken, int] | None = None
            for index, group in enumerate(held):
                if group and (found := fragments[index].complete_all(group, now)):
                    if where is None:
                        where = {token: i for i, token in enumerate(tokens)}  # (distinct tokens)
                    for j, refusal in found.items():
                        refusals[where[group[j]]] = refusal
            return dict(sorted(refusals.items())) if len(refusals) > 1 else refusals
        down = self.partitions.down
        total = len(fragments)
        groups: list[list[int]] = [[] for _ in fragments]  # the indices of each fragment's tokens
        grouped: set[builtins.bytes] = set()
        for i, token in enumerate(tokens):
            key = token if type(token) is bytes else lock_key(token)
            if len(key) == 16:  # _by_token's first look, for a fragment that is up
                index = (key[14] << 8 | key[15]) & LOCK_TAG_MASK
                if index < total and not down[index] and fragments[index].holds_lock(key):
                    if key in grouped:
                        # A repeat: its first ends the lock, completed or refused, so one complete
                        # after another finds it in no fragment (_by_token's refusal, no tick).
                        refusals[i] = self._lock_lost(key)
                        continue
                    grouped.add(key)
                    groups[index].append(i)
                    continue
            try:
                self._by_token(token, "completing a message").complete(token, now)
            except EntityError as exc:
                refusals[i] = exc
        for index, positions in enumerate(groups):
            if positions:
                for j, refusal in fragments[index].complete_all([tokens[i] for i in positions], now).items():
                    refusals[positions[j]] = refusal
        return dict(sorted(refusals.items())) if len(refusals) > 1 else refusals

    def _held_groups(self, tokens: Sequence[LockToken]) -> list[list[builtins.bytes]] | None:
        """The tokens by fragment (in their order) when each is a distinct ``bytes`` lock
        token held by its fragment (the one its low 16 bits name) and that fragment is up:
        what :meth:`complete_all` groups when none takes its one-at-a-time rules (a repeat,
        a token of no fragment or of one that is down); None when any would."""
        down = self.partitions.down
        fragments = self.fragments
        total = len(fragments)
        groups: list[list[builtins.bytes]] = [[] for _ in fragments]
        add = [group.append for group in groups]
        for token in tokens:
            if type(token) is not bytes or len(token) != 16:
                return None
            index = token[14] << 8 | token[15]  # _by_token's (two bytes: LOCK_TAG_MASK's 16 bits)
            if index >= total or down[index]:
                return None
            add[index](token)
        if len(set(tokens)) != len(tokens):
            return None
        for fragment, group in zip(fragments, groups, strict=True):
            if group and not fragment.holds_locks(group):
                return None
        return groups

    def abandon(
        self, token: LockToken, now: float, annotations: dict[Any, Any] | None = None, *, counted: bool = True
    ) -> None:
        """:meth:`Entity.abandon` in the fragment holding the lock (``amqp:internal-error`` if it is down)."""
        self._by_token(token, "abandoning a message").abandon(token, now, annotations, counted=counted)

    def defer(self, token: LockToken, now: float, annotations: dict[Any, Any] | None = None) -> None:
        """:meth:`Entity.defer` in the fragment holding the lock."""
        self._by_token(token, "deferring a message").defer(token, now, annotations)

    def dead_letter(
        self,
        token: LockToken,
        now: float,
        reason: str | None = None,
        description: str | None = None,
        annotations: dict[Any, Any] | None = None,
        properties: dict[str, Any] | None = None,
    ) -> None:
        """:meth:`Entity.dead_letter` in the fragment holding the lock."""
        self._by_token(token, "dead-lettering a message").dead_letter(
            token, now, reason, description, annotations, properties
        )

    def renew_lock(self, token: LockToken, now: float) -> float:
        """:meth:`Entity.renew_lock` in the fragment holding the lock."""
        return self._by_token(token, "renewing a lock").renew_lock(token, now)

    def _holders(self, tokens: Iterable[LockToken]) -> dict[int, list[LockToken]]:
        """The tokens by the fragment holding each (up or down); unknown ones are left out."""
        by_fragment: dict[int, list[LockToken]] = {}
        for token in tokens:
            for index, fragment in enumerate(self.fragments):
                if fragment.holds_lock(token):
                    by_fragment.setdefault(index, []).append(token)
                    break
        return by_fragment

    def release(self, tokens: Iterable[LockToken], now: float, *, counted: bool = True) -> None:
        """Locks ended now: released in whichever fragment holds them, up or down."""
        for index, group in self._holders(tokens).items():
            self.fragments[index].release(group, now, counted=counted)

    def expire_locks(self, now: float) -> int:
        """Every fragment's message and session locks ended now, up or down (fault
        injection, as the broker's own expiry reaches a down fragment); how many."""
        return sum(fragment.expire_locks(now) for fragment in self.fragments)

    # -- sessions ---------------------------------------------------------------------
    def available_sessions(self, now: float) -> list[str]:
        """The available sessions of the fragments that are up, fragment by fragment."""
        out: list[str] = []
        for index in self.partitions.up_from(0):
            out += self.fragments[index].available_sessions(now)
        return out

    def accept_session(self, session_id: str | None, owner: object, now: float) -> tuple[str, float] | None:
        """Lock ``session_id`` in its fragment, or the next available session of the fragments that are up, in turn."""
        if session_id is not None:
            return self.session_fragment(session_id, "locking a session").accept_session(session_id, owner, now)
        if not self.requires_session:
            return self.fragments[0].accept_session(None, owner, now)  # refused: not a session entity
        for index in self.partitions.up_from(self._next_receive):
            taken = self.fragments[index].accept_session(None, owner, now)
            if taken is not None:
                self._next_receive = (index + 1) % len(self.fragments)
                return taken
        return None

    def close_session(self, session_id: str, owner: object, now: float) -> None:
        """:meth:`Entity.close_session` in the session's fragment."""
        self.session_fragment(session_id).close_session(session_id, owner, now)

    # -- wire form --------------------------------------------------------------------
    # (``builtins.bytes``: in this class ``bytes`` is the property above)
    def encode(self, msg: StoredMessage, *, peek: bool = False) -> builtins.bytes:
        """The message as its fragment delivers it."""
        return self.fragments[fragment_of(msg.sequence_number)].encode(msg, peek=peek)

    def encode_all(
        self, messages: Sequence[StoredMessage], tags: Sequence[builtins.bytes] | None = None
    ) -> list[builtins.bytes]:
        """:meth:`encode` of each message (a receiver's batch, from any fragments), in order:
        the wire form depends on the message alone, so one fragment encodes them all."""
        return self.fragments[0].encode_all(messages, tags)


def partitioned_dead_letter_queue(path: str, properties: EntityProperties, partitions: Partitions) -> PartitionedEntity:
    """The dead-letter queue of a partitioned entity: partitioned alike, sharing its fragments' health."""
    return PartitionedEntity(f"{path}/$DeadLetterQueue", properties, partitions, is_dead_letter_queue=True)


def partitions_for(path: str, properties: EntityProperties, default_count: int) -> Partitions:
    """The shared fragment state of a new partitioned queue or topic."""
    return Partitions(
        path,
        properties.partition_count or default_count,
        by_message_id=properties.requires_duplicate_detection,
        duplicate_window=properties.duplicate_detection_window,
    )
