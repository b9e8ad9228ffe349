"""Retry policy as azure-servicebus's, with the delay computed purely.

The SDK's knobs: ``retry_total`` (3), ``retry_backoff_factor`` (0.8 s),
``retry_backoff_max`` (120 s), ``retry_mode`` (``exponential``: factor * 2**n for the
n-th retry; ``fixed``: the factor). docs/protocol.md#retry: ``com.microsoft:server-busy`` waits
at least 4 s. Every operation also has an overall deadline (default 60 s): no retry
starts whose wait would end past it. :func:`backoff_delay` and :func:`next_delay` are
pure; :func:`run_with_retry` takes ``sleep`` and ``clock`` so tests need no real time.

:func:`run_with_retry` is the one retry loop: the sender's sends (a failed first attempt
comes in as ``failed``), the PySpark sink's batches and the paired client's syphon run it,
each with its own :class:`RetryHooks` (who hears of a failed attempt, how long to wait).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from amqplink.aio.errors import AMQPError
from amqplink.servicebus.errors import from_amqp_error
from amqplink.servicebus.exceptions import MessageAlreadySettled, ServiceBusError, ServiceBusServerBusyError

__all__ = [
    "DEFAULT_OPERATION_TIMEOUT",
    "SERVER_BUSY_MIN_BACKOFF",
    "RetryError",
    "RetryHooks",
    "RetryMode",
    "RetryPolicy",
    "backoff_delay",
    "next_delay",
    "run_with_retry",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

SERVER_BUSY_MIN_BACKOFF = 4.0
"""After ``com.microsoft:server-busy`` wait at least 4 s (docs/protocol.md#retry)."""
DEFAULT_OPERATION_TIMEOUT = 60.0
"""Seconds one operation may take, all its retries included."""


class RetryMode(enum.Enum):
    """How the wait grows between retries (the SDK's ``RetryMode``)."""

    EXPONENTIAL = "exponential"
    FIXED = "fixed"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The SDK's retry options plus the overall operation ``timeout`` (seconds)."""

    retry_total: int = 3
    retry_backoff_factor: float = 0.8
    retry_backoff_max: float = 120.0
    retry_mode: RetryMode = RetryMode.EXPONENTIAL
    timeout: float = DEFAULT_OPERATION_TIMEOUT

    def __post_init__(self) -> None:
        if not isinstance(self.retry_mode, RetryMode):
            try:
                object.__setattr__(self, "retry_mode", RetryMode(str(self.retry_mode).lower()))
            except ValueError:
                raise ValueError(f"retry_mode must be 'exponential' or 'fixed', not {self.retry_mode!r}") from None
        if self.retry_total < 0:
            raise ValueError(f"retry_total must be 0 or more, not {self.retry_total}")
        if self.retry_backoff_factor < 0 or self.retry_backoff_max < 0:
            raise ValueError("retry_backoff_factor and retry_backoff_max must not be negative")
        if not self.timeout > 0:
            raise ValueError(f"the operation timeout must be positive, not {self.timeout}")

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> RetryPolicy:
        """Pick ``retry_*`` and ``timeout`` from a client's keyword arguments (others are ignored)."""
        names = ("retry_total", "retry_backoff_factor", "retry_backoff_max", "retry_mode", "timeout")
        return cls(**{name: options[name] for name in names if options.get(name) is not None})


def backoff_delay(policy: RetryPolicy, retried_times: int, error: BaseException | None = None) -> float:
    """Seconds to wait before retry number ``retried_times`` (1 for the first retry)."""
    if policy.retry_mode is RetryMode.FIXED:
        delay = policy.retry_backoff_factor
    else:
        delay = policy.retry_backoff_factor * 2.0 ** min(retried_times, 64)
    delay = min(policy.retry_backoff_max, delay)
    if isinstance(error, ServiceBusServerBusyError):
        delay = max(delay, SERVER_BUSY_MIN_BACKOFF)
    return delay


def next_delay(
    policy: RetryPolicy,
    retried_times: int,
    error: ServiceBusError | MessageAlreadySettled,
    *,
    now: float,
    deadline: float,
) -> float | None:
    """The wait before retry number ``retried_times``, or None to give up.

    Give up when the error is not retryable, when ``retry_total`` retries were made, or
    when the wait would end at or past ``deadline``.
    """
    if not error.retryable or retried_times > policy.retry_total:
        return None
    delay = backoff_delay(policy, retried_times, error)
    if now + delay >= deadline:
        return None
    return delay


_CONVERTIBLE = (AMQPError, OSError, TimeoutError, ServiceBusError, MessageAlreadySettled)

RetryError = ServiceBusError | MessageAlreadySettled


class RetryHooks:
    """What a user of :func:`run_with_retry` learns and decides; these defaults learn nothing
    and wait as the policy says (:func:`next_delay`). Subclasses override what they need."""

    __slots__ = ()

    def attempt_failed(self, error: RetryError) -> None:
        """An attempt failed with ``error`` (told before the loop decides whether to go on)."""

    def recovered(self) -> None:
        """An attempt succeeded after one or more had failed."""

    def delay(
        self, policy: RetryPolicy, retried_times: int, error: RetryError, *, now: float, deadline: float
    ) -> float | None:
        """Seconds to wait before retry number ``retried_times``, or None to give up (raise ``error``)."""
        return next_delay(policy, retried_times, error, now=now, deadline=deadline)

    def retrying(
        self, entity: str | None, error: RetryError, retried_times: int, policy: RetryPolicy, delay: float
    ) -> None:
        """Retry number ``retried_times`` starts in ``delay`` seconds: logged once, here
        (hooks with a line of their own say it instead)."""
        log.info(
            "%s: %s; retry %d of %d in %.1f s", entity or "operation", error, retried_times, policy.retry_total, delay
        )


_DEFAULT_HOOKS = RetryHooks()


class _Told(RetryHooks):
    """The hooks of a caller that passed only ``on_failure``."""

    __slots__ = ("_on_failure",)

    def __init__(self, on_failure: Callable[[RetryError], None]) -> None:
        self._on_failure = on_failure

    def attempt_failed(self, error: RetryError) -> None:
        self._on_failure(error)


async def run_with_retry(
    operation: Callable[[float], Awaitable[T]],
    policy: RetryPolicy,
    *,
    entity: str | None = None,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
    on_failure: Callable[[RetryError], None] | None = None,
    hooks: RetryHooks | None = None,
    failed: RetryError | None = None,
) -> T:
    """Await ``operation(remaining_seconds)`` until it succeeds or the policy gives up.

    Each attempt gets the time left before the overall deadline and is cancelled when it
    runs past it (an infinite ``policy.timeout``: never). Errors from the AMQP layer, sockets
    and timeouts are turned into Service Bus exceptions
    (:func:`~amqplink.servicebus.errors.from_amqp_error`); the last one is raised. Any other
    exception is a bug in the caller and propagates as is. ``hooks`` are told of each failed
    attempt's error, the last one included (a paired sender's failover timer starts at the
    first failure, not once the retries ran out), and decide the wait; ``on_failure`` is
    the short form of hooks that only listen. ``failed``: the error of a first attempt the
    caller already made (a fast path's); it counts as retry number one.
    """
    if hooks is None:
        hooks = _DEFAULT_HOOKS if on_failure is None else _Told(on_failure)
    deadline = clock() + policy.timeout
    retried_times = 0
    error: RetryError | None = failed
    cause: BaseException | None = failed
    while True:
        if error is not None:
            hooks.attempt_failed(error)
            retried_times += 1
            delay = hooks.delay(policy, retried_times, error, now=clock(), deadline=deadline)
            if delay is None:
                if error is cause:
                    raise error
                raise error from cause
            hooks.retrying(entity, error, retried_times, policy, delay)
            await sleep(delay)
        remaining = deadline - clock()
        try:
            if remaining == math.inf:
                result = await operation(remaining)
            else:
                result = await asyncio.wait_for(operation(remaining), max(remaining, 0.0))
        except _CONVERTIBLE as exc:
            cause, error = exc, from_amqp_error(exc, entity=entity)
            continue
        if retried_times:
            hooks.recovered()
        return result
