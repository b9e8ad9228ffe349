"""The asyncio client and the blocking facade against RabbitMQ 3.10 (Debian) with ``rabbitmq_amqp1_0``.

One private broker serves the whole module (``interop.peers.rabbitmq``); each test uses
queues of its own. What this peer does that a client must live with (docs/peers.md#rabbitmq-310-with-rabbitmq_amqp1_0):
it refuses rcv-settle-mode ``second`` by ending the session, offers no ``modified``
outcome, answers a receiver attach with a null target, sends flow frames without
delivery-count, grants senders 65,536 credit, overshoots the credit it is given, holds
a refused login for 3 s, and ends the session on a dynamic receiver attach (3.10.8
answers ``amqp:not-implemented`` at once; it does not leave it unanswered).

Known RabbitMQ 3.10 defects the body tests stay clear of: an amqp-value holding a list of
more than one element crashes its connection process, and several data (or
amqp-sequence) sections come back in reverse order.

"Nothing else arrives" is checked with a sentinel: queues are FIFO, so after the
expected messages the next one must be a marker sent last.
"""

from __future__ import annotations

import datetime
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from amqplink import Message, sync
from amqplink.aio import (
    AttachTimeout,
    Connection,
    ConnectionClosedError,
    Receiver,
    SessionEndedError,
    SettlementError,
    connect,
)
from amqplink.codec.types import (
    Byte,
    Char,
    Decimal32,
    Decimal64,
    Decimal128,
    Float,
    Int,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
)
from amqplink.engine.link import RCV_FIRST
from amqplink.protocol.definitions import Accepted
from interop.peers.rabbitmq import RabbitMQ
from tests.receiving import receive_exactly

pytestmark = pytest.mark.peer("rabbitmq")

RABBITMQ_SENDER_CREDIT = 65_536


@pytest.fixture(scope="module")
def rabbitmq() -> Iterator[RabbitMQ]:
    """One RabbitMQ node for every test in this module."""
    with RabbitMQ() as broker:
        yield broker


def _queue(tag: str) -> str:
    """A fresh address: ``/queue/NAME`` declares the queue on first use."""
    return f"/queue/amqplink-{tag}-{uuid.uuid4().hex[:12]}"


def _anonymous_url(broker: RabbitMQ) -> str:
    return f"amqp://127.0.0.1:{broker.port}"


async def _assert_sentinel_next(conn: Connection, address: str, receiver: Receiver) -> None:
    """Send a marker last; it must be the next message, so nothing else is left or duplicated."""
    marker = f"sentinel-{uuid.uuid4()}".encode()
    sender = await conn.create_sender(address)
    assert isinstance(await sender.send(Message(marker)), Accepted)
    [got] = await receive_exactly(receiver, 1, accept=False)
    assert got.body == marker, f"expected the sentinel, got {got.body!r}"
    if not got.settled:
        await receiver.accept(got)
    await sender.close()


# -- connecting ---------------------------------------------------------------------------
async def test_sasl_plain_round_trip(rabbitmq: RabbitMQ) -> None:
    address = _queue("plain")
    async with await connect(rabbitmq.url) as conn:
        assert conn.engine.sasl is not None and conn.engine.sasl.chosen == "PLAIN"
        props = conn.remote_properties or {}
        assert props[Symbol("product")] == "RabbitMQ" and props[Symbol("version")].startswith("3.10")
        sender = await conn.create_sender(address)
        sent = Message(b"hello", message_id="m-1", application_properties={"n": 7})
        assert isinstance(await sender.send(sent), Accepted)
        receiver = await conn.create_receiver(address, mode="receive-and-delete", prefetch=10)
        remote = receiver.link.remote_attach
        assert remote is not None and remote.target is None  # RabbitMQ's answer: tolerated
        [got] = await receive_exactly(receiver, 1, accept=False)
        assert got.body == b"hello" and got.message_id == "m-1"
        assert got.application_properties == {"n": 7}


@pytest.mark.parametrize("sasl", ["anonymous", "none"])
async def test_anonymous_and_no_sasl_round_trip(rabbitmq: RabbitMQ, sasl: Any) -> None:
    address = _queue(f"anon-{sasl}")
    async with await connect(_anonymous_url(rabbitmq), sasl=sasl) as conn:
        if sasl == "none":
            assert conn.engine.sasl is None
        else:
            assert conn.engine.sasl is not None and conn.engine.sasl.chosen == "ANONYMOUS"
        sender = await conn.create_sender(address)
        assert isinstance(await sender.send(Message(f"as {sasl}")), Accepted)
        receiver = await conn.create_receiver(address, mode="receive-and-delete")
        [got] = await receive_exactly(receiver, 1, accept=False)
        assert got.body == f"as {sasl}"


