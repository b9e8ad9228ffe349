"""A circuit breaker per namespace for active replication (issue 32: with one namespace
down, sends fell from about 90 to 5 per second, every send waiting on the dead one).

A namespace whose send failed with an outage error (:func:`~.outage.suggests_outage`) is
*open*: sends skip it (one copy only, counted) for ``break_for`` seconds; then a probe in
the background attaches its link (no message is sent: a probe must not reach a receiver)
and, if that works, closes it: the next sends go to both namespaces again (if one fails,
the breaker opens again). Pure: the clock is injected; the sender runs the probes.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["DEFAULT_BREAK_FOR", "BreakerState", "CircuitBreaker", "Circuit"]

DEFAULT_BREAK_FOR = 10.0
"""Seconds a failed namespace is skipped before a probe tries it again."""


class Circuit(enum.Enum):
    """A circuit breaker's state."""
    CLOSED = "closed"
    """Sends go to the namespace."""
    OPEN = "open"
    """Sends skip it; a probe tries it again after ``break_for``."""


@dataclass(frozen=True)
class BreakerState:
    """A snapshot of one namespace's breaker (``sender.breakers``)."""

    state: str
    """``closed`` or ``open``."""
    trips: int
    """Times it opened."""
    skipped: int
    """Copies not sent to the namespace while it was open."""
    open_for: float | None
    """Seconds since it opened (None while closed)."""
    last_error: str | None


class CircuitBreaker:
    """One namespace's breaker (``break_for`` 0: never opens)."""

    __slots__ = ("break_for", "clock", "last_error", "opened_at", "skipped", "state", "trips")

    def __init__(self, break_for: float = DEFAULT_BREAK_FOR, clock: Callable[[], float] = time.monotonic) -> None:
        if break_for < 0:
            raise ValueError(f"break_for must be 0 (no breaker) or more seconds, not {break_for}")
        self.break_for = break_for
        self.clock = clock
        self.state = Circuit.CLOSED
        self.opened_at: float | None = None
        self.trips = 0
        self.skipped = 0
        self.last_error: str | None = None

    @property
    def allows(self) -> bool:
        """True while sends go to the namespace."""
        return self.state is Circuit.CLOSED

    def trip(self, error: BaseException) -> bool:
        """A send failed with an outage error: open (True if it just opened)."""
        self.last_error = f"{type(error).__name__}: {error}"
        if self.break_for == 0 or self.state is Circuit.OPEN:
            return False
        self.state = Circuit.OPEN
        self.opened_at = self.clock()
        self.trips += 1
        return True

    def reset(self) -> bool:
        """The namespace answers again: closed (True if it was open)."""
        if self.state is Circuit.CLOSED:
            return False
        self.state = Circuit.CLOSED
        self.opened_at = None
        return True

    def snapshot(self) -> BreakerState:
        """The breaker's state, trips and skipped sends now (for ``sender.breakers`` and the metrics)."""
        opened = self.opened_at
        return BreakerState(
            state=self.state.value,
            trips=self.trips,
            skipped=self.skipped,
            open_for=None if opened is None else self.clock() - opened,
            last_error=self.last_error,
        )
