"""A message that is not valid AMQP is refused at the sender with ``amqp:decode-error``, never
stored to fail at every receiver (issue 23, item 13): on the fast path (a run of body-only
messages), the one-at-a-time path, in a batch, and over the wire."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.aio import connect
from amqplink.broker import Broker
from amqplink.broker.namespace import BATCH_FORMAT, EntityError, Namespace
from amqplink.broker.namespace.envelope import body_only
from amqplink.codec.errors import DecodeError
from amqplink.message import Message
from amqplink.protocol.definitions import Rejected
from tests import profiles

T0 = 1_700_000_000.0
VALID = Message(b"x" * 300).encode()

BAD = {
    "data longer than the payload": b"\x00\x53\x75\xa0\x10abc",
    "vbin32 cut short": b"\x00\x53\x75\xb0\x00\x00\x01\x00abc",
    "data then garbage": Message(b"abc").encode() + b"\xff\xff",
    "data holding a string": b"\x00\x53\x75\xa1\x03abc",
    "amqp-value of bad UTF-8": b"\x00\x53\x77\xa1\x02\xc3\x28",
    "amqp-sequence of a string": b"\x00\x53\x76\xa1\x01a",
    "two amqp-values": Message("a").encode() + Message("b").encode(),
    "data then amqp-value": Message(b"a").encode() + Message("b").encode(),
    "footer before the body": b"\x00\x53\x78\xc1\x01\x00" + Message(b"a").encode(),
    "footer not a map": Message(b"a").encode() + b"\x00\x53\x78\xa1\x01a",
    "properties then a cut body": Message(b"abc", message_id="m").encode()[:-1],
    "header then a non-section": b"\x00\x53\x70\xc0\x01\x00\xa1\x01a",
}


@dataclass
class Sent:
    payload: bytes
    message_format: int = 0


def stored(ns: Namespace) -> list[bytes]:
    """What a receiver of queue ``q`` would be sent (receive-and-delete)."""
    entity = ns.receiver_source("q")
    return entity.encode_all(entity.receive_many(T0, 1000, lock=False))


@pytest.mark.parametrize("payload", list(BAD.values()), ids=list(BAD))
def test_an_invalid_message_is_refused_on_every_path(payload: bytes) -> None:
    ns = Namespace()
    q = ns.sender_target("q")
    with pytest.raises(EntityError) as one:
        ns.sender(q)(payload, T0, 0)
    assert one.value.condition == "amqp:decode-error" and "not valid AMQP" in one.value.description
    bodies = ns.body_sender(q)
    assert bodies is not None
    assert bodies([Sent(VALID), Sent(payload), Sent(VALID)], T0) == 1  # stops at it: the general path refuses it
    batch = Message([VALID, payload], body_type="data").encode()
    with pytest.raises(EntityError) as whole:
        ns.send(q, batch, T0, BATCH_FORMAT)  # a batch is stored whole or not at all
    assert whole.value.condition == "amqp:decode-error"
    assert [Message.decode(p).body for p in stored(ns)] == [b"x" * 300]


def test_body_only_takes_a_binary_that_runs_to_the_end_only() -> None:
    assert body_only(VALID) is not None
    assert body_only(Message(b"y" * 100_000).encode()) is not None  # vbin32
    assert body_only(Message("text").encode()) is None  # decoded by the general path
    for payload in (BAD["data longer than the payload"], BAD["vbin32 cut short"], BAD["data then garbage"]):
        assert body_only(payload) is None


_bodies = (
    st.binary(max_size=300).map(lambda b: Message(b))
    | st.text(max_size=50).map(lambda t: Message(t))
    | st.lists(st.integers(-5, 5), max_size=5).map(lambda v: Message(v, body_type="sequence"))
    | st.binary(max_size=50).map(lambda b: Message(b, message_id="id", subject="s"))
)


@given(
    message=_bodies,
    cut=st.integers(0, 400),
    flip=st.tuples(st.integers(0, 400), st.integers(1, 255)) | st.none(),
    tail=st.binary(max_size=4),
)
@settings(profiles.FUZZ, deadline=None)
def test_whatever_is_stored_decodes_at_a_receiver(
    message: Message, cut: int, flip: tuple[int, int] | None, tail: bytes
) -> None:
    """Damaged messages: each is refused with amqp:decode-error or stored, and what is stored
    is a message a receiver decodes (the bug: stored, then failing at every receiver)."""
    raw = bytearray(message.encode())
    raw = raw[: max(1, len(raw) - cut % (len(raw) + 1))] + tail
    if flip is not None:
        raw[flip[0] % len(raw)] ^= flip[1]
    ns = Namespace()
    q = ns.sender_target("q")
    try:
        ns.sender(q)(bytes(raw), T0, 0)
    except EntityError as exc:
        if exc.condition == "amqp:decode-error":
            assert not stored(ns)
            return
        assert exc.condition in ("com.microsoft:argument-error", "amqp:not-allowed"), exc
        return
    for payload in stored(ns):
        try:
            Message.decode(payload)
        except DecodeError as exc:  # pragma: no cover - the failure this test exists for
            pytest.fail(f"stored a message no receiver can decode: {exc}")


async def test_over_the_wire_the_sender_gets_decode_error_and_the_link_lives_on() -> None:
    async with Broker(servicebus=True) as broker:
        conn = await connect(broker.url)
        try:
            sender = await conn.create_sender("wire")
            raw = sender.link  # the engine link: send bytes as they are
            deliveries = [raw.send(p) for p in (VALID, BAD["data then garbage"], VALID, BAD["vbin32 cut short"])]
            conn.protocol.schedule_flush()
            for _ in range(500):
                if all(d.remote_state is not None for d in deliveries):
                    break
                await asyncio.sleep(0.01)
            states = [d.remote_state for d in deliveries]
            assert [type(s).__name__ for s in states] == ["Accepted", "Rejected", "Accepted", "Rejected"]
            for state in states[1::2]:
                assert isinstance(state, Rejected) and state.error is not None
                assert str(state.error.condition) == "amqp:decode-error"
            await sender.send(Message(b"after"))
            receiver = await conn.create_receiver("wire", mode="receive-and-delete")
            got: list[bytes] = []
            while len(got) < 3:
                batch = await receiver.receive(3, timeout=5)
                assert batch, f"only {got} came"
                got += [m.body for m in batch]
            assert got == [b"x" * 300, b"x" * 300, b"after"]
            assert not await receiver.receive(timeout=0.2)  # nothing else was stored
        finally:
            await conn.close()