async def test_wrong_password_fails_fast_with_a_clear_error(rabbitmq: RabbitMQ) -> None:
    url = rabbitmq.url.replace("guest:guest@", "guest:not-the-password@")
    started = time.monotonic()
    with pytest.raises(ConnectionClosedError) as info:
        await connect(url, timeout=10)
    elapsed = time.monotonic() - started
    assert elapsed < 10  # RabbitMQ holds a refused login for about 3 s, then says so
    error = info.value
    assert error.condition == "amqp:unauthorized-access"
    text = str(error)
    assert f"amqp://127.0.0.1:{rabbitmq.port}" in text
    assert "refused the credentials" in text and "password" in text
    assert "not-the-password" not in text


# -- settlement modes ---------------------------------------------------------------------
async def test_peek_lock_falls_back_to_rcv_first_and_settles(
    rabbitmq: RabbitMQ, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="amqplink")
    address = _queue("peek")
    async with await connect(rabbitmq.url) as conn:
        sender = await conn.create_sender(address)
        outcomes = await sender.send_many([b"release-me", b"reject-me", b"accept-me", b"modify-me"])
        assert all(isinstance(o, Accepted) for o in outcomes)
        receiver = await conn.create_receiver(address, mode="peek-lock", prefetch=10)
        # RabbitMQ ended the probe's session with amqp:not-implemented; the retry settles first.
        assert conn.rcv_second_supported is False and not receiver.confirm
        assert receiver.link.rcv_settle_mode == RCV_FIRST
        first = {m.body: m for m in await receive_exactly(receiver, 4, accept=False)}
        assert set(first) == {b"release-me", b"reject-me", b"accept-me", b"modify-me"}
        assert not any(m.settled for m in first.values())

        await receiver.release(first[b"release-me"])
        await receiver.reject(first[b"reject-me"], condition="app:bad", description="cannot parse")
        await receiver.accept(first[b"accept-me"])
        assert first[b"accept-me"].settled
        with pytest.raises(SettlementError, match="already settled"):
            await receiver.accept(first[b"accept-me"])
        # RabbitMQ 3.10 offers accepted, rejected and released only (and ends the session
        # on a modified): the client refuses locally and the message stays unsettled.
        with pytest.raises(SettlementError, match="offers only"):
            await receiver.modify(first[b"modify-me"])
        assert not first[b"modify-me"].settled and not receiver.closed
        await receiver.release(first[b"modify-me"])

        again = {m.body: m for m in await receive_exactly(receiver, 2, accept=False)}
        assert set(again) == {b"release-me", b"modify-me"}  # released: redelivered
        await receiver.accept(*again.values())
        await _assert_sentinel_next(conn, address, receiver)  # rejected and accepted: gone
    # An expected fallback: reported once at INFO, never as a WARNING.
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    said = [r for r in caplog.records if r.levelno == logging.INFO and "rcv-settle-mode" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]


async def test_receive_and_delete(rabbitmq: RabbitMQ) -> None:
    address = _queue("rad")
    async with await connect(rabbitmq.url) as conn:
        sender = await conn.create_sender(address)
        bodies = [f"rad-{i}".encode() for i in range(50)]
        assert all(isinstance(o, Accepted) for o in await sender.send_many(bodies))
        receiver = await conn.create_receiver(address, mode="receive-and-delete", prefetch=20)
        got = await receive_exactly(receiver, 50, accept=False)
        assert [m.body for m in got] == bodies
        assert all(m.settled for m in got)
        with pytest.raises(SettlementError, match="receive-and-delete"):
            await receiver.accept(got[0])
        await receiver.close()
        fresh = await conn.create_receiver(address, mode="receive-and-delete", prefetch=5)
        await _assert_sentinel_next(conn, address, fresh)  # settled on arrival: none come back


async def test_presettled_sends_all_arrive(rabbitmq: RabbitMQ) -> None:
    address = _queue("presettled")
    count = 2000
    async with await connect(rabbitmq.url) as conn:
        sender = await conn.create_sender(address, settle_mode="settled", max_in_flight=200)
        for i in range(count):
            future = await sender.send_nowait(Message(i.to_bytes(4, "big")))
            assert await future is None
        await sender.wait_settled()
        receiver = await conn.create_receiver(address, mode="receive-and-delete", prefetch=500)
        got = await receive_exactly(receiver, count, accept=False)
        assert [int.from_bytes(m.body, "big") for m in got] == list(range(count))
        await _assert_sentinel_next(conn, address, receiver)


