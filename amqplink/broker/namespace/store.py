"""The message store under an entity: a small interface, and the in-memory implementation.

Entities keep their indexes (what is available, locked, scheduled) themselves; a
store only keeps messages by sequence number, so a durable one needs three
operations: :meth:`append`, :meth:`remove`, :meth:`get`.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from operator import attrgetter
from typing import Protocol

from amqplink.broker.namespace.envelope import Envelope
from amqplink.sbwire.lock_token import lock_token_from_delivery_tag

__all__ = ["LockToken", "MemoryStore", "MessageState", "MessageStore", "StoredMessage", "lock_key", "lock_text"]

LockToken = bytes | uuid.UUID
"""A lock token as callers hold it: the GUID, or its 16 bytes in .NET order (the delivery tag)."""


def lock_key(token: LockToken) -> bytes:
    """A lock token as the broker keys its locks: the GUID's 16 bytes in .NET byte order, which
    are also the delivery tag of the message it locks (so the wire form needs no conversion).
    Anything else (None: a message no longer locked) names no lock."""
    if type(token) is bytes:
        return token
    return token.bytes_le if isinstance(token, uuid.UUID) else b""


def lock_text(token: object) -> str:
    """A lock token for a message: the GUID as the SDKs print it."""
    if isinstance(token, bytes) and len(token) == 16:
        return str(lock_token_from_delivery_tag(token))
    return str(token)


class MessageState(enum.Enum):
    """Where a stored message is: available, locked by a receiver, deferred or scheduled."""

    AVAILABLE = "available"
    LOCKED = "locked"
    DEFERRED = "deferred"
    SCHEDULED = "scheduled"


@dataclass(slots=True, eq=False)
class StoredMessage:
    """A message in an entity, with what Service Bus tracks about it."""

    sequence_number: int
    envelope: Envelope
    enqueued_at: float
    expires_at: float
    state: MessageState = MessageState.AVAILABLE
    delivery_count: int = 0
    """Delivery attempts so far (locks taken); the wire carries prior attempts."""
    deferred: bool = False
    lock: bytes | None = None
    """The lock token while locked, as :func:`lock_key` keys it (the delivery tag)."""
    locked_until: float = 0.0
    scheduled_at: float | None = None

    @property
    def lock_token(self) -> uuid.UUID | None:
        """The lock token as a GUID (built on demand: the broker keys locks by :attr:`lock`)."""
        return None if self.lock is None else lock_token_from_delivery_tag(self.lock)

    @property
    def session_id(self) -> str | None:
        """The message's session id (its envelope's)."""
        return self.envelope.session_id


_SEQUENCE_NUMBER = attrgetter("sequence_number")


class MessageStore(Protocol):
    """Messages of one entity by sequence number, iterated in sequence order."""

    def append(self, message: StoredMessage) -> None:
        """Store a message (its sequence number the key)."""
    def append_run(self, messages: list[StoredMessage]) -> None:
        """Store a run of messages in increasing sequence order."""
    def remove(self, sequence_number: int) -> StoredMessage | None:
        """Take a message out (None if there is none)."""
    def get(self, sequence_number: int) -> StoredMessage | None:
        """The message with this sequence number, or None."""
    def update(self, message: StoredMessage, *, envelope: bool = False) -> None:
        """A stored message changed (``envelope``: its bytes too): a durable store writes it again."""
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[StoredMessage]: ...


class MemoryStore:
    """A dict in insertion order; sequence numbers mostly arrive in increasing order,
    and one that does not (a message put back) makes the next iteration sort once."""

    __slots__ = ("_last", "_messages", "_sorted", "get")

    def __init__(self) -> None:
        self._messages: dict[int, StoredMessage] = {}
        self._last = 0
        self._sorted = True
        # The dict's own method (the hot path: a message looked up costs no Python frame).
        self.get: Callable[[int], StoredMessage | None] = self._messages.get
        """The message with this sequence number, or None."""

    def append(self, message: StoredMessage) -> None:
        """Store a message; one out of order (put back) makes the next iteration sort once."""
        seq = message.sequence_number
        if seq > self._last:
            self._last = seq
        elif seq < self._last:
            self._sorted = False
        self._messages[seq] = message

    def append_run(self, messages: list[StoredMessage]) -> None:
        """:meth:`append` each of ``messages`` (in increasing sequence order: a run stored
        together), its checks made once when they all come after the last one here."""
        if type(self) is not MemoryStore or messages[0].sequence_number <= self._last:  # a subclass's append does more
            for message in messages:
                self.append(message)
            return
        self._append_after(messages)

    def _append_after(self, messages: list[StoredMessage]) -> None:
        """:meth:`append_run` of ``messages``, which all come after the last one here (for a
        subclass that has checked it)."""
        self._messages.update(zip(map(_SEQUENCE_NUMBER, messages), messages, strict=True))  # (no Python per message)
        self._last = messages[-1].sequence_number

    def remove(self, sequence_number: int) -> StoredMessage | None:
        """Take a message out (None if there is none)."""
        return self._messages.pop(sequence_number, None)

    def update(self, message: StoredMessage, *, envelope: bool = False) -> None:
        """Nothing to do: the message object is the stored one."""

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[StoredMessage]:
        if not self._sorted:
            ordered = sorted(self._messages.items())
            self._messages.clear()  # in place: ``get`` is this dict's
            self._messages.update(ordered)
            self._sorted = True
        return iter(list(self._messages.values()))
