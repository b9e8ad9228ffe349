"""What the rest of the broker may ask of a queue, a subscription or a dead-letter queue.

Two classes satisfy :class:`MessagingEntity`: :class:`~.entity.Entity`, which holds its
messages itself, and :class:`~.partitioned.PartitionedEntity`, which holds fragments
(each an ordinary :class:`~.entity.Entity`) and routes every call to the fragment (or
fragments) the partitioning rules name. Neither derives from the other. The namespace,
the Service Bus server (links, ``$management``), the management REST API, fault injection
and the durable store talk to this interface only; what only a container of entities
needs of an entity (picking messages without locking them, storing a run of bodies known
to fit, asking whether it holds a set of locks) is :class:`~.entity.Entity`'s own API.

A plain entity is one fragment, itself (:attr:`MessagingEntity.fragments`); its
:attr:`~MessagingEntity.partitions` is None.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from amqplink.broker.config import EntityProperties
    from amqplink.broker.namespace.entity import DeadLetterSink, Entity
    from amqplink.broker.namespace.envelope import Envelope, Sent
    from amqplink.broker.namespace.errors import EntityError
    from amqplink.broker.namespace.partitioned import Partitions
    from amqplink.broker.namespace.sessions import SessionLock
    from amqplink.broker.namespace.store import LockToken, StoredMessage

__all__ = ["MessagingEntity", "SessionView", "StoredMessages"]


class StoredMessages(Protocol):
    """An entity's messages by sequence number, iterated in sequence order (its store, or
    its fragments' stores seen as one)."""

    def get(self, sequence_number: int) -> StoredMessage | None:
        """The message with this sequence number, or None."""

    def remove(self, sequence_number: int) -> StoredMessage | None:
        """Take the message with this sequence number out (None if there is none)."""

    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[StoredMessage]: ...


class SessionView(Protocol):
    """An entity's sessions as ``$management`` reads and changes them (each call goes to the
    session's fragment on a partitioned entity)."""

    @property
    def state(self) -> MutableMapping[str, bytes]:
        """Each session's state (the bytes ``$management`` set), by session id."""

    @property
    def updated(self) -> Mapping[str, float]:
        """When each session's state was last set, by session id."""

    def set_state(self, session_id: str, state: bytes | None, now: float | None = None) -> None:
        """Set (``None``: clear) the state of ``session_id``."""

    def is_locked(self, session_id: str, now: float) -> bool:
        """Whether a live lock holds ``session_id``."""

    def held(self, session_id: str, now: float, owner: object | None = None) -> SessionLock:
        """The live lock on ``session_id`` (of ``owner`` if given); session-lock-lost otherwise."""

    def renew(self, session_id: str, now: float, owner: object | None = None) -> float:
        """Extend the lock on ``session_id`` by the lock duration from now; the new locked-until."""


