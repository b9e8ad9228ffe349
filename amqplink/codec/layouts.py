"""Maps read by the layout they had before: one precompiled ``struct`` and a skeleton compare.

A peer sends the same map again and again with new values and the same shape: Service
Bus stamps every message with ``x-opt-sequence-number`` (long), ``x-opt-enqueued-time``
(timestamp)... in the same order, so the map's bytes differ only inside its values.
:class:`MapLayouts` remembers such a map's *layout* once the generic decoder has read
it: the bytes that must recur (the map's constructor, size and count, each key, each
value's constructor, a string's length) and where its values lie. The next map with
the same head is unpacked by one ``struct.unpack_from`` whose ``s`` fields are the
skeleton and whose other fields are the values; if the skeleton is byte for byte the
learned one, the map is what the generic decoder would read, and its values are
converted as the generic decoder converts them.

The generic decoder stays the judge of errors: a map with no learned layout, one whose
skeleton differs, one running past the buffer, a string that is not UTF-8... is read by
:func:`~amqplink.codec.decode.value_decoders`'s reader, which decodes it or raises its
``DecodeError``. A layout is learned only from a map that reader accepted, and only for
values whose every byte pattern is valid once their constructor and width are (fixed-width
numbers, uuids, null, booleans, and str8/vbin8 of a given length, a string's UTF-8 checked on
each read), with keys that are whole in the skeleton, so two maps with one skeleton get
the same answer from both readers. Layouts are for ``DEFAULT_LIMITS``: the limits of a
map of such values (size, pairs, depth) are the learned map's, which passed them.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from .decode import _ONE_BYTE, section_context, value_decoders
from .types import Int, Short, Timestamp, UInt, ULong, UShort

__all__ = ["LAYOUTS_MAX", "Entry", "MapLayouts", "MapMaker", "StructBuilder", "map_entries", "map_maker"]

LAYOUTS_MAX = 64
"""Distinct map heads a :class:`MapLayouts` remembers; past this, new heads are read generically."""

_TABLE = value_decoders()
_CTX_TEMPLATE = section_context()
"""Every map read here is a message section's value: read in data mode (no descriptor
interpreted, as when the section is decoded whole)."""
_new_int = int.__new__

# How a value is made from its field, when not as unpacked (long, vbin8): WRAP, an int
# subclass of it; BYTE, the one-byte constructors' table; TEXT, UTF-8 decoded (checked);
# CONST, the learned value (immutable ones: null, true, false, uint0, ulong0), its field empty;
# UUID, a uuid of its 16 bytes (a Service Bus lock token, in every peek-locked delivery's annotations).
_WRAP, _BYTE, _TEXT, _CONST, _UUID = range(5)

# Constructor -> (struct code, kind or None, argument) for values with a fixed-width field.
_FIELDS: dict[int, tuple[str, int | None, Any]] = {
    0x81: ("q", None, None),  # long
    0x83: ("q", _WRAP, Timestamp),
    0x80: ("Q", _WRAP, ULong),
    0x70: ("I", _WRAP, UInt),
    0x71: ("i", _WRAP, Int),
    0x60: ("H", _WRAP, UShort),
    0x61: ("h", _WRAP, Short),
    0x98: ("16s", _UUID, None),
}
for _c in (0x50, 0x51, 0x52, 0x53, 0x54, 0x55):  # ubyte, byte, smalluint, smallulong, smallint, smalllong
    _FIELDS[_c] = ("B", _BYTE, _ONE_BYTE[_c])
for _c in (0x40, 0x41, 0x42, 0x43, 0x44):  # null, true, false, uint0, ulong0
    _FIELDS[_c] = ("0s", _CONST, None)
del _c
_VARIABLE8 = {0xA1: _TEXT, 0xA0: None}  # str8, vbin8: the length is skeleton, the bytes a field
_KEY_WIDTH = {0x40: 0, 0x43: 0, 0x44: 0, 0x52: 1, 0x53: 1, 0x70: 4, 0x80: 8}
"""Fixed-width key constructors (null, uint, ulong): the key's bytes are all skeleton."""


Entry = tuple[Any, int, int | None, Any]
"""A map entry of a layout: its key, its value's field index, how the value is made from the
field (None: as unpacked) and that kind's argument."""


class StructBuilder:
    """The struct of a layout being learned: the skeleton runs and the value fields of
    ``buf`` from ``start`` on, in turn (fields at even positions are skeleton)."""

    __slots__ = ("_buf", "_fmt", "_run", "_skeleton")

    def __init__(self, buf: bytes, start: int) -> None:
        self._buf = buf
        self._run = start
        self._fmt = [">"]
        self._skeleton: list[bytes] = []

    def field(self, at: int, code: str) -> int:
        """A value field of struct ``code`` at offset ``at`` (the bytes before it since the
        last field are skeleton); its index in the unpacked fields."""
        self._fmt.append(f"{at - self._run}s{code}")
        self._skeleton.append(self._buf[self._run : at])
        self._run = at + struct.calcsize(">" + code)
        return 2 * len(self._skeleton) - 1

    def finish(self, end: int) -> tuple[struct.Struct, tuple[bytes, ...]]:
        """The struct of ``buf[start:end]`` (the rest is skeleton) and its skeleton."""
        self._fmt.append(f"{end - self._run}s")
        self._skeleton.append(self._buf[self._run : end])
        return struct.Struct("".join(self._fmt)), tuple(self._skeleton)


