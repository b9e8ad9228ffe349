"""The amqplink client against a broker written with qpid-proton (interop/peers/proton_broker.py).

The broker is proton's engine and proton's Container, written here but with no
amqplink code in it: every frame amqplink sends is read by proton and every frame
it reads was written by proton. Where it helps, proton's own client decodes what
amqplink sent (and sends what amqplink decodes), compared type for type.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import proton
import pytest
from proton import Data
from proton.utils import BlockingConnection

import amqplink.sync
from amqplink import Message
from amqplink.aio import ConnectionClosedError, LinkDetachedError, connect
from amqplink.codec.types import (
    AMQPType,
    Array,
    Byte,
    Char,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
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
from amqplink.engine.link import RCV_FIRST, RCV_SECOND, SND_SETTLED
from amqplink.protocol.definitions import Accepted
from interop.peers.proton_broker import ProtonBroker
from tests.receiving import receive_exactly, receive_exactly_sync

MIB = bytes(range(256)) * 4096


@pytest.fixture(scope="module")
def broker() -> Iterator[ProtonBroker]:
    """One proton broker for the module; each test uses addresses of its own."""
    with ProtonBroker() as running:
        yield running


@pytest.fixture(autouse=True)
def _broker_still_healthy(broker: ProtonBroker) -> Iterator[None]:
    yield
    assert broker.error is None, f"the proton broker failed: {broker.error!r}"


def _address(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


# -- proton's own client, run in a worker thread from the async tests -----------------
def proton_receive(url: str, address: str, count: int) -> list[proton.Message]:
    """Receive and accept ``count`` messages with proton's blocking client."""
    conn = BlockingConnection(url, timeout=20)
    try:
        receiver = conn.create_receiver(address, name=_address("proton-receiver"), credit=min(count, 100))
        got = []
        for _ in range(count):
            got.append(receiver.receive(timeout=20))
            receiver.accept()
        return got
    finally:
        conn.close()


def proton_send(url: str, address: str, messages: list[proton.Message]) -> list[Any]:
    """Send with proton's blocking client; return the remote states."""
    conn = BlockingConnection(url, timeout=20)
    try:
        sender = conn.create_sender(address, name=_address("proton-sender"))
        return [sender.send(m).remote_state for m in messages]
    finally:
        conn.close()


# -- a typed view of values, the same for amqplink's and proton's Python types -------
_OURS: dict[type, str] = {
    type(None): "null", bool: "boolean", UByte: "ubyte", UShort: "ushort", UInt: "uint", ULong: "ulong",
    Byte: "byte", Short: "short", Int: "int", int: "long", Float: "float", float: "double", Char: "char",
    Timestamp: "timestamp", uuid.UUID: "uuid", bytes: "binary", str: "string", Symbol: "symbol",
}  # fmt: skip
_PROTONS: dict[type, str] = {
    type(None): "null", bool: "boolean", proton.ubyte: "ubyte", proton.ushort: "ushort", proton.uint: "uint",
    proton.ulong: "ulong", proton.byte: "byte", proton.short: "short", proton.int32: "int", int: "long",
    proton.float32: "float", float: "double", proton.char: "char", proton.timestamp: "timestamp",
    uuid.UUID: "uuid", bytes: "binary", memoryview: "binary", str: "string", proton.symbol: "symbol",
}  # fmt: skip
_PROTON_CODES = {
    Data.NULL: "null", Data.BOOL: "boolean", Data.UBYTE: "ubyte", Data.USHORT: "ushort", Data.UINT: "uint",
    Data.ULONG: "ulong", Data.BYTE: "byte", Data.SHORT: "short", Data.INT: "int", Data.LONG: "long",
    Data.FLOAT: "float", Data.DOUBLE: "double", Data.DECIMAL32: "decimal32", Data.DECIMAL64: "decimal64",
    Data.DECIMAL128: "decimal128", Data.CHAR: "char", Data.TIMESTAMP: "timestamp", Data.UUID: "uuid",
    Data.BINARY: "binary", Data.STRING: "string", Data.SYMBOL: "symbol", Data.LIST: "list", Data.MAP: "map",
    Data.ARRAY: "array", Data.DESCRIBED: "described",
}  # fmt: skip
_CODE_OF = {name: code for code, name in _PROTON_CODES.items()}


