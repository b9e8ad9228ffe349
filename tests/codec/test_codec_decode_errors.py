"""The decoder rejects malformed and hostile input with DecodeError (and only DecodeError)."""

from __future__ import annotations

import contextlib
import time
import tracemalloc
from datetime import timedelta
from typing import Any

import pytest
from codec_strategies import values
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqplink.codec import (
    AMQPType,
    Array,
    DecodeError,
    DecodeLimits,
    decode,
    decode_all,
    decode_sequence,
    encode,
)
from tests import profiles

H = bytes.fromhex

# (input, substring of the reason, offset reported)
MALFORMED: list[tuple[bytes, str, int]] = [
    (b"", "truncated", 0),
    (H("01"), "invalid constructor byte 0x01", 0),
    (H("ff"), "invalid constructor byte 0xff", 0),
    (H("c0020102"), "invalid constructor byte 0x02", 3),
    (H("5602"), "invalid boolean", 1),
    (H("56"), "truncated", 1),
    (H("50"), "truncated", 1),
    (H("7000"), "truncated", 1),
    (H("8000000000000000"), "truncated", 1),
    (H("98") + bytes(15), "truncated", 1),
    (H("94") + bytes(3), "truncated", 1),
    (H("a105616263"), "truncated", 1),
    (H("a1"), "truncated", 1),
    (H("b0ffffffff") + bytes(10), "truncated", 1),
    (H("b1000000"), "truncated", 1),
    (H("a102c328"), "not valid UTF-8", 2),
    (H("a103eda080"), "not valid UTF-8", 2),  # UTF-8 encoded surrogate
    (H("b100000002c328"), "not valid UTF-8", 5),
    (H("a30180"), "not ASCII", 2),
    (H("b30000000261ff"), "not ASCII", 6),
    (H("730000d800"), "invalid char", 1),
    (H("7300110000"), "invalid char", 1),
    (H("d0ffffffff00000005"), "truncated", 1),
    (H("d000000008ffffffff40404040"), "declares 4294967295 elements", 0),
    (H("d000000002"), "truncated", 1),
    (H("d00000000300000000"), "too small for its count field", 1),
    (H("c00105"), "declares 5 elements", 0),
    (H("c00001"), "declares 1 elements", 0),
    (H("c003014040"), "size field disagrees", 0),
    (H("c0020240"), "declares 2 elements", 0),
    (H("c00301a105"), "truncated", 4),  # an element running past the end of the buffer
    (H("c00401a1026162"), "size field disagrees", 0),  # an element running past the list
    (H("c1020140"), "odd number", 0),
    (H("c103024540"), "unhashable map key", 3),
    (H("c10502c0010040"), "unhashable map key", 3),
    (H("c1050441404140"), "duplicate keys", 0),
    (H("c10302a301"), "truncated", 4),
    (H("d10000000600000003404040"), "odd number", 0),
    (H("e00100"), "no element constructor", 0),
    (H("e0020101"), "invalid array element constructor 0x01", 3),
    (H("e0020100"), "descriptor missing", 4),
    (H("e006010053010052"), "nested descriptors", 6),
    (H("e0020152"), "declares 1 elements but holds only 0", 0),
    (H("e003025201"), "declares 2 elements but holds only 1", 0),
    (H("f000000005ffffffff40"), "max_collection", 0),
    (H("f000000005ffffffff52"), "max_collection", 0),
    (H("f000000009000000017000"), "truncated", 1),
    (H("e003017000"), "truncated", 4),  # element running past the buffer
    (H("e00401520101"), "size field disagrees", 0),
    (H("00"), "truncated", 1),
    (H("0053"), "truncated", 2),
    (H("005301"), "truncated", 3),
    (H("00a305"), "truncated", 2),
    (H("00a30161"), "truncated", 4),
]


@pytest.mark.parametrize(("data", "reason", "offset"), MALFORMED, ids=[d.hex() or "empty" for d, _, _ in MALFORMED])
def test_malformed_input(data: bytes, reason: str, offset: int) -> None:
    with pytest.raises(DecodeError) as info:
        decode(data)
    assert reason in info.value.reason
    assert info.value.offset == offset
    # The same input read through a memoryview, at an offset, fails the same way.
    with pytest.raises(DecodeError) as info2:
        decode(memoryview(b"\x40" + data), 1)
    assert info2.value.reason == info.value.reason
    assert info2.value.offset == offset + 1


def test_decode_all_rejects_trailing_bytes() -> None:
    with pytest.raises(DecodeError, match="1 trailing bytes") as info:
        decode_all(b"\x40\x40")
    assert info.value.offset == 1


def test_bad_offsets() -> None:
    with pytest.raises(DecodeError, match="truncated"):
        decode(b"\x40", 1)
    with pytest.raises(DecodeError, match="negative"):
        decode(b"\x40", -1)


