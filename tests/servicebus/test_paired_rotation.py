"""Failover details: backlog rotation, every sender learning at once, send_nowait, the
blocking client, pings never delivered, close/fault coordination."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig, EntityProperties, NamespaceConfig, QueueConfig
from amqplink.servicebus import BacklogQueueError, ServiceBusMessage
from amqplink.servicebus import ServiceBusClient as BlockingClient
from amqplink.servicebus.aio import ServiceBusClient
from amqplink.servicebus.exceptions import MessageSizeExceededError, ServiceBusServerBusyError
from amqplink.servicebus.paired.pairing import PING_CONTENT_TYPE
from amqplink.servicebus.paired.syphon import COORDINATION_GRACE
from tests.conftest import broker_thread
from tests.servicebus.paired_util import (
    drain,
    namespaces,
    options,
    paired_client,
    plain_sender,
    send_until_parked,
    stored,
    syphoned,
)
from tests.servicebus.scenario import wait_until


async def test_a_failing_backlog_queue_leaves_the_rotation_and_all_failing_raise(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="amqplink.servicebus")
    async with namespaces() as (primary, secondary), paired_client(primary, secondary) as client:
        keys = {
            cs.split("SharedAccessKey=")[1].split(";")[0]
            for cs in (primary.connection_string, secondary.connection_string)
        }
        primary.faults.entity_unavailable("orders", condition="amqp:internal-error")
        async with client.get_queue_sender("orders") as sender:
            await send_until_parked(sender, ServiceBusMessage("first"))
            state = client.paired_state
            assert state is not None and state.failed_over == ("orders",)
            first = state.current_backlog_queue
            assert first is not None and stored(secondary, first) == 1
            secondary.faults.entity_unavailable(first, condition="amqp:internal-error")
            await sender.send_messages(ServiceBusMessage("second"))  # succeeds: another queue took it
            state = client.paired_state
            assert state is not None and first not in state.in_rotation
            second = state.current_backlog_queue
            assert second is not None and second != first and stored(secondary, second) == 1
            for name in state.in_rotation:
                secondary.faults.entity_unavailable(name, condition="amqp:internal-error")
            with pytest.raises(BacklogQueueError, match="every backlog queue") as caught:
                await sender.send_messages(ServiceBusMessage("third"))
            assert caught.value.entity == "orders"
            state = client.paired_state
            assert state is not None and state.in_rotation == () and state.parked == 2
            assert sum(stored(secondary, q) for q in state.backlog_queues) == 2  # nothing dropped silently
            # the secondary recovers: a ping interval after the last failure every queue is tried again
            secondary.faults.clear_all()
            await send_until_parked(sender, ServiceBusMessage("fourth"))
            state = client.paired_state
            assert state is not None and len(state.in_rotation) == 3 and state.parked == 3
            assert sum(stored(secondary, q) for q in state.backlog_queues) == 3
        assert "failover engaged" in caplog.text and "pulled from rotation" in caplog.text
        assert not [key for key in keys if key in caplog.text]  # no key in any log line


def key_of(conn_str: str) -> str:
    return conn_str.split("SharedAccessKey=")[1].split(";")[0]


async def test_every_sender_of_the_entity_learns_of_the_failover_at_once() -> None:
    async with namespaces() as (primary, secondary), paired_client(primary, secondary) as client:
        fault = primary.faults.entity_unavailable("orders", condition="amqp:internal-error")
        a = client.get_queue_sender("orders")
        b = client.get_queue_sender("orders")
        other = client.get_queue_sender("invoices")
        async with a, b, other:
            await send_until_parked(a, ServiceBusMessage("a"))
            fired = fault.fired
            started = time.monotonic()
            await b.send_messages(ServiceBusMessage("b"))  # straight to the backlog
            assert fault.fired == fired  # b never tried the primary
            assert time.monotonic() - started < 1
            await other.send_messages(ServiceBusMessage("not failed over"))  # failover is per entity
            assert stored(primary, "invoices") == 1
            state = client.paired_state
            assert state is not None and state.parked == 2 and state.entities["invoices"] == "healthy"


async def test_send_nowait_is_parked_while_failed_over() -> None:
    async with namespaces() as (primary, secondary), paired_client(primary, secondary) as client:
        fault = primary.faults.entity_unavailable("orders", condition="amqp:internal-error")
        async with client.get_queue_sender("orders") as sender:
            await send_until_parked(sender, ServiceBusMessage("engage"))
            futures = [await sender.send_nowait(ServiceBusMessage(f"n{i}")) for i in range(50)]
            await asyncio.gather(*futures)
            state = client.paired_state
            assert state is not None and state.parked == 51
            primary.faults.clear(fault)
            await wait_until(lambda: client.paired_state is not None and not client.paired_state.failed_over)
            await (await sender.send_nowait(ServiceBusMessage("back")))
            assert stored(primary, "orders") == 1


async def test_a_failed_nowait_outcome_is_parked_once_failover_engaged() -> None:
    async with namespaces() as (primary, secondary), paired_client(primary, secondary) as client:
        sender = client.get_queue_sender("orders")
        async with sender:
            await sender.send_messages(ServiceBusMessage("attached"))
            primary.faults.entity_unavailable("orders", condition="amqp:internal-error")
            primary.faults.delay_dispositions(1500)  # outcomes come 1.5 s late (failover_interval: 0.3 s)
            with pytest.raises(Exception, match="internal-error"):
                await (await sender.send_nowait(ServiceBusMessage("starts the timer")))
            state = client.paired_state
            assert state is not None and state.entities["orders"] == "suspect"
            late = await sender.send_nowait(ServiceBusMessage("left for the primary"))  # before failover
            await late  # its rejection comes after failover engaged: parked, not raised
            state = client.paired_state
            assert state is not None and state.parked == 1 and state.failed_over == ("orders",)


def test_the_blocking_client_fails_over_and_back() -> None:
    with (
        broker_thread(Broker(servicebus=True)) as primary,
        broker_thread(Broker(servicebus=True, http_port=0)) as secondary,
    ):
        opts = options(secondary, enable_syphon=True)
        fast = {"retry_total": 1, "retry_backoff_factor": 0.02, "retry_backoff_max": 0.05}
        with BlockingClient.from_connection_string(primary.connection_string, paired_namespace=opts, **fast) as client:
            fault = primary.faults.run(primary.faults.entity_unavailable, "orders", condition="amqp:internal-error")
            sent = 0
            with client.get_queue_sender("orders") as sender:
                deadline = time.monotonic() + 10
                while (client.paired_state.parked if client.paired_state else 0) < 5:
                    assert time.monotonic() < deadline
                    try:
                        sender.send_messages(ServiceBusMessage(f"{sent}", message_id=f"b{sent}"))
                        sent += 1
                    except Exception:
                        pass  # the timer runs: this one raised, is not counted
                primary.faults.run(primary.faults.clear, fault)
                deadline = time.monotonic() + 30
                while True:
                    state = client.paired_state
                    assert state is not None
                    if not state.failed_over and state.syphoned == state.parked:
                        break
                    assert time.monotonic() < deadline, state
                    time.sleep(0.05)
        assert stored(primary, "orders") == sent


async def test_the_broker_never_delivers_a_ping() -> None:
    async with namespaces() as (primary, _), plain_sender(primary, "orders") as sender:
        await sender.send_messages(ServiceBusMessage(b"", content_type=PING_CONTENT_TYPE, time_to_live=1))
        await sender.send_messages(ServiceBusMessage("real"))
        got = await drain(primary.connection_string, "orders", 2, timeout=2)
        assert [str(m) for m in got] == ["real"]


async def test_a_faulted_primary_connection_faults_the_secondary_after_five_seconds() -> None:
    async with namespaces() as (primary, secondary):
        client = paired_client(primary, secondary, enable_syphon=True)
        async with client:
            pairing = client._pairing
            assert pairing is not None and pairing.syphon is not None and pairing.secondary is not None
            holder = pairing.secondary._holder
            await wait_until(lambda: holder._connection is not None and holder.generation == 1)
            first = holder._connection
            assert first is not None
            primary.faults.close_connections()
            started = time.monotonic()
            await asyncio.wait_for(first.wait_closed(), COORDINATION_GRACE + 5)
            assert time.monotonic() - started >= COORDINATION_GRACE - 0.5
            assert pairing.syphon.faulted == 1
            # the syphon carries on over new connections
            primary.faults.entity_unavailable("orders", condition="amqp:internal-error")
            async with client.get_queue_sender("orders") as sender:
                await send_until_parked(sender, ServiceBusMessage("after"))
            primary.faults.clear_all()
            await wait_until(lambda: pairing.syphoned == 1, timeout=30)
        assert stored(primary, "orders") == 1


async def test_session_messages_keep_their_session_across_the_failover() -> None:
    sessions = EntityProperties(requires_session=True)
    config = BrokerConfig((NamespaceConfig(queues=(QueueConfig("sessions", sessions),)),))
    async with namespaces(config=config) as (primary, secondary):
        client = paired_client(primary, secondary, enable_syphon=True)
        async with client:
            fault = primary.faults.entity_unavailable("sessions", condition="amqp:internal-error")
            async with client.get_queue_sender("sessions") as sender:
                await send_until_parked(sender, ServiceBusMessage("a-0", session_id="a"))
                for i in range(1, 4):
                    await sender.send_messages(ServiceBusMessage(f"a-{i}", session_id="a"))
                    await sender.send_messages(ServiceBusMessage(f"b-{i}", session_id="b"))
            state = client.paired_state
            assert state is not None and state.parked == 7
            parked = [q for q in state.backlog_queues if stored(secondary, q)]
            assert len(parked) == 1  # the session ids travel as x-ms-sessionid in one plain queue
            primary.faults.clear(fault)
            await wait_until(lambda: syphoned(client) == 7, 30)
            await wait_until(lambda: client.paired_state is not None and not client.paired_state.failed_over)
            for session, count in (("a", 4), ("b", 3)):
                async with client.get_queue_receiver("sessions", session_id=session, max_wait_time=2) as receiver:
                    got = await receiver.receive_messages(max_message_count=10, max_wait_time=2)
                    assert sorted(str(m) for m in got) == sorted(
                        [f"a-{i}" for i in range(4)] if session == "a" else [f"b-{i}" for i in range(1, 4)]
                    )
                    assert {m.session_id for m in got} == {session} and len(got) == count


async def test_a_batch_made_while_failed_over_is_parked() -> None:
    async with namespaces() as (primary, secondary), paired_client(primary, secondary) as client:
        primary.faults.refuse_connections()
        async with client.get_queue_sender("orders") as sender:
            await send_until_parked(sender, ServiceBusMessage("engage"))
            batch = await sender.create_message_batch()
            assert batch.max_size_in_bytes == 256 * 1024
            for i in range(10):
                batch.add_message(ServiceBusMessage(f"{i}", application_properties={"i": i}))
            await sender.send_messages(batch)
            state = client.paired_state
            assert state is not None and state.parked == 11
            assert sum(stored(secondary, q) for q in state.backlog_queues) == 11


async def test_server_busy_never_fails_over() -> None:
    async with namespaces() as (primary, secondary):
        client = ServiceBusClient.from_connection_string(
            primary.connection_string, paired_namespace=options(secondary), retry_total=0
        )
        async with client, client.get_queue_sender("orders") as sender:
            primary.faults.entity_unavailable("orders", condition="com.microsoft:server-busy")
            started = time.monotonic()
            refused = 0
            while time.monotonic() - started < 3 * 0.3:  # three failover intervals of refusals
                with pytest.raises(ServiceBusServerBusyError):
                    await sender.send_messages(ServiceBusMessage("busy"))
                refused += 1
            state = client.paired_state
            assert refused > 1 and state is not None
            assert state.entities["orders"] == "healthy" and state.parked == 0 and state.failovers == 0


async def test_a_message_too_large_once_parked_is_refused_and_the_queue_stays() -> None:
    async with namespaces() as (primary, secondary), paired_client(primary, secondary) as client:
        primary.faults.refuse_connections()
        async with client.get_queue_sender("orders") as sender:
            await send_until_parked(sender, ServiceBusMessage("engage"))
            limit = await client._pairing.backlog_max_size()  # type: ignore[union-attr]
            body = bytes(limit - 200)  # fits as sent, not with x-ms-path and the rest
            assert len(ServiceBusMessage(body).amqplink_message.encode()) < limit
            with pytest.raises(MessageSizeExceededError, match="larger than the backlog queue takes"):
                await sender.send_messages(
                    ServiceBusMessage(body, session_id="s" * 100, time_to_live=60, message_id="big")
                )
            state = client.paired_state
            assert state is not None and len(state.in_rotation) == 3 and state.parked == 1
