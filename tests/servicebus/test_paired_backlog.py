"""Backlog queues: created through the management REST API with the seed's properties,
idempotently; extra queues left alone; a failing endpoint is a clear, bounded error;
clients sharing a secondary each pick their own backlog queue."""

from __future__ import annotations

import asyncio
import time

import pytest

from amqplink.broker import Broker
from amqplink.broker.config import QueueConfig
from amqplink.servicebus import BacklogQueueError, ServiceBusMessage
from amqplink.servicebus.aio import ServiceBusClient
from amqplink.servicebus.paired.backlog import _Management, ensure_backlog_queues_sync
from amqplink.servicebus.paired.options import namespace_label
from tests.servicebus.paired_util import (
    FAST,
    namespaces,
    options,
    paired_client,
    plain_sender,
    send_until_parked,
    stored,
)


def label(primary: Broker) -> str:
    return namespace_label("127.0.0.1", primary.port)


async def test_backlog_queues_are_created_with_the_seed_properties() -> None:
    async with namespaces() as (primary, secondary), paired_client(primary, secondary) as client:
        names = [f"{label(primary)}/x-servicebus-transfer/{i}" for i in range(3)]
        state = client.paired_state
        assert state is not None and list(state.backlog_queues) == names
        for name in names:
            p = secondary.namespace.queues[name.lower()].properties
            assert p.lock_duration == 60
            assert p.max_bytes == 5120 << 20
            assert p.max_delivery_count == 2**31 - 1
            assert p.dead_lettering_on_message_expiration is True
            assert p.default_message_ttl == pytest.approx(922337203685.4775)  # TimeSpan.MaxValue
        o = options(secondary)
        api = _Management(o.management_url, o.secondary, o.connection_verify, 5)
        try:
            status, text = await asyncio.to_thread(api.request, "GET", names[0])
        finally:
            api.close()
        assert status == 200
        assert "<EnableBatchedOperations>true</EnableBatchedOperations>" in text
        assert "<AutoDeleteOnIdle>P10675199DT2H48M5.4775807S</AutoDeleteOnIdle>" in text
        assert "<MaxSizeInMegabytes>5120</MaxSizeInMegabytes>" in text


async def test_creation_is_idempotent_and_extra_queues_are_left_alone() -> None:
    async with namespaces() as (primary, secondary):
        extra = f"{label(primary)}/x-servicebus-transfer/7"
        secondary.namespace.add_queue(QueueConfig(extra))
        async with plain_sender(secondary, extra) as sender:
            await sender.send_messages(ServiceBusMessage("someone else's"))
        async with paired_client(primary, secondary) as first:
            state = first.paired_state
            assert state is not None and extra not in state.backlog_queues
            async with plain_sender(secondary, state.backlog_queues[0]) as sender:
                await sender.send_messages(ServiceBusMessage("parked earlier"))
        o = options(secondary)
        again = await asyncio.to_thread(
            ensure_backlog_queues_sync,
            list(state.backlog_queues),
            o.management_url,
            o.secondary,
            o.connection_verify,
            5,
        )
        assert again == []  # nothing created the second time
        async with paired_client(primary, secondary) as second:
            assert second.paired_state is not None
        assert stored(secondary, state.backlog_queues[0]) == 1  # not recreated, not emptied
        assert stored(secondary, extra) == 1  # not deleted, not used
        backlog = [n for n in secondary.namespace.queues if "x-servicebus-transfer" in n]
        assert sorted(backlog) == sorted([*(n.lower() for n in state.backlog_queues), extra.lower()])


async def closed_port() -> int:
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port: int = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    return port


async def test_a_closed_management_port_is_shown_and_the_primary_keeps_working() -> None:
    async with namespaces() as (primary, secondary):
        port = await closed_port()
        client = paired_client(primary, secondary, management_endpoint=f"https://127.0.0.1:{port}/")
        started = time.monotonic()
        async with client, client.get_queue_sender("orders") as sender:  # (used to raise BacklogQueueError)
            await sender.send_messages(ServiceBusMessage("the primary is fine"))
            state = client.paired_state
            assert state is not None and not state.backlog_checked and state.backlog_error is not None
            text = state.backlog_error
            # honest: refused at once, not "did not answer within 30 s"
            assert "refused the connection" in text and "did not answer" not in text
            assert f"https://127.0.0.1:{port}/" in text and "management_endpoint" in text
            assert secondary.connection_string.split("SharedAccessKey=")[1].split(";")[0] not in text
        assert time.monotonic() - started < 5
        assert stored(primary, "orders") == 1


async def test_a_silent_management_endpoint_is_shown_within_its_timeout() -> None:
    held: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # accept, never answer (not even the TLS handshake)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with namespaces() as (primary, secondary):
            client = paired_client(
                primary, secondary, management_endpoint=f"https://127.0.0.1:{port}/", management_timeout=0.5
            )
            started = time.monotonic()
            async with client, client.get_queue_sender("orders") as sender:
                assert time.monotonic() - started < 5  # the check is bounded by management_timeout
                await sender.send_messages(ServiceBusMessage("sent"))
                state = client.paired_state
                assert state is not None and state.backlog_error is not None
                assert "did not answer within 0.5 s" in state.backlog_error
            assert stored(primary, "orders") == 1
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_an_unreachable_secondary_namespace_does_not_stop_a_healthy_primary() -> None:
    async with namespaces() as (primary, secondary):
        opts = options(secondary)
        await secondary.stop()  # AMQP and the management API both gone
        client = ServiceBusClient.from_connection_string(primary.connection_string, paired_namespace=opts, **FAST)
        async with client, client.get_queue_sender("orders") as sender:
            for i in range(20):
                await sender.send_messages(ServiceBusMessage(f"{i}"))
            state = client.paired_state
            assert state is not None and state.backlog_error is not None and state.entities["orders"] == "healthy"
        assert stored(primary, "orders") == 20


async def test_a_refused_key_is_a_clear_error_naming_the_cause() -> None:
    async with namespaces() as (_, secondary):
        wrong = secondary.connection_string.replace("SharedAccessKey=", "SharedAccessKey=wrong")
        o = options(secondary)
        with pytest.raises(BacklogQueueError) as caught:
            await asyncio.to_thread(
                ensure_backlog_queues_sync, ["x/x-servicebus-transfer/0"], o.management_url,
                type(o)(wrong).secondary, o.connection_verify, 5,
            )  # fmt: skip
        assert caught.value.status_code == 401 and "SAS key" in str(caught.value)
        assert "wrong" not in str(caught.value)


async def test_two_clients_sharing_a_secondary_each_park_in_their_own_queue() -> None:
    async with namespaces() as (primary, secondary):
        a = paired_client(primary, secondary, seed=1)
        b = paired_client(primary, secondary, seed=5)
        async with a, b:
            state_a, state_b = a.paired_state, b.paired_state
            assert state_a is not None and state_b is not None
            assert state_a.current_backlog_queue != state_b.current_backlog_queue
            primary.faults.refuse_connections()
            primary.faults.close_connections()
            for client, n in ((a, 5), (b, 7)):
                async with client.get_queue_sender("orders") as sender:
                    for i in range(n):
                        await send_until_parked(sender, ServiceBusMessage(f"{i}"))
            assert stored(secondary, state_a.current_backlog_queue or "") == 5
            assert stored(secondary, state_b.current_backlog_queue or "") == 7
