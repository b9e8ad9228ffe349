"""The per-entity failover state machine (pure: no I/O, the clock is injected).

Seed 001: "Upon receiving a non-transient failure, a timer starts. After a TimeSpan period
consisting of the FailoverInterval property value during which no successful messages
are sent, the failover is engaged." Then "a ping task executes every PingPrimaryInterval
[...]. Once this task succeeds, all client code that uses the entity immediately starts
sending new messages to the primary namespace."

    HEALTHY --failure--> SUSPECT --(interval, no success)--> FAILED_OVER --ping accepted--> HEALTHY
                           |--success--> HEALTHY

Server-busy and authorisation errors, and errors about one message (too large, bad
partition key), say nothing about the entity's availability and do not count.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from amqplink.servicebus.exceptions import (
    MessageSizeExceededError,
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
    ServiceBusError,
    ServiceBusServerBusyError,
)

__all__ = ["EntityFailover", "FailoverState", "counts_for_failover"]


class FailoverState(enum.Enum):
    """Where an entity's sends go: the primary (healthy or suspect) or a backlog queue (failed over)."""

    HEALTHY = "healthy"
    """Sends go to the primary entity."""
    SUSPECT = "suspect"
    """A send failed; the failover timer runs; sends still go to the primary."""
    FAILED_OVER = "failed-over"
    """Sends go to a backlog queue; the primary entity is pinged."""


HEALTHY, SUSPECT, FAILED_OVER = FailoverState.HEALTHY, FailoverState.SUSPECT, FailoverState.FAILED_OVER

_NOT_COUNTED = (
    ServiceBusServerBusyError,
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
    MessageSizeExceededError,
)


def counts_for_failover(error: BaseException) -> bool:
    """True for a send error that starts (or continues) the failover timer: any Service Bus
    error the retry policy gave up on (timeouts included) except server-busy, authentication,
    authorisation and message-size errors."""
    return isinstance(error, ServiceBusError) and not isinstance(error, _NOT_COUNTED)


class EntityFailover:
    """One entity's state for one client; every sender of the entity shares it, so that
    "all senders [...] learn of the failure" at once."""

    __slots__ = (
        "clock", "engaged_after", "entity", "failbacks", "failovers", "interval", "on_change", "since", "state",
    )  # fmt: skip

    def __init__(self, entity: str, interval: float, clock: Callable[[], float]) -> None:
        if interval <= 0:
            raise ValueError(f"the failover interval must be positive, not {interval}")
        self.entity = entity
        self.interval = interval
        self.clock = clock
        self.state = HEALTHY
        self.since: float | None = None
        """When the timer started (SUSPECT) or the failover engaged (FAILED_OVER)."""
        self.failovers = 0
        self.failbacks = 0
        self.engaged_after: float | None = None
        """Seconds from the first failed attempt to the last failover's engagement (measured)."""
        self.on_change: Callable[[EntityFailover], None] | None = None
        """Called after each change of :attr:`state`."""

    def _set(self, state: FailoverState, since: float | None) -> None:
        self.state = state
        self.since = since
        if self.on_change is not None:
            self.on_change(self)

    def __repr__(self) -> str:
        return f"<EntityFailover {self.entity!r} {self.state.value}>"

    def succeeded(self) -> None:
        """A send to the primary entity was accepted: the timer stops. (While failed over only
        a ping brings the entity back: a late success of a send made before says little.)"""
        if self.state is SUSPECT:
            self._set(HEALTHY, None)

    def failed(self, error: BaseException) -> bool:
        """A send to the primary entity failed with ``error``; True if the entity is (now)
        failed over, i.e. the message should be parked rather than the error raised."""
        if self.state is FAILED_OVER:
            return True
        if not counts_for_failover(error):
            return False
        now = self.clock()
        if self.state is HEALTHY:
            self._set(SUSPECT, now)
        return self.expire(now)

    def expire(self, now: float | None = None) -> bool:
        """The timer check: a SUSPECT entity with no success for the interval fails over.
        True if the entity is failed over."""
        if self.state is SUSPECT:
            assert self.since is not None
            now = self.clock() if now is None else now
            if now - self.since >= self.interval:
                self.failovers += 1
                self.engaged_after = now - self.since
                self._set(FAILED_OVER, now)
        return self.state is FAILED_OVER

    def remaining(self) -> float | None:
        """Seconds until the running timer expires (None when no timer runs)."""
        if self.state is not SUSPECT or self.since is None:
            return None
        return max(0.0, self.since + self.interval - self.clock())

    def ping_accepted(self) -> bool:
        """The primary accepted a ping: back to HEALTHY. True if this was a failback."""
        if self.state is not FAILED_OVER:
            return False
        self.failbacks += 1
        self._set(HEALTHY, None)
        return True
