"""Receivers waiting for the next available session, as Service Bus keeps them.

A receiver that asks for the next available session (``com.microsoft:session-filter``
with no id) when no session is free is not refused at once: Service Bus holds its
attach and answers it with the next session that gets messages or is released, or,
when its wait runs out, refuses it with ``com.microsoft:timeout``. The SDKs tell the
wait in the attach's ``com.microsoft:timeout`` link property (milliseconds: the
receiver's ``max_wait_time``, NEXT_AVAILABLE_SESSION); without it the broker waits
:data:`NEXT_SESSION_WAIT` seconds, the service's default operation timeout.

:class:`SessionWaits` keeps one connection's waiting links; it never sleeps: the
entity's listeners wake it (on the next loop pass) and the broker's clock ends waits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from amqplink.broker.namespace.errors import EntityError
from amqplink.broker.namespace.interface import MessagingEntity
from amqplink.engine.link import Link, SenderLink
from amqplink.sbwire.nodes import OPERATION_TIMEOUT

__all__ = ["MAX_SESSION_WAIT", "NEXT_SESSION_WAIT", "OPERATION_TIMEOUT", "SessionWaits", "Waiter", "requested_wait"]

log = logging.getLogger(__name__)

"""The link property with which a receiver tells how long it waits (milliseconds)."""
NEXT_SESSION_WAIT = 60.0
"""Seconds a next-available-session receiver that tells no wait of its own waits."""
MAX_SESSION_WAIT = 600.0
"""Seconds at most a receiver may ask to wait (a longer ``com.microsoft:timeout`` is cut)."""


def requested_wait(properties: Any, default: float) -> float:
    """The wait in seconds a link's attach properties ask for (``com.microsoft:timeout``
    in ms), bounded by :data:`MAX_SESSION_WAIT`; ``default`` when it asks none."""
    value = properties.get(OPERATION_TIMEOUT) if isinstance(properties, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return default
    return min(float(value) / 1000, MAX_SESSION_WAIT)


@dataclass(eq=False)
class Waiter:
    """One receiving link waiting for a session of ``entity``."""

    link: SenderLink
    entity: MessagingEntity
    path: str
    deadline: float


class SessionWaits:
    """The waiting links of one connection.

    ``start(waiter, session_id, locked_until)`` attaches a link once it got a session;
    ``refuse(waiter, condition, description)`` refuses it (the wait ran out, or the
    entity refused). Both are called from the event loop, never inside an entity call.
    """

    def __init__(
        self,
        start: Callable[[Waiter, str, float], None],
        refuse: Callable[[Waiter, str, str], None],
        clock: Callable[[], float],
    ) -> None:
        self._start = start
        self._refuse = refuse
        self._clock = clock
        self.waiters: dict[Link, Waiter] = {}
        """Each waiter by its (sender) link; keyed by ``Link``, what :meth:`drop` is given."""
        self._woken = False

    def __len__(self) -> int:
        return len(self.waiters)

    def add(self, waiter: Waiter) -> None:
        """Hold ``waiter``'s attach until a session of its entity is free or its deadline."""
        self.waiters[waiter.link] = waiter
        waiter.entity.listeners.append(self._wake)
        log.info(
            "%s: receiver %r waits up to %.1f s for the next available session",
            waiter.path,
            waiter.link.name,
            waiter.deadline - self._clock(),
        )

    def drop(self, link: Link) -> Waiter | None:
        """Stop waiting for ``link`` (attached, refused, detached or gone); its waiter."""
        waiter = self.waiters.pop(link, None)
        if waiter is not None and self._wake in waiter.entity.listeners:
            waiter.entity.listeners.remove(self._wake)
        return waiter

    def _wake(self) -> None:
        """An entity's listener: messages may be available, or a session released. The
        waiters are tried on the next loop pass (not inside the entity's call)."""
        if not self._woken:
            loop = asyncio.get_running_loop()
            if not loop.is_closed():
                self._woken = True
                loop.call_soon(self.retry)

    def retry(self) -> bool:
        """Give each waiter the next available session of its entity if there is one,
        oldest waiter first; whether any was answered."""
        self._woken = False
        now = self._clock()
        answered = False
        for waiter in list(self.waiters.values()):
            if waiter.link.is_detached:  # it ended under the wait (its session or connection)
                self.drop(waiter.link)
                continue
            try:
                taken = waiter.entity.accept_session(None, waiter.link, now)
            except EntityError as exc:
                self.drop(waiter.link)
                self._refuse(waiter, exc.condition, exc.description)
                answered = True
                continue
            if taken is not None:
                self.drop(waiter.link)
                self._start(waiter, *taken)
                answered = True
        return answered

    def expire(self, now: float) -> bool:
        """Refuse the waiters whose wait ran out with ``com.microsoft:timeout``; whether any did."""
        late = [w for w in self.waiters.values() if w.deadline <= now]
        for waiter in late:
            self.drop(waiter.link)
            log.info("%s: no session became available for receiver %r in time", waiter.path, waiter.link.name)
            self._refuse(
                waiter,
                str(OPERATION_TIMEOUT),
                f"no session of {waiter.path!r} became available in time; send session messages, or try again",
            )
        return bool(late)
