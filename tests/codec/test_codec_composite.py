"""encode_composite (trailing-default trimming, widths) and the decoder's composite registry."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from amqplink.codec import (
    DecodeError,
    Described,
    Long,
    Symbol,
    UInt,
    ULong,
    decode,
    decode_all,
    decode_sequence,
    encode,
    encode_binary,
    encode_boolean,
    encode_composite,
    encode_string,
    encode_uint,
    encode_value,
    register_composite,
    registered_composites,
    unregister_composite,
)

H = bytes.fromhex

# Descriptor codes/symbols no real AMQP composite uses.
CODE = 0xF3
BIG_CODE = 0x0000_4C4B_0000_0001
SYMBOL = "amqplink-test:dummy:list"
BIG_SYMBOL = "amqplink-test:big:list"


class Dummy:
    """A stand-in for a generated composite class."""

    def __init__(self, fields: list[Any]) -> None:
        self.fields = fields

    def _amqp_encode(self, out: bytearray) -> None:
        encode_composite(out, CODE, self.fields, ENCODERS, DEFAULTS)


ENCODERS = [encode_uint, encode_uint, encode_string, encode_uint, encode_boolean]
DEFAULTS: list[Any] = [None, None, None, 7, False]


@pytest.fixture
def registered() -> Iterator[None]:
    assert CODE not in registered_composites()
    assert BIG_CODE not in registered_composites()
    register_composite(CODE, SYMBOL, Dummy)
    register_composite(BIG_CODE, BIG_SYMBOL, lambda value: ("big", value))
    try:
        yield
    finally:
        unregister_composite(CODE, SYMBOL)
        unregister_composite(BIG_CODE, BIG_SYMBOL)


def composite_bytes(values: list[Any], code: int = CODE) -> bytes:
    out = bytearray()
    encode_composite(out, code, values, ENCODERS, DEFAULTS)
    return bytes(out)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        # trailing default (False) and trailing None dropped; inner None is null
        ([UInt(1), None, "x", None, False], H("0053f3c00703520140a10178")),
        # a trailing value equal to its default is dropped too
        ([UInt(1), None, None, 7, False], H("0053f3c003015201")),
        # ... but a default value followed by a non-default one stays
        ([UInt(1), None, None, 7, True], H("0053f3c0080552014040520741")),
        # nothing left: list0
        ([None, None, None, 7, False], H("0053f345")),
        ([None, None, None, None, None], H("0053f345")),
        ([0, 300, "", None, None], H("0053f3c0090343700000012ca100")),
    ],
)
def test_encode_composite_bytes(values: list[Any], expected: bytes) -> None:
    assert composite_bytes(values) == expected


def test_encode_composite_list_widths() -> None:
    # two nulls + str8 of 250 chars = 254 bytes of items; with the count byte 255: list8
    data = composite_bytes([None, None, "x" * 250])
    assert data[3:6] == H("c0ff03")
    # one more byte does not fit list8: list32 (size counts the 4-byte count field)
    data = composite_bytes([None, None, "x" * 251])
    assert data[3:12] == H("d00000010300000003")
    assert decode_all(data) == Described(ULong(CODE), [None, None, "x" * 251])


def test_encode_composite_large_code_uses_ulong_descriptor() -> None:
    assert composite_bytes([UInt(1)], BIG_CODE) == H("008000004c4b00000001c003015201")


def test_encode_composite_many_fields_uses_list32() -> None:
    n = 300
    out = bytearray()
    encode_composite(out, CODE, [True] * n, [encode_boolean] * n, [None] * n)
    assert out[:12] == H("0053f3d0") + (n + 4).to_bytes(4, "big") + n.to_bytes(4, "big")
    assert decode_all(out) == Described(ULong(CODE), [True] * n)


def test_decode_applies_registered_factory(registered: None) -> None:
    data = composite_bytes([UInt(1), None, "x", None, False])
    obj = decode_all(data)
    assert isinstance(obj, Dummy)
    assert obj.fields == [UInt(1), None, "x"]
    # The object re-encodes to the same bytes, also nested in other values.
    assert encode(obj) == data
    back = decode_all(encode({Symbol("k"): [obj]}))
    assert isinstance(back[Symbol("k")][0], Dummy)
    assert decode_all(composite_bytes([UInt(1)], BIG_CODE)) == ("big", [UInt(1)])


@pytest.mark.parametrize(
    "descriptor",
    [
        H("53f3"),  # smallulong
        H("8000000000000000f3"),  # full-width ulong
        H("a3") + bytes([len(SYMBOL)]) + SYMBOL.encode(),  # sym8
        H("b3") + len(SYMBOL).to_bytes(4, "big") + SYMBOL.encode(),  # sym32
    ],
)
def test_every_descriptor_encoding_finds_the_factory(registered: None, descriptor: bytes) -> None:
    obj = decode_all(b"\x00" + descriptor + H("c003015205"))
    assert isinstance(obj, Dummy) and obj.fields == [UInt(5)]


@pytest.mark.parametrize(
    ("descriptor", "expected"),
    [
        (H("8100000000000000f3"), Long(0xF3)),  # a long, not a ulong: not the composite
        (H("a1") + bytes([len(SYMBOL)]) + SYMBOL.encode(), SYMBOL),  # a string, not a symbol
    ],
)
def test_descriptors_of_other_types_do_not_match(registered: None, descriptor: bytes, expected: Any) -> None:
    obj = decode_all(b"\x00" + descriptor + H("45"))
    assert isinstance(obj, Described)
    assert obj.descriptor == expected and type(obj.descriptor) in (Long, str)


def test_unknown_descriptors_give_described(registered: None) -> None:
    obj = decode_all(H("0053f445"))
    assert isinstance(obj, Described)
    assert type(obj.descriptor) is ULong and obj.descriptor == 0xF4 and obj.value == []


def test_factory_errors_become_decode_errors() -> None:
    def bad_type(value: Any) -> Any:
        raise TypeError("wrong field type")

    def bad_value(value: Any) -> Any:
        raise ValueError("bad value")

    own = DecodeError("factory says no", 99)

    def decode_error(value: Any) -> Any:
        raise own

    data = b"\x00\x00" + composite_bytes([UInt(1)])  # at offset 2, after two padding bytes
    for factory, message in [(bad_type, "wrong field type"), (bad_value, "bad value")]:
        register_composite(CODE, SYMBOL, factory)
        try:
            with pytest.raises(DecodeError) as info:
                decode(data, 2)
        finally:
            unregister_composite(CODE, SYMBOL)
        assert SYMBOL in info.value.reason and message in info.value.reason
        assert info.value.offset == 2
        assert isinstance(info.value.__cause__, (TypeError, ValueError))
    register_composite(CODE, SYMBOL, decode_error)
    try:
        with pytest.raises(DecodeError) as info:
            decode(data, 2)
    finally:
        unregister_composite(CODE, SYMBOL)
    assert info.value is own


def test_factories_for_restricted_types_get_the_plain_value(registered: None) -> None:
    seen: list[Any] = []
    factories: list[tuple[int, str, Callable[[Any], Any]]] = [
        (0xF5, "amqplink-test:data:binary", lambda v: seen.append(("data", v)) or v),
        (0xF6, "amqplink-test:annotations:map", lambda v: seen.append(("map", v)) or v),
    ]
    for code, sym, factory in factories:
        register_composite(code, sym, factory)
    try:
        out = bytearray()
        out += H("0053f6")
        encode_value(out, {Symbol("x-opt"): 1})
        out += H("0053f5")
        encode_binary(out, b"payload")
        assert decode_sequence(out) == [{Symbol("x-opt"): 1}, b"payload"]
    finally:
        for code, sym, _ in factories:
            unregister_composite(code, sym)
    assert seen == [("map", {Symbol("x-opt"): 1}), ("data", b"payload")]
    assert 0xF5 not in registered_composites()
