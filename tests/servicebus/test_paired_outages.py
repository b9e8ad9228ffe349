"""Double outages and the failover timer (issue 32, items 2 and 3): a backlog queue leaves
the rotation after one attempt, every error a sender sees is a ``ServiceBusError`` naming
the entity (never the ValueError of a backlog sender closed under concurrent parks), and
the failover timer starts at the first failed attempt, not once the retries ran out."""

from __future__ import annotations

import asyncio
import logging
import re
import time

import pytest

from amqplink.servicebus import BacklogQueueError, ServiceBusMessage
from amqplink.servicebus.aio import ServiceBusClient
from amqplink.servicebus.exceptions import ServiceBusError
from tests.servicebus.paired_util import namespaces, options, paired_client, send_until_parked, stored
from tests.servicebus.scenario import wait_until

SLOW_RETRIES = {"retry_total": 3, "retry_backoff_factor": 0.4, "retry_backoff_max": 10, "timeout": 30}
"""A retry policy whose budget is seconds per send (0.8 + 1.6 + 3.2 s of back-off)."""


async def test_concurrent_parks_survive_a_backlog_queue_failing_under_them() -> None:
    async with namespaces() as (primary, secondary):
        client = paired_client(primary, secondary, backlog_queue_count=4)
        async with client, client.get_queue_sender("orders") as sender:
            primary.faults.refuse_connections()
            primary.faults.close_connections()
            await send_until_parked(sender, ServiceBusMessage("engage"))
            state = client.paired_state
            assert state is not None and state.current_backlog_queue is not None
            first = state.current_backlog_queue
            errors: list[BaseException] = []

            async def one(i: int) -> None:
                try:
                    await sender.send_messages(ServiceBusMessage(f"{i}", message_id=f"c{i}"))
                except BaseException as exc:  # every error is collected, whatever its type
                    errors.append(exc)

            tasks = [asyncio.ensure_future(one(i)) for i in range(300)]
            await asyncio.sleep(0)
            secondary.faults.entity_unavailable(first, condition="amqp:internal-error")
            await asyncio.gather(*tasks)
            assert not [e for e in errors if not isinstance(e, ServiceBusError)], errors[:3]
            assert all(isinstance(e, ServiceBusError) and e.entity == "orders" for e in errors)
            state = client.paired_state
            assert state is not None and first not in state.in_rotation and state.in_rotation
            assert not errors  # the other queues took every one
            assert sum(stored(secondary, q) for q in state.backlog_queues) == 301 == state.parked


async def test_a_backlog_queue_leaves_the_rotation_after_one_attempt() -> None:
    async with namespaces() as (primary, secondary):
        client = ServiceBusClient.from_connection_string(
            primary.connection_string, paired_namespace=options(secondary), **SLOW_RETRIES
        )
        async with client:
            pairing = client._pairing
            assert pairing is not None
            for name in pairing.names:
                secondary.faults.entity_unavailable(name, condition="amqp:internal-error")
            started = time.monotonic()
            with pytest.raises(BacklogQueueError, match="every backlog queue") as caught:
                await pairing.park("orders", [ServiceBusMessage("x")])
            # three queues, one attempt each: no back-off (the retry budget is 5.6 s per queue)
            assert time.monotonic() - started < 0.8
            assert caught.value.entity == "orders" and caught.value.retryable
            assert [f.fired for f in secondary.faults.active] == [1, 1, 1]  # one attempt each


async def test_an_unreachable_secondary_empties_the_rotation_at_once() -> None:
    async with namespaces() as (primary, secondary):
        client = ServiceBusClient.from_connection_string(
            primary.connection_string, paired_namespace=options(secondary, backlog_queue_count=10), **SLOW_RETRIES
        )
        async with client:
            pairing = client._pairing
            assert pairing is not None
            await secondary.stop()
            started = time.monotonic()
            with pytest.raises(BacklogQueueError, match="every backlog queue") as caught:
                await pairing.park("orders", [ServiceBusMessage("x")])
            assert time.monotonic() - started < 0.8
            assert caught.value.entity == "orders"
            state = client.paired_state
            assert state is not None and state.in_rotation == () and state.last_error is not None


async def test_the_failover_timer_starts_at_the_first_failed_attempt(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="amqplink.servicebus.paired")
    async with namespaces() as (primary, secondary):
        client = ServiceBusClient.from_connection_string(
            primary.connection_string, paired_namespace=options(secondary, failover_interval=1.0), **SLOW_RETRIES
        )
        async with client, client.get_queue_sender("orders") as sender:
            await sender.send_messages(ServiceBusMessage("attached"))
            primary.faults.entity_unavailable("orders", condition="amqp:internal-error")
            started = time.monotonic()
            sending = asyncio.ensure_future(sender.send_messages(ServiceBusMessage("retried, then parked")))
            await wait_until(lambda: client.paired_state is not None and bool(client.paired_state.failed_over))
            engaged = time.monotonic() - started
            # the timer ran from the first refusal: engaged after ~1 s, while the send still retries
            # (its retries end after 5.6 s; the timer used to start only then)
            assert 0.9 <= engaged < 2.5
            assert not sending.done()
            await sending  # its retries ran out after failover engaged: parked, not raised
            state = client.paired_state
            assert state is not None and state.parked == 1 and stored(primary, "orders") == 1
        found = re.search(r"no send succeeded for ([\d.]+) s since the first failed attempt", caplog.text)
        assert found is not None and 1.0 <= float(found.group(1)) < 2.5, caplog.text


async def test_a_send_that_succeeds_on_a_retry_stops_the_timer() -> None:
    async with namespaces() as (primary, secondary):
        client = ServiceBusClient.from_connection_string(
            primary.connection_string,
            paired_namespace=options(secondary, failover_interval=0.5),
            retry_total=3,
            retry_backoff_factor=0.1,
            timeout=10,
        )
        async with client, client.get_queue_sender("orders") as sender:
            await sender.send_messages(ServiceBusMessage("attached"))
            primary.faults.entity_unavailable("orders", condition="amqp:internal-error", duration=0.1)
            await sender.send_messages(ServiceBusMessage("refused once, then taken"))
            state = client.paired_state
            assert state is not None and state.entities["orders"] == "healthy"
            await asyncio.sleep(0.7)  # past the interval: no failover without a failure
            state = client.paired_state
            assert state is not None and state.failovers == 0 and stored(primary, "orders") == 2
