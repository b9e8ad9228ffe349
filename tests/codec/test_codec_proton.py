"""Cross-check the codec against qpid-proton's (independent C) implementation.

Both directions: bytes amqplink writes are read back by proton as the same
value, and bytes proton writes are read by amqplink as the same value.  Proton
uses 32-bit sizes for compound values, so the bytes of lists/maps/arrays differ;
for scalar primitives both pick the smallest encoding and the bytes must match.
"""

from __future__ import annotations

import uuid
from typing import Any

import proton
import pytest
from codec_strategies import PRIMITIVES, assert_same, make_values, primitives
from hypothesis import given, settings
from hypothesis import strategies as st
from proton import (
    UNDESCRIBED,
    Data,
    byte,
    char,
    decimal32,
    decimal64,
    decimal128,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)

from amqplink.codec import (
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
    decode_all,
    encode,
)

_PROTON_TYPE_CODE = {
    AMQPType.NULL: Data.NULL,
    AMQPType.BOOLEAN: Data.BOOL,
    AMQPType.UBYTE: Data.UBYTE,
    AMQPType.USHORT: Data.USHORT,
    AMQPType.UINT: Data.UINT,
    AMQPType.ULONG: Data.ULONG,
    AMQPType.BYTE: Data.BYTE,
    AMQPType.SHORT: Data.SHORT,
    AMQPType.INT: Data.INT,
    AMQPType.LONG: Data.LONG,
    AMQPType.FLOAT: Data.FLOAT,
    AMQPType.DOUBLE: Data.DOUBLE,
    AMQPType.DECIMAL32: Data.DECIMAL32,
    AMQPType.DECIMAL64: Data.DECIMAL64,
    AMQPType.DECIMAL128: Data.DECIMAL128,
    AMQPType.CHAR: Data.CHAR,
    AMQPType.TIMESTAMP: Data.TIMESTAMP,
    AMQPType.UUID: Data.UUID,
    AMQPType.BINARY: Data.BINARY,
    AMQPType.STRING: Data.STRING,
    AMQPType.SYMBOL: Data.SYMBOL,
    AMQPType.LIST: Data.LIST,
    AMQPType.MAP: Data.MAP,
    AMQPType.ARRAY: Data.ARRAY,
}
_AMQP_TYPE_OF_CODE = {code: t for t, code in _PROTON_TYPE_CODE.items()}

# (our wrapper, proton class) pairs for the simple scalar wrappers.
_SCALARS: list[tuple[type, type]] = [
    (UByte, ubyte),
    (UShort, ushort),
    (UInt, uint),
    (ULong, ulong),
    (Byte, byte),
    (Short, short),
    (Int, int32),
    (Float, float32),
    (Char, char),
    (Timestamp, timestamp),
    (Symbol, symbol),
]
_TO_PROTON = dict(_SCALARS)
_FROM_PROTON = {p: ours for ours, p in _SCALARS}


def to_proton(v: Any) -> Any:
    """Our value as the object proton's Data.put_object encodes as the same AMQP value."""
    t = type(v)
    if t in _TO_PROTON:
        return _TO_PROTON[t](v)
    if t is Decimal32:
        return decimal32(int.from_bytes(v, "big"))
    if t is Decimal64:
        return decimal64(int.from_bytes(v, "big"))
    if t is Decimal128:
        return decimal128(bytes(v))
    if t is Array:
        descriptor = UNDESCRIBED if v.descriptor is None else to_proton(v.descriptor)
        return proton.Array(descriptor, _PROTON_TYPE_CODE[v.element_type], *[to_proton(x) for x in v])
    if t is list:
        return [to_proton(x) for x in v]
    if t is dict:
        return {to_proton(k): to_proton(x) for k, x in v.items()}
    if t is Described:
        return proton.Described(to_proton(v.descriptor), to_proton(v.value))
    assert t in (type(None), bool, int, float, str, bytes, uuid.UUID), t
    return v


