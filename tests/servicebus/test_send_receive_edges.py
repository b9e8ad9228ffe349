"""Edges of the Service Bus client's send and receive paths: retry_total=0, credit left
after a timed-out receive, async iterables, the next available session."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from amqplink.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusMessage
from amqplink.servicebus.aio import ServiceBusClient
from amqplink.servicebus.exceptions import ServiceBusServerBusyError
from amqplink.servicebus.message import BATCH_MESSAGE_FORMAT
from tests.servicebus.scenario import BrokerThread, broker

__all__ = ["broker"]


def client_for(broker: BrokerThread, **options: Any) -> ServiceBusClient:
    return ServiceBusClient.from_connection_string(broker.connection_string, **options)


async def purge(client: ServiceBusClient, queue: str) -> None:
    async with client.get_queue_receiver(queue, receive_mode="receiveanddelete", prefetch_count=100) as r:
        while await r.receive_messages(max_message_count=100, max_wait_time=0.3):
            pass


def spy_transfers(sender: Any, record: Callable[[bytes, int], None]) -> None:
    """Call ``record(payload, message_format)`` for every transfer ``sender``'s link makes."""
    link = sender._link
    assert link is not None
    original = link.send_payload_nowait

    async def spy(payload: bytes, *, message_format: int = 0) -> Any:
        record(payload, message_format)
        return await original(payload, message_format=message_format)

    link.send_payload_nowait = spy
    try_original = link.try_send_payload

    def try_spy(payload: bytes, *, message_format: int = 0) -> Any:
        sent = try_original(payload, message_format=message_format)
        if sent is not None:
            record(payload, message_format)
        return sent

    link.try_send_payload = try_spy


