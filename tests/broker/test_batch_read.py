"""``read_batch`` (the batches clients send, cut from the payload) makes what ``decode_batch``
(the envelope decoded whole, each message split) makes, envelope for envelope, and raises
what it raises: for batches of the usual messages (this project's, the official SDK's
properties of thirteen fields), of other shapes, and for payloads damaged anywhere."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from amqplink.broker.namespace.batches import decode_batch, read_batch, split_batch
from amqplink.broker.namespace.envelope import Envelope
from amqplink.broker.namespace.errors import EntityError
from amqplink.codec.errors import DecodeError
from amqplink.message import Message
from amqplink.servicebus.message import ServiceBusMessage, ServiceBusMessageBatch
from tests import profiles


def _sdk_properties(message_id: str) -> bytes:
    """The properties section the official SDK (pyamqp) writes for a message-id only:
    a list8 of all 13 fields, 12 of them null."""
    raw = message_id.encode()
    return b"\x00\x53\x73\xc0" + bytes((len(raw) + 15, 13, 0xA1, len(raw))) + raw + b"\x40" * 12


def _data(body: bytes) -> bytes:
    return (
        b"\x00\x53\x75\xa0" + bytes((len(body),)) if len(body) < 256 else b"\x00\x53\x75\xb0" + len(body).to_bytes(4)
    ) + body


ids = st.one_of(
    st.from_regex(r"[a-z0-9:]{1,12}", fullmatch=True), st.text(max_size=90), st.text(min_size=230, max_size=260)
)
bodies = st.one_of(st.binary(max_size=40), st.sampled_from([bytes(300), bytes(1024)]))
keys = st.one_of(st.none(), st.sampled_from(["k0", "k1", "a key"]))


@st.composite
def inner(draw: st.DrawFn) -> bytes:
    """One encoded message: mostly the usual shapes, sometimes anything."""
    kind = draw(st.sampled_from(["sink", "sink", "sdk", "friendly", "value", "bytes"]))
    body = draw(bodies)
    if kind == "sink":  # this project's client: annotations (partition key), id-only properties, data
        message_id = draw(st.one_of(st.none(), ids))
        return Message(body, message_id=message_id, partition_key=draw(keys)).encode()
    if kind == "sdk":
        return _sdk_properties(draw(ids.filter(lambda i: len(i.encode()) <= 240))) + _data(body)
    if kind == "friendly":
        return Message(
            body,
            message_id=draw(st.one_of(st.none(), ids)),
            session_id=draw(st.one_of(st.none(), st.just("s"))),
            ttl=draw(st.one_of(st.none(), st.just(5.0))),
            application_properties=draw(st.one_of(st.none(), st.just({"a": 1}))),
        ).encode()
    if kind == "value":
        return Message(body, body_type="value").encode()
    return draw(st.binary(max_size=20))


@st.composite
def batches(draw: st.DrawFn) -> bytes:
    messages = draw(st.lists(inner(), max_size=8))
    if draw(st.booleans()):  # runs of alike messages, as a batch mostly is
        messages = [m for m in messages for _ in range(draw(st.integers(1, 4)))]
    head = draw(st.sampled_from(["batch", "none", "friendly"]))
    if head == "batch" and messages:
        batch = ServiceBusMessageBatch(1 << 30)
        first = ServiceBusMessage(b"", message_id=draw(st.text(max_size=20)), partition_key=draw(keys))
        batch.add_encoded(messages[0], first)
        for message in messages[1:]:
            batch.add_encoded(message, first)
        payload = batch._payload()
    elif head == "friendly":
        payload = Message(messages, body_type="data", message_id="outer", application_properties={"p": 1}).encode()
    else:
        payload = b"".join(_data(m) for m in messages)
    return payload


def _outcome(split: Any, payload: bytes) -> Any:
    try:
        envelopes = split(payload)
    except (DecodeError, EntityError) as exc:
        return type(exc).__name__, str(exc)
    return [_fields(e) for e in envelopes]


def _fields(e: Envelope) -> tuple[Any, ...]:
    return (e.header, e.annotations, e.properties, e.application_properties, e.props_raw, e.body, e.size)


def _check(payload: bytes) -> None:
    expected = _outcome(decode_batch, payload)
    assert _outcome(split_batch, payload) == expected
    assert _outcome(split_batch, memoryview(payload)) == expected


@settings(deadline=None)
@given(batches())
@example(_data(_sdk_properties("x") + _data(b"b")))
@example(_data(_sdk_properties("x" * 240) + _data(b"b")) * 2)  # the longest id of a list8
@example(_data(Message(b"b", message_id="i", message_annotations={"x-opt-partition-key": "k" * 300}).encode()) * 2)
@example(_data(_sdk_properties("x")[:-1] + b"\x41" + _data(b"b")))  # a 13th field not null
def test_read_batch_makes_what_decode_batch_makes(payload: bytes) -> None:
    _check(payload)


@settings(profiles.FUZZ, deadline=None)
@given(batches(), st.data())
def test_a_damaged_batch_raises_what_decode_batch_raises(payload: bytes, data: st.DataObject) -> None:
    damaged = bytearray(payload)
    for _ in range(data.draw(st.integers(1, 3))):
        if not damaged:
            break
        at = data.draw(st.integers(0, len(damaged) - 1))
        damaged[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(damaged)))
    _check(bytes(damaged))
    _check(bytes(damaged[:cut]))


def test_the_sinks_batches_are_read_not_decoded() -> None:
    """The usual batch takes the read path (what the benchmarks measure), and its messages
    share one annotations dict per partition key."""
    batch = ServiceBusMessageBatch(1 << 30)
    for row in range(600):
        batch.add_message(ServiceBusMessage(bytes(1024), message_id=f"w:0:{row}", partition_key=f"w:0:{row // 256}"))
    batch.add_message(ServiceBusMessage(b"sdk", message_id="sdk-shaped"))
    payload = batch._payload()
    envelopes = read_batch(payload)
    assert envelopes is not None
    assert [_fields(e) for e in envelopes] == [_fields(e) for e in decode_batch(payload)]
    assert [e.message_id for e in envelopes[:3]] == ["w:0:0", "w:0:1", "w:0:2"]
    assert len({id(e.annotations) for e in envelopes[:600]}) == 3  # keys w:0:0, w:0:1, w:0:2
    sdk_shaped = _data(_sdk_properties("from-the-sdk") + _data(b"body"))
    read = read_batch(sdk_shaped)
    assert read is not None and read[0].message_id == "from-the-sdk" and read[0].body == _data(b"body")


def test_a_batch_with_a_footer_is_left_to_the_general_path() -> None:
    payload = Message([Message(b"x").encode()], body_type="data", footer={"f": 1}).encode()
    assert read_batch(payload) is None
    assert [e.body for e in split_batch(payload)] == [_data(b"x")]
