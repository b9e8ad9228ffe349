"""Maps read by a learned layout agree with the generic map reader.

:class:`MapLayouts` learns a map's layout from the generic reader's answer and reads
later maps with the same head from it. Property: for a run of maps of one shape (new
values each time, sometimes a byte changed, inserted or cut, or a key repeated), every
read gives the same value, end offset and exact types, or the same ``DecodeError``, as
the generic reader; and maps of the shapes a layout reads are read from the layout.
"""

from __future__ import annotations

import struct
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqplink.codec import layouts as layouts_module
from amqplink.codec.decode import DEFAULT_LIMITS, value_decoders
from amqplink.codec.errors import DecodeError
from amqplink.codec.layouts import LAYOUTS_MAX, MapLayouts
from amqplink.codec.types import Symbol, Timestamp, ULong
from tests import profiles

_TABLE = value_decoders()


def _generic(buf: bytes) -> Any:
    return _TABLE[buf[0]](buf, 1, 1, DEFAULT_LIMITS._template.copy())


def _typed(value: Any) -> Any:
    if isinstance(value, dict):
        return [(_typed(k), _typed(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


def _outcome(read: Any, buf: bytes) -> tuple[str, Any]:
    try:
        value, end = read(buf)
    except DecodeError as exc:
        return "error", str(exc)
    return "ok", (_typed(value), end)


def _check(layouts: MapLayouts, buf: bytes) -> None:
    assert _outcome(lambda b: layouts.read(b, 0), buf) == _outcome(_generic, buf)


# -- encodings, written byte by byte so that every constructor can be chosen ----------------
def _s8(constructor: int, raw: bytes) -> bytes:
    return bytes((constructor, len(raw))) + raw


def _fixed(constructor: int, code: str) -> st.SearchStrategy[bytes]:
    size = struct.calcsize(">" + code)
    return st.binary(min_size=size, max_size=size).map(lambda raw: bytes((constructor,)) + raw)


# Value kinds, by constructor: the ones a layout reads, then some it leaves to the generic reader.
VALUE_KINDS: dict[str, st.SearchStrategy[bytes]] = {
    "long": _fixed(0x81, "q"),
    "timestamp": _fixed(0x83, "q"),
    "ulong": _fixed(0x80, "Q"),
    "uint": _fixed(0x70, "I"),
    "int": _fixed(0x71, "i"),
    "ushort": _fixed(0x60, "H"),
    "short": _fixed(0x61, "h"),
    "one-byte": st.tuples(st.sampled_from([0x50, 0x51, 0x52, 0x53, 0x54, 0x55]), st.integers(0, 255)).map(bytes),
    "constant": st.sampled_from([b"\x40", b"\x41", b"\x42", b"\x43", b"\x44"]),
    "str8": st.text(max_size=6).map(lambda t: _s8(0xA1, t.encode())),
    "str8-bytes": st.binary(max_size=6).map(lambda raw: _s8(0xA1, raw)),  # not always UTF-8
    "vbin8": st.binary(max_size=6).map(lambda raw: _s8(0xA0, raw)),
    "sym8": st.sampled_from([b"a", b"bc", b"\xff"]).map(lambda raw: _s8(0xA3, raw)),
    "boolean": st.integers(0, 2).map(lambda b: bytes((0x56, b))),
    "double": _fixed(0x82, "d"),
    "list0": st.just(b"\x45"),
    "list8": st.just(b"\xc0\x02\x01\x40"),
}
KEYS = st.one_of(
    st.sampled_from(["x-opt-sequence-number", "x-opt-enqueued-time", "x-opt-locked-until", "k"]).map(
        lambda name: _s8(0xA3, name.encode())
    ),
    st.text(max_size=4).map(lambda t: _s8(0xA1, t.encode())),
    st.integers(0, 255).map(lambda n: bytes((0x53, n))),
    _fixed(0x80, "Q"),
    _fixed(0x70, "I"),
    st.just(b"\x40"),
    st.just(b"\xc0\x01\x00"),  # an (empty) list: unhashable
)


def _map(pairs: list[tuple[bytes, bytes]], wide: bool) -> bytes:
    body = b"".join(k + v for k, v in pairs)
    count = 2 * len(pairs)
    if wide or len(body) + 1 > 255:
        return b"\xd1" + struct.pack(">II", len(body) + 4, count) + body
    return bytes((0xC1, len(body) + 1, count)) + body


@st.composite
def map_runs(draw: Any) -> list[bytes]:
    """Maps of one shape: the same keys (a key now and then repeated) and value kinds, new values."""
    kinds = draw(st.lists(st.sampled_from(sorted(VALUE_KINDS)), max_size=5))
    keys = draw(st.lists(KEYS, min_size=len(kinds), max_size=len(kinds)))
    wide = draw(st.booleans())
    runs = []
    for _ in range(draw(st.integers(1, 4))):
        pairs = [(k, draw(VALUE_KINDS[kind])) for k, kind in zip(keys, kinds, strict=True)]
        if pairs and draw(st.integers(0, 9)) == 0:  # a key repeated
            at = draw(st.integers(0, len(pairs) - 1))
            pairs[at] = (pairs[0][0], pairs[at][1])
        buf = bytearray(_map(pairs, wide) + draw(st.binary(max_size=3)))  # what follows the map
        mutation = draw(st.sampled_from(["none", "none", "none", "truncate", "set", "insert", "delete"]))
        at = draw(st.integers(0, len(buf) - 1))
        if mutation == "truncate":
            del buf[max(at, 1) :]
        elif mutation == "set":
            buf[at] = draw(st.integers(0, 255))
        elif mutation == "insert":
            buf.insert(max(at, 1), draw(st.integers(0, 255)))
        elif mutation == "delete" and at:
            del buf[at]
        runs.append(bytes(buf))
    return runs


@settings(profiles.FUZZ, deadline=timedelta(milliseconds=500), suppress_health_check=[HealthCheck.too_slow])
@given(map_runs())
def test_layout_reads_agree_with_the_generic_reader(run: list[bytes]) -> None:
    layouts = MapLayouts()
    for buf in run:
        _check(layouts, buf)


# -- the Service Bus stamps: the layout is learned once and then read from ---------------------
def _stamps(sequence: int, enqueued: int, locked: int, extra: bytes = b"") -> bytes:
    pairs = [
        (_s8(0xA3, b"x-opt-sequence-number"), b"\x81" + struct.pack(">q", sequence)),
        (_s8(0xA3, b"x-opt-enqueued-time"), b"\x83" + struct.pack(">q", enqueued)),
        (_s8(0xA3, b"x-opt-enqueue-sequence-number"), b"\x81" + struct.pack(">q", sequence)),
        (_s8(0xA3, b"x-opt-locked-until"), b"\x83" + struct.pack(">q", locked)),
    ]
    if extra:
        pairs.append((_s8(0xA3, b"x-opt-partition-key"), extra))
    return _map(pairs, wide=False)


@pytest.mark.parametrize("extra", [b"", _s8(0xA1, b"pk-1"), b"\x40", b"\x52\x07", _s8(0xA0, b"\x00\xff")])
def test_the_stamps_are_read_from_their_layout(extra: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    layouts = MapLayouts()
    first = _stamps(1, 1_700_000_000_000, 1_700_000_030_000, extra)
    assert layouts.read(first, 0) == _generic(first)  # read by the generic reader, and learned
    later = _stamps(2**40, -5, 2**62, extra)
    expected = (_typed(_generic(later)[0]), len(later))

    def refuse(buf: Any, pos: int, depth: int, ctx: Any) -> Any:
        raise AssertionError("the generic reader was asked")

    monkeypatch.setattr(layouts_module, "_TABLE", [refuse] * 256)
    value, end = layouts.read(later + b"\x00\x53\x73", 0)  # what follows the map is not read
    assert (_typed(value), end) == expected


def _pair_map(*pairs: tuple[bytes, bytes]) -> bytes:
    return _map([(_s8(0xA3, k), v) for k, v in pairs], wide=False)


@pytest.mark.parametrize(
    ("learned", "later"),
    [
        (_stamps(1, 1, 1), _stamps(2, 3, 4)[:-1]),  # truncated: runs past the buffer
        (_pair_map((b"a", b"\x40"), (b"b", b"\x40")), _pair_map((b"a", b"\x40"), (b"a", b"\x40"))),  # duplicate key
        (_pair_map((b"a", b"\x40"), (b"b", b"\x40")), _pair_map((b"a", b"\x40"), (b"c", b"\x40"))),  # another key
        (_pair_map((b"a", b"\x52\x01")), _pair_map((b"a", b"\x50\x01"))),  # another constructor
        (_pair_map((b"a", b"\xa1\x02ok")), _pair_map((b"a", b"\xa1\x02\xff\xfe"))),  # not UTF-8
        (_pair_map((b"a", b"\xa1\x02ok")), _pair_map((b"a", b"\xa3\x02ok"))),  # a symbol, not a string
        (_pair_map((b"a", b"\x40")), b"\xc1\x04\x03\xa3\x01a\x40"),  # an odd count
    ],
)
def test_maps_unlike_their_layout_are_left_to_the_generic_reader(learned: bytes, later: bytes) -> None:
    layouts = MapLayouts()
    layouts.read(learned, 0)
    assert layouts._layouts[learned[:3]] is not None
    _check(layouts, later)


def test_a_map_of_other_values_is_not_learned_and_the_cache_is_bounded() -> None:
    layouts = MapLayouts()
    double = _pair_map((b"k", b"\x82" + struct.pack(">d", 1.5)))
    assert layouts.read(double, 0) == ({"k": 1.5}, len(double))
    assert layouts._layouts == {double[:3]: None}
    for n in range(LAYOUTS_MAX + 5):
        layouts.read(_map([(_s8(0xA3, b"k" * (n + 1)), b"\x40")], wide=True), 0)
    assert len(layouts._layouts) == LAYOUTS_MAX


def test_a_map_maker_makes_each_kind_of_value_and_binds_the_keys() -> None:
    """The maker is compiled from field indices only: keys from the wire (any text) are names."""
    one_byte = layouts_module._ONE_BYTE[0x53]  # smallulong
    keys = ['"}; raise SystemExit; {"', Symbol("x-opt-enqueued-time"), ULong(7), None, "k\n"]
    entries = (
        (keys[0], 1, None, None),
        (keys[1], 3, layouts_module._WRAP, Timestamp),
        (keys[2], 5, layouts_module._BYTE, one_byte),
        (keys[3], 7, layouts_module._TEXT, None),
        (keys[4], 9, layouts_module._CONST, True),
    )
    made = layouts_module.map_maker(entries)((b"", -5, b"", 1_700_000_000_000, b"", 9, b"", "é".encode(), b"", b""))
    assert _typed(made) == _typed(
        {keys[0]: -5, keys[1]: Timestamp(1_700_000_000_000), keys[2]: one_byte[9], keys[3]: "é", keys[4]: True}
    )
    assert type(made[keys[1]]) is Timestamp and list(made) == keys
    with pytest.raises(UnicodeDecodeError):  # the caller leaves such a map to the generic reader
        layouts_module.map_maker(entries[3:4])((b"", b"", b"", b"", b"", b"", b"", b"\xff"))
    assert layouts_module.map_maker(())(()) == {}
