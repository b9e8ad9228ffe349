"""Retry policy: the pure delay arithmetic and run_with_retry on a fake clock (no real sleeping)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqplink.aio.errors import ConnectionClosedError, LinkDetachedError
from amqplink.servicebus.exceptions import (
    MessageLockLostError,
    OperationTimeoutError,
    ServiceBusConnectionError,
    ServiceBusServerBusyError,
)
from amqplink.servicebus.retry import (
    SERVER_BUSY_MIN_BACKOFF,
    RetryError,
    RetryHooks,
    RetryMode,
    RetryPolicy,
    backoff_delay,
    next_delay,
    run_with_retry,
)


class FakeTime:
    """A clock that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_sdk_defaults() -> None:
    policy = RetryPolicy()
    assert (policy.retry_total, policy.retry_backoff_factor, policy.retry_backoff_max) == (3, 0.8, 120.0)
    assert policy.retry_mode is RetryMode.EXPONENTIAL and policy.timeout == 60.0


def test_exponential_fixed_and_cap() -> None:
    policy = RetryPolicy()
    assert [backoff_delay(policy, n) for n in (1, 2, 3)] == pytest.approx([1.6, 3.2, 6.4])
    assert backoff_delay(policy, 10) == 120.0
    fixed = RetryPolicy(retry_mode="fixed")  # type: ignore[arg-type]
    assert fixed.retry_mode is RetryMode.FIXED
    assert [backoff_delay(fixed, n) for n in (1, 2, 9)] == [0.8, 0.8, 0.8]


def test_server_busy_waits_at_least_four_seconds() -> None:
    busy = ServiceBusServerBusyError()
    assert backoff_delay(RetryPolicy(), 1, busy) == SERVER_BUSY_MIN_BACKOFF == 4.0
    assert backoff_delay(RetryPolicy(retry_mode=RetryMode.FIXED, retry_backoff_factor=0), 1, busy) == 4.0
    assert backoff_delay(RetryPolicy(), 3, busy) == pytest.approx(6.4)
    assert backoff_delay(RetryPolicy(), 1, ServiceBusConnectionError()) == pytest.approx(1.6)


def test_next_delay_gives_up_for_each_reason() -> None:
    policy = RetryPolicy(retry_total=2)
    retryable = ServiceBusConnectionError()
    assert next_delay(policy, 1, retryable, now=0, deadline=60) == pytest.approx(1.6)
    assert next_delay(policy, 3, retryable, now=0, deadline=60) is None  # retries used up
    assert next_delay(policy, 1, MessageLockLostError(), now=0, deadline=60) is None  # not retryable
    assert next_delay(policy, 1, retryable, now=58.4, deadline=60) is None  # would end at the deadline


