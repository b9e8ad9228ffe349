"""A receiver asking for the next available session waits for one, as Service Bus does:
it gets the next session that receives messages or is released, and when its wait (the
receiver's ``max_wait_time``, sent as the ``com.microsoft:timeout`` link property) runs out
it is refused with ``com.microsoft:timeout`` (OperationTimeoutError). Each test body runs
with the official SDK and with amqplink's client."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.servicebus.scenario import Api, BrokerThread, api, body, broker, wait_until

__all__ = ["api", "broker"]  # fixtures


def waiting(broker: BrokerThread) -> int:
    """Receivers the broker holds waiting for a session (read on the broker's loop)."""

    async def count() -> int:
        host = broker.broker.servicebus
        assert host is not None
        return sum(len(conn.waits) for conn in host.connections)

    return int(broker.call(count()))


async def _next_session(client: Any, api: Api, wait: float, *, settle: bool = True) -> tuple[str, list[bytes]]:
    """Open a next-available-session receiver; the session it got and its first message's body."""
    next_available = api.sb.NEXT_AVAILABLE_SESSION
    async with client.get_queue_receiver("sessions", session_id=next_available, max_wait_time=wait) as receiver:
        session_id = receiver.session.session_id
        got = await receiver.receive_messages(max_message_count=1, max_wait_time=wait)
        for message in got:
            if settle:
                await receiver.complete_message(message)
        return session_id, [body(m) for m in got]


async def test_a_waiting_receiver_gets_the_next_session_that_receives_a_message(api: Api, broker: BrokerThread) -> None:
    sb = api.sb
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        started = time.monotonic()
        receiving = asyncio.create_task(_next_session(client, api, 20.0))
        await wait_until(lambda: waiting(broker) == 1)  # held, not refused: no session exists yet
        async with client.get_queue_sender("sessions") as sender:
            await sender.send_messages(sb.ServiceBusMessage("late", session_id="late-1"))
        session_id, bodies = await asyncio.wait_for(receiving, 15)
        assert session_id == "late-1" and bodies == [b"late"]
        assert time.monotonic() - started < 15  # answered by the message, not by the wait's end
        assert waiting(broker) == 0


async def test_a_waiting_receiver_gets_a_session_another_receiver_releases(api: Api, broker: BrokerThread) -> None:
    sb = api.sb
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("sessions") as sender:
            await sender.send_messages(sb.ServiceBusMessage("only", session_id="only-1"))
        holder = client.get_queue_receiver("sessions", session_id="only-1")
        await holder.__aenter__()
        try:
            (held,) = await holder.receive_messages(max_message_count=1, max_wait_time=5)
            assert body(held) == b"only"
            receiving = asyncio.create_task(_next_session(client, api, 20.0))
            await wait_until(lambda: waiting(broker) == 1)  # the one session is locked
        finally:
            await holder.close()  # releases the session and its message's lock
        session_id, bodies = await asyncio.wait_for(receiving, 15)
        assert session_id == "only-1" and bodies == [b"only"]


async def test_the_wait_runs_out_with_operation_timeout(api: Api, broker: BrokerThread) -> None:
    exceptions = api.exceptions
    cs = broker.connection_string
    async with api.aio.ServiceBusClient.from_connection_string(cs, retry_total=0) as client:
        started = time.monotonic()
        with pytest.raises(exceptions.OperationTimeoutError):
            await _next_session(client, api, 1.0)
        elapsed = time.monotonic() - started
        assert 0.8 <= elapsed < 10  # it waited (about max_wait_time) before giving up
        await wait_until(lambda: waiting(broker) == 0)  # nothing left behind in the broker


QUICK_RETRIES = {"retry_total": 1, "retry_backoff_factor": 0.1}
"""A retry that still fits: the receive's or iteration's own wait ends the retries, not
``retry_total`` (the SDK's defaults take four waits and backoffs, some 20 s)."""


def _assert_timed_out(error: BaseException, started: float, wait: float) -> None:
    """``error`` is the broker's refusal naming the entity, after about ``wait`` seconds."""
    assert "sessions" in str(error)  # the entity, named in the broker's description
    assert wait * 0.8 <= time.monotonic() - started < wait + 8


async def test_a_first_receive_with_no_session_free_raises_operation_timeout(api: Api, broker: BrokerThread) -> None:
    """A receiver opened by its first receive (no ``async with``) that gets no session
    raises, as the SDK's does, rather than returning no messages as if a session were idle."""
    next_available = api.sb.NEXT_AVAILABLE_SESSION
    cs = broker.connection_string
    async with api.aio.ServiceBusClient.from_connection_string(cs, **QUICK_RETRIES) as client:
        receiver = client.get_queue_receiver("sessions", session_id=next_available, max_wait_time=1.0)
        started = time.monotonic()
        try:
            with pytest.raises(api.exceptions.OperationTimeoutError) as caught:
                await receiver.receive_messages(max_message_count=1, max_wait_time=2.0)
            _assert_timed_out(caught.value, started, 1.0)
            started = time.monotonic()
            with pytest.raises(api.exceptions.OperationTimeoutError) as caught:
                async for _message in receiver:
                    raise AssertionError("no session exists, so no message either")
            _assert_timed_out(caught.value, started, 1.0)
        finally:
            await receiver.close()
        await wait_until(lambda: waiting(broker) == 0)


def test_blocking_next_available_receivers_with_no_session_free_raise_operation_timeout(
    api: Api, broker: BrokerThread
) -> None:
    """The blocking client as the asyncio one: opening, a first receive and iterating each
    raise OperationTimeoutError once the receiver's wait runs out."""
    next_available = api.sb.NEXT_AVAILABLE_SESSION
    timeout_error = api.exceptions.OperationTimeoutError
    with api.sb.ServiceBusClient.from_connection_string(broker.connection_string, **QUICK_RETRIES) as client:
        started = time.monotonic()
        opening = client.get_queue_receiver("sessions", session_id=next_available, max_wait_time=1.0)
        with pytest.raises(timeout_error) as caught, opening:
            raise AssertionError("no session exists to lock")
        _assert_timed_out(caught.value, started, 1.0)
        receiver = client.get_queue_receiver("sessions", session_id=next_available, max_wait_time=1.0)
        try:
            started = time.monotonic()
            with pytest.raises(timeout_error) as caught:
                receiver.receive_messages(max_message_count=1, max_wait_time=2.0)
            _assert_timed_out(caught.value, started, 1.0)
            started = time.monotonic()
            with pytest.raises(timeout_error) as caught:
                for _message in receiver:
                    raise AssertionError("no session exists, so no message either")
            _assert_timed_out(caught.value, started, 1.0)
        finally:
            receiver.close()


def test_a_blocking_first_receive_takes_a_session_that_is_free(api: Api, broker: BrokerThread) -> None:
    """The other side: a session with a message is locked and received from as before."""
    sb = api.sb
    with sb.ServiceBusClient.from_connection_string(broker.connection_string, **QUICK_RETRIES) as client:
        with client.get_queue_sender("sessions") as sender:
            sender.send_messages(sb.ServiceBusMessage("waiting", session_id="free-1"))
        with client.get_queue_receiver("sessions", session_id=sb.NEXT_AVAILABLE_SESSION, max_wait_time=5) as receiver:
            (got,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            assert receiver.session.session_id == "free-1" and body(got) == b"waiting"
            receiver.complete_message(got)
