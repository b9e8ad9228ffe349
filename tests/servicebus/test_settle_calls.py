"""Every way a user calls the asyncio receiver's settle methods (``async def`` in the SDK):
awaited, gathered, as a task, under ``wait_for``, through ``ensure_future``, never awaited,
cancelled, from the blocking facade's thread; the errors raised where they are awaited,
the same on the link's immediate settlement as on the coroutine that starts it when awaited."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest

from amqplink.protocol.definitions import Disposition
from amqplink.servicebus import ServiceBusMessage, ServiceBusReceivedMessage
from amqplink.servicebus import blocking as sync_sb
from amqplink.servicebus.aio import ServiceBusClient, ServiceBusReceiver
from amqplink.servicebus.exceptions import MessageAlreadySettled, MessageLockLostError
from amqplink.servicebus.settlement import LinkSettlement
from tests.aio.test_wire_efficiency import WireTap
from tests.servicebus.scenario import BrokerThread, broker

__all__ = ["broker"]

QUEUE = "plain"


async def fill_and_receive(client: ServiceBusClient, receiver: ServiceBusReceiver, n: int) -> list[Any]:
    async with client.get_queue_sender(QUEUE) as sender:
        await sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(n)])
    return await receive_exactly(receiver, n)


async def receive_exactly(receiver: ServiceBusReceiver, n: int) -> list[Any]:
    """``n`` messages from ``receiver`` (failing if a receive waits 5 s for nothing first)."""
    got: list[Any] = []
    while len(got) < n:
        batch = await receiver.receive_messages(max_message_count=n - len(got), max_wait_time=5)
        assert batch, f"received {len(got)} of {n}"
        got += batch
    return got


@contextlib.asynccontextmanager
async def received(
    broker: BrokerThread, n: int, prefetch: int | None = None
) -> AsyncIterator[tuple[ServiceBusReceiver, list[Any]]]:
    """A peek-lock receiver on ``QUEUE`` of a fresh client, with ``n`` messages sent and received."""
    extra: dict[str, Any] = {} if prefetch is None else {"prefetch_count": prefetch}
    async with (
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
        client.get_queue_receiver(QUEUE, **extra) as receiver,
    ):
        yield receiver, await fill_and_receive(client, receiver, n)


def wire_tap(receiver: ServiceBusReceiver) -> WireTap:
    """The frames the receiver's connection writes from now on."""
    link = receiver._link
    assert link is not None
    return WireTap(link.connection)


async def task_stepped() -> None:
    """Return after the callbacks already scheduled on the loop ran (a task created before
    this call has taken its first step): they run in the order they were scheduled."""
    turn = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(turn.set_result, None)
    await turn


async def queue_is_empty(receiver: ServiceBusReceiver) -> bool:
    """A ``$management`` round trip on the same connection: the broker answers it after the
    dispositions sent before it, so their confirmations have arrived when it returns."""
    return not await receiver.peek_messages(max_message_count=10)


def settle_calls(receiver: ServiceBusReceiver) -> dict[str, Callable[[Any], Coroutine[Any, Any, None]]]:
    return {
        "complete": receiver.complete_message,
        "abandon": receiver.abandon_message,
        "defer": receiver.defer_message,
        "dead-letter": lambda m: receiver.dead_letter_message(m, "reason", "description"),
    }


async def test_a_settlement_on_the_link_is_a_future_and_a_coroutine(broker: BrokerThread) -> None:
    async with received(broker, 1) as (receiver, (m,)):
        settling = receiver.complete_message(m)
        assert type(settling) is LinkSettlement
        assert asyncio.isfuture(settling) and asyncio.iscoroutine(settling)
        assert asyncio.ensure_future(settling) is settling  # no Task around it
        assert await settling is None
        assert m._settled
        assert await queue_is_empty(receiver)


