"""Exact encodings of every primitive (smallest width), and decoding of every valid width."""

from __future__ import annotations

import datetime as dt
import enum
import math
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from codec_strategies import assert_same

from amqplink.codec import (
    ENCODERS,
    AMQPType,
    Array,
    Byte,
    Char,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
    EncodeError,
    Float,
    Int,
    Long,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
    decode,
    decode_all,
    encode,
    encode_array,
    encode_binary,
    encode_boolean,
    encode_byte,
    encode_char,
    encode_decimal32,
    encode_decimal64,
    encode_decimal128,
    encode_described,
    encode_double,
    encode_float,
    encode_int,
    encode_list,
    encode_long,
    encode_map,
    encode_null,
    encode_short,
    encode_string,
    encode_symbol,
    encode_timestamp,
    encode_ubyte,
    encode_uint,
    encode_ulong,
    encode_ushort,
    encode_uuid,
    encode_value,
    multiple,
)

H = bytes.fromhex
U = uuid.UUID("12345678-9abc-def0-1234-56789abcdef0")

# (encoder, value, exact expected bytes)
TYPED_CASES: list[tuple[Callable[[bytearray, Any], None], Any, bytes]] = [
    (encode_null, None, H("40")),
    (encode_boolean, True, H("41")),
    (encode_boolean, False, H("42")),
    (encode_ubyte, 0, H("5000")),
    (encode_ubyte, 255, H("50ff")),
    (encode_ushort, 0, H("600000")),
    (encode_ushort, 0xFFFF, H("60ffff")),
    (encode_uint, 0, H("43")),
    (encode_uint, 1, H("5201")),
    (encode_uint, 255, H("52ff")),
    (encode_uint, 256, H("7000000100")),
    (encode_uint, 0xFFFFFFFF, H("70ffffffff")),
    (encode_ulong, 0, H("44")),
    (encode_ulong, 1, H("5301")),
    (encode_ulong, 255, H("53ff")),
    (encode_ulong, 256, H("800000000000000100")),
    (encode_ulong, 2**64 - 1, H("80ffffffffffffffff")),
    (encode_byte, -128, H("5180")),
    (encode_byte, 127, H("517f")),
    (encode_byte, -1, H("51ff")),
    (encode_short, -32768, H("618000")),
    (encode_short, 1, H("610001")),
    (encode_int, 0, H("5400")),
    (encode_int, -128, H("5480")),
    (encode_int, 127, H("547f")),
    (encode_int, 128, H("7100000080")),
    (encode_int, -129, H("71ffffff7f")),
    (encode_int, -(2**31), H("7180000000")),
    (encode_long, 0, H("5500")),
    (encode_long, -128, H("5580")),
    (encode_long, 127, H("557f")),
    (encode_long, 128, H("810000000000000080")),
    (encode_long, -(2**63), H("818000000000000000")),
    (encode_float, 1.5, H("723fc00000")),
    (encode_float, -0.0, H("7280000000")),
    (encode_double, 1.5, H("823ff8000000000000")),
    (encode_double, math.inf, H("827ff0000000000000")),
    (encode_decimal32, b"\x01\x02\x03\x04", H("7401020304")),
    (encode_decimal64, bytes(range(8)), H("840001020304050607")),
    (encode_decimal128, bytes(range(16)), H("94000102030405060708090a0b0c0d0e0f")),
    (encode_char, "a", H("7300000061")),
    (encode_char, "\U0001f600", H("730001f600")),
    (encode_timestamp, 1311704463521, H("830000013167adb8a1")),
    (encode_timestamp, dt.datetime(2011, 7, 26, 18, 21, 3, 521000, tzinfo=dt.UTC), H("830000013167adb8a1")),
    (encode_timestamp, -1, H("83ffffffffffffffff")),
    (encode_uuid, U, H("98") + U.bytes),
    (encode_binary, b"", H("a000")),
    (encode_binary, b"ab", H("a0026162")),
    (encode_binary, bytearray(b"ab"), H("a0026162")),
    (encode_binary, memoryview(b"xab")[1:], H("a0026162")),
    (encode_binary, b"x" * 255, H("a0ff") + b"x" * 255),
    (encode_binary, b"x" * 256, H("b000000100") + b"x" * 256),
    (encode_string, "", H("a100")),
    (encode_string, "é", H("a102c3a9")),
    (encode_string, "\U0001f600", H("a104f09f9880")),
    (encode_string, "x" * 255, H("a1ff") + b"x" * 255),
    (encode_string, "x" * 256, H("b100000100") + b"x" * 256),
    (encode_string, "é" * 128, H("b100000100") + "é".encode() * 128),  # 128 chars, 256 bytes
    (encode_symbol, "", H("a300")),
    (encode_symbol, "amqp:accepted:list", H("a312") + b"amqp:accepted:list"),
    (encode_symbol, "s" * 256, H("b300000100") + b"s" * 256),
    (encode_list, [], H("45")),
    (encode_list, (), H("45")),
    (encode_list, [None], H("c0020140")),
    (encode_list, [UInt(1), "a"], H("c006025201a10161")),
    (encode_list, [b"x" * 251], H("c0fe01a0fb") + b"x" * 251),  # body 253 bytes: list8 size 254
    (encode_list, [b"x" * 252], H("c0ff01a0fc") + b"x" * 252),  # body 254 bytes: list8 size 255
    (encode_list, [b"x" * 253], H("d00000010300000001a0fd") + b"x" * 253),  # body 255: list32
    (encode_list, [None] * 256, H("d00000010400000100") + b"\x40" * 256),  # count > 255: list32
    (encode_map, {}, H("c10100")),
    (encode_map, {Symbol("a"): 1}, H("c10602a301615501")),
    (encode_map, {"k": None}, H("c10502a1016b40")),
    (
        encode_map,
        {UInt(i): None for i in range(128)},  # 256 elements: map32
        H("d10000018300000100") + H("4340") + b"".join(bytes((0x52, i, 0x40)) for i in range(1, 128)),
    ),
]


