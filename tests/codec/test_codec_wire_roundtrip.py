"""What the codec reads it writes back as it was: every value, in any encoding a peer chose.

The broker writes the message annotations it read back into every delivery and every
record of a durable store (docs/broker-semantics.md#what-is-refused-at-the-transfer), and a
client re-sends what it received: a decoded value must encode to a value that decodes the
same, type for type and bit for bit (a float's NaN payload, a decimal's raw bytes, an
array's element type and descriptor, a descriptor's type), even when the encoding differs
(a uint sent in four bytes comes back in one).
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from wire_strategies import wire_values

from amqplink.codec import (
    AMQPType,
    Array,
    Described,
    Float,
    Long,
    Symbol,
    ULong,
    decode_all,
    encode,
    same_value,
)
from amqplink.protocol.definitions import Accepted, AmqpValue, ApplicationProperties, MessageAnnotations


@settings(deadline=None)
@given(wire_values)
def test_a_decoded_value_encodes_back_to_the_same_value(raw: bytes) -> None:
    # As a message's data: an amqp-value body holding it, read as data (no descriptor
    # interpreted, even accepted's or a section's), written back as it came.
    section = decode_all(b"\x00\x53\x77" + raw)
    assert type(section) is AmqpValue
    assert not _interpreted(section.value)
    written = encode(section)
    back = decode_all(written)
    assert type(back) is AmqpValue and same_value(back.value, section.value), (raw.hex(), section, back)
    assert encode(back) == written  # and the same bytes from then on


@settings(deadline=None)
@given(wire_values)
def test_an_annotation_value_encodes_back_to_the_same_value(raw: bytes) -> None:
    entries = b"\xa3\x03x-v" + raw
    section = b"\x00\x53\x72\xd1" + struct.pack(">II", len(entries) + 4, 2) + entries
    annotations = decode_all(section)
    assert type(annotations) is MessageAnnotations
    back = decode_all(encode(annotations))
    assert same_value(back.value, annotations.value), (raw.hex(), annotations, back)


def _interpreted(value: Any) -> bool:
    """Whether a protocol composite (an object of amqplink.protocol) is somewhere in ``value``."""
    if isinstance(value, dict):
        return any(_interpreted(k) or _interpreted(v) for k, v in value.items())
    if isinstance(value, list):
        return any(map(_interpreted, value))
    if isinstance(value, Described):
        return _interpreted(value.descriptor) or _interpreted(value.value)
    return hasattr(value, "_amqp_encode")


@pytest.mark.parametrize(
    ("wire", "kept"),
    [
        ("00532445", Described(ULong(0x24), [])),  # accepted's descriptor, as data
        ("005324c0020141", Described(ULong(0x24), [True])),  # with a field accepted has not
        ("005370c00401a10178", Described(ULong(0x70), ["x"])),  # a header whose field is no boolean
        ("00550541", Described(Long(5), True)),  # a long descriptor stays a long
    ],
)
def test_described_values_in_annotations_are_kept_whatever_their_descriptor(wire: str, kept: Any) -> None:
    value = bytes.fromhex(wire)
    section = b"\x00\x53\x72\xc1" + bytes((len(value) + 5, 2, 0xA3, 2)) + b"x-" + value
    annotations = decode_all(section)
    assert type(annotations) is MessageAnnotations
    assert same_value(annotations.value[Symbol("x-")], kept)
    assert encode(annotations) == section
    # outside a message section the protocol's composites are still what they are
    assert decode_all(bytes.fromhex("00532445")) == Accepted()


def test_application_properties_read_described_values_as_data() -> None:
    section = ApplicationProperties({"k": Described(ULong(0x24), [True])})
    back = decode_all(encode(section))
    assert same_value(back.value["k"], Described(ULong(0x24), [True]))


@pytest.mark.parametrize("bits", [0x7F800001, 0x7FC00001, 0xFFBFFFFF, 0x7FFFFFFF, 0xFF800001])
def test_a_float_nan_keeps_its_payload_and_signalling_bit(bits: int) -> None:
    raw = b"\x72" + struct.pack(">I", bits)
    value = decode_all(raw)
    assert type(value) is Float and value != value
    assert encode(value) == raw
    array = Array([value, Float(1.5)], AMQPType.FLOAT)
    assert decode_all(encode(array))[0].hex() == value.hex()
    assert encode(array)[4:8] == raw[1:]


def test_a_nan_made_in_python_is_a_quiet_float_nan() -> None:
    assert encode(Float(float("nan"))) == b"\x72\x7f\xc0\x00\x00"
    # a double NaN whose payload is all in bits a float drops stays a NaN, not an infinity
    low_payload = struct.unpack(">d", struct.pack(">Q", 0x7FF0000000000001))[0]
    assert encode(Float(low_payload)) == b"\x72\x7f\xc0\x00\x00"


def test_same_value_tells_apart_what_equality_does_not() -> None:
    assert not same_value(1, ULong(1)) and ULong(1) == 1
    nan = float("nan")
    assert same_value(nan, nan) and nan != nan
    assert not same_value(0.0, -0.0)
    assert not same_value(Array([1], AMQPType.LONG), [1])
    assert not same_value({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert same_value(Described(Symbol("x"), [ULong(1)]), Described(Symbol("x"), [ULong(1)]))
    assert not same_value(Described(Symbol("x"), [ULong(1)]), Described("x", [ULong(1)]))
