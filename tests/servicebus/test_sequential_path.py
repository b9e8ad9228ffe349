"""The patterns most code uses, one send awaited at a time and each message completed in
turn (docs/benchmarks-sbclient.md): what makes them cheap, pinned by counting, not timing.

- asyncio: a sequential send or settlement creates no Task, and a lone transfer is written
  before the loop turns (a burst still coalesces);
- blocking: calls made back to back run the loop on the calling thread (no
  ``call_soon_threadsafe``: no call handed to another thread) and create no Task for a
  single send or a settlement;
- what must not change: a send refused with a retryable error is retried under the retry
  policy (not with ``retry_total=0``), and the blocking sender stays thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from amqplink import sync
from amqplink.servicebus import ServiceBusMessage
from amqplink.servicebus import blocking as sync_sb
from amqplink.servicebus.aio import ServiceBusClient
from amqplink.servicebus.exceptions import ServiceBusError
from tests.servicebus.scenario import BrokerThread, broker

__all__ = ["broker"]

QUEUE = "plain"
CALLS = 20


class LoopWatch:
    """Counts the Tasks a loop creates and the callbacks other threads hand it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.tasks: list[asyncio.Task[Any]] = []
        self.hops = 0

    def _factory(self, loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        self.tasks.append(task)
        return task

    def _threadsafe(self, callback: Any, *args: Any, **kwargs: Any) -> Any:
        self.hops += 1
        return type(self.loop).call_soon_threadsafe(self.loop, callback, *args, **kwargs)

    @contextlib.contextmanager
    def watching(self) -> Iterator[LoopWatch]:
        self.loop.set_task_factory(self._factory)
        self.loop.call_soon_threadsafe = self._threadsafe  # type: ignore[method-assign]
        try:
            yield self
        finally:
            del self.loop.call_soon_threadsafe
            self.loop.set_task_factory(None)


def sync_loop() -> asyncio.AbstractEventLoop:
    return sync._loop_thread().loop


# -- asyncio ---------------------------------------------------------------------------------
async def test_sequential_sends_and_settlements_create_no_task(broker: BrokerThread) -> None:
    async with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender(QUEUE) as sender:
            await sender.send_messages(ServiceBusMessage("attach"))
            with LoopWatch(asyncio.get_running_loop()).watching() as watch:
                for i in range(CALLS):
                    await sender.send_messages(ServiceBusMessage(f"m{i}"))
            assert watch.tasks == []
        async with client.get_queue_receiver(QUEUE, prefetch_count=CALLS + 1) as receiver:
            got: list[Any] = []
            while len(got) < CALLS + 1:
                batch = await receiver.receive_messages(max_message_count=CALLS + 1, max_wait_time=5)
                assert batch, f"received {len(got)} of {CALLS + 1}"
                got += batch
            with LoopWatch(asyncio.get_running_loop()).watching() as watch:
                for message in got:
                    await receiver.complete_message(message)
            assert watch.tasks == []
            assert await receiver.receive_messages(max_wait_time=0.2) == []  # all completed


async def test_a_lone_transfer_is_written_at_once_and_a_burst_coalesces(broker: BrokerThread) -> None:
    async with (
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
        client.get_queue_sender(QUEUE) as sender,
    ):
        await sender.send_messages(ServiceBusMessage("attach"))
        link = sender._link
        assert link is not None and link.in_flight == 0
        engine = link._protocol.engine
        first = await link.send_payload_nowait(ServiceBusMessage("alone")._message.encode())
        assert engine.output_size() == 0  # written before the loop turned
        second = await link.send_payload_nowait(ServiceBusMessage("second")._message.encode())
        third = await link.send_payload_nowait(ServiceBusMessage("third")._message.encode())
        assert engine.output_size() > 0  # behind the first: left for one write at the loop's turn
        await asyncio.gather(first, second, third)


# -- blocking --------------------------------------------------------------------------------
@contextlib.contextmanager
def attached_sender(broker: BrokerThread, **options: Any) -> Iterator[sync_sb.ServiceBusSender]:
    """A blocking sender to ``QUEUE`` whose link is attached (one message sent)."""
    with (
        sync_sb.ServiceBusClient.from_connection_string(broker.connection_string, **options) as client,
        client.get_queue_sender(QUEUE) as sender,
    ):
        sender.send_messages(ServiceBusMessage("attach"))
        yield sender


def test_blocking_sends_cross_no_thread_and_create_no_task(broker: BrokerThread) -> None:
    with attached_sender(broker) as sender:
        with LoopWatch(sync_loop()).watching() as watch:
            for i in range(CALLS):
                sender.send_messages(ServiceBusMessage(f"m{i}"))
        assert watch.tasks == []
        assert watch.hops == 0


def test_blocking_settlements_cross_no_thread_and_create_no_task(broker: BrokerThread) -> None:
    with sync_sb.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender(QUEUE) as sender:
            sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(CALLS)])
        with client.get_queue_receiver(QUEUE, prefetch_count=CALLS) as receiver:
            got: list[Any] = []
            while len(got) < CALLS:
                batch = receiver.receive_messages(max_message_count=CALLS, max_wait_time=5)
                assert batch, f"received {len(got)} of {CALLS}"
                got += batch
            with LoopWatch(sync_loop()).watching() as watch:
                for message in got:
                    receiver.complete_message(message)
            assert watch.tasks == []
            assert watch.hops == 0
            assert receiver.receive_messages(max_wait_time=0.2) == []  # the broker removed them all


