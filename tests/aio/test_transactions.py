"""Transactions on the asyncio client (``Connection.transaction``), against the embedded
Service Bus broker: posting, settling, commit, roll-back, and the errors a caller sees."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from amqplink.aio import connect
from amqplink.aio.connection import Connection
from amqplink.aio.errors import LinkDetachedError, MessageRejected, SettlementError, TransactionError
from amqplink.aio.receiver import ReceivedMessage, Receiver
from amqplink.aio.transactions import outcome_of
from amqplink.broker import Broker
from amqplink.engine.states import TransactionState
from amqplink.message import Message
from amqplink.protocol.definitions import Accepted, TransactionalState


@asynccontextmanager
async def _broker(
    servicebus: bool = True, data_dir: Path | None = None, credit_window: int = 1000
) -> AsyncIterator[tuple[Broker, Connection]]:
    broker = Broker(servicebus=servicebus, data_dir=data_dir, credit_window=credit_window)
    await broker.start()
    conn = await connect(broker.url)
    try:
        yield broker, conn
    finally:
        await conn.close()
        await broker.stop()


async def _received(conn: Connection, queue: str) -> tuple[Receiver, ReceivedMessage]:
    """One message sent to ``queue`` and received (peek-lock): the receiver and the message."""
    source = await conn.create_sender(queue)
    await source.send(Message(b"work"))
    receiver = await conn.create_receiver(queue, prefetch=1)
    (message,) = await receiver.receive(1, timeout=10)
    return receiver, message


def _count(broker: Broker, queue: str) -> int:
    assert broker.servicebus is not None
    return len(broker.servicebus.namespace.receiver_source(queue).store)


async def test_a_committed_transaction_stores_what_it_sent() -> None:
    async with _broker() as (broker, conn):
        sender = await conn.create_sender("q")
        async with await conn.transaction() as txn:
            for i in range(3):
                state = await txn.send(sender, Message(b"m%d" % i))
                assert type(state) is TransactionalState and outcome_of(state) == Accepted()
            assert _count(broker, "q") == 0
        assert txn.state is TransactionState.COMMITTED
        assert _count(broker, "q") == 3


@pytest.mark.parametrize("credit", [4, 1000])
async def test_a_commit_right_after_pipelined_sends_includes_them_all(credit: int) -> None:
    """``send_nowait`` then the commit at once: the sends wait in the sender (credit 4: most
    of them for credit) and the commit waits for them, else its discharge would reach the
    broker first and they would name a transaction no longer open."""
    async with _broker(credit_window=credit) as (broker, conn):
        sender = await conn.create_sender("q", max_in_flight=100)
        txn = await conn.transaction()
        futures = [await txn.send_nowait(sender, Message(b"m%d" % i)) for i in range(20)]
        await txn.commit()
        assert all(outcome_of(f.result()) == Accepted() for f in futures)
        assert _count(broker, "q") == 20


async def test_an_exception_in_the_block_rolls_it_back() -> None:
    async with _broker() as (broker, conn):
        sender = await conn.create_sender("q")
        with pytest.raises(RuntimeError, match="changed my mind"):
            async with await conn.transaction() as txn:
                await txn.send(sender, Message(b"never"))
                raise RuntimeError("changed my mind")
        assert txn.state is TransactionState.ROLLED_BACK
        assert _count(broker, "q") == 0


async def test_receive_settle_and_send_in_one_transaction_and_settle_again_after_a_roll_back() -> None:
    async with _broker() as (broker, conn):
        receiver, message = await _received(conn, "a")
        onward = await conn.create_sender("a", properties=None)  # (plain, same entity: the rule holds)
        txn = await conn.transaction()
        answer = await txn.settle(receiver, message)
        assert answer == TransactionalState(txn_id=txn.txn_id, outcome=Accepted())
        await txn.send(onward, Message(b"follow-up"))
        await txn.rollback()
        assert _count(broker, "a") == 1  # the original, still locked; the follow-up was never stored
        await receiver.accept(message)  # settled again, outside any transaction
        assert _count(broker, "a") == 0


async def test_a_settlement_in_a_committed_transaction_is_confirmed_by_the_commit() -> None:
    async with _broker() as (broker, conn):
        receiver, message = await _received(conn, "a")
        async with await conn.transaction() as txn:
            await txn.settle(receiver, message)
            assert not message.settled
        assert _count(broker, "a") == 0
        await asyncio.sleep(0)  # the broker's settlement follows the commit's answer in the same read
        assert message.settled


async def test_a_refused_commit_raises_and_applies_nothing() -> None:
    async with _broker() as (broker, conn):
        receiver, message = await _received(conn, "a")
        txn = await conn.transaction()
        await txn.settle(receiver, message)
        await receiver.close()  # the receiver goes: its message is no longer held by it
        with pytest.raises(TransactionError, match="rolled back") as caught:
            await txn.commit()
        assert caught.value.condition == "amqp:transaction:rollback"
        assert txn.state is TransactionState.ROLLED_BACK
        assert _count(broker, "a") == 1


async def test_a_message_the_transaction_cannot_take_raises_message_rejected() -> None:
    async with _broker() as (broker, conn):
        first = await conn.create_sender("one")
        second = await conn.create_sender("two")
        txn = await conn.transaction()
        await txn.send(first, Message(b"x"))
        with pytest.raises(MessageRejected, match="not-allowed") as caught:
            await txn.send(second, Message(b"elsewhere"))
        assert "via" in str(caught.value)
        await txn.commit()
        assert _count(broker, "one") == 1 and _count(broker, "two") == 0


async def test_work_after_the_end_is_refused_at_once() -> None:
    async with _broker() as (_, conn):
        sender = await conn.create_sender("q")
        txn = await conn.transaction()
        await txn.commit()
        with pytest.raises(TransactionError, match="committed"):
            await txn.send(sender, Message(b"late"))


async def test_a_broker_without_a_coordinator_refuses_the_control_link() -> None:
    async with _broker(servicebus=False) as (_, conn):
        with pytest.raises(LinkDetachedError, match="not-implemented"):
            await conn.transaction()


async def test_a_settlement_the_broker_refuses_raises_and_may_be_made_again() -> None:
    async with _broker() as (broker, conn):
        receiver, message = await _received(conn, "a")
        other = await conn.create_sender("b")
        txn = await conn.transaction()
        await txn.send(other, Message(b"first on b"))
        with pytest.raises(SettlementError, match="not-allowed"):
            await txn.settle(receiver, message)  # the transaction works on 'b' already
        await receiver.accept(message)
        await txn.commit()
        assert _count(broker, "a") == 0 and _count(broker, "b") == 1


async def test_commits_with_a_data_directory_are_answered_once_written(tmp_path: Path) -> None:
    """The answer leaves once the commit is on disk, without waiting for other traffic (each
    commit here waits for the one before: a lost flush would hang the loop)."""
    from amqplink.sbwire.nodes import TRANSFER_DESTINATION_ADDRESS

    async with _broker(data_dir=tmp_path) as (broker, conn):
        source = await conn.create_sender("src")
        for i in range(10):
            await source.send(Message(b"in", message_id=f"m{i}"))
        receiver = await conn.create_receiver("src", prefetch=2)
        onward = await conn.create_sender("src", properties={TRANSFER_DESTINATION_ADDRESS: "dst"})
        for _ in range(10):
            (message,) = await receiver.receive(1, timeout=10)
            txn = await conn.transaction()
            await txn.send(onward, Message(b"out"))
            await txn.settle(receiver, message)
            await asyncio.wait_for(txn.commit(), 5)
        assert _count(broker, "src") == 0 and _count(broker, "dst") == 10
        plain = await conn.create_sender("q")
        for _ in range(3):  # sends only: nothing else makes the broker write to the socket
            txn = await conn.transaction()
            await txn.send(plain, Message(b"alone"))
            await asyncio.wait_for(txn.commit(), 5)
        assert _count(broker, "q") == 3