def map_entries(
    fields: StructBuilder, buf: bytes, start: int, end: int, value: dict[Any, Any]
) -> tuple[Entry, ...] | None:
    """The entries of the map at ``buf[start:end]`` (accepted by the generic reader, which
    gave ``value``), its value fields added to ``fields``; None if some key or value is not
    of a kind a layout reads."""
    entries: list[Entry] = []
    p = start + (3 if buf[start] == 0xC1 else 9)
    for key, item in value.items():
        c = buf[p]
        if c == 0xA3 or c == 0xA1:  # sym8, str8 key
            p += 2 + buf[p + 1]
        elif c in _KEY_WIDTH:
            p += 1 + _KEY_WIDTH[c]
        else:
            return None
        c = buf[p]
        p += 1
        if c in _FIELDS:
            code, kind, arg = _FIELDS[c]
            if kind == _CONST:
                arg = item
        elif c in _VARIABLE8:
            code, kind, arg = f"{buf[p]}s", _VARIABLE8[c], None
            p += 1
        else:
            return None
        entries.append((key, fields.field(p, code), kind, arg))
        p += struct.calcsize(">" + code)
    if p != end:  # cannot happen for an accepted map; refuse rather than trust it
        return None
    return tuple(entries)


MapMaker = Callable[[tuple[Any, ...]], dict[Any, Any]]
"""Makes the map of a layout from the unpacked fields of a struct (:func:`map_maker`)."""

# How each kind of entry makes its value from the unpacked fields ``f`` (its field index
# ``i``, its argument bound as ``a<n>``): as unpacked; an int subclass of it; the one-byte
# constructors' table; UTF-8 decoded (checked); the learned value.
_VALUE_SOURCE = {
    None: "f[{i}]",
    _WRAP: "_new_int(a{n}, f[{i}])",
    _BYTE: "a{n}[f[{i}]]",
    _TEXT: "f[{i}].decode()",
    _CONST: "a{n}",
    _UUID: "_uuid(bytes=f[{i}])",
}


def map_maker(entries: tuple[Entry, ...]) -> MapMaker:
    """The function that makes the map of ``entries`` from the unpacked fields: one dict
    display of the entries in order, each value made as its kind says. It is compiled once
    per layout; the keys and arguments are bound as names (``k<n>``, ``a<n>``), never written
    into the source, which holds only field indices. A str8 that is not UTF-8 raises
    ``UnicodeDecodeError``: the caller leaves such a map to the generic reader."""
    namespace: dict[str, Any] = {"_new_int": _new_int, "_uuid": uuid.UUID}
    items = []
    for n, (key, i, kind, arg) in enumerate(entries):
        namespace[f"k{n}"] = key
        namespace[f"a{n}"] = arg
        items.append(f"k{n}: " + _VALUE_SOURCE[kind].format(i=int(i), n=n))
    exec(f"def make(f):\n    return {{{', '.join(items)}}}\n", namespace)
    maker: MapMaker = namespace["make"]
    return maker


class _Layout:
    """One learned map: its struct, skeleton and the maker of its map."""

    __slots__ = ("make", "size", "skeleton", "unpack")

    def __init__(self, packer: struct.Struct, skeleton: tuple[bytes, ...], entries: tuple[Entry, ...]) -> None:
        self.unpack = packer.unpack_from
        self.size = packer.size
        self.skeleton = skeleton
        self.make = map_maker(entries)


def _learn(buf: bytes, start: int, end: int, value: dict[Any, Any]) -> _Layout | None:
    """The layout of the map at ``buf[start:end]`` (accepted by the generic reader, which
    gave ``value``); None if some key or value is not of a kind a layout reads."""
    fields = StructBuilder(buf, start)
    entries = map_entries(fields, buf, start, end, value)
    return None if entries is None else _Layout(*fields.finish(end), entries)


class MapLayouts:
    """The layouts of the maps met at one place of a message (e.g. its message annotations),
    by their head; what is not read by a layout is read as the section's value
    (:func:`~amqplink.codec.decode.section_context`)."""

    __slots__ = ("_layouts",)

    def __init__(self) -> None:
        self._layouts: dict[bytes, _Layout | None] = {}

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        """The value whose constructor is at ``pos`` and the offset after it, as the generic
        reader ``value_decoders()[buf[pos]](buf, pos + 1, 1, ctx)`` gives them (or its
        ``DecodeError``); a map of a learned layout is read from it."""
        c = buf[pos]
        if c == 0xC1:
            head = buf[pos : pos + 3]
        elif c == 0xD1:
            head = buf[pos : pos + 9]
        else:
            return _TABLE[c](buf, pos + 1, 1, _CTX_TEMPLATE.copy())
        layouts = self._layouts
        layout = layouts.get(head)
        if layout is None:
            value, end = _TABLE[c](buf, pos + 1, 1, _CTX_TEMPLATE.copy())
            if head not in layouts and len(layouts) < LAYOUTS_MAX:
                layouts[head] = _learn(buf, pos, end, value)
            return value, end
        try:
            fields = layout.unpack(buf, pos)
        except struct.error:  # the map runs past the buffer
            fields = ()
        if fields[0::2] == layout.skeleton:
            try:
                return layout.make(fields), pos + layout.size
            except UnicodeDecodeError:  # the generic reader reports it
                pass
        return _TABLE[c](buf, pos + 1, 1, _CTX_TEMPLATE.copy())
