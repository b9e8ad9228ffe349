"""The per-entity failover state machine, with an injected clock (no I/O)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqplink.servicebus.exceptions import (
    MessageSizeExceededError,
    MessagingEntityNotFoundError,
    OperationTimeoutError,
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
    ServiceBusConnectionError,
    ServiceBusError,
    ServiceBusServerBusyError,
)
from amqplink.servicebus.paired.failover import (
    FAILED_OVER,
    HEALTHY,
    SUSPECT,
    EntityFailover,
    counts_for_failover,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def machine(interval: float = 10.0) -> tuple[EntityFailover, Clock]:
    clock = Clock()
    return EntityFailover("orders", interval, clock), clock


INTERNAL = ServiceBusError("internal", condition="amqp:internal-error")


def test_a_failure_starts_the_timer_and_a_success_stops_it() -> None:
    f, clock = machine()
    assert f.failed(INTERNAL) is False
    assert f.state is SUSPECT and f.remaining() == 10.0
    clock.now += 4
    assert f.remaining() == 6.0
    f.succeeded()
    assert f.state is HEALTHY and f.remaining() is None


def test_no_success_within_the_interval_fails_over_once() -> None:
    f, clock = machine()
    f.failed(INTERNAL)
    clock.now += 9.999
    assert f.failed(INTERNAL) is False  # a later failure does not restart the timer
    assert f.expire() is False
    clock.now += 0.001
    assert f.expire() is True and f.state is FAILED_OVER and f.failovers == 1
    assert f.failed(INTERNAL) is True and f.failovers == 1


def test_only_a_ping_fails_back() -> None:
    f, clock = machine(1.0)
    f.failed(INTERNAL)
    clock.now += 1
    assert f.expire()
    f.succeeded()  # a late success of a send made before: not a failback
    assert f.state is FAILED_OVER
    assert f.ping_accepted() is True and f.state is HEALTHY and f.failbacks == 1
    assert f.ping_accepted() is False and f.failbacks == 1


@pytest.mark.parametrize(
    "error",
    [
        ServiceBusServerBusyError("busy"),
        ServiceBusAuthenticationError("no"),
        ServiceBusAuthorizationError("no"),
        MessageSizeExceededError("big"),
        ValueError("bad partition key"),
    ],
)
def test_server_busy_authorisation_and_message_errors_do_not_count(error: BaseException) -> None:
    f, clock = machine()
    assert counts_for_failover(error) is False
    assert f.failed(error) is False
    clock.now += 100
    assert f.state is HEALTHY and f.expire() is False


@pytest.mark.parametrize(
    "error",
    [INTERNAL, OperationTimeoutError("t"), ServiceBusConnectionError("c"), MessagingEntityNotFoundError("gone")],
)
def test_timeouts_and_non_transient_errors_count(error: BaseException) -> None:
    assert counts_for_failover(error) is True


def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        EntityFailover("orders", 0, Clock())


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["fail", "busy", "ok", "tick", "expire", "ping"]),
        st.floats(min_value=0, max_value=5, allow_nan=False),
    ),
    max_size=60,
)


@given(EVENTS, st.floats(min_value=0.1, max_value=10))
def test_the_machine_against_a_model(events: list[tuple[str, float]], interval: float) -> None:
    """A model: failed over iff some counted failure started a timer (no success since,
    while not failed over) at least ``interval`` ago when checked; only a ping fails back."""
    f, clock = machine(interval)
    started: float | None = None  # the model's timer
    failed_over = False
    failovers = failbacks = 0
    for event, dt in events:
        if event == "tick":
            clock.now += dt
            continue
        if event == "fail" or event == "expire":
            if event == "fail" and not failed_over and started is None:
                started = clock.now
            if not failed_over and started is not None and clock.now - started >= interval:
                failed_over, started = True, None
                failovers += 1
            parked = f.failed(INTERNAL) if event == "fail" else f.expire()
            assert parked is failed_over
        elif event == "busy":
            assert f.failed(ServiceBusServerBusyError("busy")) is failed_over
        elif event == "ok":
            f.succeeded()
            if not failed_over:
                started = None
        elif event == "ping":
            assert f.ping_accepted() is failed_over
            if failed_over:
                failbacks += 1
            failed_over = False
        expected = FAILED_OVER if failed_over else SUSPECT if started is not None else HEALTHY
        assert f.state is expected
        assert (f.failovers, f.failbacks) == (failovers, failbacks)