def _busy_namespace(broker: BrokerThread, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every send the broker gets is refused with server-busy; the times of the refusals."""
    from amqplink.broker.namespace.errors import EntityError

    refusals: list[float] = []

    def busy(*args: Any, **kwargs: Any) -> None:
        refusals.append(time.monotonic())
        raise EntityError("com.microsoft:server-busy", "the namespace is busy (test)")

    monkeypatch.setattr(broker.broker.namespace.router, "send", busy)  # (what the connections call)
    return refusals


@pytest.mark.parametrize("shape", ["one", "list", "batch"])
async def test_retry_total_zero_sends_once(broker: BrokerThread, monkeypatch: pytest.MonkeyPatch, shape: str) -> None:
    """retry_total=0: the first failure is the answer (no second transfer, no backoff)."""
    async with client_for(broker, retry_total=0) as client, client.get_queue_sender("plain") as sender:
        payload: Any = ServiceBusMessage("refused")
        if shape == "list":
            payload = [ServiceBusMessage("refused"), ServiceBusMessage("also refused")]
        elif shape == "batch":
            payload = await sender.create_message_batch()
            payload.add_message(ServiceBusMessage("refused"))
        refusals = _busy_namespace(broker, monkeypatch)
        started = time.monotonic()
        with pytest.raises(ServiceBusServerBusyError):
            await sender.send_messages(payload)
        assert len(refusals) == 1
        assert time.monotonic() - started < 4.0  # no server-busy backoff either


async def test_a_receive_that_times_out_leaves_no_credit_behind(broker: BrokerThread) -> None:
    """prefetch_count=0: a receive_messages that got nothing drains its credit, so a message
    sent afterwards is not locked for a receiver nobody is waiting on."""
    async with client_for(broker) as client:
        await purge(client, "other")
        async with client.get_queue_receiver("other", prefetch_count=0) as idle:
            assert await idle.receive_messages(max_message_count=5, max_wait_time=0.2) == []
            link = idle._link
            assert link is not None and link.link.link_credit == 0
            async with client.get_queue_sender("other") as sender:
                await sender.send_messages(ServiceBusMessage("for whoever asks next"))
            async with client.get_queue_receiver("other") as asking:
                got = await asking.receive_messages(max_wait_time=5)
                assert [str(m) for m in got] == ["for whoever asks next"]
                await asking.complete_message(got[0])
            assert link.buffered == 0
            # the idle receiver still works: a new call grants credit again
            async with client.get_queue_sender("other") as sender:
                await sender.send_messages(ServiceBusMessage("for the idle one"))
            (again,) = await idle.receive_messages(max_wait_time=5)
            assert str(again) == "for the idle one"
            await idle.complete_message(again)


async def test_send_messages_takes_an_async_iterable_split_into_batches(broker: BrokerThread) -> None:
    sent: list[tuple[int, int]] = []

    async def produce() -> AsyncIterator[ServiceBusMessage]:
        for i in range(600):
            await asyncio.sleep(0)  # a producer that awaits: earlier batches' outcomes come in meanwhile
            yield ServiceBusMessage(b"%04d" % i + b"y" * 1000)

    async with client_for(broker) as client:
        await purge(client, "other")
        async with client.get_queue_sender("other") as sender:
            await sender.create_message_batch()  # attach: the broker's max-message-size is known
            spy_transfers(sender, lambda payload, fmt: sent.append((len(payload), fmt)))
            await sender.send_messages(produce())
        assert len(sent) >= 3 and all(fmt == BATCH_MESSAGE_FORMAT for _, fmt in sent)
        assert all(size <= sender.max_message_size for size, _ in sent)
        async with client.get_queue_receiver("other", prefetch_count=300, receive_mode="receiveanddelete") as r:
            got = []
            while batch := await r.receive_messages(max_message_count=300, max_wait_time=1):
                got += batch
        assert [b"".join(m.body)[:4] for m in got] == [b"%04d" % i for i in range(600)]


async def test_the_next_available_session_is_the_one_with_messages(broker: BrokerThread) -> None:
    async with client_for(broker) as client:
        async with client.get_queue_sender("sessions") as sender:
            await sender.send_messages([ServiceBusMessage(f"n{i}", session_id="waiting") for i in range(3)])
        async with client.get_queue_receiver("sessions", session_id=NEXT_AVAILABLE_SESSION) as receiver:
            assert receiver.session.session_id == "waiting"
            got = await receiver.receive_messages(max_message_count=3, max_wait_time=5)
            assert [str(m) for m in got] == ["n0", "n1", "n2"]
            assert {m.session_id for m in got} == {"waiting"}
            for message in got:
                await receiver.complete_message(message)


async def test_a_broker_that_never_answers_a_drain_gets_the_link_closed(
    broker: BrokerThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wait for a drain's answer is bounded; the link whose credit could not be taken
    back is closed (so nothing is locked for it), and the next receive attaches a new one."""
    from amqplink.engine.link import SenderLink
    from amqplink.servicebus import receiver as receiver_module

    monkeypatch.setattr(receiver_module, "DRAIN_ANSWER_TIMEOUT", 0.5)
    async with client_for(broker) as client:
        await purge(client, "other")
        async with client.get_queue_receiver("other", prefetch_count=0) as idle:
            await idle.receive_messages(max_wait_time=0.1)  # attached
            first = idle._link
            monkeypatch.setattr(SenderLink, "drained", lambda self: None)  # the broker holds every drain
            started = time.monotonic()
            assert await idle.receive_messages(max_wait_time=0.2) == []
            assert time.monotonic() - started < 3.0
            assert first is not None and first.closed
            monkeypatch.undo()
            async with client.get_queue_sender("other") as sender:
                await sender.send_messages(ServiceBusMessage("after the drain"))
            (got,) = await idle.receive_messages(max_wait_time=5)
            assert str(got) == "after the drain" and idle._link is not first
            await idle.complete_message(got)


async def test_single_sends_from_concurrent_tasks_leave_in_batches(broker: BrokerThread) -> None:
    """Tasks sharing one sender: their single sends are gathered into batch transfers; every
    message arrives once, each task's in its order; an oversized one fails alone."""
    from amqplink.servicebus.exceptions import MessageSizeExceededError

    formats: list[int] = []
    async with client_for(broker) as client:
        await purge(client, "other")
        async with client.get_queue_sender("other") as sender:
            await sender.send_messages(ServiceBusMessage("warm-up"))
            spy_transfers(sender, lambda _payload, fmt: formats.append(fmt))

            async def task(t: int) -> None:
                for i in range(5):
                    await sender.send_messages(ServiceBusMessage(f"{t}:{i}"))

            async def oversized() -> None:
                await sender.send_messages(ServiceBusMessage("first"))
                with pytest.raises(MessageSizeExceededError):
                    await sender.send_messages(ServiceBusMessage(b"x" * (300 * 1024)))

            await asyncio.gather(*(task(t) for t in range(50)), oversized())
        assert BATCH_MESSAGE_FORMAT in formats and len(formats) < 251
        async with client.get_queue_receiver("other", prefetch_count=300, receive_mode="receiveanddelete") as r:
            got = []
            while batch := await r.receive_messages(max_message_count=300, max_wait_time=1):
                got += [str(m) for m in batch]
        assert sorted(got) == sorted(["warm-up", "first"] + [f"{t}:{i}" for t in range(50) for i in range(5)])
        for t in range(50):
            assert [m for m in got if m.startswith(f"{t}:")] == [f"{t}:{i}" for i in range(5)]


async def test_gathered_batches_hold_at_most_the_named_number_of_messages(
    broker: BrokerThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    from amqplink.message import Message
    from amqplink.servicebus import sender as sender_module

    monkeypatch.setattr(sender_module, "GATHER_MAX_MESSAGES", 3)
    sizes: list[int] = []
    async with client_for(broker) as client:
        await purge(client, "other")
        async with client.get_queue_sender("other") as sender:
            await sender.send_messages(ServiceBusMessage("warm-up"))

            def count(payload: bytes, fmt: int) -> None:
                body = Message.decode(payload).body if fmt == BATCH_MESSAGE_FORMAT else None
                sizes.append(len(body) if isinstance(body, list) else 1)  # one data section decodes as bytes

            spy_transfers(sender, count)

            async def task(t: int) -> None:
                for i in range(4):
                    await sender.send_messages(ServiceBusMessage(f"{t}:{i}"))

            await asyncio.gather(*(task(t) for t in range(20)))
        assert max(sizes) == 3 and sum(sizes) == 80
        await purge(client, "other")


async def test_a_gathered_message_that_cannot_be_encoded_fails_alone(broker: BrokerThread) -> None:
    """Concurrent single sends (the first leaves alone, the rest are gathered into one batch):
    the message whose application property cannot be encoded raises EncodeError in its own
    task; the others are sent."""
    from amqplink.codec.errors import EncodeError

    async with client_for(broker) as client:
        await purge(client, "other")
        async with client.get_queue_sender("other") as sender:
            await sender.send_messages(ServiceBusMessage("warm-up"))

            async def send(i: int) -> None:
                props = {"nested": {"a": 1}} if i == 2 else None
                await sender.send_messages(ServiceBusMessage(f"m{i}", application_properties=props))

            results = await asyncio.wait_for(
                asyncio.gather(*(send(i) for i in range(5)), return_exceptions=True), timeout=10
            )
        assert [type(r) for r in results] == [type(None)] * 2 + [EncodeError] + [type(None)] * 2
        async with client.get_queue_receiver("other", receive_mode="receiveanddelete") as r:
            got: list[str] = []
            while batch := await r.receive_messages(max_message_count=10, max_wait_time=1):
                got += [str(m) for m in batch]
        assert sorted(got) == ["m0", "m1", "m3", "m4", "warm-up"]


async def test_a_receive_cancelled_after_taking_messages_gives_them_back(broker: BrokerThread) -> None:
    """A cancelled ``receive_messages`` (a task cancelled by ``wait_for`` or a shutdown) that
    had already taken messages releases them: they are not left locked until the lock
    expires (Service Bus keeps a lock past the link's close), and a release is no delivery
    attempt, so the next receiver gets them at once with their delivery count unchanged."""
    async with client_for(broker) as client:
        await purge(client, "other")
        async with client.get_queue_sender("other") as sender:
            await sender.send_messages([ServiceBusMessage(f"m{i}", message_id=f"m{i}") for i in range(3)])
        async with client.get_queue_receiver("other") as first:
            for message in await first.receive_messages(1, max_wait_time=5):  # opens the link
                await first.complete_message(message)
            link = first._link
            assert link is not None
            gathering = asyncio.Event()
            original = link.receive

            async def receive_then_hang(max_messages: int = 1, timeout: float | None = None) -> Any:
                if timeout is not None and timeout < 1:  # the gathering after the first message
                    gathering.set()
                    await asyncio.Event().wait()
                return await original(max_messages, timeout)

            link.receive = receive_then_hang  # type: ignore[method-assign]
            task = asyncio.ensure_future(first.receive_messages(3, max_wait_time=5))  # waits for a third
            await asyncio.wait_for(gathering.wait(), 5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            link.receive = original  # type: ignore[method-assign]
        async with client.get_queue_receiver("other") as second:  # (what first had buffered: released on close)
            got = await second.receive_messages(2, max_wait_time=5)
            assert sorted(str(m.message_id) for m in got) == ["m1", "m2"]
            assert [m.delivery_count for m in got] == [0, 0]
            for message in got:
                await second.complete_message(message)
