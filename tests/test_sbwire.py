"""``amqplink.sbwire``: Service Bus's wire contract, one copy for the client and the broker."""

from __future__ import annotations

import datetime as dt
import math
import uuid
from decimal import Decimal

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from amqplink.codec import Decimal32, Decimal64, Decimal128, Symbol
from amqplink.sbwire import decimals, formats, lock_token, nodes, sas


@given(st.integers(min_value=0, max_value=253402300799 * 10**6))
def test_ticks_round_trip_to_the_microsecond(micros: int) -> None:
    seconds = micros / 10**6  # a float: exact to its ulp (2 us in year 9999)
    back = formats.datetime_from_ticks(formats.dotnet_ticks(seconds))
    expected = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=micros)
    assert abs(back - expected) <= dt.timedelta(microseconds=1, seconds=math.ulp(seconds))


def test_ticks_of_the_unix_epoch_and_one_second() -> None:
    assert formats.dotnet_ticks(0) == 621355968000000000
    one_second = dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)
    assert formats.datetime_from_ticks(621355968000000000 + 10_000_000) == one_second


def test_the_lock_token_example_of_the_protocol_notes() -> None:
    tag = bytes.fromhex("5bad8f0fcbd99f46a1657086772895 0e".replace(" ", ""))
    token = lock_token.lock_token_from_delivery_tag(tag)
    assert token == uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e")
    assert lock_token.delivery_tag_from_lock_token(str(token)) == tag


def test_the_client_paths_export_the_same_objects() -> None:
    from amqplink.broker.namespace.management import OPERATIONS
    from amqplink.servicebus import lock_token as client_lock_token
    from amqplink.servicebus import sas as client_sas
    from amqplink.servicebus.management_node import Operation

    for name in sas.__all__:
        assert getattr(client_sas, name) is getattr(sas, name), name
    assert client_lock_token.lock_token_from_delivery_tag is lock_token.lock_token_from_delivery_tag
    assert Operation is nodes.Operation and set(OPERATIONS) == set(nodes.Operation)


def test_a_minted_token_verifies_against_the_neutral_verifier() -> None:
    from amqplink.servicebus.credentials import AzureNamedKeyCredential
    from amqplink.servicebus.sas import mint_token

    minted = mint_token(AzureNamedKeyCredential("send", "k3y"), "sb://ns.example/q", now=1000, ttl=60)
    claims = sas.verify_sas_token(minted.token, keys={"send": "k3y"}, audience="sb://ns.example/q/x", now=1030)
    assert claims.key_name == "send" and claims.expires_at == 1060


# -- decimals (sbwire/decimals.py) ----------------------------------------------------
_decimal_kinds = st.sampled_from([Decimal32, Decimal64, Decimal128])


@pytest.mark.parametrize(
    ("text", "wire"),
    [
        ("1.5", "0c3e000000000000000000000000000f"),  # exponent 6175 >> 9 in the first byte (BID: >> 7)
        ("-0.001", "8c3a0000000000000000000000000001"),
        ("4294967295", "0c4000000000000000000000ffffffff"),
        ("1E+5", "0c4000000000000000000000000186a0"),  # a positive exponent multiplied in (scale 0)
        ("1E-28", "0c080000000000000000000000000001"),
    ],
)
def test_service_bus_writes_a_decimal_as_dotnet_does(text: str, wire: str) -> None:
    kinds = [kind for kind in (Decimal32, Decimal64, Decimal128) if len(Decimal(text).as_tuple().digits) <= kind.DIGITS]
    for kind in kinds:  # a decimal32 or decimal64 is delivered as the same decimal128
        assert decimals.servicebus_decimal128(kind.from_decimal(text)).hex() == wire


@pytest.mark.parametrize("text", ["NaN", "-Infinity", "1E-29", str(2**96), "0.00000000000000000000000000001"])
def test_what_dotnet_decimal_does_not_hold_has_no_service_bus_form(text: str) -> None:
    value = Decimal128.from_decimal(text)
    assert decimals.dotnet_decimal(value) is None
    with pytest.raises(ValueError, match=r"\.NET decimal"):
        decimals.servicebus_decimal128(value)


@settings(deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, decimals.DOTNET_MAX_SCALE), st.booleans(), _decimal_kinds)
def test_the_python_sdk_reads_service_bus_decimals(coefficient: int, scale: int, negative: bool, kind: type) -> None:
    # pyamqp reads a coefficient of up to 32 bits right (it prints each word as decimal
    # digits: a wider one it misreads from Service Bus too)
    from azure.servicebus._pyamqp._decode import _decode_decimal128

    number = Decimal((int(negative), tuple(map(int, str(coefficient))), -scale))
    try:
        value = kind.from_decimal(number)
    except ValueError:
        return  # more digits than decimal32/64 hold
    _, read = _decode_decimal128(memoryview(bytes(decimals.servicebus_decimal128(value))))
    assert read == number


def test_the_python_sdk_cannot_read_a_standard_decimal128() -> None:
    # why the broker writes Service Bus's layout for it: the standard one fails its decoder
    from azure.servicebus._pyamqp._decode import _decode_decimal128

    with pytest.raises(ValueError, match="decimal128"):
        _decode_decimal128(memoryview(bytes(Decimal128.from_decimal("1.5"))))