@pytest.mark.parametrize(("encoder", "value", "expected"), TYPED_CASES)
def test_typed_encoder_exact(encoder: Callable[[bytearray, Any], None], value: Any, expected: bytes) -> None:
    out = bytearray(b"\xee")
    encoder(out, value)
    assert bytes(out) == b"\xee" + expected


# encode_value: the AMQP type follows the Python type.
VALUE_CASES: list[tuple[Any, bytes]] = [
    (None, H("40")),
    (True, H("41")),
    (False, H("42")),
    (UByte(7), H("5007")),
    (UShort(7), H("600007")),
    (UInt(0), H("43")),
    (UInt(255), H("52ff")),
    (UInt(256), H("7000000100")),
    (ULong(0), H("44")),
    (ULong(3), H("5303")),
    (Byte(-2), H("51fe")),
    (Short(-2), H("61fffe")),
    (Int(-2), H("54fe")),
    (Long(-2), H("55fe")),
    (-2, H("55fe")),
    (2**63 - 1, H("817fffffffffffffff")),
    (2**63, H("808000000000000000")),  # only fits ulong
    (2**64 - 1, H("80ffffffffffffffff")),
    (Float(0.5), H("723f000000")),
    (0.5, H("823fe0000000000000")),
    (Timestamp(5), H("830000000000000005")),
    (dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC), H("8300000000000003e8")),
    (Char("a"), H("7300000061")),
    (Symbol("a"), H("a30161")),
    ("a", H("a10161")),
    (b"a", H("a00161")),
    (bytearray(b"a"), H("a00161")),
    (memoryview(b"a"), H("a00161")),
    (U, H("98") + U.bytes),
    (Decimal32(b"abcd"), H("74") + b"abcd"),
    (Decimal64(b"abcdefgh"), H("84") + b"abcdefgh"),
    (Decimal128(b"abcdefghijklmnop"), H("94") + b"abcdefghijklmnop"),
    ([], H("45")),
    ((1,), H("c003015501")),
    ({}, H("c10100")),
    # (descriptors no composite is registered for, so they decode back as Described)
    (Described(ULong(0xF7), []), H("0053f745")),
    (Described(Symbol("amqplink-test:x"), []), H("00a30f") + b"amqplink-test:x" + H("45")),
    (Described(ULong(0x100), None), H("0080000000000000010040")),
    # arrays: element constructor once, a shared width chosen for all elements
    (Array([], AMQPType.UINT), H("e0020052")),
    (Array([], AMQPType.STRING), H("e00200a1")),
    (Array([UInt(1), UInt(2)]), H("e00402520102")),
    (Array([UInt(1), UInt(256)]), H("e00a02700000000100000100")),
    (Array([ULong(1)]), H("e003015301")),
    (Array([ULong(1), ULong(300)], AMQPType.ULONG), H("e0120280") + (1).to_bytes(8, "big") + (300).to_bytes(8, "big")),
    (Array([Int(-1), Int(1)]), H("e0040254ff01")),
    (Array([Int(-1), Int(1000)]), H("e00a0271ffffffff000003e8")),
    (Array([-1, 1]), H("e0040255ff01")),
    (Array([True, False]), H("e00402560100")),
    (Array([None, None], AMQPType.NULL), H("e0020240")),
    (Array([UByte(1), UByte(2)]), H("e00402500102")),
    (Array([Symbol("a"), Symbol("bc")]), H("e00702a30161026263")),
    (
        Array([Symbol("a"), Symbol("b" * 256)]),
        H("f00000010e00000002b3") + H("00000001") + b"a" + H("00000100") + b"b" * 256,
    ),
    (Array(["x"], AMQPType.STRING, Symbol("d")), H("e0080100a30164a10178")),
    (Array([UInt(7)], AMQPType.UINT, ULong(0x20)), H("e006010053205207")),
    (Array([[], [UInt(1)]], AMQPType.LIST), H("e00802c0010003015201")),
    (Array([{}], AMQPType.MAP), H("e00401c10100")),
    (Array([Array([UInt(1)]), Array([], AMQPType.NULL)], AMQPType.ARRAY), H("e00902e003015201020040")),
    (
        Array([Described(Symbol("d"), "x"), Described(Symbol("d"), "y")], AMQPType.DESCRIBED),
        H("e00a0200a30164a101780179"),
    ),
    ([Symbol("a")], H("c00401a30161")),
]


