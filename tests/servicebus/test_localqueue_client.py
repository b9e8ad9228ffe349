"""The local queue in a client (issue 32, item 1): a send no namespace takes is stored and
returns; what is stored is forwarded in order, with the same message ids, once the
namespace takes messages again, and removed; new sends wait behind it; a full queue is a
typed error with nothing half stored; with pairing, a double outage raises nothing and
loses nothing."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig, EntityProperties, NamespaceConfig, QueueConfig
from amqplink.servicebus import LocalQueueFullError, LocalQueueOptions, ServiceBusMessage
from amqplink.servicebus import ServiceBusClient as BlockingClient
from amqplink.servicebus.aio import ServiceBusClient
from amqplink.servicebus.exceptions import MessageSizeExceededError, ServiceBusError
from amqplink.servicebus.localqueue.errors import LocalQueueCorruptError, LocalQueueInUseError
from tests.conftest import broker_thread
from tests.servicebus.paired_util import FAST, drain, options, stored
from tests.servicebus.scenario import wait_until

DEDUPE = BrokerConfig(
    (NamespaceConfig(queues=(QueueConfig("orders", EntityProperties(requires_duplicate_detection=True)),)),)
)


def local_client(broker: Broker, directory: Path, **kwargs: Any) -> ServiceBusClient:
    local = LocalQueueOptions(directory, **kwargs.pop("local", {}))
    return ServiceBusClient.from_connection_string(broker.connection_string, local_queue=local, **FAST, **kwargs)


def local_depth(client: ServiceBusClient) -> int:
    state = client.local_queue_state
    return 0 if state is None else state.depth


async def depth_zero(client: ServiceBusClient, timeout: float = 30.0) -> None:
    def empty() -> bool:
        state = client.local_queue_state
        return state is not None and state.depth == 0 and state.forwarding == "idle"

    await wait_until(empty, timeout)


@asynccontextmanager
async def down(broker: Broker) -> AsyncIterator[None]:
    """The broker refuses connections (and drops the open ones) inside the block."""
    fault = broker.faults.refuse_connections()
    broker.faults.close_connections()
    try:
        yield
    finally:
        broker.faults.clear(fault)


async def test_stored_while_the_namespace_is_down_then_forwarded_in_order(tmp_path: Path) -> None:
    async with Broker(servicebus=True) as primary:
        client = local_client(primary, tmp_path / "lq")
        async with client, client.get_queue_sender("orders") as sender:
            async with down(primary):
                for i in range(50):
                    await sender.send_messages(ServiceBusMessage(f"{i}", message_id=f"m{i}"))  # no error
                await sender.send_messages([ServiceBusMessage(f"{i}", message_id=f"m{i}") for i in range(50, 60)])
                state = client.local_queue_state
                assert state is not None and state.depth == 60 and state.stored == 60
                assert state.entities["orders"].depth == 60 and state.oldest_age is not None
                assert stored(primary, "orders") == 0
            await depth_zero(client)
            state = client.local_queue_state
            assert state is not None and state.forwarded == 60 and state.bytes == 0
            await sender.send_messages(ServiceBusMessage("after", message_id="after"))  # the plain path again
            assert "send_messages" not in vars(sender)
        got = await drain(primary.connection_string, "orders", 61)
        assert [str(m.message_id) for m in got] == [f"m{i}" for i in range(60)] + ["after"]


async def test_sends_made_while_it_forwards_wait_behind_the_stored_ones(tmp_path: Path) -> None:
    sessions = EntityProperties(requires_session=True)
    config = BrokerConfig((NamespaceConfig(queues=(QueueConfig("orders"), QueueConfig("sessions", sessions))),))
    async with Broker(servicebus=True, config=config) as primary:
        client = local_client(primary, tmp_path / "lq", local={"forward_batch": 7})
        async with client, client.get_queue_sender("orders") as sender, client.get_queue_sender("sessions") as ss:
            async with down(primary):
                for i in range(60):
                    await sender.send_messages(ServiceBusMessage(f"{i}", message_id=f"m{i}"))
                    await ss.send_messages(ServiceBusMessage(f"{i}", session_id=f"s{i % 3}", message_id=f"s{i}"))
            for i in range(60, 150):  # while the stored ones are being forwarded
                await sender.send_messages(ServiceBusMessage(f"{i}", message_id=f"m{i}"))
                await ss.send_messages(ServiceBusMessage(f"{i}", session_id=f"s{i % 3}", message_id=f"s{i}"))
            await depth_zero(client)
        got = await drain(primary.connection_string, "orders", 150)
        assert [str(m.message_id) for m in got] == [f"m{i}" for i in range(150)]
        async with ServiceBusClient.from_connection_string(primary.connection_string) as reader:
            for session in range(3):
                receiver = reader.get_queue_receiver("sessions", session_id=f"s{session}", max_wait_time=2)
                async with receiver:
                    ids: list[str] = []
                    while batch := await receiver.receive_messages(max_message_count=300, max_wait_time=1):
                        ids += [str(m.message_id) for m in batch]
                        for m in batch:
                            await receiver.complete_message(m)
                assert ids == [f"s{i}" for i in range(150) if i % 3 == session]  # each session in order


async def test_a_full_queue_raises_a_typed_error_and_stores_nothing_of_the_send(tmp_path: Path) -> None:
    async with Broker(servicebus=True) as primary:
        client = local_client(primary, tmp_path / "lq", local={"max_bytes": 4096})
        async with client, client.get_queue_sender("orders") as sender, down(primary):
            with pytest.raises(LocalQueueFullError) as caught:
                await sender.send_messages([ServiceBusMessage(bytes(1500), message_id=f"big{i}") for i in range(3)])
            error = caught.value
            assert isinstance(error, ServiceBusError) and error.entity == "orders" and error.retryable
            assert "full" in str(error) and str(tmp_path / "lq") in str(error)
            assert isinstance(error.__cause__, ServiceBusError)  # the error it was to shield from
            await sender.send_messages(ServiceBusMessage(bytes(1500), message_id="fits"))
            with pytest.raises(LocalQueueFullError, match="earlier messages wait there"):  # stored behind: no cause
                await sender.send_messages([ServiceBusMessage(bytes(1000), message_id=f"no{i}") for i in range(3)])
            state = client.local_queue_state
            assert state is not None and state.depth == 1 and state.refused_full == 6


async def test_an_error_it_does_not_shield_from_is_raised_and_nothing_is_stored(tmp_path: Path) -> None:
    async with Broker(servicebus=True) as primary:
        client = local_client(primary, tmp_path / "lq")
        async with client, client.get_queue_sender("orders") as sender:
            with pytest.raises(MessageSizeExceededError):
                await sender.send_messages(ServiceBusMessage(bytes(300 * 1024)))
            state = client.local_queue_state
            assert state is not None and state.depth == 0 and state.stored == 0


async def test_what_a_closed_client_left_is_forwarded_by_the_next_one(tmp_path: Path) -> None:
    async with Broker(servicebus=True) as primary:
        first = local_client(primary, tmp_path / "lq")
        async with first, first.get_queue_sender("orders") as sender, down(primary):
            futures = [await sender.send_nowait(ServiceBusMessage(f"{i}", message_id=f"n{i}")) for i in range(20)]
            await asyncio.gather(*futures)  # each resolved once stored
            state = first.local_queue_state
            assert state is not None and state.depth == 20
            with pytest.raises(LocalQueueInUseError):  # one client per directory
                async with local_client(primary, tmp_path / "lq"):
                    pass
        second = local_client(primary, tmp_path / "lq")
        async with second:
            await depth_zero(second)
        got = await drain(primary.connection_string, "orders", 20)
        assert [str(m.message_id) for m in got] == [f"n{i}" for i in range(20)]


async def test_a_damaged_directory_is_refused_at_start(tmp_path: Path) -> None:
    async with Broker(servicebus=True) as primary:
        client = local_client(primary, tmp_path / "lq")
        async with client, client.get_queue_sender("orders") as sender, down(primary):
            for i in range(3):
                await sender.send_messages(ServiceBusMessage(f"{i}"))
        segment = next((tmp_path / "lq").glob("*.log"))
        data = bytearray(segment.read_bytes())
        data[60] ^= 0xFF  # inside the first stored frame: the later frames still check
        segment.write_bytes(bytes(data))
        with pytest.raises(LocalQueueCorruptError, match="damaged at offset"):
            async with local_client(primary, tmp_path / "lq"):
                pass
        assert segment.read_bytes() == bytes(data)


def test_the_blocking_client_stores_and_forwards(tmp_path: Path) -> None:
    with broker_thread(Broker(servicebus=True)) as primary:
        local = LocalQueueOptions(tmp_path / "lq")
        with BlockingClient.from_connection_string(primary.connection_string, local_queue=local, **FAST) as client:
            fault = primary.faults.run(primary.faults.refuse_connections)
            primary.faults.run(primary.faults.close_connections)
            with client.get_queue_sender("orders") as sender:
                for i in range(10):
                    sender.send_messages(ServiceBusMessage(f"{i}", message_id=f"b{i}"))
                state = client.local_queue_state
                assert state is not None and state.depth == 10
                primary.faults.run(primary.faults.clear, fault)
                deadline = time.monotonic() + 30
                while (state := client.local_queue_state) is not None and state.depth:
                    assert time.monotonic() < deadline, state
                    time.sleep(0.05)
        assert stored(primary, "orders") == 10


async def test_a_double_outage_raises_nothing_and_loses_nothing(tmp_path: Path) -> None:
    """The secondary namespace down, then the primary killed and restarted from its data:
    paired + local queue, a stream of sends from four senders: none raises, each id once."""
    async with Broker(servicebus=True, config=DEDUPE, data_dir=tmp_path / "primary") as first:
        port = first.port
        secondary = await Broker(servicebus=True, http_port=0).start()
        paired = options(secondary, failover_interval=0.3)
        await secondary.stop()  # the secondary is down from the start
        client = ServiceBusClient.from_connection_string(
            first.connection_string, paired_namespace=paired, local_queue=LocalQueueOptions(tmp_path / "lq"), **FAST
        )
        restarted: list[Broker] = []
        raised: list[BaseException] = []
        try:
            async with client:
                senders = [client.get_queue_sender("orders") for _ in range(4)]
                indices = iter(range(2000))
                phase = "up"

                async def worker(sender: Any) -> None:
                    nonlocal phase
                    for i in indices:
                        if i == 500:
                            phase = "stopping"
                            await first.stop()
                            phase = "down"
                        elif phase == "down" and local_depth(client) >= 300:
                            phase = "restarting"
                            restarted.append(await Broker(DEDUPE, data_dir=tmp_path / "primary").start(port=port))
                        try:
                            await sender.send_messages(ServiceBusMessage(f"{i}", message_id=f"m{i}"))
                        except BaseException as exc:
                            raised.append(exc)

                await asyncio.gather(*(worker(s) for s in senders))
                assert restarted, "the stream ended before the outage was over"
                await depth_zero(client, timeout=60)
                state = client.local_queue_state
                assert state is not None and state.stored >= 300 and state.forwarded == state.stored
            assert raised == []  # the sender saw no error at all
            got = await drain(restarted[0].connection_string, "orders", 2000)
            ids = Counter(str(m.message_id) for m in got)
            assert set(ids) == {f"m{i}" for i in range(2000)} and set(ids.values()) == {1}
        finally:
            for broker in restarted:
                await broker.stop()