def test_the_python_sdk_is_told_by_its_product() -> None:
    assert decimals.reads_servicebus_decimals({Symbol("product"): "azsdk-python-servicebus"})
    assert decimals.reads_servicebus_decimals({"product": b"azsdk-python-servicebus"})
    assert not decimals.reads_servicebus_decimals({Symbol("product"): "amqplink"})
    assert not decimals.reads_servicebus_decimals(None)


# -- reading either layout (sbwire/decimals.py read_decimal) -------------------------------
def _dotnet_reads(raw: bytes) -> tuple[int, int, int] | None:
    """(sign, coefficient, scale) of the ``System.Decimal`` Microsoft.Azure.Amqp's decoder
    (``DecimalEncoding.DecodeDecimal128``) makes of 16 bytes, modelled on its source; None
    where it makes none (a NaN, an infinity, the ``11`` form it reads as 0, a scale past 28,
    an overflow). It takes the exponent from the standard 14 bits, the scale as the low byte
    of minus the exponent, the coefficient from the last 12 bytes."""
    if raw[0] & 0x60 == 0x60:
        return None
    exponent = ((raw[0] & 0x7F) << 7 | raw[1] >> 1) - 6176
    coefficient = int.from_bytes(raw[4:], "big")
    if exponent <= 0:
        scale = -exponent & 0xFF
        return (raw[0] >> 7, coefficient, scale) if scale <= decimals.DOTNET_MAX_SCALE else None
    value = coefficient * 10**exponent
    return (raw[0] >> 7, value, 0) if value < 2**96 else None


def _number(sign: int, coefficient: int, scale: int) -> Decimal:
    return Decimal((sign, tuple(map(int, str(coefficient))), -scale))


_dotnet_decimals = st.tuples(st.integers(0, 1), st.integers(0, 2**96 - 1), st.integers(0, decimals.DOTNET_MAX_SCALE))


@st.composite
def _near_servicebus_layout(draw: st.DrawFn) -> bytes:
    """16 bytes at or near the shape Service Bus writes: any first byte's sign over 0x0C (or
    any first byte), any second byte, the two zero bytes or not, any coefficient."""
    first = draw(st.sampled_from([0x0C, 0x8C]) | st.integers(0, 255))
    second = draw(st.sampled_from([(6176 - scale & 0x7F) << 1 for scale in range(29)]) | st.integers(0, 255))
    pad = draw(st.sampled_from([b"\0\0"]) | st.binary(min_size=2, max_size=2))
    return bytes((first, second)) + pad + draw(st.binary(min_size=12, max_size=12))


@given(_dotnet_decimals)
def test_either_layout_of_a_dotnet_decimal_reads_as_the_number(decimal: tuple[int, int, int]) -> None:
    number = _number(*decimal)
    standard = Decimal128.from_decimal(number)
    servicebus = decimals.servicebus_decimal128(standard)
    assert decimals.in_servicebus_layout(servicebus) and not decimals.in_servicebus_layout(standard)
    for raw in (standard, servicebus):  # scale, sign of zero and all 96 bits kept
        assert decimals.read_decimal(raw).as_tuple() == number.as_tuple()
        assert _dotnet_reads(raw) == decimal  # as .NET (Service Bus) reads both


@given(st.integers(0, 1), st.integers(0, 2**96 - 1), st.integers(1, 6111))
def test_a_standard_decimal_with_a_positive_exponent_is_never_taken_for_service_buss(
    sign: int, coefficient: int, exponent: int
) -> None:
    number = Decimal((sign, tuple(map(int, str(coefficient))), exponent))
    try:
        standard = Decimal128.from_decimal(number)
    except ValueError:
        return  # past decimal128's range
    assert not decimals.in_servicebus_layout(standard)
    assert decimals.read_decimal(standard) == number


@given(_near_servicebus_layout() | st.binary(min_size=16, max_size=16))
@example(bytes.fromhex("0c06" + "00" * 13 + "01"))  # scale 29: no .NET decimal, no Service Bus writing
@example(bytes.fromhex("0c42" + "00" * 13 + "01"))  # scale -1 (exponent 6177)
@example(bytes.fromhex("8c3f" + "00" * 13 + "01"))  # the coefficient's 113th bit set
@example(bytes.fromhex("0c3e0001" + "00" * 11 + "01"))  # above 96 bits
@example(bytes.fromhex("0c3e0100" + "00" * 11 + "01"))
@example(bytes.fromhex("0c08" + "00" * 13 + "01"))  # 1E-28, as Service Bus writes it
def test_bytes_are_read_as_service_bus_wrote_them_exactly_when_it_could_have(raw: bytes) -> None:
    value = Decimal128(raw)
    dotnet = _dotnet_reads(raw)
    written = dotnet is not None and decimals.servicebus_decimal128(Decimal128.from_decimal(_number(*dotnet))) == raw
    assert decimals.in_servicebus_layout(raw) is written
    read = decimals.read_decimal(value)
    event(f"written by Service Bus: {written}")
    if written:
        assert dotnet is not None and read.as_tuple() == _number(*dotnet).as_tuple()
    else:  # the standard reading (a NaN compared by its text)
        assert str(read) == str(value.to_decimal())


@pytest.mark.parametrize("kind", [Decimal32, Decimal64])
def test_decimal32_and_decimal64_are_read_as_the_standard_says(kind: type) -> None:
    value = kind.from_decimal("-1.25")
    assert decimals.read_decimal(value).as_tuple() == Decimal("-1.25").as_tuple()
