"""Active and passive replication over two embedded namespaces, one killed and restarted
from its data dir mid-stream; the de-duplicating receiver yields every id exactly once,
also across its own restart on the same SQLite file."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from pathlib import Path

import pytest

from amqplink.servicebus import ServiceBusMessage, ServiceBusReceiveMode
from amqplink.servicebus.aio import ActiveReplicationSender, Deduplicator, PassiveReplicationSender
from tests.servicebus.replication_util import (
    QUEUE,
    Namespace,
    ProcessNamespace,
    clients,
    consume,
    dedup_receiver,
    two_namespaces,
)

N = 300


def _ids(start: int, stop: int) -> list[str]:
    return [f"m{i:05d}" for i in range(start, stop)]


async def test_active_replication_with_a_namespace_killed_and_a_consumer_restarted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="amqplink.servicebus.replication")
    async with two_namespaces(tmp_path) as (first, second):
        async with clients(first, second) as (ca, cb):
            # no breaker: every send tries both (the counts below are exact; test_replication_breaker has the breaker)
            sender = ActiveReplicationSender(ca.get_queue_sender(QUEUE), cb.get_queue_sender(QUEUE), break_for=0)
            for part, (start, stop) in enumerate(((0, N // 3), (N // 3, 2 * N // 3), (2 * N // 3, N))):
                if part == 1:
                    await first.kill()
                if part == 2:
                    await first.start()  # from its data dir: the first third is there again
                for message_id in _ids(start, stop):
                    await sender.send_messages(ServiceBusMessage(message_id, message_id=message_id))
                assert sender.degraded == ((0,) if part == 1 else ())
            assert sender.counters.sends == N and sender.counters.failed == 0
            assert sender.counters.sent_to_one == N // 3  # the middle third: the secondary only
            logged = [r.getMessage() for r in caplog.records if r.name.endswith("replication.senders")]
            assert len(logged) == 2 and "refused a send" in logged[0] and "accepts sends again" in logged[1]
            assert (first.stored(), second.stored()) == (N - N // 3, N)
            await sender.close()

        path = tmp_path / "dedup.sqlite"
        yielded: Counter[str] = Counter()
        # The first consumer stops midway; a second one on the same file takes over.
        async with clients(first, second) as opened:
            with Deduplicator(path=path) as dedup:
                receiver = dedup_receiver(opened, dedup)
                await consume(receiver, yielded, until=lambda: len(yielded) >= N // 2)
                await receiver.close()
                first_half = set(yielded)
        async with clients(first, second) as opened:
            with Deduplicator(path=path) as dedup:
                assert all(i in dedup for i in first_half)  # the file remembers
                receiver = dedup_receiver(opened, dedup)
                await consume(
                    receiver, yielded, until=lambda: len(yielded) == N and first.stored() == second.stored() == 0
                )
                await receiver.close()
                # copies of ids the first consumer handled were removed, not yielded again
                assert dedup.duplicates_removed >= 1
        assert set(yielded) == set(_ids(0, N))
        assert [i for i, n in yielded.items() if n != 1] == []


async def test_passive_replication_with_the_active_namespace_killed_and_restarted(tmp_path: Path) -> None:
    async with two_namespaces(tmp_path) as (first, second), clients(first, second) as (ca, cb):
        a, b = ca.get_queue_sender(QUEUE), cb.get_queue_sender(QUEUE)
        sender = PassiveReplicationSender(a, b)
        for message_id in _ids(0, N // 3):
            await sender.send_messages(ServiceBusMessage(message_id, message_id=message_id))
        assert sender.active is a and sender.counters.swaps == 0
        await first.kill()  # m1..: accepted by the primary, stuck there while it is down (seed 003)
        for message_id in _ids(N // 3, 2 * N // 3):
            await sender.send_messages(ServiceBusMessage(message_id, message_id=message_id))
        assert sender.active is b and sender.counters.swaps == 1
        await first.start()
        for message_id in _ids(2 * N // 3, N):
            await sender.send_messages(ServiceBusMessage(message_id, message_id=message_id))
        assert sender.active is b and sender.counters.swaps == 1  # no swap back while b works
        assert (first.stored(), second.stored()) == (N // 3, N - N // 3)

        yielded: Counter[str] = Counter()
        with Deduplicator(path=tmp_path / "dedup.sqlite") as dedup:
            receiver = dedup_receiver([ca, cb], dedup)
            await consume(receiver, yielded, until=lambda: len(yielded) == N)
            await receiver.close()
        assert set(yielded) == set(_ids(0, N)) and max(yielded.values()) == 1


async def test_passive_timed_out_send_that_was_stored_is_a_duplicate_removed(tmp_path: Path) -> None:
    """Seed 003: "the sender sends a message m to the primary queue. Service Bus successfully
    processes m but fails to send a response. After the send operation times out, the
    sender sends an identical copy of m to the secondary queue"."""
    async with two_namespaces(tmp_path) as (first, second), clients(first, second) as (ca, cb):
        sender = PassiveReplicationSender(ca.get_queue_sender(QUEUE), cb.get_queue_sender(QUEUE))
        await sender.send_messages(ServiceBusMessage("warm", message_id="warm"))
        assert first.broker is not None
        fault = first.broker.faults.delay_dispositions(3000, entity=QUEUE)
        await sender.send_messages(ServiceBusMessage("m", message_id="m"), timeout=0.5)
        assert sender.counters.swaps == 1 and fault.fired >= 1
        first.broker.faults.clear(fault)
        assert (first.stored(), second.stored()) == (2, 1)  # m in both

        yielded: Counter[str] = Counter()
        receiver = dedup_receiver([ca, cb], Deduplicator())
        await consume(receiver, yielded, until=lambda: first.stored() == second.stored() == 0)
        assert yielded == Counter({"warm": 1, "m": 1})
        assert receiver.duplicates_removed == 1
        await receiver.close()