async def test_awaited_gathered_task_wait_for_and_ensure_future_settle_each_message_once(broker: BrokerThread) -> None:
    async with received(broker, 8, prefetch=20) as (receiver, got):
        tap = wire_tap(receiver)
        tasks_before = len(asyncio.all_tasks())
        await receiver.complete_message(got[0])
        gathered = [receiver.complete_message(m) for m in got[1:4]]
        assert len(asyncio.all_tasks()) == tasks_before  # gather wraps no Task around them
        assert await asyncio.gather(*gathered) == [None, None, None]
        task = asyncio.create_task(receiver.complete_message(got[4]))
        assert await task is None
        assert await asyncio.wait_for(receiver.complete_message(got[5]), 10) is None
        assert await asyncio.ensure_future(receiver.complete_message(got[6])) is None
        results = await asyncio.gather(
            receiver.complete_message(got[7]), receiver.complete_message(got[0]), return_exceptions=True
        )
        assert results[0] is None and type(results[1]) is MessageAlreadySettled
        assert all(m._settled for m in got)
        assert await queue_is_empty(receiver)
        dispositions = [p for p in tap.performatives() if type(p) is Disposition]
        covered = sorted(
            n for d in dispositions for n in range(int(d.first), int(d.last if d.last is not None else d.first) + 1)
        )
        assert len(covered) == len(set(covered)) == 8  # one disposition per message, none twice


async def test_a_settlement_never_awaited_settles_the_message_once(broker: BrokerThread) -> None:
    async with received(broker, 1) as (receiver, (m,)):
        tap = wire_tap(receiver)
        receiver.complete_message(m)  # started at once; nobody awaits it
        # A second call while the broker has not answered the first: refused, not sent again.
        with pytest.raises(MessageAlreadySettled):
            await receiver.complete_message(m)
        assert await queue_is_empty(receiver)
        assert m._settled  # the broker's confirmation settled it, unawaited
        with pytest.raises(MessageAlreadySettled):
            await receiver.abandon_message(m)
        assert len([p for p in tap.performatives() if type(p) is Disposition]) == 1


async def test_a_cancelled_wait_leaves_the_settlement_to_the_broker(broker: BrokerThread) -> None:
    async with received(broker, 2) as (receiver, (first, second)):
        started = asyncio.Event()

        async def worker() -> None:
            settling = receiver.complete_message(first)
            started.set()
            await settling

        task = asyncio.create_task(worker())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        with pytest.raises(TimeoutError):  # wait_for cancels the settlement it times out
            await asyncio.wait_for(receiver.complete_message(second), 0)
        assert await queue_is_empty(receiver)  # the dispositions had left: the broker settled both
        assert first._settled and second._settled
        for m in (first, second):
            with pytest.raises(MessageAlreadySettled):
                await receiver.complete_message(m)


async def test_a_cancelled_task_created_from_a_settlement_cancels_its_wait(broker: BrokerThread) -> None:
    async with received(broker, 1) as (receiver, (m,)):
        settling = receiver.complete_message(m)
        task = asyncio.create_task(settling)
        await task_stepped()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert settling.cancelled()
        assert await queue_is_empty(receiver) and m._settled


async def test_a_task_cancelled_before_its_first_step_leaves_the_settlement_to_the_broker(
    broker: BrokerThread,
) -> None:
    async with received(broker, 1) as (receiver, (m,)):
        settling = receiver.complete_message(m)
        task = asyncio.create_task(settling)
        task.cancel()  # the disposition is on its way already: the broker settles the message
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await settling is None
        assert m._settled and await queue_is_empty(receiver)


async def test_settling_from_another_thread_starts_on_the_loop(broker: BrokerThread) -> None:
    """Off the loop thread (the blocking facade's callers) the call returns a coroutine and
    touches neither the loop nor the engine; the loop runs it when it is awaited there."""
    async with received(broker, 1) as (receiver, (m,)):
        tap = wire_tap(receiver)
        made: list[Any] = []
        thread = threading.Thread(target=lambda: made.append(receiver.complete_message(m)))
        thread.start()
        thread.join()
        (coro,) = made
        assert inspect.iscoroutine(coro) and not asyncio.isfuture(coro)
        assert not [p for p in tap.performatives() if type(p) is Disposition]  # nothing sent yet
        await coro
        assert m._settled and await queue_is_empty(receiver)


def test_the_blocking_facade_settles_through_the_loop_thread(broker: BrokerThread) -> None:
    with sync_sb.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender(QUEUE) as sender:
            sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b"), ServiceBusMessage("c")])
        with client.get_queue_receiver(QUEUE, max_wait_time=5) as receiver:
            got: list[Any] = []
            while len(got) < 3:
                got += receiver.receive_messages(max_message_count=3 - len(got))
            receiver.complete_message(got[0])
            receiver.abandon_message(got[1])
            receiver.dead_letter_message(got[2], "why", "because")
            with pytest.raises(MessageAlreadySettled):
                receiver.complete_message(got[0])
            (again,) = receiver.receive_messages()
            assert str(again) == "b" and again.delivery_count == 1
            receiver.complete_message(again)
            assert not receiver.peek_messages()