def test_a_blocking_call_that_needs_a_coroutine_runs_one_task_on_the_calling_thread(broker: BrokerThread) -> None:
    """A batch (not the single-message path) runs as one Task, on the calling thread too."""
    with attached_sender(broker) as sender:
        with LoopWatch(sync_loop()).watching() as watch:
            sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
        assert watch.hops == 0
        assert len(watch.tasks) == 1  # the call's coroutine (the attached link is not checked in a Task)


def test_a_refused_blocking_send_is_retried_under_the_policy(broker: BrokerThread) -> None:
    """The first attempt, started without a Task, is refused with a retryable condition; the
    retry (after the policy's back-off, by which time the fault is cleared) is accepted."""
    faults = broker.broker.faults
    with attached_sender(broker, retry_backoff_factor=0.5, retry_total=3) as sender:
        fault = faults.run(faults.entity_unavailable, QUEUE, condition="amqp:internal-error")
        outcome: list[BaseException | None] = []

        def send() -> None:
            try:
                sender.send_messages(ServiceBusMessage("retried"))
                outcome.append(None)
            except BaseException as exc:  # reported to the test
                outcome.append(exc)

        thread = threading.Thread(target=send)
        thread.start()
        assert fault.fired_event.wait(10), "the broker never refused the send"
        faults.run(faults.clear, fault)  # before the back-off (1 s) ends
        thread.join(30)
        assert outcome == [None]
        assert fault.fired == 1
    with (
        sync_sb.ServiceBusClient.from_connection_string(broker.connection_string) as client,
        client.get_queue_receiver(QUEUE, prefetch_count=10) as receiver,
    ):
        bodies = []
        while len(bodies) < 2:
            batch = receiver.receive_messages(max_message_count=10, max_wait_time=5)
            assert batch
            bodies += [b"".join(m.body) for m in batch]
        assert sorted(bodies) == [b"attach", b"retried"]


def test_retry_total_zero_raises_the_first_refusal(broker: BrokerThread) -> None:
    faults = broker.broker.faults
    with attached_sender(broker, retry_total=0) as sender:
        fault = faults.run(faults.entity_unavailable, QUEUE, condition="amqp:internal-error")
        with pytest.raises(ServiceBusError):
            sender.send_messages(ServiceBusMessage("refused"))
        assert fault.fired == 1


def test_the_blocking_sender_is_thread_safe(broker: BrokerThread) -> None:
    threads, each = 8, 25
    with sync_sb.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender(QUEUE) as sender:
            errors: list[BaseException] = []

            def work(n: int) -> None:
                try:
                    for i in range(each):
                        sender.send_messages(ServiceBusMessage(f"{n}-{i}"))
                except BaseException as exc:  # reported to the test
                    errors.append(exc)

            workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join(60)
            assert errors == []
        with client.get_queue_receiver(QUEUE, prefetch_count=threads * each) as receiver:
            bodies: set[bytes] = set()
            while len(bodies) < threads * each:
                batch = receiver.receive_messages(max_message_count=threads * each, max_wait_time=5)
                assert batch, f"received {len(bodies)} of {threads * each}"
                for message in batch:
                    bodies.add(b"".join(message.body))
                    receiver.complete_message(message)
            assert bodies == {f"{n}-{i}".encode() for n in range(threads) for i in range(each)}
