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