async def test_a_deferred_message_settles_over_management_with_a_coroutine(broker: BrokerThread) -> None:
    async with received(broker, 1) as (receiver, (m,)):
        await receiver.defer_message(m)
        (deferred,) = await receiver.receive_deferred_messages(m.sequence_number)
        settling = receiver.complete_message(deferred)
        assert inspect.iscoroutine(settling)
        await asyncio.gather(settling)
        assert deferred._settled
        assert await queue_is_empty(receiver)
        with pytest.raises(MessageAlreadySettled):
            await receiver.complete_message(deferred)


async def test_the_broker_refusing_a_settlement_is_raised_where_it_is_awaited(broker: BrokerThread) -> None:
    async with received(broker, 2) as (receiver, (m, n)):

        async def expire() -> None:
            broker.broker.faults.expire_locks()

        broker.call(expire())
        settling = receiver.complete_message(m)  # does not raise: the answer is to come
        task = asyncio.create_task(receiver.complete_message(n))
        with pytest.raises(MessageLockLostError):
            await settling
        with pytest.raises(MessageLockLostError):  # thrown into the task that drives it
            await task
        assert not m._settled and not n._settled


# -- the immediate settlement and the coroutine give the same results and errors ------------
SITUATIONS = ["live", "settled", "receiver closed", "link gone", "lock expired", "peeked", "not a message"]


async def settle_in(
    broker: BrokerThread, situation: str, action: str, immediate: bool, *, together: bool = False
) -> tuple[str, str]:
    """Settle one message with ``action`` in ``situation``: through the call on the loop
    (``immediate``: the LinkSettlement) or the coroutine the call returns off the loop;
    ``together``: through ``complete_messages`` (its one outcome raised)."""
    async with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        receiver = client.get_queue_receiver(QUEUE)
        async with receiver:
            (m,) = await fill_and_receive(client, receiver, 1)
            target: Any = m
            if situation == "settled":
                await receiver.complete_message(m)
            elif situation == "link gone":
                assert receiver._link is not None
                await receiver._link.close()
            elif situation == "lock expired":

                async def expire() -> None:
                    broker.broker.faults.expire_locks()

                broker.call(expire())
            elif situation == "peeked":
                (target,) = await receiver.peek_messages(1)
            elif situation == "not a message":
                target = "m"
            if situation == "receiver closed":
                await receiver.close()
            call = settle_calls(receiver)[action]
            if together:
                assert action == "complete"

                async def settle_together() -> None:
                    (outcome,) = await receiver.complete_messages([target])
                    if outcome is not None:
                        raise outcome

                settling: Any = settle_together()
            elif immediate:
                settling = call(target)
                on_link = situation not in ("peeked", "not a message")  # those take the coroutine
                assert (type(settling) is LinkSettlement) is on_link
            else:
                made: list[Any] = []
                thread = threading.Thread(target=lambda: made.append(call(target)))
                thread.start()
                thread.join()
                (settling,) = made
                assert inspect.iscoroutine(settling) and not isinstance(settling, LinkSettlement)
            try:
                await settling
            except Exception as error:
                cause = error.__cause__
                text = str(error).replace(str(getattr(m, "lock_token", None)), "<lock token>")
                return type(error).__name__, f"{text} <- {type(cause).__name__ if cause else None}"
            assert isinstance(m, ServiceBusReceivedMessage) and m._settled
            return "settled", ""


@pytest.mark.parametrize("situation", SITUATIONS)
async def test_complete_messages_and_complete_message_agree(broker: BrokerThread, situation: str) -> None:
    """Each outcome of ``complete_messages`` is what ``complete_message`` gives the message."""
    one = await settle_in(broker, situation, "complete", immediate=True)
    together = await settle_in(broker, situation, "complete", immediate=True, together=True)
    assert together == one, situation


@pytest.mark.parametrize("situation", SITUATIONS)
async def test_the_immediate_settlement_and_the_coroutine_agree(broker: BrokerThread, situation: str) -> None:
    for action in ["complete", "abandon", "defer", "dead-letter"]:
        immediate = await settle_in(broker, situation, action, immediate=True)
        later = await settle_in(broker, situation, action, immediate=False)
        assert immediate == later, (situation, action)
        if situation == "live":
            assert immediate == ("settled", "")
        else:
            assert immediate[0] != "settled"