@pytest.mark.parametrize(("value", "expected"), VALUE_CASES)
def test_encode_value_exact(value: Any, expected: bytes) -> None:
    assert encode(value) == expected


@pytest.mark.parametrize(("value", "expected"), VALUE_CASES)
def test_exact_encodings_decode_back(value: Any, expected: bytes) -> None:
    got = decode_all(expected)
    if isinstance(value, (bytearray, memoryview)):
        assert_same(got, bytes(value))
    elif isinstance(value, tuple):
        assert_same(got, list(value))
    elif isinstance(value, dt.datetime):
        assert_same(got, Timestamp.from_datetime(value))
    elif type(value) is Long:
        assert_same(got, int(value))
    elif type(value) is int and value >= 2**63:
        assert_same(got, ULong(value))
    elif isinstance(value, Array) and value.element_type is AMQPType.DESCRIBED:
        assert_same(got, Array(["x", "y"], AMQPType.STRING, Symbol("d")))
    else:
        assert_same(got, value)


# Every valid encoding (not only the smallest) must decode.
DECODE_CASES: list[tuple[bytes, Any]] = [
    (H("40"), None),
    (H("41"), True),
    (H("42"), False),
    (H("5601"), True),
    (H("5600"), False),
    (H("50ff"), UByte(255)),
    (H("60ffff"), UShort(65535)),
    (H("43"), UInt(0)),
    (H("5200"), UInt(0)),
    (H("7000000000"), UInt(0)),
    (H("7000000005"), UInt(5)),
    (H("70ffffffff"), UInt(2**32 - 1)),
    (H("44"), ULong(0)),
    (H("5300"), ULong(0)),
    (H("800000000000000005"), ULong(5)),
    (H("80ffffffffffffffff"), ULong(2**64 - 1)),
    (H("5180"), Byte(-128)),
    (H("61ff00"), Short(-256)),
    (H("54ff"), Int(-1)),
    (H("71ffffffff"), Int(-1)),
    (H("7100000005"), Int(5)),
    (H("55ff"), -1),
    (H("81ffffffffffffffff"), -1),
    (H("810000000000000005"), 5),
    (H("723fc00000"), Float(1.5)),
    (H("823ff8000000000000"), 1.5),
    (H("7401020304"), Decimal32(b"\x01\x02\x03\x04")),
    (H("84") + bytes(8), Decimal64(bytes(8))),
    (H("94") + bytes(16), Decimal128(bytes(16))),
    (H("730010ffff"), Char("\U0010ffff")),
    (H("83ffffffffffffffff"), Timestamp(-1)),
    (H("98") + U.bytes, U),
    (H("a000"), b""),
    (H("b000000000"), b""),
    (H("b0000000026162"), b"ab"),
    (H("a100"), ""),
    (H("b100000002c3a9"), "é"),
    (H("a300"), Symbol("")),
    (H("b30000000161"), Symbol("a")),
    (H("45"), []),
    (H("c00100"), []),
    (H("d00000000400000000"), []),
    (H("d000000006000000024041"), [None, True]),
    (H("c10100"), {}),
    (H("d10000000400000000"), {}),
    (H("d10000000800000002a3016140"), {Symbol("a"): None}),
    (H("c10602a1016b5205"), {"k": UInt(5)}),
    (H("e0020143"), Array([UInt(0)], AMQPType.UINT)),  # uint0 elements take no bytes
    (H("e0020340"), Array([None, None, None], AMQPType.NULL)),
    (H("e0020241"), Array([True, True], AMQPType.BOOLEAN)),
    (H("e00402560100"), Array([True, False], AMQPType.BOOLEAN)),
    (H("e0020245"), Array([[], []], AMQPType.LIST)),
    (H("f0000000050000000070"), Array([], AMQPType.UINT)),
    (H("f00000000d00000002700000000100000002"), Array([UInt(1), UInt(2)], AMQPType.UINT)),
    (H("e00b02b1000000016100000000"), Array(["a", ""], AMQPType.STRING)),
    (H("e01302d00000000400000000000000050000000140"), Array([[], [None]], AMQPType.LIST)),
    (H("e0070100a301645207"), Array([UInt(7)], AMQPType.UINT, Symbol("d"))),
    (H("e00d01008000000000000000205207"), Array([UInt(7)], AMQPType.UINT, ULong(0x20))),
    (H("00532045"), Described(ULong(0x20), [])),
    (H("004440"), Described(ULong(0), None)),
    (H("0080000000000000002045"), Described(ULong(0x20), [])),
    (H("00b3000000017840"), Described(Symbol("x"), None)),
    (H("00a1017840"), Described("x", None)),  # unusual descriptor types are kept
    (H("000053014045"), Described(Described(ULong(1), None), [])),
]


