"""The straight-line header and data section readers agree with the generic decoder.

``hot_decode`` registers them with the codec (``register_fast_composite``); for any
bytes and any limits, decoding with them gives exactly what decoding without them
gives: the same value and offset, or a ``DecodeError`` (they decline whatever they
do not read, and the generic path reports it).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.codec.decode import DecodeLimits, decode, register_fast_composite
from amqplink.codec.errors import DecodeError
from amqplink.codec.types import UByte, UInt
from amqplink.protocol import hot_decode
from amqplink.protocol.definitions import Data, Header

READERS = {Header.DESCRIPTOR_CODE: hot_decode._read_header, Data.DESCRIPTOR_CODE: hot_decode._read_data}

limits = st.sampled_from(
    [DecodeLimits(), DecodeLimits(max_depth=1), DecodeLimits(max_size=8), DecodeLimits(max_collection=2)]
)
headers = st.builds(
    Header,
    durable=st.one_of(st.none(), st.booleans()),
    priority=st.one_of(st.none(), st.integers(0, 255).map(UByte)),
    ttl=st.one_of(st.none(), st.integers(0, 300).map(UInt), st.integers(0, 2**32 - 1).map(UInt)),
    first_acquirer=st.one_of(st.none(), st.booleans()),
    delivery_count=st.one_of(st.none(), st.integers(0, 300).map(UInt), st.integers(0, 2**32 - 1).map(UInt)),
)
datas = st.builds(Data, st.one_of(st.binary(max_size=300), st.binary(min_size=250, max_size=600)))


@contextmanager
def _generic_only() -> Iterator[None]:
    for code in READERS:
        register_fast_composite(code, None)
    try:
        yield
    finally:
        for code, reader in READERS.items():
            register_fast_composite(code, reader)


def _outcome(data: bytes, limit: DecodeLimits) -> tuple[Any, ...]:
    try:
        value, end = decode(data, 0, limit)
    except DecodeError as exc:
        return ("error", str(exc))
    return ("ok", type(value), value, end)


def _agree(data: bytes, limit: DecodeLimits) -> tuple[Any, ...]:
    fast = _outcome(data, limit)
    with _generic_only():
        generic = _outcome(data, limit)
    assert fast == generic
    return fast


def _encoded(section: Any, tail: bytes = b"") -> bytes:
    out = bytearray()
    section._amqp_encode(out)
    return bytes(out) + tail


@settings(max_examples=300)
@given(section=st.one_of(headers, datas), tail=st.binary(max_size=4), limit=limits)
def test_encoded_sections_decode_alike(section: Any, tail: bytes, limit: DecodeLimits) -> None:
    outcome = _agree(_encoded(section, tail), limit)
    if limit == DecodeLimits():
        assert outcome[0] == "ok" and outcome[2] == section


@settings(max_examples=500)
@given(section=st.one_of(headers, datas), data=st.data(), limit=limits)
def test_mutated_sections_decode_alike(section: Any, data: st.DataObject, limit: DecodeLimits) -> None:
    raw = bytearray(_encoded(section))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    _agree(bytes(raw[:cut]), limit)
    _agree(bytes(raw), limit)


def test_the_readers_take_the_usual_shapes() -> None:
    header = _encoded(Header(durable=True, priority=UByte(4), delivery_count=UInt(2)))
    assert hot_decode._read_header(header, 3, 1, DecodeLimits()._template) is not None
    body = _encoded(Data(b"x" * 300))
    assert hot_decode._read_data(body, 3, 1, DecodeLimits()._template) is not None