# -- flow control under load ----------------------------------------------------------------
async def test_ten_thousand_pipelined_messages_no_loss_no_duplicates(rabbitmq: RabbitMQ) -> None:
    address = _queue("bulk")
    count = 10_000
    bodies = [f"bulk-{i:05d}".encode() for i in range(count)]
    async with await connect(rabbitmq.url) as conn:
        sender = await conn.create_sender(address, max_in_flight=1000)
        assert isinstance(await sender.send(Message(bodies[0], message_id=0)), Accepted)
        # The grant came in flow frames without delivery-count; one message used one credit.
        assert sender.credit == RABBITMQ_SENDER_CREDIT - 1
        half = count // 2
        outcomes = await sender.send_many(Message(bodies[i], message_id=i) for i in range(1, half))
        futures = [await sender.send_nowait(Message(bodies[i], message_id=i)) for i in range(half, count)]
        outcomes += [await f for f in futures]
        assert len(outcomes) == count - 1 and all(isinstance(o, Accepted) for o in outcomes)
        assert sender.in_flight == 0

        # RabbitMQ overshoots the credit it is given under load; the receiver takes the
        # excess (2.6.7 allows it) rather than detaching.
        receiver = await conn.create_receiver(address, mode="peek-lock", prefetch=1000)
        got = await receive_exactly(receiver, count, batch=500)
        assert len(got) == count
        assert [m.body for m in got] == bodies
        assert [m.message_id for m in got] == list(range(count))
        assert not receiver.closed and receiver.error is None
        await _assert_sentinel_next(conn, address, receiver)


# -- attach failures ------------------------------------------------------------------------
async def test_dynamic_receiver_is_refused_and_the_connection_stays_usable(rabbitmq: RabbitMQ) -> None:
    address = _queue("after-dynamic")
    async with await connect(rabbitmq.url) as conn:
        started = time.monotonic()
        with pytest.raises(SessionEndedError) as info:
            await conn.create_receiver(None, dynamic=True, timeout=5)
        assert time.monotonic() - started < 5
        assert info.value.condition == "amqp:not-implemented"
        assert "Dynamic" in (info.value.description or "")
        assert not conn.closed
        sender = await conn.create_sender(address)
        assert isinstance(await sender.send(b"still fine"), Accepted)
        receiver = await conn.create_receiver(address, mode="receive-and-delete")
        [got] = await receive_exactly(receiver, 1, accept=False)
        assert got.body == b"still fine"


async def test_attach_timeout_then_late_answers_leave_the_connection_usable(rabbitmq: RabbitMQ) -> None:
    address = _queue("late")
    async with await connect(rabbitmq.url) as conn:
        # A zero time-out expires before the attach is even written: RabbitMQ answers
        # the attach and the detach that follows it after the client has given up.
        started = time.monotonic()
        with pytest.raises(AttachTimeout, match="did not answer attach"):
            await conn.create_sender(address, timeout=0)
        with pytest.raises(AttachTimeout, match="did not answer attach"):
            await conn.create_receiver(address, mode="receive-and-delete", timeout=0)
        assert time.monotonic() - started < 1
        assert not conn.closed and not conn._links  # the timed-out links are gone
        sender = await conn.create_sender(address)
        assert isinstance(await sender.send(b"after the time-outs"), Accepted)
        receiver = await conn.create_receiver(address, mode="receive-and-delete")
        [got] = await receive_exactly(receiver, 1, accept=False)
        assert got.body == b"after the time-outs"
        await _assert_sentinel_next(conn, address, receiver)


# -- message content ------------------------------------------------------------------------
BODIES: list[Message] = [
    Message(b"\x00\x01raw bytes\xff"),
    Message(b""),
    Message("text \u00e9\u4e2d"),
    Message(42),
    Message(-(2**40)),
    Message(3.5),
    Message(True),
    Message(False),
    Message(None),
    Message(uuid.UUID(int=5)),
    Message(Symbol("a-symbol")),
    Message({"k": 1, "nested": {"l": [1, "x"], "b": b"\x01"}}),
    Message(["one element"]),
    Message([]),
    Message([1, "two", b"three", None], body_type="sequence"),
]


async def test_every_body_kind_round_trips(rabbitmq: RabbitMQ) -> None:
    address = _queue("bodies")
    async with await connect(rabbitmq.url) as conn:
        sender = await conn.create_sender(address)
        assert all(isinstance(o, Accepted) for o in await sender.send_many(BODIES))
        receiver = await conn.create_receiver(address, mode="receive-and-delete", prefetch=50)
        got = await receive_exactly(receiver, len(BODIES), accept=False)
        for sent, back in zip(BODIES, got, strict=True):
            assert back.body_type == sent.body_type, sent
            assert back.body == sent.body and type(back.body) is type(sent.body), sent