def typed(value: Any) -> Any:
    """(type name, value) all the way down, for amqplink's or proton's Python values."""
    t = type(value)
    name = _OURS.get(t) or _PROTONS.get(t)
    if name is not None:
        if name == "binary":
            return (name, bytes(value))
        if name in ("float", "double"):
            return (name, float(value))
        if name in ("string", "symbol", "char"):
            return (name, str(value))
        if name in ("null", "boolean", "uuid"):
            return (name, value)
        return (name, int(value))
    if t in (Decimal32, Decimal64, Decimal128):
        return (t.__name__.lower(), bytes(value))
    if t in (proton.decimal32, proton.decimal64):
        return (t.__name__, int(value).to_bytes(4 if t is proton.decimal32 else 8, "big"))
    if t is proton.decimal128:
        return ("decimal128", bytes(value))
    if isinstance(value, Array):
        return ("array", value.element_type.value, typed(value.descriptor), [typed(v) for v in value])
    if isinstance(value, proton.Array):
        descriptor = None if value.descriptor is proton.UNDESCRIBED else value.descriptor
        return ("array", _PROTON_CODES[value.type], typed(descriptor), [typed(v) for v in value.elements])
    if isinstance(value, Described | proton.Described):
        return ("described", typed(value.descriptor), typed(value.value))
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    if isinstance(value, dict):
        return ("map", sorted(((typed(k), typed(v)) for k, v in value.items()), key=repr))
    raise TypeError(f"no typed view of {t.__name__}")


def to_proton(value: Any) -> Any:
    """The Python value proton encodes as the same AMQP value as amqplink's ``value``."""
    t = type(value)
    simple = {
        UByte: proton.ubyte, UShort: proton.ushort, UInt: proton.uint, ULong: proton.ulong, Byte: proton.byte,
        Short: proton.short, Int: proton.int32, Float: proton.float32, Char: proton.char,
        Timestamp: proton.timestamp, Symbol: proton.symbol,
    }  # fmt: skip
    if t in simple:
        return simple[t](value)
    if t is Decimal32:
        return proton.decimal32(int.from_bytes(value, "big"))
    if t is Decimal64:
        return proton.decimal64(int.from_bytes(value, "big"))
    if t is Decimal128:
        return proton.decimal128(bytes(value))
    if t is Array:
        descriptor = proton.UNDESCRIBED if value.descriptor is None else to_proton(value.descriptor)
        return proton.Array(descriptor, _CODE_OF[value.element_type.value], *[to_proton(v) for v in value])
    if t is Described:
        return proton.Described(to_proton(value.descriptor), to_proton(value.value))
    if t is list:
        return [to_proton(v) for v in value]
    if t is dict:
        return {to_proton(k): to_proton(v) for k, v in value.items()}
    return value


# Every AMQP type family as an amqp-value body: (name, value).
VALUES: list[tuple[str, Any]] = [
    ("null", None),
    ("true", True),
    ("false", False),
    ("ubyte", UByte(255)),
    ("ushort", UShort(65535)),
    ("uint0", UInt(0)),
    ("smalluint", UInt(200)),
    ("uint", UInt(2**32 - 1)),
    ("ulong0", ULong(0)),
    ("smallulong", ULong(7)),
    ("ulong", ULong(2**64 - 1)),
    ("byte", Byte(-128)),
    ("short", Short(-32768)),
    ("smallint", Int(-5)),
    ("int", Int(-(2**31))),
    ("smalllong", -7),
    ("long", -(2**63)),
    ("float", Float(1.5)),
    ("double", 3.141592653589793),
    ("decimal32", Decimal32(b"\x22\x50\x00\x01")),
    ("decimal64", Decimal64(bytes(range(1, 9)))),
    ("decimal128", Decimal128(bytes(range(16)))),
    ("char", Char("\U0001f600")),
    ("timestamp", Timestamp(1_700_000_000_123)),
    ("uuid", uuid.UUID("12345678-1234-5678-1234-567812345678")),
    ("vbin8", b"\x00\xff" * 10),
    ("vbin32", bytes(range(256)) * 2),
    ("str8", "héllo wörld ☃"),
    ("str32", "x" * 300),
    ("sym8", Symbol("amqp:sym")),
    ("sym32", Symbol("s" * 300)),
    ("list0", []),
    ("list", [1, "a", None, True, [UInt(2)], {"k": b"v"}]),
    ("list32", [Int(i) for i in range(300)]),
    ("map", {"a": 1, Symbol("s"): [1, 2], ULong(3): {"nested": None}, "d": Described(Symbol("x:y"), 1)}),
    ("described-symbol", Described(Symbol("com.example:thing"), "v")),
    ("described-ulong", Described(ULong(0x1234_0000_0001), [1, "two"])),
    ("array-int", Array([Int(1), Int(-2), Int(3)], AMQPType.INT)),
    ("array-long", Array([1, 2**40], AMQPType.LONG)),
    ("array-symbol", Array([Symbol("a"), Symbol("bb")], AMQPType.SYMBOL)),
    ("array-string", Array(["x", "y" * 300], AMQPType.STRING)),
    ("array-uuid", Array([uuid.UUID(int=1), uuid.UUID(int=2)], AMQPType.UUID)),
    ("array-empty", Array([], AMQPType.LONG)),
    ("array-described", Array(["p", "q"], AMQPType.STRING, descriptor=Symbol("com.example:d"))),
]


