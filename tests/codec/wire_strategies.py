"""Hypothesis strategies for AMQP values as bytes, in every encoding a peer may choose.

:mod:`codec_strategies` draws Python values, which amqplink's encoder writes in the smallest
encoding; a peer may write any legal one (a uint in four bytes, a short string as str32, a
list as list32, a boolean as ``56 01``, a descriptor as a full-width ulong or a sym32...).
These draw the bytes themselves: every primitive in each of its encodings, lists, maps and
arrays (of every element constructor, nested, described) and described values, for the
tests that feed what other clients send (the codec's round trip of decoded values, the
broker's accept path). Shared by the codec and broker tests (imported as a sibling module
from tests/codec, or as ``tests.codec.wire_strategies``).

What is left out is what amqplink reads but cannot write back as it came, said where it
is decided: a descriptor that is a string (reserved, 1.2: read as ``str``, written as a
symbol) and map keys Python takes as equal (long 1 and uint 1: refused by the decoder).
"""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import strategies as st

from amqplink.codec import decode_all

__all__ = ["ARRAY_ELEMENTS", "SCALARS", "descriptor_bytes", "scalar_bytes", "typed", "wire_maps", "wire_values"]


def _u32(n: int) -> bytes:
    return struct.pack(">I", n)


def _fixed(code: int, size: int) -> st.SearchStrategy[bytes]:
    return st.binary(min_size=size, max_size=size).map(lambda raw: bytes((code,)) + raw)


_code_points = st.integers(0, 0x10FFFF).filter(lambda c: not 0xD800 <= c <= 0xDFFF)
_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
_ascii = st.text(st.characters(max_codepoint=127), max_size=8)
_small_floats = st.floats(width=32, allow_nan=False).map(lambda f: b"\x72" + struct.pack(">f", f))