@pytest.mark.parametrize(
    "kwargs",
    [{"retry_total": -1}, {"retry_backoff_factor": -1}, {"retry_mode": "linear"}, {"timeout": 0}],
)
def test_invalid_policies(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_from_options_picks_only_retry_settings() -> None:
    options = {"retry_total": 7, "retry_mode": "Fixed", "logging_enable": True, "timeout": None}
    policy = RetryPolicy.from_options(options)
    assert (policy.retry_total, policy.retry_mode, policy.timeout) == (7, RetryMode.FIXED, 60.0)


@given(
    st.floats(min_value=0, max_value=50),
    st.floats(min_value=0, max_value=500),
    st.sampled_from(list(RetryMode)),
    st.booleans(),
)
def test_delay_properties(factor: float, cap: float, mode: RetryMode, busy: bool) -> None:
    policy = RetryPolicy(retry_backoff_factor=factor, retry_backoff_max=cap, retry_mode=mode)
    error = ServiceBusServerBusyError() if busy else ServiceBusConnectionError()
    delays = [backoff_delay(policy, n, error) for n in range(1, 12)]
    assert delays == sorted(delays)  # never shrinks
    floor = SERVER_BUSY_MIN_BACKOFF if busy else 0.0
    assert all(floor <= d <= max(cap, floor) for d in delays)


async def test_retries_transient_failures_then_succeeds() -> None:
    fake = FakeTime()
    given_time: list[float] = []
    failures = [LinkDetachedError("x", condition="com.microsoft:server-busy"), ConnectionClosedError("socket")]

    async def operation(remaining: float) -> str:
        given_time.append(remaining)
        if failures:
            raise failures.pop(0)
        return "done"

    assert await run_with_retry(operation, RetryPolicy(), sleep=fake.sleep, clock=fake.clock) == "done"
    assert fake.sleeps == pytest.approx([4.0, 3.2])
    assert given_time == pytest.approx([60.0, 56.0, 52.8])


class Failing:
    """An operation that always raises ``error``, counting its calls."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls = 0

    async def __call__(self, remaining: float) -> None:
        self.calls += 1
        raise self.error


async def test_exhausted_retries_raise_the_last_error_converted() -> None:
    fake = FakeTime()
    operation = Failing(LinkDetachedError("gone", condition="amqp:link:detach-forced"))
    with pytest.raises(ServiceBusConnectionError) as info:
        await run_with_retry(operation, RetryPolicy(), entity="q", sleep=fake.sleep, clock=fake.clock)
    assert operation.calls == 4 and fake.sleeps == pytest.approx([1.6, 3.2, 6.4])
    assert info.value.entity == "q" and isinstance(info.value.__cause__, LinkDetachedError)


@pytest.mark.parametrize(
    ("error", "raised"),
    [
        (LinkDetachedError("lost", condition="com.microsoft:message-lock-lost"), MessageLockLostError),
        (TypeError("a bug: not retried, not wrapped"), TypeError),
    ],
)
async def test_raises_at_once(error: Exception, raised: type[Exception]) -> None:
    fake = FakeTime()
    operation = Failing(error)
    with pytest.raises(raised):
        await run_with_retry(operation, RetryPolicy(), sleep=fake.sleep, clock=fake.clock)
    assert operation.calls == 1 and fake.sleeps == []


async def test_overall_deadline_stops_retrying() -> None:
    fake = FakeTime()
    operation = Failing(ServiceBusServerBusyError())
    with pytest.raises(ServiceBusServerBusyError):
        await run_with_retry(operation, RetryPolicy(timeout=7), sleep=fake.sleep, clock=fake.clock)
    assert operation.calls == 2 and fake.sleeps == [4.0]  # a second 4 s wait would end past 7 s


async def test_a_hanging_attempt_is_cut_at_the_deadline() -> None:
    never = asyncio.Event()

    async def operation(remaining: float) -> None:
        await never.wait()

    with pytest.raises(OperationTimeoutError):
        await run_with_retry(operation, RetryPolicy(timeout=0.05))


class Recording(RetryHooks):
    """Hooks that note what the loop tells them and wait ``wait`` seconds at most ``times`` times."""

    def __init__(self, wait: float, times: int) -> None:
        self.wait, self.times = wait, times
        self.failed: list[RetryError] = []
        self.recoveries = 0

    def attempt_failed(self, error: RetryError) -> None:
        self.failed.append(error)

    def recovered(self) -> None:
        self.recoveries += 1

    def delay(
        self, policy: RetryPolicy, retried_times: int, error: RetryError, *, now: float, deadline: float
    ) -> float | None:
        return self.wait if retried_times <= self.times else None


async def test_a_failed_first_attempt_counts_as_the_first_retry() -> None:
    """``failed``: the fast path's attempt failed already; the loop waits, then tries again,
    with ``retry_total`` counting that attempt (3 in all: the failed one and two more)."""
    fake = FakeTime()
    operation = Failing(ConnectionClosedError("socket"))
    first = ServiceBusConnectionError("the fast path's")
    with pytest.raises(ServiceBusConnectionError):
        await run_with_retry(operation, RetryPolicy(retry_total=2), sleep=fake.sleep, clock=fake.clock, failed=first)
    assert operation.calls == 2 and fake.sleeps == pytest.approx([1.6, 3.2])


async def test_hooks_hear_each_failure_decide_the_wait_and_hear_the_recovery() -> None:
    fake = FakeTime()
    failures = [ServiceBusServerBusyError("busy"), ConnectionClosedError("socket")]

    async def operation(remaining: float) -> str:
        if failures:
            raise failures.pop(0)
        return "done"

    hooks = Recording(wait=0.5, times=5)
    policy = RetryPolicy(retry_total=0, timeout=math.inf)  # the hooks decide, not the policy
    assert await run_with_retry(operation, policy, sleep=fake.sleep, clock=fake.clock, hooks=hooks) == "done"
    assert [type(e) for e in hooks.failed] == [ServiceBusServerBusyError, ServiceBusConnectionError]
    assert fake.sleeps == [0.5, 0.5] and hooks.recoveries == 1
    hooks = Recording(wait=0.5, times=1)
    with pytest.raises(ServiceBusConnectionError):
        await run_with_retry(Failing(ConnectionClosedError("socket")), policy, sleep=fake.sleep, clock=fake.clock,
                             hooks=hooks)  # fmt: skip
    assert len(hooks.failed) == 2 and hooks.recoveries == 0


class Announcing(Recording):
    """Hooks with a retry line of their own."""

    def __init__(self, wait: float, times: int) -> None:
        super().__init__(wait, times)
        self.announced: list[tuple[int, float]] = []

    def retrying(
        self, entity: str | None, error: RetryError, retried_times: int, policy: RetryPolicy, delay: float
    ) -> None:
        self.announced.append((retried_times, delay))


async def test_each_retry_is_logged_once_by_the_loop_or_by_the_hooks(caplog: pytest.LogCaptureFixture) -> None:
    """The loop's "retry n of m" line is the hooks' default: hooks that say it their own way
    (the sink's, the syphon's) replace it, so a retry is one log record, not two."""
    fake = FakeTime()
    policy = RetryPolicy(retry_total=5, timeout=math.inf)

    def twice() -> Callable[[float], Awaitable[str]]:
        failures = [ConnectionClosedError("socket"), ConnectionClosedError("socket")]

        async def operation(remaining: float) -> str:
            if failures:
                raise failures.pop()
            return "done"

        return operation

    with caplog.at_level("INFO", logger="amqplink.servicebus.retry"):
        await run_with_retry(twice(), policy, entity="q",
                             sleep=fake.sleep, clock=fake.clock)  # fmt: skip
    assert [r.getMessage().split("; ")[-1] for r in caplog.records] == [
        "retry 1 of 5 in 1.6 s",
        "retry 2 of 5 in 3.2 s",
    ]
    caplog.clear()
    hooks = Announcing(wait=0.5, times=5)
    with caplog.at_level("INFO", logger="amqplink.servicebus.retry"):
        await run_with_retry(twice(), policy, sleep=fake.sleep,
                             clock=fake.clock, hooks=hooks)  # fmt: skip
    assert caplog.records == [] and hooks.announced == [(1, 0.5), (2, 0.5)]
