"""Property tests: decode(encode(v)) gives back v, with the same types."""

from __future__ import annotations

from typing import Any

from codec_strategies import assert_same, primitive_arrays, values
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.codec import Array, decode, decode_all, decode_sequence, encode, encode_value


@settings(deadline=None)
@given(values)
def test_roundtrip_is_type_exact(value: Any) -> None:
    data = encode(value)
    assert_same(decode_all(data), value)
    # Deterministic: the same value always encodes to the same bytes.
    assert encode(value) == data
    # Encoding into a non-empty buffer appends exactly the same bytes.
    out = bytearray(b"prefix")
    encode_value(out, value)
    assert bytes(out) == b"prefix" + data


@settings(deadline=None)
@given(st.lists(values, max_size=4), st.binary(max_size=3))
def test_sequence_and_offsets(items: list[Any], prefix: bytes) -> None:
    chunks = [encode(v) for v in items]
    data = b"".join(chunks)
    decoded = decode_sequence(data)
    assert len(decoded) == len(items)
    for got, want in zip(decoded, items, strict=True):
        assert_same(got, want)
    # decode() at an offset, over a memoryview of a bytearray, reports where each value ends.
    buf = memoryview(bytearray(prefix + data))
    pos = len(prefix)
    for chunk, want in zip(chunks, items, strict=True):
        got, end = decode(buf, pos)
        assert_same(got, want)
        assert end == pos + len(chunk)
        pos = end
    assert pos == len(buf)


@settings(deadline=None)
@given(primitive_arrays())
def test_array_roundtrip_keeps_element_type_and_descriptor(array: Array) -> None:
    back = decode_all(encode(array))
    assert isinstance(back, Array)
    assert back.element_type is array.element_type
    assert back.descriptor == array.descriptor
    assert_same(back, array)
