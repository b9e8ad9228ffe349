"""The proof of paired-namespace failover: a stream of sends survives the primary entity
becoming unavailable, and the primary broker being killed and restarted from its data
directory; the syphon then delivers every parked message with its properties restored."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig, EntityProperties, NamespaceConfig, QueueConfig
from amqplink.servicebus import ServiceBusMessage
from amqplink.servicebus.aio import ServiceBusClient, ServiceBusSender
from amqplink.servicebus.exceptions import ServiceBusError
from amqplink.servicebus.message import ServiceBusReceivedMessage
from amqplink.servicebus.paired.pairing import PING_CONTENT_TYPE
from tests.servicebus.paired_util import drain, namespaces, paired_client, stored
from tests.servicebus.scenario import wait_until

TTL = dt.timedelta(hours=2)


def message(i: int) -> ServiceBusMessage:
    return ServiceBusMessage(
        f"body-{i}", message_id=f"m{i}", application_properties={"i": i}, time_to_live=TTL, subject="order"
    )


async def stream(
    senders: list[ServiceBusSender], count: int, on_index: Callable[[int], Awaitable[None]]
) -> tuple[set[int], set[int]]:
    """Send ``count`` messages over ``senders`` concurrently; (accepted ids, raised ids).
    ``on_index(i)`` runs before message ``i`` (fault injection at a point of the stream)."""
    accepted: set[int] = set()
    raised: set[int] = set()
    indices = iter(range(count))

    async def worker(sender: ServiceBusSender) -> None:
        for i in indices:
            await on_index(i)
            try:
                await sender.send_messages(message(i))
            except ServiceBusError:
                raised.add(i)
            else:
                accepted.add(i)

    await asyncio.gather(*(worker(s) for s in senders))
    assert len(accepted) + len(raised) == count  # every send either succeeded or raised
    return accepted, raised


def check_restored(got: list[ServiceBusReceivedMessage], accepted: set[int], raised: set[int], exact: bool) -> None:
    assert not [m for m in got if m.content_type == PING_CONTENT_TYPE]  # no ping reaches a receiver
    ids = Counter(str(m.message_id) for m in got)
    assert {f"m{i}" for i in accepted} <= set(ids)  # nothing accepted was lost
    assert all(ids[f"m{i}"] == 1 for i in accepted)  # and nothing came twice
    if exact:
        assert not [i for i in raised if f"m{i}" in ids]  # a send that raised was not stored
    for m in got:
        i = int(str(m.message_id)[1:])
        assert str(m) == f"body-{i}"
        props = {(k.decode() if isinstance(k, bytes) else k): v for k, v in (m.application_properties or {}).items()}
        assert props == {"i": i}  # x-ms-path / x-ms-sessionid / x-ms-timetolive removed
        assert m.time_to_live == TTL and m.subject == "order"


async def settle(client: ServiceBusClient, secondary: Broker) -> None:
    """Wait (with a deadline) until the entity failed back and the syphon moved everything."""

    def done() -> bool:
        state = client.paired_state
        assert state is not None
        return not state.failed_over and state.syphoned >= state.parked

    await wait_until(done, timeout=60)
    state = client.paired_state
    assert state is not None
    await wait_until(lambda: all(stored(secondary, q) == 0 for q in state.backlog_queues), timeout=30)
    pairing = client._pairing
    assert pairing is not None and not pairing._pings  # no ping task left: pings stopped
    assert state.pings_accepted == state.failbacks


async def test_ten_thousand_sends_with_the_primary_entity_unavailable_midway() -> None:
    async with namespaces() as (primary, secondary):
        client = paired_client(primary, secondary, enable_syphon=True)
        async with client:
            senders = [client.get_queue_sender("orders") for _ in range(8)]
            fault: Any = None

            async def faults(i: int) -> None:
                nonlocal fault
                state = client.paired_state
                assert state is not None
                if i == 3000:
                    fault = primary.faults.entity_unavailable("orders", condition="amqp:internal-error")
                elif fault is not None and state.parked >= 1500:
                    primary.faults.clear(fault)
                    fault = None

            accepted, raised = await stream(senders, 10_000, faults)
            state = client.paired_state
            assert state is not None and state.failovers == 1 and state.parked >= 1500
            await settle(client, secondary)
            state = client.paired_state
            assert state is not None and state.failbacks == 1 and state.syphoned == state.parked
            pings = state.pings_sent
            for sender in senders:
                await sender.send_messages(message(10_000 + senders.index(sender)))  # healthy again
                accepted.add(10_000 + senders.index(sender))
            assert client.paired_state is not None and client.paired_state.pings_sent == pings
        got = await drain(primary.connection_string, "orders", len(accepted))
        check_restored(got, accepted, raised, exact=True)
        assert len(got) == len(accepted)


async def test_the_primary_broker_killed_and_restarted_from_its_data_dir(tmp_path: Path) -> None:
    dedupe = EntityProperties(requires_duplicate_detection=True)
    config = BrokerConfig((NamespaceConfig(queues=(QueueConfig("orders", dedupe),)),))
    async with namespaces(config=config, data_dir=tmp_path) as (first, secondary):
        port = first.port
        restarted: list[Broker] = []
        client = paired_client(first, secondary, enable_syphon=True)
        try:
            async with client:
                senders = [client.get_queue_sender("orders") for _ in range(4)]
                phase = "up"

                async def kill_and_restart(i: int) -> None:
                    nonlocal phase
                    state = client.paired_state
                    assert state is not None
                    if i == 600:
                        phase = "stopping"  # (the other workers go on while it stops)
                        await first.stop()
                        phase = "down"
                    elif phase == "down" and state.parked >= 300:
                        phase = "restarting"
                        restarted.append(await Broker(config, data_dir=tmp_path).start(port=port))

                accepted, raised = await stream(senders, 2000, kill_and_restart)
                assert restarted, "the stream ended before enough was parked"
                await settle(client, secondary)
                state = client.paired_state
                assert state is not None and state.failovers >= 1 and state.failbacks == state.failovers
            # a send that raised may have been stored before the kill (at least once): the
            # queue's duplicate detection removes what the syphon brings a second time
            got = await drain(restarted[0].connection_string, "orders", len(accepted))
            check_restored(got, accepted, raised, exact=False)
        finally:
            for broker in restarted:
                await broker.stop()