APPLICATION_PROPERTIES: dict[str, Any] = {
    "string": "s\u00e9",
    "long": 2**40,
    "negative": -5,
    "double": 1.5,
    "true": True,
    "false": False,
    "null": None,
    "binary": b"\x00\xff",
    "uuid": uuid.UUID(int=9),
    "symbol": Symbol("sym"),
    "ubyte": UByte(3),
    "ushort": UShort(5),
    "uint": UInt(7),
    "ulong": ULong(2**50),
    "byte": Byte(-3),
    "short": Short(-300),
    "int": Int(-70_000),
    "float": Float(0.5),
    "char": Char("x"),
    "timestamp": Timestamp(1_704_164_645_678),
    "decimal32": Decimal32(b"\x00\x01\x02\x03"),
    "decimal64": Decimal64(bytes(range(8))),
    "decimal128": Decimal128(bytes(range(16))),
}


async def test_application_property_types_and_properties_survive(rabbitmq: RabbitMQ) -> None:
    address = _queue("props")
    created = datetime.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC)
    sent = Message(
        b"p",
        application_properties=APPLICATION_PROPERTIES,
        message_id="id-1",
        correlation_id=uuid.UUID(int=3),
        subject="subject",
        content_type="text/plain",
        content_encoding="utf-8",
        reply_to="/queue/replies",
        session_id="group",
        group_sequence=3,
        reply_to_group_id="reply-group",
        user_id=b"guest",  # RabbitMQ checks it against the authenticated user
        to=address,
        creation_time=created,
        ttl=60,
        priority=7,
        durable=True,
        message_annotations={"x-opt-note": "kept"},
    )
    async with await connect(rabbitmq.url) as conn:
        sender = await conn.create_sender(address)
        assert isinstance(await sender.send(sent), Accepted)
        receiver = await conn.create_receiver(address, mode="receive-and-delete")
        [got] = await receive_exactly(receiver, 1, accept=False)
    props = got.application_properties
    assert props is not None and set(props) == set(APPLICATION_PROPERTIES)
    for key, value in APPLICATION_PROPERTIES.items():
        assert props[key] == value and type(props[key]) is type(value), key
    assert got.message_id == "id-1" and got.correlation_id == uuid.UUID(int=3)
    assert got.subject == "subject" and got.to == address
    assert got.content_type == "text/plain" and got.content_encoding == "utf-8"
    assert got.reply_to == "/queue/replies" and got.reply_to_group_id == "reply-group"
    assert got.session_id == "group" and got.group_sequence == 3
    assert got.user_id == b"guest" and got.creation_time == created
    assert got.ttl == 60 and got.priority == 7 and got.durable is True
    assert got.message_annotations is not None and got.message_annotations[Symbol("x-opt-note")] == "kept"


async def test_one_mebibyte_message_in_many_frames(rabbitmq: RabbitMQ) -> None:
    address = _queue("big")
    body = bytes(range(256)) * 4096
    async with await connect(rabbitmq.url, max_frame_size=4096) as conn:
        assert conn.engine.remote_open is not None and int(conn.engine.remote_open.max_frame_size) == 4096
        sender = await conn.create_sender(address)
        assert isinstance(await sender.send(Message(body, message_id="big")), Accepted)
        receiver = await conn.create_receiver(address, mode="peek-lock", prefetch=2)
        [got] = await receive_exactly(receiver, 1, accept=False)
        assert got.body == body and got.message_id == "big"
        await receiver.accept(got)
        await _assert_sentinel_next(conn, address, receiver)


# -- the blocking facade --------------------------------------------------------------------
def test_sync_facade(rabbitmq: RabbitMQ) -> None:
    address = _queue("sync")
    with sync.connect(rabbitmq.url) as conn:
        sender = conn.create_sender(address)
        assert isinstance(sender.send(Message(b"first")), Accepted)
        outcomes = sender.send_many(Message(f"s-{i}".encode()) for i in range(300))
        assert len(outcomes) == 300 and all(isinstance(o, Accepted) for o in outcomes)
        assert isinstance(sender.send_nowait(b"last").result(10), Accepted)
        receiver = conn.create_receiver(address, mode="peek-lock", prefetch=50)
        got = []
        for message in receiver:
            receiver.accept(message)
            got.append(message.body)
            if len(got) == 302:
                break
        assert got == [b"first", *(f"s-{i}".encode() for i in range(300)), b"last"]
        receiver.close()
        sender.close()
    assert conn.closed
