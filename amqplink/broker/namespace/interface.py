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

    def get(self, sequence_number: int) -> StoredMessage | None: ...
    def remove(self, sequence_number: int) -> StoredMessage | None: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[StoredMessage]: ...


class SessionView(Protocol):
    """An entity's sessions as ``$management`` reads and changes them (each call goes to the
    session's fragment on a partitioned entity)."""

    @property
    def state(self) -> MutableMapping[str, bytes]: ...
    @property
    def updated(self) -> Mapping[str, float]: ...
    def set_state(self, session_id: str, state: bytes | None, now: float | None = None) -> None: ...
    def is_locked(self, session_id: str, now: float) -> bool: ...
    def held(self, session_id: str, now: float, owner: object | None = None) -> SessionLock: ...
    def renew(self, session_id: str, now: float, owner: object | None = None) -> float: ...


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
    def store(self) -> StoredMessages: ...
    @property
    def bytes(self) -> int: ...
    @property
    def sessions(self) -> SessionView: ...
    @property
    def fragments(self) -> Sequence[Entity]:
        """The entities holding the messages: the entity itself, or a partitioned entity's
        fragments (fragment ``i`` at index ``i``)."""
        ...

    # -- adding -------------------------------------------------------------------
    def check_accept(self, envelopes: list[Envelope]) -> None: ...
    def accept(self, envelope: Envelope, now: float) -> int: ...
    def accept_all(self, envelopes: list[Envelope], now: float, key: Any = ...) -> None: ...
    def accept_bodies(self, sent: Sequence[Sent], now: float) -> int: ...
    def schedule(self, envelope: Envelope, at: float, now: float) -> int: ...
    def cancel_scheduled(self, sequence_numbers: Iterable[int]) -> None: ...

    # -- time ---------------------------------------------------------------------
    def tick(self, now: float) -> None: ...
    def next_deadline(self) -> float: ...

    # -- receiving ----------------------------------------------------------------
    def receive(
        self, now: float, *, lock: bool = True, session_id: str | None = None, owner: object | None = None
    ) -> StoredMessage | None: ...
    def receive_many(
        self, now: float, count: int, *, lock: bool = True, session_id: str | None = None, owner: object | None = None
    ) -> list[StoredMessage]: ...
    def restore(self, msg: StoredMessage) -> None: ...
    def peek(
        self, from_sequence: int, count: int, now: float, *, session_id: str | None = None
    ) -> list[StoredMessage]: ...
    def receive_deferred(
        self,
        sequence_numbers: Iterable[int],
        now: float,
        *,
        lock: bool = True,
        session_id: str | None = None,
        owner: object | None = None,
    ) -> list[StoredMessage]: ...

    # -- settling -----------------------------------------------------------------
    def holds_lock(self, token: LockToken) -> bool: ...
    def locked(self, token: LockToken, now: float) -> StoredMessage: ...
    def complete(self, token: LockToken, now: float) -> None: ...
    def complete_all(self, tokens: Sequence[LockToken], now: float) -> dict[int, EntityError]: ...
    def abandon(
        self, token: LockToken, now: float, annotations: dict[Any, Any] | None = None, *, counted: bool = True
    ) -> None: ...
    def defer(self, token: LockToken, now: float, annotations: dict[Any, Any] | None = None) -> None: ...
    def dead_letter(
        self,
        token: LockToken,
        now: float,
        reason: str | None = None,
        description: str | None = None,
        annotations: dict[Any, Any] | None = None,
        properties: dict[str, Any] | None = None,
    ) -> None: ...
    def renew_lock(self, token: LockToken, now: float) -> float: ...
    def release(self, tokens: Iterable[LockToken], now: float, *, counted: bool = True) -> None: ...
    def expire_locks(self, now: float) -> int: ...

    # -- sessions -----------------------------------------------------------------
    def available_sessions(self, now: float) -> list[str]: ...
    def accept_session(self, session_id: str | None, owner: object, now: float) -> tuple[str, float] | None: ...
    def close_session(self, session_id: str, owner: object, now: float) -> None: ...

    # -- wire form ----------------------------------------------------------------
    # (``builtins.bytes``: in this class ``bytes`` is the property above)
    def encode(self, msg: StoredMessage, *, peek: bool = False) -> builtins.bytes: ...
    def encode_all(
        self, messages: Sequence[StoredMessage], tags: Sequence[builtins.bytes] | None = None
    ) -> list[builtins.bytes]: ...
