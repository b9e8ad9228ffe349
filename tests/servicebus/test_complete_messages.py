"""``complete_messages``: completing many messages together (the Spark source's settle path).
Their dispositions leave as ranges and the broker's confirmations are awaited together; each
message's outcome comes back in place, None or the error ``complete_message`` raises for it
(a peeked message, one settled before or twice in the list, a refusal by the broker), and a
deferred message is completed over ``$management`` as ``complete_message`` does."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator

import pytest

from amqplink.broker import Broker
from amqplink.protocol.definitions import Disposition
from amqplink.servicebus import ServiceBusClient, ServiceBusMessage
from amqplink.servicebus import aio as sbaio
from amqplink.servicebus.exceptions import MessageAlreadySettled, ServiceBusError
from tests.aio.test_wire_efficiency import WireTap
from tests.conftest import broker_thread
from tests.servicebus.scenario import BrokerThread, broker
from tests.servicebus.test_settle_calls import receive_exactly

__all__ = ["broker"]

COUNT = 100


async def test_complete_messages_leave_as_ranges_and_empty_the_queue(broker: BrokerThread) -> None:
    async with sbaio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("other") as sender:
            await sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(COUNT)])
        async with client.get_queue_receiver("other", prefetch_count=COUNT) as receiver:
            got = await receive_exactly(receiver, COUNT)
            link = receiver._link
            assert link is not None
            tap = WireTap(link.connection)
            outcomes = await receiver.complete_messages(got)
            assert outcomes == [None] * COUNT
            dispositions = [p for p in tap.performatives() if type(p) is Disposition]
            covered = sum(int(d.last if d.last is not None else d.first) - int(d.first) + 1 for d in dispositions)
            assert covered == COUNT and len(dispositions) <= 4
            assert all(not d.settled for d in dispositions)  # rcv-settle-mode second: the broker settles
            assert all(m._settled for m in got)
            assert not await receiver.peek_messages(max_message_count=1)
            again = await receiver.complete_messages(got[:1])
            assert type(again[0]) is MessageAlreadySettled


async def test_each_outcome_comes_back_in_place(broker: BrokerThread) -> None:
    async with sbaio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("other") as sender:
            await sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(4)])
        async with client.get_queue_receiver("other", prefetch_count=0) as receiver:
            (peeked,) = await receiver.peek_messages(max_message_count=1)
            first, second, done, later = await receive_exactly(receiver, 4)
            await receiver.complete_message(done)
            await receiver.defer_message(later)
            (deferred,) = await receiver.receive_deferred_messages([later.sequence_number])
            outcomes = await receiver.complete_messages([first, peeked, first, deferred, done, second])
            kinds = [type(o) for o in outcomes]
            assert kinds == [type(None), ValueError, MessageAlreadySettled, type(None), MessageAlreadySettled,
                             type(None)]  # fmt: skip
            assert first._settled and second._settled and deferred._settled
            assert not await receiver.peek_messages(max_message_count=5)


@pytest.fixture()
def durable() -> Iterator[Broker]:
    with tempfile.TemporaryDirectory() as directory, broker_thread(Broker(servicebus=True, data_dir=directory)) as b:
        yield b


def test_blocking_refusals_by_the_broker_leave_the_messages_unsettled(durable: Broker) -> None:
    """A full disk refuses each completion (the durable store's ``Journal.space`` seam): each
    outcome is that refusal, nothing is settled, and the messages come back."""
    assert durable.servicebus is not None and durable.servicebus.persistence is not None
    journal = durable.servicebus.persistence.commits.journal
    conn_str = (
        f"Endpoint=sb://127.0.0.1:{durable.port};SharedAccessKeyName=RootManageSharedAccessKey;"
        "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true"
    )
    with ServiceBusClient.from_connection_string(conn_str) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages([ServiceBusMessage("x"), ServiceBusMessage("y")])
        with client.get_queue_receiver("q") as receiver:
            got = receiver.receive_messages(max_message_count=2, max_wait_time=5)
            while len(got) < 2:
                got += receiver.receive_messages(max_message_count=2 - len(got), max_wait_time=5)
            journal.space = 0  # type: ignore[attr-defined]
            outcomes = receiver.complete_messages(got)
            assert all(isinstance(o, ServiceBusError) and "No space left" in str(o) for o in outcomes), outcomes
            assert not any(m._settled for m in got)
            journal.space = 1 << 20  # type: ignore[attr-defined]
            back = receiver.receive_messages(max_message_count=2, max_wait_time=5)
            while len(back) < 2:
                back += receiver.receive_messages(max_message_count=2 - len(back), max_wait_time=5)
            assert sorted(m.sequence_number for m in back) == sorted(m.sequence_number for m in got)
            assert receiver.complete_messages(back) == [None, None]