def test_decode_sequence_reports_failing_value_offset() -> None:
    assert decode_sequence(b"") == []
    assert decode_sequence(H("40415201")) == [None, True, 1]
    with pytest.raises(DecodeError) as info:
        decode_sequence(b"\x40\x41\x52")
    assert info.value.offset == 3


# ---------------------------------------------------------------------------
# Limits
# ---------------------------------------------------------------------------


def test_max_size() -> None:
    limits = DecodeLimits(max_size=3)
    assert decode_all(H("a103616263"), limits) == "abc"
    for data in [H("a10461626364"), H("a00461626364"), H("a30461626364"), H("b00000000461626364")]:
        with pytest.raises(DecodeError, match="max_size"):
            decode_all(data, limits)
    with pytest.raises(DecodeError, match="max_size"):
        decode_all(encode([None, None, None]), limits)  # list of 5 bytes


def test_max_collection() -> None:
    limits = DecodeLimits(max_collection=2)
    assert decode_all(encode([1, 2]), limits) == [1, 2]
    assert decode_all(encode({1: 2, 3: 4}), limits) == {1: 2, 3: 4}
    for value in ([1, 2, 3], {1: 2, 3: 4, 5: 6}, Array([1, 2, 3])):
        with pytest.raises(DecodeError, match="max_collection"):
            decode_all(encode(value), limits)


@pytest.mark.parametrize(
    ("data", "limits", "reason", "offset"),
    [
        # the 4th list down starts at offset 9: c00b01 c00801 c00501 [c0020140]
        (encode([[[[None]]]]), DecodeLimits(max_depth=3), "max_depth", 9),
        (H("4040") + encode({1: {2: {3: {4: None}}}}), DecodeLimits(max_depth=3), "max_depth", 17),
        # the inner list of three, after 0x40 and the outer list's header and first element
        (H("40") + encode([1, [1, 2, 3]]), DecodeLimits(max_collection=2), "max_collection", 6),
        (H("40") + encode([1, Array([1, 2, 3])]), DecodeLimits(max_collection=2), "max_collection", 6),
        (H("4040") + encode(["abcd"]), DecodeLimits(max_size=3), "max_size", 2),
        # a binary's offset is that of its size field, as for a truncated one
        (H("40") + encode(b"x" * 300), DecodeLimits(max_size=299), "max_size", 2),
    ],
    ids=["list-depth", "map-depth", "list-count", "array-count", "list-size", "binary-size"],
)
def test_limit_errors_name_the_offset_of_the_offending_value(
    data: bytes, limits: DecodeLimits, reason: str, offset: int
) -> None:
    start = len(data) - len(data.lstrip(b"\x40"))
    with pytest.raises(DecodeError, match=reason) as info:
        decode(data, start, limits)
    assert info.value.offset == offset
    assert f"at offset {offset}" in str(info.value)


def test_zero_width_array_elements_share_one_budget() -> None:
    # An array of nulls takes ~10 bytes however many elements it declares, so the
    # count of such elements is budgeted per decode call, not per array.
    def nulls(n: int) -> bytes:
        return H("f000000005") + n.to_bytes(4, "big") + H("40")

    assert len(decode_all(nulls(60000))) == 60000
    with pytest.raises(DecodeError, match="zero-width"):
        decode_sequence(nulls(60000) + nulls(60000))
    inner = [nulls(60000)] * 100
    body = b"".join(inner)
    with pytest.raises(DecodeError, match="zero-width"):
        decode_all(H("d0") + (len(body) + 4).to_bytes(4, "big") + (100).to_bytes(4, "big") + body)


def nested_list32(depth: int) -> bytes:
    """A valid list32 nested ``depth`` deep around an empty list0."""
    headers = []
    length = 1
    for _ in range(depth):
        headers.append(H("d0") + (length + 4).to_bytes(4, "big") + H("00000001"))
        length += 9
    return b"".join(reversed(headers)) + H("45")


def test_depth_limit() -> None:
    limits = DecodeLimits(max_depth=3)
    assert decode_all(encode([[[None]]]), limits) == [[[None]]]
    with pytest.raises(DecodeError, match="max_depth"):
        decode_all(encode([[[[None]]]]), limits)
    with pytest.raises(DecodeError, match="max_depth"):
        decode_all(encode({1: {2: {3: {4: None}}}}), limits)
    with pytest.raises(DecodeError, match="max_depth"):
        decode_all(encode(Array([Array([Array([Array([1])])])])), limits)
    assert decode_all(nested_list32(32)) is not None
    with pytest.raises(DecodeError, match="max_depth"):
        decode_all(nested_list32(33))