@pytest.mark.parametrize(("data", "expected"), DECODE_CASES, ids=[d.hex()[:24] for d, _ in DECODE_CASES])
def test_decoder_accepts_every_valid_encoding(data: bytes, expected: Any) -> None:
    assert_same(decode_all(data), expected)
    # Also from a memoryview of a bytearray, at an offset.
    value, end = decode(memoryview(bytearray(b"\x99" + data + b"\x99")), 1)
    assert_same(value, expected)
    assert end == 1 + len(data)


def test_binary_decodes_to_bytes_copy_of_just_the_value() -> None:
    source = bytearray(b"\xa0\x03abc" + b"z" * 100)
    value, end = decode(memoryview(source))
    assert type(value) is bytes and value == b"abc" and end == 5
    source[2] = ord("X")
    assert value == b"abc"  # a copy, not a view of the input


# ---------------------------------------------------------------------------
# Encoder errors
# ---------------------------------------------------------------------------

ENCODE_ERRORS: list[tuple[Callable[[bytearray, Any], None], Any]] = [
    (encode_ubyte, -1),
    (encode_ubyte, 256),
    (encode_ubyte, 1.0),
    (encode_ushort, 65536),
    (encode_uint, -1),
    (encode_uint, 2**32),
    (encode_uint, "1"),
    (encode_ulong, -1),
    (encode_ulong, 2**64),
    (encode_byte, 128),
    (encode_short, -32769),
    (encode_int, 2**31),
    (encode_long, 2**63),
    (encode_float, 1e300),
    (encode_float, "x"),
    (encode_double, "x"),
    (encode_decimal32, b"123"),
    (encode_decimal64, "12345678"),
    (encode_decimal128, b"1" * 15),
    (encode_char, "ab"),
    (encode_char, "\ud800"),
    (encode_timestamp, 2**63),
    (encode_timestamp, "now"),
    (encode_uuid, "12345678-9abc-def0-1234-56789abcdef0"),
    (encode_binary, "text"),
    (encode_string, b"bytes"),
    (encode_string, "\ud800"),
    (encode_symbol, "é"),
    (encode_symbol, b"a"),
    (encode_symbol, ["a"]),
    (encode_list, "abc"),
    (encode_list, {1: 2}),
    (encode_map, [1, 2]),
    (encode_array, 5),
    (encode_value, object()),
    (encode_value, 2**64),
    (encode_value, -(2**63) - 1),
    (encode_value, [1, object()]),
    (encode_value, Array([UInt(1), -1], AMQPType.UINT)),
    (encode_value, Array(["é"], AMQPType.SYMBOL)),
    (encode_value, Array([1], AMQPType.NULL)),
    (encode_value, Array([Described(Symbol("a"), 1), Described(Symbol("b"), 1)], AMQPType.DESCRIBED)),
    (encode_value, Array([1], AMQPType.DESCRIBED)),
    (encode_value, Array([Described(Symbol("a"), 1)], AMQPType.LONG, descriptor=Symbol("d"))),
]


