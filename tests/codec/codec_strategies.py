"""Hypothesis strategies for AMQP values and a type-exact comparison helper.

Shared by the codec tests (imported as a sibling module; pytest puts this
directory on sys.path because tests/ has no __init__.py).
"""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import strategies as st

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
    registered_composites,
)

I64 = (-(2**63), 2**63 - 1)


def _sized_int(lo: int, hi: int, small: tuple[int, int]) -> st.SearchStrategy[int]:
    # Mostly values around the width boundaries of the compact encodings.
    return st.one_of(st.integers(*small), st.integers(lo, hi), st.sampled_from([lo, hi]))


_non_surrogate = st.characters(exclude_categories=("Cs",))
_text = st.one_of(
    st.text(alphabet=_non_surrogate, max_size=12),
    st.text(alphabet=_non_surrogate, min_size=90, max_size=140),  # often > 255 UTF-8 bytes
)
_ascii = st.characters(max_codepoint=127)

PRIMITIVES: dict[AMQPType, st.SearchStrategy[Any]] = {
    AMQPType.NULL: st.none(),
    AMQPType.BOOLEAN: st.booleans(),
    AMQPType.UBYTE: st.integers(0, 255).map(UByte),
    AMQPType.USHORT: _sized_int(0, 0xFFFF, (0, 300)).map(UShort),
    AMQPType.UINT: _sized_int(0, 0xFFFFFFFF, (0, 300)).map(UInt),
    AMQPType.ULONG: _sized_int(0, 2**64 - 1, (0, 300)).map(ULong),
    AMQPType.BYTE: st.integers(-128, 127).map(Byte),
    AMQPType.SHORT: _sized_int(-0x8000, 0x7FFF, (-200, 200)).map(Short),
    AMQPType.INT: _sized_int(-(2**31), 2**31 - 1, (-200, 200)).map(Int),
    AMQPType.LONG: _sized_int(*I64, (-200, 200)),
    AMQPType.FLOAT: st.floats(width=32, allow_nan=False).map(Float),
    AMQPType.DOUBLE: st.floats(allow_nan=False),
    AMQPType.DECIMAL32: st.binary(min_size=4, max_size=4).map(Decimal32),
    AMQPType.DECIMAL64: st.binary(min_size=8, max_size=8).map(Decimal64),
    AMQPType.DECIMAL128: st.binary(min_size=16, max_size=16).map(Decimal128),
    AMQPType.CHAR: _non_surrogate.map(Char),
    AMQPType.TIMESTAMP: _sized_int(*I64, (-200, 2**41)).map(Timestamp),
    AMQPType.UUID: st.uuids(),
    AMQPType.BINARY: st.one_of(st.binary(max_size=12), st.binary(min_size=250, max_size=300)),
    AMQPType.STRING: _text,
    AMQPType.SYMBOL: st.one_of(
        st.text(alphabet=_ascii, max_size=12), st.text(alphabet=_ascii, min_size=250, max_size=300)
    ).map(Symbol),
}

primitives = st.one_of(*PRIMITIVES.values())


def _unregistered_code(code: int) -> bool:
    return code not in registered_composites()


def _unregistered_symbol(sym: str) -> bool:
    return sym not in registered_composites().values()


# Descriptors that no composite factory claims (other modules may register some).
descriptors = st.one_of(
    st.integers(0, 255).filter(_unregistered_code).map(ULong),
    st.integers(256, 2**64 - 1).filter(_unregistered_code).map(ULong),
    st.text(alphabet=_ascii, min_size=1, max_size=20)
    .map(lambda s: "test:" + s)
    .filter(_unregistered_symbol)
    .map(Symbol),
)


@st.composite
def primitive_arrays(draw: st.DrawFn, described: bool | None = None) -> Array:
    element_type = draw(st.sampled_from(list(PRIMITIVES)))
    items = draw(st.lists(PRIMITIVES[element_type], max_size=6))
    if described is None:
        described = draw(st.booleans())
    descriptor = draw(descriptors) if described else None
    return Array(items, element_type, descriptor)


def make_values(keys: st.SearchStrategy[Any] = primitives) -> st.SearchStrategy[Any]:
    """Arbitrary nested AMQP values; ``keys`` generates the map keys."""

    def compound(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            st.lists(children, max_size=5),
            st.dictionaries(keys, children, max_size=5),
            primitive_arrays(),
            st.lists(st.lists(children, max_size=3), max_size=3).map(lambda v: Array(v, AMQPType.LIST)),
            st.lists(st.dictionaries(keys, children, max_size=3), max_size=3).map(lambda v: Array(v, AMQPType.MAP)),
            st.lists(primitive_arrays(described=False), max_size=3).map(lambda v: Array(v, AMQPType.ARRAY)),
            st.builds(Described, descriptors, children),
        )

    return st.recursive(primitives, compound, max_leaves=16)


values = make_values()


def assert_same(a: Any, b: Any, path: str = "value") -> None:
    """Assert ``a`` and ``b`` are equal with the same Python types, recursively."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__} ({a!r} vs {b!r})"
    if isinstance(a, float):
        assert struct.pack(">d", a) == struct.pack(">d", b), f"{path}: {a!r} != {b!r}"
    elif isinstance(a, Array):
        assert a.element_type == b.element_type, f"{path}: element types {a.element_type} != {b.element_type}"
        assert_same(a.descriptor, b.descriptor, path + ".descriptor")
        assert len(a) == len(b), f"{path}: lengths {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, list):
        assert len(a) == len(b), f"{path}: lengths {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert len(a) == len(b), f"{path}: sizes {len(a)} != {len(b)}"
        for i, ((ka, va), (kb, vb)) in enumerate(zip(a.items(), b.items(), strict=True)):
            assert_same(ka, kb, f"{path}.key{i}")
            assert_same(va, vb, f"{path}[{ka!r}]")
    elif isinstance(a, Described):
        assert_same(a.descriptor, b.descriptor, path + ".descriptor")
        assert_same(a.value, b.value, path + ".value")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"