async def test_receive_and_delete_yields_each_id_once(tmp_path: Path) -> None:
    async with two_namespaces(tmp_path) as (first, second), clients(first, second) as (ca, cb):
        sender = ActiveReplicationSender(ca.get_queue_sender(QUEUE), cb.get_queue_sender(QUEUE))
        await sender.send_messages([ServiceBusMessage(i, message_id=i) for i in _ids(0, 100)])
        yielded: Counter[str] = Counter()
        receiver = dedup_receiver([ca, cb], Deduplicator(), ServiceBusReceiveMode.RECEIVE_AND_DELETE)
        # every copy accounted for: 200 sent, each either yielded or removed
        await consume(receiver, yielded, until=lambda: yielded.total() + receiver.duplicates_removed == 200)
        assert first.stored() == second.stored() == 0
        assert set(yielded) == set(_ids(0, 100)) and max(yielded.values()) == 1
        assert receiver.duplicates_removed == 100
        await receiver.close()




async def test_a_namespace_killed_while_consuming_then_back(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="amqplink.servicebus.replication")
    async with two_namespaces(tmp_path) as (first, second), clients(first, second) as (ca, cb):
        sender = ActiveReplicationSender(ca.get_queue_sender(QUEUE), cb.get_queue_sender(QUEUE))
        await sender.send_messages([ServiceBusMessage(i, message_id=i) for i in _ids(0, N)])
        yielded: Counter[str] = Counter()
        receiver = dedup_receiver([ca, cb], Deduplicator(path=tmp_path / "dedup.sqlite"))
        await consume(receiver, yielded, until=lambda: len(yielded) >= N // 3)
        await first.kill()
        await consume(receiver, yielded, until=lambda: len(yielded) >= 2 * N // 3)  # the secondary alone
        await first.start()
        await consume(receiver, yielded, until=lambda: first.stored() == second.stored() == 0)
        assert set(yielded) == set(_ids(0, N)) and max(yielded.values()) == 1
        assert receiver.duplicates_removed == N  # every id had a second copy, each removed once
        logged = [r.getMessage() for r in caplog.records if r.name.endswith("replication.receiver")]
        assert len(logged) == 2 and "namespace 0" in logged[0] and "failed" in logged[0]  # once per outage
        assert "receives again" in logged[1]
        await receiver.close()


async def test_passive_replication_with_the_active_broker_sigkilled_mid_stream(tmp_path: Path) -> None:
    """The primary is a broker process SIGKILLed while sends stream on, then restarted from
    its data dir on the same port: sends fail over (the one in flight may be stored in both:
    the seed's duplicate), the messages it had accepted come back with it (the seed's delay),
    and the de-duplicating receiver yields every id exactly once."""
    first = await ProcessNamespace(tmp_path / "primary", "primary-key").start()
    second = await Namespace(tmp_path / "secondary", "secondary-key").start()
    try:
        async with clients(first, second) as (ca, cb):
            sender = PassiveReplicationSender(ca.get_queue_sender(QUEUE), cb.get_queue_sender(QUEUE))
            progress = asyncio.Queue[int]()

            async def produce() -> None:
                for n, message_id in enumerate(_ids(0, N), 1):
                    await sender.send_messages(ServiceBusMessage(message_id, message_id=message_id))
                    progress.put_nowait(n)

            producing = asyncio.ensure_future(produce())
            while await progress.get() < N // 3:
                pass
            first.kill()  # while the producer goes on
            while await progress.get() < 2 * N // 3:
                pass
            await first.start()
            await producing
            assert sender.counters.swaps == 1 and sender.counters.sends == N

            yielded: Counter[str] = Counter()
            receiver = dedup_receiver([ca, cb], Deduplicator(path=tmp_path / "dedup.sqlite"))
            async with ca.get_queue_receiver(QUEUE) as peek_a, cb.get_queue_receiver(QUEUE) as peek_b:

                async def done() -> bool:  # every id yielded and nothing left in either namespace
                    return len(yielded) == N and all(
                        [not await r.peek_messages(1, sequence_number=1) for r in (peek_a, peek_b)]
                    )

                await consume(receiver, yielded, until=done)
            await receiver.close()
        assert set(yielded) == set(_ids(0, N)) and max(yielded.values()) == 1
    finally:
        first.kill()
        await second.kill()