@pytest.mark.parametrize(("encoder", "value"), ENCODE_ERRORS)
def test_encode_errors(encoder: Callable[[bytearray, Any], None], value: Any) -> None:
    with pytest.raises(EncodeError):
        encoder(bytearray(), value)


def test_encode_error_names_type_and_value() -> None:
    with pytest.raises(EncodeError, match=r"uint") as info:
        encode_uint(bytearray(), 2**32)
    assert str(2**32) in str(info.value)


def test_failed_array_leaves_output_unchanged() -> None:
    out = bytearray(b"keep")
    with pytest.raises(EncodeError):
        encode_array(out, Array([UInt(1), "x"], AMQPType.UINT))
    assert out == b"keep"


# ---------------------------------------------------------------------------
# Dispatch details
# ---------------------------------------------------------------------------


def test_bool_is_not_encoded_as_int() -> None:
    assert encode(True) == H("41")
    assert encode([False]) == H("c0020142")


def test_subclasses_use_their_base_encoding() -> None:
    class Color(enum.IntEnum):
        RED = 300

    class MySymbol(Symbol):
        pass

    class MyUInt(UInt):
        pass

    assert encode(Color.RED) == encode(300)
    assert encode(MySymbol("a")) == H("a30161")
    assert encode(MyUInt(3)) == H("5203")
    assert encode(dt.datetime(1970, 1, 1, 0, 0, 1)) == H("8300000000000003e8")  # naive = UTC


def test_objects_with_amqp_encode_encode_themselves() -> None:
    class Accepted:
        def _amqp_encode(self, out: bytearray) -> None:
            out += H("00532445")

    assert encode(Accepted()) == H("00532445")
    assert encode([Accepted(), {Symbol("k"): Accepted()}]) == H("c00f0200532445c10802a3016b00532445")


def test_encode_described_with_int_and_symbol_descriptors() -> None:
    out = bytearray()
    encode_described(out, 0x75, b"x")
    encode_described(out, Symbol("amqp:data:binary"), b"x")
    encode_described(out, 2**40, None)
    assert bytes(out) == (
        H("005375a00178") + H("00a310") + b"amqp:data:binary" + H("a00178") + H("0080000001000000000040")
    )


def test_encoders_table_covers_every_type() -> None:
    assert set(ENCODERS) == set(AMQPType)
    for amqp_type, value, expected in [
        (AMQPType.UINT, 5, H("5205")),
        (AMQPType.SYMBOL, "a", H("a30161")),
        (AMQPType.TIMESTAMP, 5, H("830000000000000005")),
        (AMQPType.DESCRIBED, Described(ULong(1), None), H("00530140")),
    ]:
        out = bytearray()
        ENCODERS[amqp_type](out, value)
        assert bytes(out) == expected


def test_multiple() -> None:
    enc = multiple(encode_symbol)
    out = bytearray()
    enc(out, Symbol("a"))  # a single value: just the element
    assert bytes(out) == H("a30161")
    out = bytearray()
    enc(out, ["a", "bc"])  # several: an array of the element type
    assert bytes(out) == H("e00702a30161026263")
    out = bytearray()
    enc(out, [])
    assert bytes(out) == H("e00200a3")
    out = bytearray()
    multiple(encode_uint)(out, (1, 256))
    assert bytes(out) == H("e00a02700000000100000100")
    out = bytearray()
    enc(out, Array([UInt(1)]))  # an explicit Array keeps its own element type
    assert bytes(out) == H("e003015201")
    with pytest.raises(EncodeError):
        enc(bytearray(), ["é"])
