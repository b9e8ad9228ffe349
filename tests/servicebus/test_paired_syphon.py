"""The syphon: lock renewal while forwarding, several syphons at once, messages that
were not parked."""

from __future__ import annotations

import gc

import pytest

from amqplink.broker.config import EntityProperties, QueueConfig
from amqplink.servicebus import ServiceBusMessage
from amqplink.servicebus.paired import syphon as syphon_module
from amqplink.servicebus.paired.options import namespace_label
from tests.servicebus.paired_util import namespaces, paired_client, plain_sender, send_until_parked, stored, syphoned
from tests.servicebus.scenario import wait_until


async def test_locks_are_renewed_while_a_slow_forward_runs() -> None:
    async with namespaces() as (primary, secondary):
        # backlog queue 0 made beforehand with a 2 s lock: the client leaves it as it is
        label = namespace_label("127.0.0.1", primary.port)
        short = EntityProperties(lock_duration=2.0, max_delivery_count=2**31 - 1)
        for i in range(3):
            secondary.namespace.add_queue(QueueConfig(f"{label}/x-servicebus-transfer/{i}", short))
        async with paired_client(primary, secondary) as sender_client:
            fault = primary.faults.entity_unavailable("orders", condition="amqp:internal-error")
            async with sender_client.get_queue_sender("orders") as sender:
                await send_until_parked(sender, ServiceBusMessage("slow", message_id="slow-1"))
            primary.faults.clear(fault)
        delay = primary.faults.delay_dispositions(3500)  # the forward's outcome comes after the lock ran out
        async with paired_client(primary, secondary, enable_syphon=True) as syphon_client:
            await wait_until(
                lambda: syphon_client.paired_state is not None and syphon_client.paired_state.syphoned == 1
            )
            primary.faults.clear(delay)
        assert stored(primary, "orders") == 1  # forwarded once: the lock held, no redelivery
        assert sum(stored(secondary, f"{label}/x-servicebus-transfer/{i}") for i in range(3)) == 0


async def test_two_syphons_share_the_work_without_repeats() -> None:
    async with namespaces() as (primary, secondary):
        async with paired_client(primary, secondary) as client:
            fault = primary.faults.entity_unavailable("orders", condition="amqp:internal-error")
            async with client.get_queue_sender("orders") as sender:
                await send_until_parked(sender, ServiceBusMessage("first"))
                await sender.send_messages([ServiceBusMessage(f"{i}") for i in range(499)])
            state = client.paired_state
            assert state is not None and state.parked == 500
            primary.faults.clear(fault)
        a = paired_client(primary, secondary, enable_syphon=True, seed=1)
        b = paired_client(primary, secondary, enable_syphon=True, seed=2)
        async with a, b:
            await wait_until(lambda: syphoned(a) + syphoned(b) >= 500, timeout=30)
            assert syphoned(a) + syphoned(b) == 500
        assert stored(primary, "orders") == 500


async def test_a_message_that_was_not_parked_is_dead_lettered() -> None:
    async with namespaces() as (primary, secondary):
        name = f"{namespace_label('127.0.0.1', primary.port)}/x-servicebus-transfer/0"
        async with (
            paired_client(primary, secondary, backlog_queue_count=1) as client,
            plain_sender(secondary, name) as stray,
        ):
            await stray.send_messages(ServiceBusMessage("no x-ms-path"))
        async with paired_client(primary, secondary, backlog_queue_count=1, enable_syphon=True):
            dead = secondary.namespace.queues[name.lower()].dead_letter_queue
            await wait_until(lambda: len(dead.store) == 1)
        assert stored(primary, "orders") == 0 and stored(secondary, name) == 0
        assert client.paired_state is not None and client.paired_state.parked == 0


async def test_the_syphon_keeps_a_bounded_number_of_destination_senders(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(syphon_module, "MAX_DESTINATIONS", 2)
    entities = [f"q{i}" for i in range(5)]
    async with namespaces() as (primary, secondary):
        async with paired_client(primary, secondary) as client:
            primary.faults.refuse_connections()
            primary.faults.close_connections()
            for entity in entities:
                async with client.get_queue_sender(entity) as sender:
                    await send_until_parked(sender, [ServiceBusMessage(f"{entity}-{n}") for n in range(3)])
            primary.faults.clear_all()
        async with paired_client(primary, secondary, enable_syphon=True) as syphon_client:
            await wait_until(lambda: syphoned(syphon_client) == 15, timeout=30)
            pairing = syphon_client._pairing
            assert pairing is not None and pairing.syphon is not None
            assert len(pairing.syphon._senders) <= 2
        assert [stored(primary, e) for e in entities] == [3] * 5


async def test_each_parked_message_is_completed_as_soon_as_its_forward_is_accepted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A syphon cut off mid-batch (its secondary connection dropped) repeats only the forwards
    still in flight: the ones the primary had accepted were completed already (issue 32: four
    kills of the syphon brought 514 extra copies, whole batches of up to 256). The forwards'
    outcomes that came after their sends gave up are read, not left for asyncio to report."""
    async with namespaces() as (primary, secondary):
        label = namespace_label("127.0.0.1", primary.port)  # a lock of 2 s: the cut-off batch is back soon
        short = EntityProperties(lock_duration=2.0, max_delivery_count=2**31 - 1)
        secondary.namespace.add_queue(QueueConfig(f"{label}/x-servicebus-transfer/0", short))
        async with paired_client(primary, secondary, backlog_queue_count=1) as client:
            fault = primary.faults.entity_unavailable("fast", condition="amqp:internal-error")
            slow_fault = primary.faults.entity_unavailable("slow", condition="amqp:internal-error")
            async with client.get_queue_sender("fast") as fast, client.get_queue_sender("slow") as slow:
                await send_until_parked(fast, ServiceBusMessage("f0"))
                await send_until_parked(slow, ServiceBusMessage("s0"))
                await fast.send_messages([ServiceBusMessage(f"f{i}") for i in range(1, 40)])
                await slow.send_messages([ServiceBusMessage(f"s{i}") for i in range(1, 10)])
            primary.faults.clear(fault)
            primary.faults.clear(slow_fault)
        held = primary.faults.delay_dispositions(8000, entity="slow")  # the slow ones' outcomes are late
        async with paired_client(primary, secondary, backlog_queue_count=1, enable_syphon=True) as syphon_client:
            await wait_until(lambda: stored(primary, "fast") == 40, timeout=10)
            # completed at once, not when the batch's slow outcomes come (8 s later)
            await wait_until(lambda: syphoned(syphon_client) >= 40, timeout=3)
            secondary.faults.close_connections()  # the syphon is cut off: what it had not completed comes back
            primary.faults.clear(held)
            await wait_until(lambda: stored(primary, "slow") >= 10, timeout=30)
            await wait_until(lambda: sum(stored(secondary, q) for q in client.paired_state.backlog_queues) == 0,  # type: ignore[union-attr]
                             timeout=30)  # fmt: skip
        assert stored(primary, "fast") == 40  # not one repeated
        assert stored(primary, "slow") >= 10  # (in flight when cut off: at least once)
    gc.collect()  # a future whose exception no one retrieved is reported when collected
    assert "never retrieved" not in caplog.text
