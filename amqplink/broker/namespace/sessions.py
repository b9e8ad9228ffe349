"""Message sessions of one entity: exclusive session locks with expiry, and session state.

"A session receiver ... holds an exclusive lock on all messages with that session
ID" (Service Bus message sessions); the lock lasts the entity's lock duration and
is renewed with ``renew-session-lock``. State is an opaque binary kept per session.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from amqplink.broker.namespace.errors import SESSION_CANNOT_BE_LOCKED, SESSION_LOCK_LOST, EntityError

__all__ = ["MAX_SESSION_STATE", "SessionLock", "SessionTable"]

MAX_SESSION_STATE = 256 * 1024
"""Bytes of state one session may hold (Service Bus: the maximum message size)."""


@dataclass(slots=True, eq=False)
class SessionLock:
    session_id: str
    owner: object
    locked_until: float


class SessionTable:
    """Who holds which session until when, and each session's state."""

    __slots__ = ("_earliest", "_locks", "entity_path", "lock_duration", "on_state", "state", "updated")

    def __init__(self, entity_path: str, lock_duration: float) -> None:
        self.entity_path = entity_path
        self.lock_duration = lock_duration
        self._locks: dict[str, SessionLock] = {}
        self._earliest = math.inf  # no lock runs out before this (may be early, never late)
        self.state: dict[str, bytes] = {}
        self.updated: dict[str, float] = {}
        """When each session's state was last set by a client (``get-message-sessions``'s
        updated-since listing); not kept across a restart."""
        self.on_state: Callable[[str, bytes | None], None] | None = None
        """Told of every change of a session's state (a durable store keeps it)."""

    def set_state(self, session_id: str, state: bytes | None, now: float | None = None) -> None:
        """Set (``None``: clear) the state of ``session_id``, at ``now`` if given."""
        if state is None:
            self.state.pop(session_id, None)
        else:
            self.state[session_id] = state
        if now is not None:
            self.updated[session_id] = now
        elif state is None:
            self.updated.pop(session_id, None)
        if self.on_state is not None:
            self.on_state(session_id, state)

    def is_locked(self, session_id: str, now: float) -> bool:
        """Whether an unexpired lock holds ``session_id``."""
        lock = self._locks.get(session_id)
        return lock is not None and lock.locked_until > now

    def lock(self, session_id: str, owner: object, now: float) -> SessionLock:
        """Take the session for ``owner``; refused while another holds an unexpired lock."""
        held = self._locks.get(session_id)
        if held is not None and held.locked_until > now and held.owner is not owner:
            raise EntityError(
                SESSION_CANNOT_BE_LOCKED,
                f"session {session_id!r} of {self.entity_path!r} is locked by another receiver",
            )
        lock = SessionLock(session_id, owner, now + self.lock_duration)
        self._locks[session_id] = lock
        self._earliest = min(self._earliest, lock.locked_until)
        return lock

    def held(self, session_id: str, now: float, owner: object | None = None) -> SessionLock:
        """The live lock on ``session_id`` (of ``owner`` if given); session-lock-lost otherwise."""
        lock = self._locks.get(session_id)
        if lock is None or lock.locked_until <= now or (owner is not None and lock.owner is not owner):
            raise EntityError(
                SESSION_LOCK_LOST, f"the lock on session {session_id!r} of {self.entity_path!r} was lost or expired"
            )
        return lock

    def renew(self, session_id: str, now: float, owner: object | None = None) -> float:
        """Extend the lock on ``session_id`` (of ``owner`` if given) by the lock duration from
        ``now``; the new locked-until."""
        lock = self.held(session_id, now, owner)
        lock.locked_until = now + self.lock_duration
        return lock.locked_until

    def release(self, session_id: str, owner: object | None = None) -> bool:
        """Drop the lock on ``session_id`` (only ``owner``'s, if given); whether there was one to drop."""
        lock = self._locks.get(session_id)
        if lock is None or (owner is not None and lock.owner is not owner):
            return False
        del self._locks[session_id]
        return True

    def expire_all(self) -> int:
        """Drop every session lock now (fault injection); how many there were."""
        count = len(self._locks)
        self._locks.clear()
        self._earliest = math.inf
        return count

    def next_expiry(self) -> float:
        """No session lock runs out before this (infinity without locks; may be early)."""
        return self._earliest

    def expired(self, now: float) -> list[str]:
        """Drop and name the session locks that ran out (cheap until the earliest may have)."""
        if now < self._earliest:
            return []
        gone = [sid for sid, lock in self._locks.items() if lock.locked_until <= now]
        for sid in gone:
            del self._locks[sid]
        self._earliest = min((lock.locked_until for lock in self._locks.values()), default=math.inf)
        return gone