@pytest.mark.parametrize(
    "data",
    [
        nested_list32(10_000),
        H("c00101") * 10_000,
        H("00") * 10_000 + H("40"),
        H("c1020240") * 10_000,
        H("e00201e0") * 10_000,
    ],
    ids=["list32", "list8-bad-sizes", "described-chain", "map8", "array8"],
)
def test_deep_nesting_is_a_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_all(data)
    # Even with the depth limit lifted, Python's recursion limit surfaces as DecodeError.
    with pytest.raises(DecodeError):
        decode_all(data, DecodeLimits(max_depth=10**9))


HUGE_DECLARATIONS = [
    H("b0ffffffff") + bytes(10),  # 4 GiB binary
    H("b1ffffffff") + bytes(10),
    H("b3ffffffff") + bytes(10),
    H("d0ffffffffffffffff") + bytes(10),
    H("d00000000effffffff") + bytes(10),
    H("d10000000efffffffe") + bytes(10),
    H("f00000000effffffff40") + bytes(9),
    H("f00000000effffffff52") + bytes(9),
    H("f00000000effffffff00530145") + bytes(6),
    H("c00a01d0ffffffff0000000500"),
]


def test_huge_declared_sizes_fail_fast_without_allocating() -> None:
    tracemalloc.start()
    try:
        started = time.perf_counter()
        for data in HUGE_DECLARATIONS:
            with pytest.raises(DecodeError):
                decode(data)
            with pytest.raises(DecodeError):
                decode(memoryview(bytearray(data)))
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, f"peak allocation {peak} bytes"
    assert elapsed < 1.0


# ---------------------------------------------------------------------------
# Fuzzing: decode returns a value or raises DecodeError; nothing else, no hangs.
# ---------------------------------------------------------------------------


def decode_everything(data: bytes | bytearray | memoryview) -> None:
    try:
        _, end = decode(data)
        assert 0 < end <= len(data)
    except DecodeError as exc:
        assert isinstance(exc.offset, int)
    with contextlib.suppress(DecodeError):
        decode_all(data)
    with contextlib.suppress(DecodeError):
        decode_sequence(data)
    with contextlib.suppress(DecodeError):
        decode_all(data, DecodeLimits(max_depth=4, max_collection=8, max_size=16))


FUZZ = settings(
    profiles.FUZZ,
    deadline=timedelta(milliseconds=500),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_constructors = st.sampled_from(
    [0x00, 0x40, 0x45, 0x53, 0x56, 0x70, 0x73, 0xA0, 0xA1, 0xA3, 0xB0, 0xC0, 0xC1, 0xD0, 0xD1, 0xE0, 0xF0]
)


@pytest.mark.fuzz
@FUZZ
@given(st.one_of(st.binary(max_size=64), st.builds(lambda c, rest: bytes([c]) + rest, _constructors, st.binary())))
def test_fuzz_random_bytes(data: bytes) -> None:
    decode_everything(data)
    decode_everything(memoryview(bytearray(data)))


HUGE = [H("ffffffff"), H("7fffffff"), H("ff"), H("80000000"), H("00000000"), H("0000ffff")]


@st.composite
def mutated_encodings(draw: st.DrawFn) -> bytes:
    value = draw(values)
    data = bytearray(encode(value))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip", "set", "truncate", "append", "splice", "delete"]))
        i = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and data:
            data[i] = draw(st.integers(0, 255))
        elif op == "truncate":
            del data[i:]
        elif op == "append":
            data += draw(st.binary(min_size=1, max_size=8))
        elif op == "splice":
            data[i : i + draw(st.integers(0, 4))] = draw(st.sampled_from(HUGE))
        elif op == "delete" and data:
            del data[i]
    return bytes(data)


@pytest.mark.fuzz
@FUZZ
@given(mutated_encodings())
def test_fuzz_mutated_encodings(data: bytes) -> None:
    decode_everything(data)


@settings(deadline=timedelta(milliseconds=500))
@given(values, st.integers(0, 1000))
def test_every_truncation_of_a_valid_encoding_is_rejected(value: Any, cut: int) -> None:
    data = encode(value)
    cut %= len(data)
    with pytest.raises(DecodeError):
        decode_all(data[:cut])


def test_array_of_described_and_arrays_of_arrays_decode() -> None:
    described = Array([[], [1]], AMQPType.LIST, descriptor=1)
    got = decode_all(encode(described))
    assert isinstance(got, Array)
    assert got.descriptor == 1 and got.element_type is AMQPType.LIST and got == [[], [1]]
    nested = Array([Array([1, 2]), Array([], AMQPType.STRING)], AMQPType.ARRAY)
    got = decode_all(encode(nested))
    assert got == nested
    assert [a.element_type for a in got] == [AMQPType.LONG, AMQPType.STRING]
