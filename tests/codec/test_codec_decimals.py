"""AMQP's decimals (IEEE 754-2008, BID) read and written as ``decimal.Decimal``.

The codec keeps a decimal as its raw bytes (what was sent is what is kept and compared);
``to_decimal`` and ``from_decimal`` convert, and the broker needs them to keep a decimal
application property as Service Bus does (amqplink/sbwire/decimals.py).
"""

from __future__ import annotations

import decimal
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqplink.codec import Decimal32, Decimal64, Decimal128, EncodeError, decode_all, encode

KINDS = (Decimal32, Decimal64, Decimal128)


def _tuple(value: Decimal) -> tuple[object, ...]:
    return tuple(value.as_tuple())


@st.composite
def representable(draw: st.DrawFn, kind: type) -> Decimal:
    """A finite number ``kind`` holds exactly, with an exponent it holds (its cohort kept)."""
    digits = draw(st.integers(1, kind.DIGITS))
    coefficient = draw(st.integers(0, 10**digits - 1))
    high = 3 * (1 << (kind.EXPONENT_BITS - 2)) - 1 - kind.BIAS
    exponent = draw(st.one_of(st.integers(-kind.BIAS, high), st.sampled_from([-kind.BIAS, high, 0, -2])))
    return Decimal((draw(st.integers(0, 1)), tuple(map(int, str(coefficient))), exponent))


@pytest.mark.parametrize(
    ("kind", "text", "wire"),
    [
        (Decimal32, "1", "32800001"),
        (Decimal64, "1", "31c0000000000001"),
        (Decimal128, "1", "30400000000000000000000000000001"),
        (Decimal128, "1.5", "303e000000000000000000000000000f"),
        (Decimal128, "-0", "b0400000000000000000000000000000"),
        (Decimal32, "9999999", "6cb8967f"),  # a coefficient of 2**23 or more: 11, the exponent, 100...
        (Decimal128, "Infinity", "78000000000000000000000000000000"),
        (Decimal128, "-Infinity", "f8000000000000000000000000000000"),
        (Decimal128, "NaN", "7c000000000000000000000000000000"),
        (Decimal128, "sNaN", "7e000000000000000000000000000000"),
        (Decimal64, "NaN12", "7c0000000000000c"),
    ],
)
def test_known_encodings(kind: type, text: str, wire: str) -> None:
    value = kind.from_decimal(text)
    assert value.hex() == wire
    assert _tuple(kind(bytes.fromhex(wire)).to_decimal()) == _tuple(Decimal(text))
    assert encode(value)[1:] == bytes.fromhex(wire) and decode_all(encode(value)) == value


@pytest.mark.parametrize("kind", KINDS)
@given(data=st.data())
def test_a_number_the_type_holds_comes_back_with_its_exponent(kind: type, data: st.DataObject) -> None:
    number = data.draw(representable(kind))
    assert _tuple(kind.from_decimal(number).to_decimal()) == _tuple(number)


@pytest.mark.parametrize("kind", KINDS)
@given(data=st.data())
def test_any_bytes_read_as_a_number_that_writes_back_canonically(kind: type, data: st.DataObject) -> None:
    raw = kind(data.draw(st.binary(min_size=kind.SIZE, max_size=kind.SIZE)))
    number = raw.to_decimal()
    canonical = kind.from_decimal(number)
    assert _tuple(canonical.to_decimal()) == _tuple(number)
    assert kind.from_decimal(canonical.to_decimal()) == canonical  # canonical bytes are a fixed point


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        (Decimal32, "12345678"),  # eight digits, none of them a trailing zero
        (Decimal32, "1E+97"),  # beyond the exponent, and no room to shift it into the coefficient
        (Decimal128, "1E-6177"),
        (Decimal128, "1" * 35),
        (Decimal64, "NaN" + "1" * 16),  # a payload beyond the precision
    ],
)
def test_what_the_type_cannot_hold_is_refused(kind: type, text: str) -> None:
    with pytest.raises(ValueError, match=kind.__name__):
        kind.from_decimal(text)


def test_an_exponent_out_of_range_is_moved_by_trailing_zeros() -> None:
    assert Decimal32.from_decimal("1E+91").to_decimal() == Decimal("1E+91")  # 10E+90: a zero into the coefficient
    assert _tuple(Decimal32.from_decimal("1E+91").to_decimal()) == _tuple(Decimal("10E+90"))
    assert _tuple(Decimal32.from_decimal("100E-103").to_decimal()) == _tuple(Decimal("1E-101"))


def test_a_non_canonical_coefficient_reads_as_zero() -> None:
    # decimal128's second form always holds a coefficient above 10**34 - 1: zero (IEEE 754)
    assert Decimal128(bytes.fromhex("6c000000000000000000000000000001")).to_decimal().is_zero()


@given(representable(Decimal128))
def test_a_python_decimal_encodes_as_the_decimal128_that_holds_it(number: Decimal) -> None:
    wire = encode(number)
    assert wire == encode(Decimal128.from_decimal(number))
    assert _tuple(decode_all(wire).to_decimal()) == _tuple(number)


@pytest.mark.parametrize("text", ["1" * 35, "1E-6177", "NaN" + "1" * 34])
def test_a_python_decimal_no_decimal128_holds_is_not_rounded_but_refused(text: str) -> None:
    with pytest.raises(EncodeError, match="decimal128"):
        encode({"d": Decimal(text)})


def test_the_official_sdk_writes_decimal128_as_the_codec_does() -> None:
    from azure.servicebus._pyamqp._encode import encode_decimal128

    context = decimal.Context(prec=34)
    for text in ["1.5", "1.2345", "-0.001", "0", "123456789012345678901234567890", "1E+100", "-7E-300"]:
        number = context.create_decimal(text)
        out = bytearray()
        encode_decimal128(out, number)
        assert bytes(out) == encode(Decimal128.from_decimal(number)) == encode(number), text