def from_proton(v: Any) -> Any:
    """A value proton's Data.get_object returned, in our representation."""
    t = type(v)
    if t in _FROM_PROTON:
        return _FROM_PROTON[t](v)
    if t is decimal32:
        return Decimal32(int(v).to_bytes(4, "big"))
    if t is decimal64:
        return Decimal64(int(v).to_bytes(8, "big"))
    if t is decimal128:
        return Decimal128(bytes(v))
    if t is proton.Array:
        descriptor = None if v.descriptor is UNDESCRIBED else from_proton(v.descriptor)
        return Array([from_proton(x) for x in v.elements], _AMQP_TYPE_OF_CODE[v.type], descriptor)
    if t is list:
        return [from_proton(x) for x in v]
    if t is dict:
        return {from_proton(k): from_proton(x) for k, x in v.items()}
    if t is proton.Described:
        return Described(from_proton(v.descriptor), from_proton(v.value))
    if t is memoryview:  # proton returns an empty binary as a memoryview
        return bytes(v)
    assert t in (type(None), bool, int, float, str, bytes, uuid.UUID), t
    return v


# Map keys the cross-check leaves out: proton's Python binding cannot read a map
# with a binary key (get_binary hands back an unhashable memoryview), and it
# models decimal32/decimal64 as ints, which collide with other int keys.
#
# Proton's Data.get_object also mishandles a described value whose value is
# itself described (even in bytes proton wrote): inside an array element it
# raises KeyError, and in a list or map it drops the elements that follow.
# The cross-check leaves such nested described values out.


def _proton_can_read(v: Any) -> bool:
    if isinstance(v, Described):
        return not isinstance(v.value, Described) and _proton_can_read(v.descriptor) and _proton_can_read(v.value)
    if isinstance(v, list):  # includes Array
        return all(_proton_can_read(x) for x in v)
    if isinstance(v, dict):
        return all(_proton_can_read(k) and _proton_can_read(x) for k, x in v.items())
    return True


values = make_values(keys=primitives.filter(lambda k: type(k) not in (bytes, Decimal32, Decimal64))).filter(
    _proton_can_read
)


def test_proton_limitation_is_real() -> None:
    # Documents why _proton_can_read filters: proton fails on its own bytes here,
    # while amqplink reads them correctly.
    nested = Described(ULong(5), Described(ULong(6), None))
    in_array = Array([[nested]], AMQPType.LIST)
    in_list = [nested, UInt(1)]
    assert not _proton_can_read(in_array) and not _proton_can_read(in_list)
    with pytest.raises(KeyError):
        proton_decode(proton_encode(in_array))
    assert len(proton_decode(proton_encode(in_list))) == 1  # proton lost UInt(1)
    assert_same(decode_all(proton_encode(in_array)), in_array)
    assert_same(decode_all(proton_encode(in_list)), in_list)


def proton_encode(v: Any) -> bytes:
    data = Data()
    data.put_object(to_proton(v))
    return bytes(data.encode())


def proton_decode(raw: bytes) -> Any:
    data = Data()
    consumed = data.decode(raw)
    assert consumed == len(raw), f"proton consumed {consumed} of {len(raw)} bytes"
    data.rewind()
    assert data.next() is not None
    value = from_proton(data.get_object())
    assert data.next() is None  # exactly one value
    return value


@settings(deadline=None)
@given(values)
def test_proton_reads_what_we_write(value: Any) -> None:
    assert_same(proton_decode(encode(value)), value)


@settings(deadline=None)
@given(values)
def test_we_read_what_proton_writes(value: Any) -> None:
    assert_same(decode_all(proton_encode(value)), value)


_SCALAR_TYPES = [t for t in PRIMITIVES if t not in (AMQPType.NULL,)]


@settings(deadline=None)
@given(st.sampled_from(_SCALAR_TYPES).flatmap(lambda t: PRIMITIVES[t]))
def test_scalar_bytes_identical_to_proton(value: Any) -> None:
    # Proton also picks uint0/smalluint, smallint, smalllong, str8/vbin8/sym8...
    assert encode(value) == proton_encode(value)


def test_proton_identical_small_examples() -> None:
    for value in [UInt(0), UInt(1), UInt(255), UInt(256), ULong(0), ULong(9), 5, -5, 300, Int(-100), True]:
        assert encode(value) == proton_encode(value), value
