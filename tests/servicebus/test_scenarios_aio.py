"""One scenario suite, two clients: every test body runs with ``azure.servicebus.aio`` and
with ``amqplink.servicebus.aio`` (the ``api`` fixture; only the import differs), against
the embedded Service Bus broker."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

from tests.servicebus.scenario import LOCK, MAX_DELIVERY, SHORT_LOCK, Api, BrokerThread, api, body, broker

__all__ = ["api", "broker"]  # fixtures

NOW = lambda: dt.datetime.now(dt.UTC)  # noqa: E731


async def send(client: Any, queue: str, messages: Any) -> None:
    """One sender, one ``send_messages`` call."""
    async with client.get_queue_sender(queue) as sender:
        await sender.send_messages(messages)


async def drain(receiver: Any, wait: float = 0.5) -> list[Any]:
    """Every message the receiver gets until ``wait`` s pass without one."""
    got: list[Any] = []
    while True:
        batch = await receiver.receive_messages(max_message_count=50, max_wait_time=wait)
        if not batch:
            return got
        got += batch


async def receive_n(receiver: Any, n: int, wait: float = 5.0) -> list[Any]:
    got: list[Any] = []
    while len(got) < n:
        batch = await receiver.receive_messages(max_message_count=n - len(got), max_wait_time=wait)
        assert batch, f"only {len(got)} of {n} messages came"
        got += batch
    return got


async def test_send_receive_complete_with_properties(api: Api, broker: BrokerThread) -> None:
    sb = api.sb
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("plain") as sender:
            await sender.send_messages(
                sb.ServiceBusMessage(
                    "hello",
                    application_properties={"colour": "red", "n": 7},
                    subject="greeting",
                    content_type="text/plain",
                    correlation_id="corr-1",
                    message_id="id-1",
                    reply_to="replies",
                    to="someone",
                    time_to_live=dt.timedelta(minutes=5),
                )
            )
        async with client.get_queue_receiver("plain") as receiver:
            (msg,) = await receive_n(receiver, 1)
            assert body(msg) == b"hello" and str(msg) == "hello"
            assert msg.application_properties == {b"colour": b"red", b"n": 7}
            assert (msg.subject, msg.content_type, msg.correlation_id, msg.message_id) == (
                "greeting", "text/plain", "corr-1", "id-1")  # fmt: skip
            assert (msg.reply_to, msg.to, msg.session_id) == ("replies", "someone", None)
            assert msg.time_to_live == dt.timedelta(minutes=5)
            assert msg.delivery_count == 0
            assert isinstance(msg.sequence_number, int) and msg.sequence_number >= 1
            assert msg.enqueued_time_utc is not None and abs(msg.enqueued_time_utc - NOW()) < dt.timedelta(minutes=1)
            assert msg.lock_token is not None
            assert msg.locked_until_utc is not None and msg.locked_until_utc > NOW()
            assert msg.dead_letter_reason is None
            await receiver.complete_message(msg)
            with pytest.raises(api.exceptions.MessageAlreadySettled):
                await receiver.complete_message(msg)
            assert await drain(receiver) == []


async def test_send_list_batch_and_iterate(api: Api, broker: BrokerThread) -> None:
    sb = api.sb
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("plain") as sender:
            await sender.send_messages([sb.ServiceBusMessage(f"list-{i}") for i in range(5)])
            batch = await sender.create_message_batch()
            for i in range(3):
                batch.add_message(sb.ServiceBusMessage(f"batch-{i}"))
            assert len(batch) == 3 and 0 < batch.size_in_bytes <= batch.max_size_in_bytes
            await sender.send_messages(batch)
        async with client.get_queue_receiver("plain", max_wait_time=1) as receiver:
            seen = []
            async for msg in receiver:
                seen.append(str(msg))
                await receiver.complete_message(msg)
            assert seen == [f"list-{i}" for i in range(5)] + [f"batch-{i}" for i in range(3)]


async def test_batch_refuses_the_message_past_its_size(api: Api, broker: BrokerThread) -> None:
    sb = api.sb
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("plain") as sender:
            batch = await sender.create_message_batch(max_size_in_bytes=2000)
            added = 0
            with pytest.raises(api.exceptions.MessageSizeExceededError):
                for _ in range(100):
                    batch.add_message(sb.ServiceBusMessage(b"x" * 300))
                    added += 1
            assert 3 <= added < 7 and len(batch) == added
            await sender.send_messages(batch)
        async with client.get_queue_receiver("plain") as receiver:
            assert len(await receive_n(receiver, added)) == added


async def test_abandon_redelivers_with_delivery_count_plus_one(api: Api, broker: BrokerThread) -> None:
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        await send(client, "plain", api.sb.ServiceBusMessage("again"))
        async with client.get_queue_receiver("plain") as receiver:
            (first,) = await receive_n(receiver, 1)
            await receiver.abandon_message(first)
            (second,) = await receive_n(receiver, 1)
            assert str(second) == "again"
            assert second.delivery_count == first.delivery_count + 1
            assert second.sequence_number == first.sequence_number
            await receiver.complete_message(second)


async def test_defer_then_receive_deferred_and_complete(api: Api, broker: BrokerThread) -> None:
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        await send(client, "plain", api.sb.ServiceBusMessage("later"))
        async with client.get_queue_receiver("plain") as receiver:
            (msg,) = await receive_n(receiver, 1)
            seq = msg.sequence_number
            await receiver.defer_message(msg)
            assert await drain(receiver) == []
            (deferred,) = await receiver.receive_deferred_messages([seq])
            assert str(deferred) == "later" and deferred.sequence_number == seq
            assert deferred.lock_token is not None
            await receiver.complete_message(deferred)
            with pytest.raises(api.exceptions.MessageNotFoundError):
                await receiver.receive_deferred_messages([seq])
        async with client.get_queue_receiver("plain") as receiver:
            assert await drain(receiver) == []


async def test_dead_letter_with_reason_reaches_the_dead_letter_queue(api: Api, broker: BrokerThread) -> None:
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        await send(client, "plain", api.sb.ServiceBusMessage("poison"))
        async with client.get_queue_receiver("plain") as receiver:
            (msg,) = await receive_n(receiver, 1)
            await receiver.dead_letter_message(msg, reason="bad-input", error_description="cannot parse")
            assert await drain(receiver) == []
        async with client.get_queue_receiver("plain", sub_queue=api.sb.ServiceBusSubQueue.DEAD_LETTER) as dlq:
            (dead,) = await receive_n(dlq, 1)
            assert str(dead) == "poison"
            assert dead.dead_letter_reason == "bad-input"
            assert dead.dead_letter_error_description == "cannot parse"
            await dlq.complete_message(dead)


async def test_max_delivery_count_dead_letters(api: Api, broker: BrokerThread) -> None:
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        await send(client, "retries", api.sb.ServiceBusMessage("flaky"))
        async with client.get_queue_receiver("retries") as receiver:
            for attempt in range(MAX_DELIVERY):
                (msg,) = await receive_n(receiver, 1)
                assert msg.delivery_count == attempt
                await receiver.abandon_message(msg)
            assert await drain(receiver) == []
        async with client.get_queue_receiver("retries", sub_queue=api.sb.ServiceBusSubQueue.DEAD_LETTER) as dlq:
            (dead,) = await receive_n(dlq, 1)
            assert str(dead) == "flaky" and dead.dead_letter_reason == "MaxDeliveryCountExceeded"


async def test_peek_does_not_lock(api: Api, broker: BrokerThread) -> None:
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        await send(client, "plain", [api.sb.ServiceBusMessage(f"p{i}") for i in range(3)])
        async with client.get_queue_receiver("plain") as receiver:
            peeked = await receiver.peek_messages(max_message_count=5)
            assert [str(m) for m in peeked] == ["p0", "p1", "p2"]
            assert all(m.lock_token is None for m in peeked)
            with pytest.raises(ValueError):
                await receiver.complete_message(peeked[0])
            assert await receiver.peek_messages(max_message_count=5) == []  # continues after the last peeked
            again = await receiver.peek_messages(max_message_count=1, sequence_number=peeked[1].sequence_number)
            assert [str(m) for m in again] == ["p1"]
            got = await receive_n(receiver, 3)
            assert [str(m) for m in got] == ["p0", "p1", "p2"]


async def test_scheduled_message_appears_on_time_and_cancel(api: Api, broker: BrokerThread) -> None:
    sb = api.sb
    async with (
        api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client,
        client.get_queue_sender("plain") as sender,
        client.get_queue_receiver("plain") as receiver,
    ):
        at = NOW() + dt.timedelta(seconds=2)
        kept, cancelled = await sender.schedule_messages(
            [sb.ServiceBusMessage("scheduled"), sb.ServiceBusMessage("cancelled")], at
        )
        assert isinstance(kept, int) and isinstance(cancelled, int) and kept != cancelled
        await sender.cancel_scheduled_messages(cancelled)
        assert await receiver.receive_messages(max_wait_time=1) == []
        (msg,) = await receive_n(receiver, 1, wait=5)
        arrived = NOW()
        assert str(msg) == "scheduled"
        assert at - dt.timedelta(milliseconds=100) <= arrived < at + dt.timedelta(seconds=3)
        assert msg.scheduled_enqueue_time_utc is not None
        await receiver.complete_message(msg)
        assert await drain(receiver) == []


async def test_renew_message_lock_extends_it(api: Api, broker: BrokerThread) -> None:
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        await send(client, "locks", api.sb.ServiceBusMessage("hold"))
        async with client.get_queue_receiver("locks") as receiver:
            (msg,) = await receive_n(receiver, 1)
            before = msg.locked_until_utc
            await asyncio.sleep(LOCK / 2)
            renewed = await receiver.renew_message_lock(msg)
            assert renewed > before and msg.locked_until_utc == renewed
            await asyncio.sleep(LOCK / 2 + 0.5)  # past the first lock, inside the renewed one
            await receiver.complete_message(msg)
            assert await drain(receiver, 0.3) == []


async def test_lock_expiry_mid_processing_loses_the_lock_and_redelivers(api: Api, broker: BrokerThread) -> None:
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        await send(client, "expiring", api.sb.ServiceBusMessage("slow", message_id="dedup-me"))
        async with client.get_queue_receiver("expiring") as receiver:
            (msg,) = await receive_n(receiver, 1)
            await asyncio.sleep(SHORT_LOCK + 0.5)  # "processing" outlives the lock
            with pytest.raises(api.exceptions.MessageLockLostError):
                await receiver.complete_message(msg)
            (again,) = await receive_n(receiver, 1)
            assert again.message_id == "dedup-me" and again.delivery_count == msg.delivery_count + 1
            await receiver.complete_message(again)


async def test_receive_and_delete(api: Api, broker: BrokerThread) -> None:
    sb = api.sb
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        await send(client, "plain", [sb.ServiceBusMessage("a"), sb.ServiceBusMessage("b")])
        mode = sb.ServiceBusReceiveMode.RECEIVE_AND_DELETE
        async with client.get_queue_receiver("plain", receive_mode=mode) as receiver:
            got = await receive_n(receiver, 2)
            assert [str(m) for m in got] == ["a", "b"]
            assert got[0].lock_token is None and got[0].locked_until_utc is None
            with pytest.raises(ValueError):
                await receiver.complete_message(got[0])
        async with client.get_queue_receiver("plain") as receiver:
            assert await drain(receiver) == []


async def test_sessions_state_renew_and_next_available(api: Api, broker: BrokerThread) -> None:
    sb = api.sb
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("sessions") as sender:
            await sender.send_messages(
                [sb.ServiceBusMessage(f"{s}-{i}", session_id=s) for s in ("s1", "s2") for i in range(2)]
            )
        async with client.get_queue_receiver("sessions", session_id="s1") as receiver:
            session = receiver.session
            assert session.session_id == "s1"
            assert session.locked_until_utc is not None and session.locked_until_utc > NOW()
            assert [str(m) for m in await receiver.peek_messages(max_message_count=10)] == ["s1-0", "s1-1"]
            got = await receive_n(receiver, 2)
            assert [str(m) for m in got] == ["s1-0", "s1-1"] and {m.session_id for m in got} == {"s1"}
            for m in got:
                await receiver.complete_message(m)
            assert await session.get_state() is None
            await session.set_state(b"step-2")
            assert await session.get_state() == b"step-2"
            renewed = await session.renew_lock()
            assert renewed >= session.locked_until_utc - dt.timedelta(seconds=1)
        async with client.get_queue_receiver("sessions", session_id=sb.NEXT_AVAILABLE_SESSION) as receiver:
            assert receiver.session.session_id == "s2"
            got = await receive_n(receiver, 2)
            assert [str(m) for m in got] == ["s2-0", "s2-1"]
            for m in got:
                await receiver.complete_message(m)


async def test_topic_fans_out_to_subscriptions_by_rule(api: Api, broker: BrokerThread) -> None:
    sb = api.sb
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_topic_sender("events") as sender:
            await sender.send_messages(
                [sb.ServiceBusMessage("r", subject="red"), sb.ServiceBusMessage("b", subject="blue")]
            )
        async with client.get_subscription_receiver("events", "all") as receiver:
            assert sorted(str(m) for m in await receive_n(receiver, 2)) == ["b", "r"]
        async with client.get_subscription_receiver("events", "red") as receiver:
            got = await receive_n(receiver, 1)
            assert [str(m) for m in got] == ["r"]
            await receiver.complete_message(got[0])
            assert await drain(receiver) == []


@pytest.mark.slow  # three lock lifetimes: 9 s
async def test_auto_lock_renewer_holds_a_message_past_its_lock(api: Api, broker: BrokerThread) -> None:
    failures: list[Any] = []

    async def on_failure(renewable: Any, error: Any) -> None:
        failures.append(error)

    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        await send(client, "locks", api.sb.ServiceBusMessage("long job"))
        renewer = api.aio.AutoLockRenewer(max_lock_renewal_duration=60, on_lock_renew_failure=on_failure)
        async with client.get_queue_receiver("locks", auto_lock_renewer=renewer) as receiver:
            (msg,) = await receive_n(receiver, 1)
            await asyncio.sleep(LOCK * 3)
            assert msg.locked_until_utc > NOW()
            await receiver.complete_message(msg)
            assert msg.auto_renew_error is None and failures == []
        await renewer.close()


async def test_errors_name_the_same_exception(api: Api, broker: BrokerThread) -> None:
    exceptions = api.exceptions
    cs = broker.connection_string
    async with api.aio.ServiceBusClient.from_connection_string(cs, retry_total=0) as client:
        with pytest.raises(exceptions.ServiceBusAuthenticationError):  # the token's put answered 404
            async with client.get_queue_sender("no-such-queue") as sender:
                await sender.send_messages(api.sb.ServiceBusMessage("x"))
        with pytest.raises(exceptions.OperationTimeoutError):  # no session comes within its wait
            next_available = api.sb.NEXT_AVAILABLE_SESSION
            async with client.get_queue_receiver("sessions", session_id=next_available, max_wait_time=1) as receiver:
                await receiver.receive_messages(max_wait_time=1)
        async with client.get_queue_receiver("plain") as receiver:
            with pytest.raises(exceptions.MessageNotFoundError):
                await receiver.receive_deferred_messages([12345])
            with pytest.raises(ValueError):
                await receiver.receive_messages(max_message_count=0)
        async with client.get_queue_sender("plain") as sender:
            with pytest.raises(exceptions.MessageSizeExceededError):
                await sender.send_messages(api.sb.ServiceBusMessage(b"x" * (300 * 1024)))
            await sender.send_messages(api.sb.ServiceBusMessage("the sender is still usable"))


@pytest.mark.slow  # three lock lifetimes: 9 s
async def test_auto_lock_renewer_holds_a_session_past_its_lock(api: Api, broker: BrokerThread) -> None:
    sb = api.sb
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        await send(client, "short-sessions", [sb.ServiceBusMessage(f"m{i}", session_id="long") for i in range(2)])
        renewer = api.aio.AutoLockRenewer(max_lock_renewal_duration=60)
        async with client.get_queue_receiver("short-sessions", session_id="long", auto_lock_renewer=renewer) as r:
            (first,) = await receive_n(r, 1)
            await r.complete_message(first)
            await asyncio.sleep(LOCK * 3)
            assert r.session.locked_until_utc > NOW() and r.session.auto_renew_error is None
            (second,) = await receive_n(r, 1)
            assert str(second) == "m1"
            await r.complete_message(second)
        await renewer.close()