# -- settlement ------------------------------------------------------------------------
async def test_round_trip_and_the_broker_honours_rcv_settle_mode_second(broker: ProtonBroker) -> None:
    q = _address("rt")
    async with await connect(broker.url) as conn:
        assert conn.engine.remote_open is not None
        assert conn.engine.remote_open.container_id.startswith("proton-broker-")
        sender = await conn.create_sender(q)
        outcome = await sender.send(Message(b"hello", message_id="m-1", application_properties={"n": 7}))
        assert isinstance(outcome, Accepted)
        receiver = await conn.create_receiver(q, mode="peek-lock", prefetch=10)
        assert receiver.confirm  # proton answered rcv-settle-mode second
        assert receiver.link.remote_attach is not None
        assert int(receiver.link.remote_attach.rcv_settle_mode or 0) == RCV_SECOND
        [got] = await receiver.receive(1, timeout=10)
        assert got.body == b"hello" and got.message_id == "m-1" and got.application_properties == {"n": 7}
        assert not got.settled
        await receiver.accept(got)  # returns once proton has settled too
        assert got.settled
    state = broker.state()
    assert state.depths[q] == 0 and state.unsettled == 0


async def test_peek_lock_settles_first_with_a_broker_that_answers_rcv_settle_mode_first(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # proton's defaults: the attach answers rcv-settle-mode first, and the sender
    # settles only after the receiver has; an unsettled accept would wait forever.
    caplog.set_level(logging.DEBUG, logger="amqplink")
    q = _address("first")
    with ProtonBroker(rcv_settle_mode="first") as first:
        async with await connect(first.url) as conn:
            await (await conn.create_sender(q)).send_many([b"a", b"b", b"c"])
            receiver = await conn.create_receiver(q, mode="peek-lock", prefetch=10)
            assert receiver.link.remote_attach is not None
            assert int(receiver.link.remote_attach.rcv_settle_mode or 0) == RCV_FIRST
            assert not receiver.confirm and receiver.link.rcv_settle_mode == RCV_FIRST
            a, b, c = await receive_exactly(receiver, 3, accept=False)
            await asyncio.wait_for(receiver.accept(a), 10)
            await asyncio.wait_for(receiver.release(b), 10)
            await asyncio.wait_for(receiver.accept(c), 10)
            assert a.settled and b.settled and c.settled
            [b2] = await receive_exactly(receiver, 1, accept=False)  # released: delivered again
            assert b2.body == b"b"
            await asyncio.wait_for(receiver.accept(b2), 10)
            await receiver.close()
            second = await conn.create_receiver(q, mode="peek-lock", prefetch=10)
            assert not second.confirm  # remembered: asks for first at once
            await (await conn.create_sender(q)).send(b"d")
            [d] = await receive_exactly(second, 1, accept=False)
            await asyncio.wait_for(second.accept(d), 10)
        state = first.state()
        assert state.depths[q] == 0 and state.unsettled == 0
        assert first.error is None
    said = [r for r in caplog.records if "rcv-settle-mode first" in r.getMessage()]
    assert [r.levelno for r in said] == [logging.INFO]  # once, for both receivers


async def test_peek_lock_release_modify_reject_accept_and_requeue_on_close(broker: ProtonBroker) -> None:
    q = _address("settle")
    async with await connect(broker.url) as conn:
        sender = await conn.create_sender(q)
        assert all(isinstance(o, Accepted) for o in await sender.send_many([b"a", b"b", b"c", b"d"]))
        # prefetch=0: one credit per receive, so the order below is the broker's, not the buffer's.
        receiver = await conn.create_receiver(q, mode="peek-lock", prefetch=0)

        async def one() -> Any:
            [m] = await receiver.receive(1, timeout=10)
            return m

        a = await one()
        assert a.body == b"a"
        await receiver.release(a)
        again = await one()
        assert again.body == b"a"  # released: back at the head and redelivered
        await receiver.modify(again, delivery_failed=True, undeliverable_here=False)
        third = await one()
        assert third.body == b"a"  # modified, deliverable here: back again
        await receiver.modify(third, undeliverable_here=True)  # this one is dead-lettered
        b = await one()
        assert b.body == b"b"
        await receiver.reject(b, condition="app:bad-order", description="cannot parse")
        c = await one()
        assert c.body == b"c"
        await receiver.accept(c)
        d = await one()
        assert d.body == b"d"
        assert broker.state().unsettled == 1
        await receiver.close()  # d was never settled: the broker takes it back
        state = broker.state()
        assert state.depths[q] == 1 and state.unsettled == 0
        assert [(p, why) for p, why in state.dead_letters[q]] == [
            (Message(b"a").encode(), "modified undeliverable-here"),
            (Message(b"b").encode(), "rejected app:bad-order"),
        ]
        receiver2 = await conn.create_receiver(q, prefetch=5)
        [d2] = await receiver2.receive(1, timeout=10)
        assert d2.body == b"d"
        await receiver2.accept(d2)
    assert broker.state().depths[q] == 0


async def test_unsettled_messages_come_back_when_the_connection_drops(broker: ProtonBroker) -> None:
    q = _address("drop")
    async with await connect(broker.url) as conn:
        await (await conn.create_sender(q)).send_many([bytes([i]) for i in range(5)])
        receiver = await conn.create_receiver(q, prefetch=3)
        got = await receive_exactly(receiver, 3, accept=False)
        assert [m.body for m in got] == [b"\x00", b"\x01", b"\x02"]
        conn.protocol.abort()  # no detach, no close: the socket just goes
    async with await connect(broker.url) as conn:
        receiver = await conn.create_receiver(q, mode="receive-and-delete", prefetch=10)
        bodies = [m.body for m in await receive_exactly(receiver, 5, accept=False, batch=5)]
        assert bodies == [bytes([i]) for i in range(5)]  # requeued in order, ahead of the rest


async def test_receive_and_delete_gets_presettled_deliveries(broker: ProtonBroker) -> None:
    q = _address("rad")
    async with await connect(broker.url) as conn:
        await (await conn.create_sender(q)).send_many([f"m{i}".encode() for i in range(20)])
        receiver = await conn.create_receiver(q, mode="receive-and-delete", prefetch=7)
        remote = receiver.link.remote_attach
        assert remote is not None and int(remote.snd_settle_mode or 0) == SND_SETTLED
        got = await receive_exactly(receiver, 20, accept=False, batch=20)
        assert [m.body for m in got] == [f"m{i}".encode() for i in range(20)]
        assert all(m.settled for m in got)
        state = broker.state()
        assert state.depths[q] == 0 and state.unsettled == 0
        await receiver.close()
    assert broker.state().depths[q] == 0  # nothing was held back to requeue


async def test_presettled_send(broker: ProtonBroker) -> None:
    q = _address("presettled")
    async with await connect(broker.url) as conn:
        sender = await conn.create_sender(q, settle_mode="settled", max_in_flight=50)
        remote = sender.link.remote_attach
        assert remote is not None and int(remote.snd_settle_mode or 0) == SND_SETTLED
        for i in range(500):
            assert await (await sender.send_nowait(Message(i.to_bytes(2, "big")))) is None
        await sender.wait_settled()
        receiver = await conn.create_receiver(q, prefetch=100)
        got = await receive_exactly(receiver, 500, batch=500)
        assert [int.from_bytes(m.body, "big") for m in got] == list(range(500))


async def test_receivers_share_a_queue_round_robin(broker: ProtonBroker) -> None:
    q = _address("rr")
    async with await connect(broker.url) as conn:
        r1 = await conn.create_receiver(q, mode="receive-and-delete", prefetch=10)
        r2 = await conn.create_receiver(q, mode="receive-and-delete", prefetch=10)
        await (await conn.create_sender(q)).send_many([bytes([i]) for i in range(10)])
        got1 = [m.body for m in await receive_exactly(r1, 5, accept=False)]
        got2 = [m.body for m in await receive_exactly(r2, 5, accept=False)]
        assert sorted(got1 + got2) == [bytes([i]) for i in range(10)]
        assert got1 == sorted(got1) and got2 == sorted(got2)  # each in queue order


async def test_drain_takes_what_is_there_and_gives_back_the_rest(broker: ProtonBroker) -> None:
    q = _address("drain")
    async with await connect(broker.url) as conn:
        sender = await conn.create_sender(q)
        await sender.send_many([b"1", b"2"])
        receiver = await conn.create_receiver(q, mode="receive-and-delete", prefetch=0)
        link = receiver.link
        link.flow(10, drain=True)  # the engine's drain: no asyncio API yet
        conn.protocol.flush()
        got = await receive_exactly(receiver, 2, accept=False, batch=2)
        assert [m.body for m in got] == [b"1", b"2"]
        # The broker answers the drain with a flow after the transfers; one round trip
        # on the same connection later, that flow has been read.
        await sender.send(b"3")
        assert link.link_credit == 0 and int(link.delivery_count) == 10
        assert broker.state().depths[q] == 1  # "3" waits: no credit left


async def test_dynamic_receiver_gets_an_address_from_proton(broker: ProtonBroker) -> None:
    async with await connect(broker.url) as conn:
        receiver = await conn.create_receiver(None, dynamic=True)
        assert receiver.address and receiver.address.startswith("dynamic-")
        remote = receiver.link.remote_attach
        assert remote is not None and remote.source is not None and remote.source.dynamic
        sender = await conn.create_sender(receiver.address)
        assert isinstance(await sender.send(b"to-dynamic"), Accepted)
        [got] = await receiver.receive(1, timeout=10)
        assert got.body == b"to-dynamic"
        await receiver.accept(got)


async def test_refused_attach_is_reported_with_proton_s_condition(broker: ProtonBroker) -> None:
    async with await connect(broker.url) as conn:
        with pytest.raises(LinkDetachedError) as info:
            await conn.create_sender(None)
        assert info.value.condition == "amqp:not-found"
        sender = await conn.create_sender(_address("after-refusal"))  # the connection is unharmed
        assert isinstance(await sender.send(b"x"), Accepted)


async def test_broker_shutdown_is_reported_as_closed_by_the_peer() -> None:
    own = ProtonBroker().start()
    try:
        conn = await connect(own.url)
        sender = await conn.create_sender("q")
        await asyncio.to_thread(own.stop)  # proton closes the connection cleanly, without an error
        assert conn.closed and isinstance(conn.error, ConnectionClosedError)
        assert "closed by the peer" in str(conn.error)
        with pytest.raises(ConnectionClosedError, match="closed by the peer"):
            await sender.send(b"x")
        await conn.close()
    finally:
        own.stop()


# -- message contents ------------------------------------------------------------------
async def test_every_amqp_value_type_round_trips_and_proton_reads_the_same(broker: ProtonBroker) -> None:
    q_ours, q_proton = _address("values"), _address("values-for-proton")
    sent = [Message(value, body_type="value", subject=name) for name, value in VALUES]
    async with await connect(broker.url) as conn:
        sender = await conn.create_sender(q_ours)
        assert all(isinstance(o, Accepted) for o in await sender.send_many(sent))
        assert all(isinstance(o, Accepted) for o in await (await conn.create_sender(q_proton)).send_many(sent))
        receiver = await conn.create_receiver(q_ours, prefetch=100)
        got = await receive_exactly(receiver, len(sent), batch=100)
    for (name, value), message in zip(VALUES, got, strict=True):
        assert message.subject == name and message.body_type == "value"
        assert typed(message.body) == typed(value), name
    decoded = await asyncio.to_thread(proton_receive, broker.url, q_proton, len(sent))
    for (name, value), p in zip(VALUES, decoded, strict=True):
        assert p.subject == name and p.inferred is False
        assert typed(p.body) == typed(value), name


async def test_every_amqp_value_type_sent_by_proton_is_read_by_amqplink(broker: ProtonBroker) -> None:
    q = _address("values-from-proton")
    messages = [proton.Message(body=to_proton(value), subject=name) for name, value in VALUES]
    states = await asyncio.to_thread(proton_send, broker.url, q, messages)
    assert states == [proton.Delivery.ACCEPTED] * len(messages)
    async with await connect(broker.url) as conn:
        receiver = await conn.create_receiver(q, prefetch=100)
        got = await receive_exactly(receiver, len(messages), batch=100)
    for (name, value), message in zip(VALUES, got, strict=True):
        assert message.subject == name and message.body_type == "value"
        assert typed(message.body) == typed(value), name


async def test_data_and_sequence_bodies_both_ways(broker: ProtonBroker) -> None:
    q, q_proton, q_back = _address("bodies"), _address("bodies-for-proton"), _address("bodies-from-proton")
    ours = [
        Message(b"one data section"),
        Message(b""),
        Message([b"first", b"", b"third"], body_type="data"),
        Message([1, "two", Symbol("three"), [UByte(4)]], body_type="sequence"),
        Message([[1], ["a", None], []], body_type="sequences"),
        Message(),  # no body: an amqp-value of null
    ]
    async with await connect(broker.url) as conn:
        sender = await conn.create_sender(q)
        await sender.send_many(ours)
        await (await conn.create_sender(q_proton)).send_many([ours[0], ours[3]])
        receiver = await conn.create_receiver(q, prefetch=10)
        got = await receive_exactly(receiver, len(ours), accept=False, batch=10)
        await receiver.accept(*got)
        for sent, message in zip(ours, got, strict=True):
            assert message == sent and message.body_type == sent.body_type
        assert typed(got[3].body) == typed(ours[3].body)
        data_p, seq_p = await asyncio.to_thread(proton_receive, broker.url, q_proton, 2)
        assert data_p.inferred is True and bytes(data_p.body) == b"one data section"
        assert seq_p.inferred is True and typed(seq_p.body) == typed(ours[3].body)
        states = await asyncio.to_thread(
            proton_send,
            broker.url,
            q_back,
            [
                proton.Message(body=b"raw", inferred=True),
                proton.Message(body=[proton.ubyte(1), "x"], inferred=True),
                proton.Message(body=b"bin-value"),
            ],
        )
        assert states == [proton.Delivery.ACCEPTED] * 3
        receiver2 = await conn.create_receiver(q_back, prefetch=10)
        back = await receive_exactly(receiver2, 3, accept=False, batch=3)
        await receiver2.accept(*back)
    assert back[0].body_type == "data" and back[0].body == b"raw"
    assert back[1].body_type == "sequence" and typed(back[1].body) == typed([UByte(1), "x"])
    assert back[2].body_type == "value" and typed(back[2].body) == ("binary", b"bin-value")


APP_PROPERTIES: dict[str, Any] = {
    "null": None, "bool": True, "ubyte": UByte(1), "ushort": UShort(2), "uint": UInt(3), "ulong": ULong(4),
    "byte": Byte(-1), "short": Short(-2), "int": Int(-3), "long": -(2**40), "float": Float(0.25),
    "double": 1e100, "decimal32": Decimal32(b"\x01\x02\x03\x04"), "decimal64": Decimal64(bytes(8)),
    "decimal128": Decimal128(bytes(range(16))), "char": Char("é"), "timestamp": Timestamp(1_600_000_000_000),
    "uuid": uuid.UUID(int=42), "binary": b"\x00\x01", "string": "text", "symbol": Symbol("sym"),
}  # fmt: skip


def _full_message() -> Message:
    return Message(
        b"payload",
        message_id=uuid.UUID(int=7),
        user_id=b"anonymous",
        to="queue-x",
        subject="subject",
        reply_to="replies",
        correlation_id=b"\x00\xffcorr",
        content_type="application/octet-stream",
        content_encoding="identity",
        absolute_expiry_time=dt.datetime(2040, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC),
        creation_time=dt.datetime(2024, 5, 6, 7, 8, 9, 10000, tzinfo=dt.UTC),
        group_id="group",
        group_sequence=2**32 - 1,
        reply_to_group_id="reply-group",
        durable=True,
        priority=9,
        ttl=86400.5,
        first_acquirer=True,
        delivery_count=3,
        delivery_annotations={"x-opt-trace": "t-1", Symbol("x-opt-n"): ULong(9)},
        message_annotations={"x-opt-partition-key": "pk", Symbol("x-opt-list"): [1, 2], ULong(77): "ulong key"},
        application_properties=dict(APP_PROPERTIES),
        footer={"x-opt-signature": b"\x01\x02", Symbol("x-opt-hash"): Symbol("sha256")},
    )


async def test_every_header_property_annotation_and_footer_field_survives(broker: ProtonBroker) -> None:
    q, q_proton = _address("fields"), _address("fields-for-proton")
    ids: list[Any] = ["string-id", 2**64 - 1, uuid.UUID(int=99), b"\x00binary-id"]
    sent = [_full_message()] + [Message(b"x", message_id=i, correlation_id=i) for i in ids]
    async with await connect(broker.url) as conn:
        await (await conn.create_sender(q)).send_many(sent)
        await (await conn.create_sender(q_proton)).send_many(sent)
        receiver = await conn.create_receiver(q, prefetch=10)
        got = await receive_exactly(receiver, len(sent), accept=False, batch=10)
        await receiver.accept(*got)
    full = got[0]
    assert full == sent[0]  # every section, byte for byte through proton
    assert full.delivery_annotations == {Symbol("x-opt-trace"): "t-1", Symbol("x-opt-n"): 9}
    assert full.footer == {Symbol("x-opt-signature"): b"\x01\x02", Symbol("x-opt-hash"): Symbol("sha256")}
    assert typed(full.application_properties) == typed(APP_PROPERTIES)
    assert full.ttl == 86400.5 and full.priority == 9 and full.group_sequence == 2**32 - 1
    assert full.creation_time == dt.datetime(2024, 5, 6, 7, 8, 9, 10000, tzinfo=dt.UTC)
    assert [(m.message_id, m.correlation_id) for m in got[1:]] == [(i, i) for i in ids]
    assert [type(m.message_id) for m in got[1:]] == [str, ULong, uuid.UUID, bytes]

    decoded = await asyncio.to_thread(proton_receive, broker.url, q_proton, len(sent))
    p = decoded[0]
    assert bytes(p.body) == b"payload" and p.inferred is True
    assert p.id == uuid.UUID(int=7) and p.user_id == b"anonymous" and p.address == "queue-x"
    assert p.subject == "subject" and p.reply_to == "replies" and bytes(p.correlation_id) == b"\x00\xffcorr"
    assert typed(p.content_type) == ("symbol", "application/octet-stream")
    assert typed(p.content_encoding) == ("symbol", "identity")
    assert p.expiry_time == dt.datetime(2040, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC).timestamp()
    assert p.creation_time == dt.datetime(2024, 5, 6, 7, 8, 9, 10000, tzinfo=dt.UTC).timestamp()
    assert p.group_id == "group" and p.group_sequence == 2**32 - 1 and p.reply_to_group_id == "reply-group"
    assert p.durable is True and p.priority == 9 and p.ttl == 86400.5
    assert p.first_acquirer is True and p.delivery_count == 3
    assert typed(dict(p.instructions)) == typed({Symbol("x-opt-trace"): "t-1", Symbol("x-opt-n"): ULong(9)})
    assert typed(dict(p.annotations)) == typed(
        {Symbol("x-opt-partition-key"): "pk", Symbol("x-opt-list"): [1, 2], ULong(77): "ulong key"}
    )
    assert typed(p.properties) == typed(APP_PROPERTIES)
    proton_ids = [(p.id, p.correlation_id) for p in decoded[1:]]
    assert [(typed(a), typed(b)) for a, b in proton_ids] == [
        (("string", "string-id"),) * 2,
        (("long", 2**64 - 1),) * 2,  # a ulong on the wire; proton's Message.id hands ulongs back as int
        (("uuid", uuid.UUID(int=99)),) * 2,
        (("binary", b"\x00binary-id"),) * 2,
    ]


async def test_proton_sent_properties_and_annotations_read_by_amqplink(broker: ProtonBroker) -> None:
    q = _address("fields-from-proton")
    p = proton.Message(
        body=b"from proton",
        inferred=True,
        id=proton.ulong(12345),
        user_id=b"anonymous",
        address="dest",
        subject="subj",
        reply_to="rt",
        correlation_id="corr",
        content_type="text/plain",
        content_encoding="utf-8",
        expiry_time=2_000_000_000.5,
        creation_time=1_700_000_000.25,
        group_id="g",
        group_sequence=5,
        reply_to_group_id="rg",
        durable=True,
        priority=7,
        ttl=12.5,
        first_acquirer=True,
        delivery_count=2,
        instructions={"x-opt-da": "v"},
        annotations={"x-opt-partition-key": "pk", "x-opt-n": proton.ulong(3)},
        properties={k: to_proton(v) for k, v in APP_PROPERTIES.items()},
    )
    assert await asyncio.to_thread(proton_send, broker.url, q, [p]) == [proton.Delivery.ACCEPTED]
    async with await connect(broker.url) as conn:
        receiver = await conn.create_receiver(q)
        [m] = await receiver.receive(1, timeout=10)
        await receiver.accept(m)
    assert m.body == b"from proton" and m.body_type == "data"
    assert typed(m.message_id) == ("ulong", 12345) and m.user_id == b"anonymous" and m.to == "dest"
    assert m.subject == "subj" and m.reply_to == "rt" and m.correlation_id == "corr"
    assert typed(m.content_type) == ("symbol", "text/plain") and m.content_encoding == "utf-8"
    assert m.absolute_expiry_time == dt.datetime.fromtimestamp(2_000_000_000.5, dt.UTC)
    assert m.creation_time == dt.datetime.fromtimestamp(1_700_000_000.25, dt.UTC)
    assert m.group_id == "g" and m.session_id == "g" and m.group_sequence == 5 and m.reply_to_group_id == "rg"
    assert m.durable is True and m.priority == 7 and m.ttl == 12.5 and m.first_acquirer is True
    assert m.delivery_count == 2
    assert m.delivery_annotations == {Symbol("x-opt-da"): "v"}
    assert m.partition_key == "pk" and typed(m.message_annotations[Symbol("x-opt-n")]) == ("ulong", 3)
    assert typed(m.application_properties) == typed(APP_PROPERTIES)


# -- size and volume -------------------------------------------------------------------
async def test_one_mebibyte_messages_both_ways_with_small_frames(broker: ProtonBroker) -> None:
    q1, q2, q_proton = _address("big1"), _address("big2"), _address("big-proton")
    other = bytes(reversed(MIB))
    async with await connect(broker.url, max_frame_size=4096) as small, await connect(broker.url) as default:
        assert isinstance(await (await small.create_sender(q1)).send(Message(MIB)), Accepted)
        assert isinstance(await (await default.create_sender(q2)).send(Message(other)), Accepted)
        assert isinstance(await (await small.create_sender(q_proton)).send(Message(MIB)), Accepted)
        r_default = await default.create_receiver(q1)
        r_small = await small.create_receiver(q2)
        [got1] = await r_default.receive(1, timeout=20)
        [got2] = await r_small.receive(1, timeout=20)
        assert got1.body == MIB and got2.body == other
        await r_default.accept(got1)
        await r_small.accept(got2)
    [p] = await asyncio.to_thread(proton_receive, broker.url, q_proton, 1)
    assert bytes(p.body) == MIB
    big = proton.Message(body=other, inferred=True)
    assert await asyncio.to_thread(proton_send, broker.url, q_proton, [big]) == [proton.Delivery.ACCEPTED]
    async with await connect(broker.url, max_frame_size=4096) as small:
        receiver = await small.create_receiver(q_proton)
        [got3] = await receiver.receive(1, timeout=20)
        assert got3.body == other
        await receiver.accept(got3)


async def test_ten_thousand_pipelined_messages_no_loss_no_duplicates_in_order(broker: ProtonBroker) -> None:
    q = _address("volume")
    n = 10_000
    async with await connect(broker.url) as conn:
        sender = await conn.create_sender(q, max_in_flight=300)
        first = await sender.send_many(Message(i.to_bytes(4, "big"), message_id=i) for i in range(n // 2))
        futures = [await sender.send_nowait(Message(i.to_bytes(4, "big"), message_id=i)) for i in range(n // 2, n)]
        assert sender.in_flight <= 300
        outcomes = first + [await f for f in futures]
        assert len(outcomes) == n and all(isinstance(o, Accepted) for o in outcomes)
        assert broker.state().depths[q] == n
        receiver = await conn.create_receiver(q, mode="peek-lock", prefetch=1000)
        got = await receive_exactly(receiver, n, batch=1000)
        seen = [int.from_bytes(m.body, "big") for m in got]
        assert all(m.message_id == i for m, i in zip(got, seen, strict=True))
        assert seen == list(range(n))  # nothing lost, nothing twice, in order
        assert receiver.buffered == 0
        state = broker.state()
        assert state.depths[q] == 0 and state.unsettled == 0 and not state.dead_letters.get(q)


# -- the blocking facade and the command line --------------------------------------------
def test_the_sync_facade(broker: ProtonBroker) -> None:
    q = _address("sync")
    with amqplink.sync.connect(broker.url) as conn:
        sender = conn.create_sender(q)
        assert isinstance(sender.send(Message(b"one", subject="s")), Accepted)
        assert all(isinstance(o, Accepted) for o in sender.send_many([b"two", b"three"]))
        receiver = conn.create_receiver(q, prefetch=10)
        got = receive_exactly_sync(receiver, 3, accept=False, batch=3)
        assert [m.body for m in got] == [b"one", b"two", b"three"] and got[0].subject == "s"
        receiver.release(got[2])
        receiver.accept(*got[:2])
        [again] = receiver.receive(1, timeout=10)
        assert again.body == b"three"
        receiver.accept(again)
    assert broker.state().depths[q] == 0


def _cli(*args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "amqplink.cli", *args, "--json"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_cli_send_and_receive_against_the_proton_broker(broker: ProtonBroker) -> None:
    q = _address("cli")
    sent = _cli("send", broker.url, q, "--count", "2000", "--size", "100", "--in-flight", "200")
    assert sent["count"] == 2000 and sent["outcomes"] == {"accepted": 2000}
    settled = _cli("send", broker.url, q, "--count", "500", "--size", "10", "--settled")
    assert settled["outcomes"] == {"settled": 500}
    assert broker.state().depths[q] == 2500
    got = _cli("receive", broker.url, q, "--count", "2000", "--prefetch", "300")
    assert got["count"] == 2000 and got["complete"] is True and got["body_bytes"] == 2000 * 100
    rest = _cli("receive", broker.url, q, "--count", "500", "--mode", "receive-and-delete")
    assert rest["count"] == 500 and rest["complete"] is True and rest["body_bytes"] == 500 * 10
    assert broker.state().depths[q] == 0