class MessagingEntity(Protocol):
    """A queue, a subscription or a dead-letter queue, partitioned or not.

    Time is always passed in (``now``); the rules each method keeps are on
    :class:`~.entity.Entity`, and :class:`~.partitioned.PartitionedEntity` says where it
    sends each call.
    """

    path: str
    properties: EntityProperties
    is_dead_letter_queue: bool
    requires_session: bool
    listeners: list[Callable[[], None]]
    """Called when messages may have become available."""
    dead_letter_sink: DeadLetterSink | None
    """Where dead-lettered messages go (set by the namespace)."""
    on_timed: Callable[[Entity], None] | None
    """Told of each :class:`~.entity.Entity` (the entity itself or one of its fragments)
    that gains a deadline: the namespace's clock visits it."""

    @property
    def partitions(self) -> Partitions | None:
        """The fragments' shared state (count, which are down, the rules that pick one);
        None: not partitioned."""
        ...

    @property
    def store(self) -> StoredMessages:
        """The entity's messages by sequence number."""

    @property
    def bytes(self) -> int:
        """The size of the messages held (what ``MaxSizeInMegabytes`` bounds)."""

    @property
    def sessions(self) -> SessionView:
        """The entity's sessions, as ``$management`` reads and changes them."""

    @property
    def fragments(self) -> Sequence[Entity]:
        """The entities holding the messages: the entity itself, or a partitioned entity's
        fragments (fragment ``i`` at index ``i``)."""
        ...

    # -- adding -------------------------------------------------------------------
    def check_accept(self, envelopes: list[Envelope]) -> None:
        """Raise what storing these messages would raise, changing nothing."""

    def accept(self, envelope: Envelope, now: float) -> int:
        """Store a sent message (or schedule it); its sequence number."""

    def accept_all(self, envelopes: list[Envelope], now: float, key: Any = ...) -> None:
        """Store several sent messages, all or none (``key``: their partition key, when known)."""

    def accept_bodies(self, sent: Sequence[Sent], now: float) -> int:
        """Store the messages of ``sent`` that are a body alone, as one run; how many it took."""

    def schedule(self, envelope: Envelope, at: float, now: float) -> int:
        """Hold a message until ``at``; its sequence number."""

    def cancel_scheduled(self, sequence_numbers: Iterable[int]) -> None:
        """Drop scheduled messages (none if any is not scheduled here)."""

    # -- time ---------------------------------------------------------------------
    def tick(self, now: float) -> None:
        """Apply what time decides: lock expiry, scheduled messages, TTL."""

    def next_deadline(self) -> float:
        """The earliest time :meth:`tick` has something to do."""

    # -- receiving ----------------------------------------------------------------
    def receive(
        self, now: float, *, lock: bool = True, session_id: str | None = None, owner: object | None = None
    ) -> StoredMessage | None:
        """The next available message, locked (``lock``) or removed."""

    def receive_many(
        self, now: float, count: int, *, lock: bool = True, session_id: str | None = None, owner: object | None = None
    ) -> list[StoredMessage]:
        """Up to ``count`` next available messages, as :meth:`receive` in turn would give them."""

    def restore(self, msg: StoredMessage) -> None:
        """Undo :meth:`receive` for a message that could not be handed over."""

    def peek(
        self, from_sequence: int, count: int, now: float, *, session_id: str | None = None
    ) -> list[StoredMessage]:
        """Up to ``count`` messages from ``from_sequence`` on, without locking them."""

    def receive_deferred(
        self,
        sequence_numbers: Iterable[int],
        now: float,
        *,
        lock: bool = True,
        session_id: str | None = None,
        owner: object | None = None,
    ) -> list[StoredMessage]:
        """Deferred messages by sequence number."""

    # -- settling -----------------------------------------------------------------
    def holds_lock(self, token: LockToken) -> bool:
        """Whether ``token`` names a lock this entity handed out."""

    def locked(self, token: LockToken, now: float) -> StoredMessage:
        """The message ``token`` locks (``com.microsoft:message-lock-lost`` if the lock is gone)."""

    def complete(self, token: LockToken, now: float) -> None:
        """Settle the message ``token`` locks: it leaves the entity."""

    def complete_all(self, tokens: Sequence[LockToken], now: float) -> dict[int, EntityError]:
        """:meth:`complete` each of ``tokens``; the refusals by index."""

    def abandon(
        self, token: LockToken, now: float, annotations: dict[Any, Any] | None = None, *, counted: bool = True
    ) -> None:
        """Give the locked message back (to the DLQ past MaxDeliveryCount)."""

    def defer(self, token: LockToken, now: float, annotations: dict[Any, Any] | None = None) -> None:
        """Set the locked message aside: it is received again only by its sequence number."""

    def dead_letter(
        self,
        token: LockToken,
        now: float,
        reason: str | None = None,
        description: str | None = None,
        annotations: dict[Any, Any] | None = None,
        properties: dict[str, Any] | None = None,
    ) -> None:
        """Move the locked message to the dead-letter queue, with a reason and description."""

    def renew_lock(self, token: LockToken, now: float) -> float:
        """Extend a message lock by the lock duration from now; the new locked-until."""

    def release(self, tokens: Iterable[LockToken], now: float, *, counted: bool = True) -> None:
        """End these locks now: the messages come back as after expiry."""

    def expire_locks(self, now: float) -> int:
        """End every message and session lock now (fault injection); how many."""

    # -- sessions -----------------------------------------------------------------
    def available_sessions(self, now: float) -> list[str]:
        """Sessions with available messages and no live lock."""

    def accept_session(self, session_id: str | None, owner: object, now: float) -> tuple[str, float] | None:
        """Lock ``session_id`` (or the next available session) for ``owner``: (id, locked-until) or None."""

    def close_session(self, session_id: str, owner: object, now: float) -> None:
        """The session receiver went away: its lock ends."""

    # -- wire form ----------------------------------------------------------------
    # (``builtins.bytes``: in this class ``bytes`` is the property above)
    def encode(self, msg: StoredMessage, *, peek: bool = False) -> builtins.bytes:
        """The message as delivered (Service Bus's annotations stamped; ``peek``: as a peek shows it)."""

    def encode_all(
        self, messages: Sequence[StoredMessage], tags: Sequence[builtins.bytes] | None = None
    ) -> list[builtins.bytes]:
        """:meth:`encode` of each message (a receiver's batch), in order; ``tags``: the deliveries' tags
        (their lock tokens go into the delivery-annotations)."""