def _sized(code: int, raws: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    wide = code & 0x10  # 0xb0, 0xb1, 0xb3: a 32-bit size
    return raws.filter(lambda raw: wide or len(raw) < 256).map(
        lambda raw: bytes((code,)) + (_u32(len(raw)) if wide else bytes((len(raw),))) + raw
    )


SCALARS: dict[int, st.SearchStrategy[bytes]] = {
    0x40: st.just(b"\x40"), 0x41: st.just(b"\x41"), 0x42: st.just(b"\x42"),
    0x56: st.sampled_from([b"\x56\x00", b"\x56\x01"]), 0x43: st.just(b"\x43"), 0x44: st.just(b"\x44"),
    0x50: _fixed(0x50, 1), 0x60: _fixed(0x60, 2), 0x70: _fixed(0x70, 4), 0x52: _fixed(0x52, 1),
    0x80: _fixed(0x80, 8), 0x53: _fixed(0x53, 1), 0x51: _fixed(0x51, 1), 0x61: _fixed(0x61, 2),
    0x71: _fixed(0x71, 4), 0x54: _fixed(0x54, 1), 0x81: _fixed(0x81, 8), 0x55: _fixed(0x55, 1),
    0x72: st.one_of(_fixed(0x72, 4), _small_floats),  # any bits: NaNs of every payload, infinities
    0x82: _fixed(0x82, 8),
    0x74: _fixed(0x74, 4), 0x84: _fixed(0x84, 8), 0x94: _fixed(0x94, 16),  # decimals: any bits, non-canonical too
    0x73: _code_points.map(lambda c: b"\x73" + _u32(c)), 0x83: _fixed(0x83, 8), 0x98: _fixed(0x98, 16),
    0xA0: _sized(0xA0, st.binary(max_size=12)), 0xB0: _sized(0xB0, st.binary(max_size=12)),
    0xA1: _sized(0xA1, _text.map(str.encode)), 0xB1: _sized(0xB1, _text.map(str.encode)),
    0xA3: _sized(0xA3, _ascii.map(str.encode)), 0xB3: _sized(0xB3, _ascii.map(str.encode)),
}  # fmt: skip
"""Each scalar constructor and a value behind it (all of one value's bytes)."""

scalar_bytes = st.one_of(*SCALARS.values())
"""One scalar (every primitive but list, map and array), in any of its encodings."""

descriptor_bytes = st.one_of(
    st.integers(0, 255).map(lambda code: bytes((0x53, code))),  # the usual: a smallulong code
    st.integers(0, 2**64 - 1).map(lambda code: b"\x80" + struct.pack(">Q", code)),
    _sized(0xA3, _ascii.filter(bool).map(str.encode)), _sized(0xB3, _ascii.filter(bool).map(str.encode)),
    _fixed(0x81, 8), _fixed(0x55, 1),  # a long (reserved, 1.2, but read and written back)
    st.sampled_from([bytes.fromhex("0024"), bytes.fromhex("0070"), bytes.fromhex("0077"), bytes.fromhex("0031")])
    .map(lambda code: b"\x53" + code[1:]),  # protocol descriptors: accepted, header, amqp-value, declare
)  # fmt: skip
"""A descriptor: a ulong code (small or full width, the protocol's own among them), a symbol,
a long."""


def _key(raw: bytes) -> Any:
    """The key ``raw`` reads as in a message section (as data: an amqp-value's)."""
    value = decode_all(b"\x00\x53\x77" + raw).value
    return value if value == value else ("nan", raw)  # (a NaN equals no key: each is its own)


def _list(items: list[bytes], wide: bool) -> bytes:
    body = b"".join(items)
    if not items and not wide:
        return b"\x45"
    if wide or len(body) + 1 > 255 or len(items) > 255:
        return b"\xd0" + _u32(len(body) + 4) + _u32(len(items)) + body
    return b"\xc0" + bytes((len(body) + 1, len(items))) + body


def _map(pairs: list[tuple[bytes, bytes]], wide: bool) -> bytes:
    body = b"".join(k + v for k, v in pairs)
    count = 2 * len(pairs)
    if wide or len(body) + 1 > 255 or count > 255:
        return b"\xd1" + _u32(len(body) + 4) + _u32(count) + body
    return b"\xc1" + bytes((len(body) + 1, count)) + body


ARRAY_ELEMENTS: dict[int, st.SearchStrategy[bytes]] = {
    0x40: st.just(b""), 0x41: st.just(b""), 0x42: st.just(b""), 0x43: st.just(b""), 0x44: st.just(b""),
    0x45: st.just(b""), 0x56: st.sampled_from([b"\x00", b"\x01"]),
    0x50: st.binary(min_size=1, max_size=1), 0x60: st.binary(min_size=2, max_size=2),
    0x70: st.binary(min_size=4, max_size=4), 0x52: st.binary(min_size=1, max_size=1),
    0x80: st.binary(min_size=8, max_size=8), 0x53: st.binary(min_size=1, max_size=1),
    0x51: st.binary(min_size=1, max_size=1), 0x61: st.binary(min_size=2, max_size=2),
    0x71: st.binary(min_size=4, max_size=4), 0x54: st.binary(min_size=1, max_size=1),
    0x81: st.binary(min_size=8, max_size=8), 0x55: st.binary(min_size=1, max_size=1),
    0x72: st.binary(min_size=4, max_size=4), 0x82: st.binary(min_size=8, max_size=8),
    0x74: st.binary(min_size=4, max_size=4), 0x84: st.binary(min_size=8, max_size=8),
    0x94: st.binary(min_size=16, max_size=16), 0x73: _code_points.map(_u32),
    0x83: st.binary(min_size=8, max_size=8), 0x98: st.binary(min_size=16, max_size=16),
    0xA0: st.binary(max_size=6).map(lambda raw: bytes((len(raw),)) + raw),
    0xB0: st.binary(max_size=6).map(lambda raw: _u32(len(raw)) + raw),
    0xA1: _text.map(str.encode).filter(lambda raw: len(raw) < 256).map(lambda raw: bytes((len(raw),)) + raw),
    0xB1: _text.map(lambda text: _u32(len(text.encode())) + text.encode()),
    0xA3: _ascii.map(lambda text: bytes((len(text),)) + text.encode()),
    0xB3: _ascii.map(lambda text: _u32(len(text)) + text.encode()),
}  # fmt: skip
"""Each element constructor of a primitive array and what one element holds after it."""


@st.composite
def _array(draw: st.DrawFn, children: st.SearchStrategy[bytes], wide: bool) -> bytes:
    """An array: one element constructor (a primitive's, a list's, a map's, an array's; with a
    descriptor or not), then elements without constructors."""
    kind = draw(st.sampled_from([*ARRAY_ELEMENTS, 0xC0, 0xD0, 0xC1, 0xD1, 0xE0, 0xF0]))
    count = draw(st.integers(0, 4))
    if kind in ARRAY_ELEMENTS:
        elements = [draw(ARRAY_ELEMENTS[kind]) for _ in range(count)]
    else:  # compound elements: each one's size and count in the element constructor's width
        elements = []
        for _ in range(count):
            if kind in (0xC0, 0xD0):
                one = _list(draw(st.lists(children, max_size=3)), kind == 0xD0)
            elif kind in (0xC1, 0xD1):
                one = _map(draw(_pairs(children)), kind == 0xD1)
            else:
                one = draw(_array(children, kind == 0xF0))
            if one[0] != kind:  # _list/_map chose another width: size it as the constructor says
                continue
            elements.append(one[1:])
    constructor = bytes((kind,))
    if draw(st.booleans()) and kind not in (0xE0, 0xF0):
        constructor = b"\x00" + draw(descriptor_bytes) + constructor
    body = constructor + b"".join(elements)
    if wide or len(body) + 1 > 255 or len(elements) > 255:
        return b"\xf0" + _u32(len(body) + 4) + _u32(len(elements)) + body
    return b"\xe0" + bytes((len(body) + 1, len(elements))) + body


def _pairs(children: st.SearchStrategy[bytes]) -> st.SearchStrategy[list[tuple[bytes, bytes]]]:
    keys = st.one_of(scalar_bytes, st.tuples(descriptor_bytes, scalar_bytes).map(lambda d: b"\x00" + d[0] + d[1]))
    return st.lists(st.tuples(keys, children), max_size=3, unique_by=lambda pair: _key(pair[0]))


def _compound(children: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.tuples(st.lists(children, max_size=4), st.booleans()).map(lambda t: _list(*t)),
        st.tuples(_pairs(children), st.booleans()).map(lambda t: _map(*t)),
        st.booleans().flatmap(lambda wide: _array(children, wide)),
        st.tuples(descriptor_bytes, children).map(lambda d: b"\x00" + d[0] + d[1]),
    )


_WIRE_VALUES = st.recursive(scalar_bytes, _compound, max_leaves=12)
wire_values = st.deferred(lambda: _WIRE_VALUES)
"""One AMQP value, as bytes, in any encoding: scalars, lists, maps, arrays, described values
(deferred: its repr is short)."""


def wire_maps(
    keys: st.SearchStrategy[bytes], values: st.SearchStrategy[bytes] = wire_values
) -> st.SearchStrategy[bytes]:
    """A map (map8 or map32) of distinct ``keys`` to ``values``, as bytes."""
    pairs = st.lists(st.tuples(keys, values), max_size=4, unique_by=lambda pair: _key(pair[0]))
    return st.tuples(pairs, st.booleans()).map(lambda t: _map(*t))


def typed(*codes: int) -> st.SearchStrategy[bytes]:
    """A scalar behind one of the constructors ``codes``."""
    return st.one_of(*(SCALARS[code] for code in codes))
