"""The single-pass decoder for the usual message shapes agrees with the generic one.

``Message.decode`` reads the common shapes (header, annotations, properties, application
properties, one data section, footer) in one pass and leaves everything else to the
generic section decoder. Property: on every payload - well-formed, out of order, repeated,
truncated or with a byte changed - the message decoded (or the ``DecodeError`` raised) is
the same as the generic decoder's, and the single pass never accepts a payload the generic
decoder rejects.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.codec.errors import DecodeError
from amqplink.codec.types import Symbol, Timestamp, UByte, UInt
from amqplink.message import Message, _decode_common
from amqplink.protocol import definitions as sections_

AmqpSequence, AmqpValue, Data, Footer = sections_.AmqpSequence, sections_.AmqpValue, sections_.Data, sections_.Footer
Header, Properties = sections_.Header, sections_.Properties
ApplicationProperties, DeliveryAnnotations = sections_.ApplicationProperties, sections_.DeliveryAnnotations
MessageAnnotations = sections_.MessageAnnotations


def _generic(payload: bytes) -> Message:
    msg = Message.__new__(Message)
    msg.header = msg.delivery_annotations = msg.message_annotations = None
    msg.properties = msg.application_properties = msg.footer = None
    msg._decode_sections(payload, len(payload))
    return msg


def _shape(msg: Message) -> str:
    """Values and their exact types (UInt is not int, Symbol is not str)."""

    def typed(value: Any) -> Any:
        if isinstance(value, dict):
            return [(typed(k), typed(v)) for k, v in value.items()]
        if isinstance(value, list):
            return [typed(v) for v in value]
        if hasattr(value, "__slots__") and not isinstance(value, (str, bytes, int)):
            return (type(value).__name__, [typed(getattr(value, f)) for f in type(value).__slots__])
        return (type(value).__name__, value)

    sections = (msg.header, msg.delivery_annotations, msg.message_annotations, msg.properties,
                msg.application_properties, msg.footer, msg.body_type, msg.body)  # fmt: skip
    return repr(typed(list(sections)))


def _outcome(decoder: Any, payload: bytes) -> tuple[str, str]:
    try:
        return "ok", _shape(decoder(payload))
    except DecodeError as exc:
        return "error", str(exc)


def _check(payload: bytes) -> None:
    generic = _outcome(_generic, payload)
    assert _outcome(Message.decode, payload) == generic
    single = Message.__new__(Message)
    if _decode_common(single, payload, len(payload)):  # it accepted: the generic decoder must agree
        assert generic == ("ok", _shape(single))


keys = st.sampled_from(
    ["x-opt-sequence-number", "x-opt-enqueued-time", "x-opt-locked-until", "x-opt-partition-key", "k"]
)
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=0, max_value=2**40).map(Timestamp),
    st.text(max_size=12),
    st.binary(max_size=12),
    st.integers(min_value=0, max_value=255).map(UInt),
)
annotations = st.dictionaries(keys.map(Symbol), values, max_size=5)
header = st.builds(
    Header,
    durable=st.one_of(st.none(), st.booleans()),
    priority=st.one_of(st.none(), st.integers(0, 255).map(UByte)),
    ttl=st.one_of(st.none(), st.integers(0, 2**32 - 1).map(UInt)),
    first_acquirer=st.one_of(st.none(), st.booleans()),
    delivery_count=st.one_of(st.none(), st.integers(0, 2**32 - 1).map(UInt)),
)
properties = st.builds(
    Properties,
    message_id=st.one_of(st.none(), st.text(max_size=40)),
    subject=st.one_of(st.none(), st.text(max_size=10)),
    group_id=st.one_of(st.none(), st.text(max_size=10)),
    creation_time=st.one_of(st.none(), st.integers(0, 2**40).map(Timestamp)),
    content_type=st.one_of(st.none(), st.just(Symbol("application/json"))),
)
sections = st.one_of(
    header,
    annotations.map(DeliveryAnnotations),
    annotations.map(MessageAnnotations),
    properties,
    st.dictionaries(st.text(max_size=6), values, max_size=4).map(ApplicationProperties),
    st.binary(max_size=300).map(Data),
    st.lists(values, max_size=3).map(AmqpSequence),
    values.map(AmqpValue),
    annotations.map(Footer),
)


def _encode(parts: list[Any]) -> bytes:
    out = bytearray()
    for part in parts:
        part._amqp_encode(out)
    return bytes(out)


def _usual(draw: Any) -> list[Any]:
    """The usual order, each section present or not, one data body."""
    parts = [draw(st.one_of(st.none(), s)) for s in (header, annotations.map(DeliveryAnnotations),
             annotations.map(MessageAnnotations), properties,
             st.dictionaries(st.text(max_size=6), values, max_size=4).map(ApplicationProperties))]  # fmt: skip
    parts.append(Data(draw(st.binary(max_size=300))))
    parts.append(draw(st.one_of(st.none(), annotations.map(Footer))))
    return [p for p in parts if p is not None]


@st.composite
def payloads(draw: Any) -> bytes:
    parts = _usual(draw) if draw(st.booleans()) else draw(st.lists(sections, max_size=6))
    payload = bytearray(_encode(parts))
    mutation = draw(st.sampled_from(["none", "truncate", "flip", "insert"]))
    if payload and mutation == "truncate":
        del payload[draw(st.integers(0, len(payload) - 1)) :]
    elif payload and mutation == "flip":
        at = draw(st.integers(0, len(payload) - 1))
        payload[at] = draw(st.integers(0, 255))
    elif mutation == "insert":
        payload.insert(draw(st.integers(0, len(payload))), draw(st.integers(0, 255)))
    return bytes(payload)


@settings(max_examples=600)
@given(payloads())
def test_single_pass_and_generic_decoders_agree(payload: bytes) -> None:
    _check(payload)


def test_the_broker_shape_takes_the_single_pass() -> None:
    payload = _encode([
        Header(delivery_count=UInt(0)),
        MessageAnnotations({Symbol("x-opt-sequence-number"): 7, Symbol("x-opt-enqueued-time"): Timestamp(1)}),
        Properties(message_id="id-1"),
        ApplicationProperties({"a": 1}),
        Data(b"body" * 300),
    ])  # fmt: skip
    msg = Message.__new__(Message)
    assert _decode_common(msg, payload, len(payload))
    assert msg.body == b"body" * 300 and msg.message_id == "id-1" and msg.delivery_count == 0
    _check(payload)


@pytest.mark.parametrize(
    "payload",
    [
        # a header whose durable field is a ubyte: the header's field check rejects it
        b"\x00\x53\x70\xc0\x03\x01\x50\x01" + b"\x00\x53\x75\xa0\x01x",
        # message annotations with a duplicate key
        b"\x00\x53\x72\xc1\x09\x04\xa3\x01k\x41\xa3\x01k\x42" + b"\x00\x53\x75\xa0\x01x",
        # application properties that are a list, not a map
        b"\x00\x53\x74\xc0\x01\x00" + b"\x00\x53\x75\xa0\x01x",
        # a string that is not UTF-8 in the properties
        b"\x00\x53\x73\xc0\x04\x01\xa1\x01\xff" + b"\x00\x53\x75\xa0\x01x",
        # a map whose size field disagrees with its contents
        b"\x00\x53\x72\xc1\x05\x02\xa3\x01k\x41\x40" + b"\x00\x53\x75\xa0\x01x",
    ],
)
def test_malformed_usual_shapes_are_rejected_as_by_the_generic_decoder(payload: bytes) -> None:
    with pytest.raises(DecodeError):
        Message.decode(payload)
    assert not _decode_common(Message.__new__(Message), payload, len(payload))
    _check(payload)
