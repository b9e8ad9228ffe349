"""AMQP 1.0 type decoder (spec part 1, "Types", section 1.6).

:func:`decode` reads one value at an offset of a ``bytes``/``bytearray``/
``memoryview`` without copying the input: a 256-entry table indexed by the
constructor byte selects the function that reads the value.  Each such function
takes ``(buf, pos, depth, ctx)`` where ``pos`` is the offset just after the
constructor byte, and returns ``(value, offset after the value)``.  The same
functions read array elements, which are encoded without constructors.

The decoder is defensive: malformed or hostile input raises
:class:`~amqplink.codec.errors.DecodeError` (with the offset of the problem),
never another exception, and never allocates memory in proportion to a size
or count field before checking that the input really holds that many bytes.
See :class:`DecodeLimits` for the caps on nesting and collection sizes.

Described values whose descriptor was registered with
:func:`register_composite` decode to ``factory(value)``; other described values
decode to :class:`~amqplink.codec.types.Described`. Inside the value of a composite
registered with ``data=True`` (a message section: what it holds is the application's
data, not the protocol's) no descriptor is interpreted: every described value there
decodes to :class:`~amqplink.codec.types.Described`, whatever its descriptor, so that
it encodes back to what was sent (an annotation that happens to use the descriptor of
``accepted`` stays that described value, its fields and all). A descriptor keeps its
type: a long one decodes to :class:`~amqplink.codec.types.Long` (a plain ``int``
descriptor encodes as a ulong code).  An array of described
values decodes to an :class:`~amqplink.codec.types.Array` whose
``descriptor`` is the shared descriptor and whose elements are the plain
described values (factories are not applied to array elements); element
constructors with nested descriptors (``0x00 d1 0x00 d2 ...``) are rejected.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import DecodeError
from .types import (
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
    Long,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
)

__all__ = [
    "DEFAULT_LIMITS",
    "DecodeLimits",
    "decode",
    "decode_all",
    "decode_sequence",
    "float32_nan",
    "interpret",
    "register_composite",
    "section_context",
    "registered_composites",
    "unregister_composite",
]

Buffer = bytes | bytearray | memoryview
# ctx is a per-call list: [max_depth, max_collection, max_size, zero_width_budget, data]
# (data: 1 inside a message section's value, where no descriptor is interpreted)
_Ctx = list[int]
_Decoder = Callable[[Buffer, int, int, _Ctx], tuple[Any, int]]

_NO_SIZE_LIMIT = 1 << 64


@dataclass(frozen=True)
class DecodeLimits:
    """Caps applied while decoding untrusted input.

    ``max_depth``: nesting of lists, maps, arrays and described values.
    ``max_collection``: elements of one list or array, or pairs of one map;
    also the total number of zero-width array elements (arrays of null,
    ``true``, ``uint0``... which occupy no bytes) in one :func:`decode` call.
    ``max_size``: if set, the largest byte size of any single value.
    """

    max_depth: int = 32
    max_collection: int = 65536
    max_size: int | None = None
    _template: list[int] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.max_depth < 1:
            raise ValueError("max_depth must be at least 1")
        if self.max_collection < 0:
            raise ValueError("max_collection must not be negative")
        if self.max_size is not None and self.max_size < 0:
            raise ValueError("max_size must not be negative")
        size = _NO_SIZE_LIMIT if self.max_size is None else self.max_size
        template = [self.max_depth, self.max_collection, size, self.max_collection, 0]
        object.__setattr__(self, "_template", template)


DEFAULT_LIMITS = DecodeLimits()

_unpack_H = struct.Struct(">H").unpack_from
_unpack_h = struct.Struct(">h").unpack_from
_unpack_I = struct.Struct(">I").unpack_from
_unpack_i = struct.Struct(">i").unpack_from
_unpack_Q = struct.Struct(">Q").unpack_from
_unpack_q = struct.Struct(">q").unpack_from
_unpack_f = struct.Struct(">f").unpack_from
_unpack_d = struct.Struct(">d").unpack_from
_unpack_II = struct.Struct(">II").unpack_from
_pack_Q = struct.Struct(">Q").pack
_struct_error = struct.error

_new_int = int.__new__
_new_float = float.__new__
_new_str = str.__new__
_new_bytes = bytes.__new__

# Preallocated wrapper instances for small values.
_UBYTES = [_new_int(UByte, i) for i in range(256)]
_USHORTS = [_new_int(UShort, i) for i in range(256)]
_UINTS = [_new_int(UInt, i) for i in range(256)]
_ULONGS = [_new_int(ULong, i) for i in range(256)]
_BYTES = [_new_int(Byte, i) for i in range(-128, 128)]  # index value + 128
_SHORTS = [_new_int(Short, i) for i in range(-128, 128)]
_INTS = [_new_int(Int, i) for i in range(-128, 128)]

# For the constructors of one-byte values: the decoded value of every byte.
_ONE_BYTE: list[list[Any] | None] = [None] * 256
_ONE_BYTE[0x50] = _UBYTES
_ONE_BYTE[0x51] = [_BYTES[b ^ 0x80] for b in range(256)]
_ONE_BYTE[0x52] = _UINTS
_ONE_BYTE[0x53] = _ULONGS
_ONE_BYTE[0x54] = [_INTS[b ^ 0x80] for b in range(256)]
_ONE_BYTE[0x55] = [b - 256 if b > 127 else b for b in range(256)]

_SYMBOLS: dict[bytes, Symbol] = {}
_SYMBOL_CACHE_MAX = 4096
_SYMBOL_CACHE_MAX_LEN = 256


def _truncated(pos: int, what: str) -> DecodeError:
    return DecodeError(f"truncated input: {what} runs past the end of the buffer", pos)


# ---------------------------------------------------------------------------
# Fixed-width values
# ---------------------------------------------------------------------------


def _d_invalid(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    raise DecodeError(f"invalid constructor byte 0x{buf[pos - 1]:02x}", pos - 1)


def _d_null(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    return None, pos


def _d_true(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    return True, pos


def _d_false(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    return False, pos


def _d_boolean(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        b = buf[pos]
    except IndexError:
        raise _truncated(pos, "boolean") from None
    if b == 1:
        return True, pos + 1
    if b == 0:
        return False, pos + 1
    raise DecodeError(f"invalid boolean byte 0x{b:02x}", pos)


def _d_uint0(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    return _UINTS[0], pos


def _d_ulong0(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    return _ULONGS[0], pos


def _d_list0(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    return [], pos


def _d_ubyte(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        return _UBYTES[buf[pos]], pos + 1
    except IndexError:
        raise _truncated(pos, "ubyte") from None


def _d_smalluint(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        return _UINTS[buf[pos]], pos + 1
    except IndexError:
        raise _truncated(pos, "smalluint") from None


def _d_smallulong(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        return _ULONGS[buf[pos]], pos + 1
    except IndexError:
        raise _truncated(pos, "smallulong") from None


def _d_byte(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        b = buf[pos]
    except IndexError:
        raise _truncated(pos, "byte") from None
    return _BYTES[b ^ 0x80], pos + 1  # (b ^ 0x80) == signed value + 128


def _d_smallint(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        b = buf[pos]
    except IndexError:
        raise _truncated(pos, "smallint") from None
    return _INTS[b ^ 0x80], pos + 1


def _d_smalllong(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        b = buf[pos]
    except IndexError:
        raise _truncated(pos, "smalllong") from None
    return (b - 256 if b > 127 else b), pos + 1


def _d_ushort(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        v = _unpack_H(buf, pos)[0]
    except _struct_error:
        raise _truncated(pos, "ushort") from None
    return (_USHORTS[v] if v < 256 else _new_int(UShort, v)), pos + 2


def _d_short(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        v = _unpack_h(buf, pos)[0]
    except _struct_error:
        raise _truncated(pos, "short") from None
    return (_SHORTS[v + 128] if -128 <= v < 128 else _new_int(Short, v)), pos + 2


def _d_uint(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        v = _unpack_I(buf, pos)[0]
    except _struct_error:
        raise _truncated(pos, "uint") from None
    return (_UINTS[v] if v < 256 else _new_int(UInt, v)), pos + 4


def _d_int(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        v = _unpack_i(buf, pos)[0]
    except _struct_error:
        raise _truncated(pos, "int") from None
    return (_INTS[v + 128] if -128 <= v < 128 else _new_int(Int, v)), pos + 4


def _d_ulong(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        v = _unpack_Q(buf, pos)[0]
    except _struct_error:
        raise _truncated(pos, "ulong") from None
    return (_ULONGS[v] if v < 256 else _new_int(ULong, v)), pos + 8


def _d_long(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        return _unpack_q(buf, pos)[0], pos + 8
    except _struct_error:
        raise _truncated(pos, "long") from None


def _d_timestamp(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        v = _unpack_q(buf, pos)[0]
    except _struct_error:
        raise _truncated(pos, "timestamp") from None
    return _new_int(Timestamp, v), pos + 8


def _d_float(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        v = _unpack_f(buf, pos)[0]
    except _struct_error:
        raise _truncated(pos, "float") from None
    if v != v:  # a NaN: its payload and signalling bit kept (a C cast would set the quiet bit)
        v = float32_nan(_unpack_I(buf, pos)[0])
    return _new_float(Float, v), pos + 4


def _d_double(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        return _unpack_d(buf, pos)[0], pos + 8
    except _struct_error:
        raise _truncated(pos, "double") from None


def _d_char(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        v = _unpack_I(buf, pos)[0]
    except _struct_error:
        raise _truncated(pos, "char") from None
    if v > 0x10FFFF or 0xD800 <= v <= 0xDFFF:
        raise DecodeError(f"invalid char code point 0x{v:x}", pos)
    return _new_str(Char, chr(v)), pos + 4


def _fixed(buf: Buffer, pos: int, size: int, what: str) -> bytes:
    end = pos + size
    if end > len(buf):
        raise _truncated(pos, what)
    return bytes(buf[pos:end])


def _d_decimal32(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    return _new_bytes(Decimal32, _fixed(buf, pos, 4, "decimal32")), pos + 4


def _d_decimal64(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    return _new_bytes(Decimal64, _fixed(buf, pos, 8, "decimal64")), pos + 8


def _d_decimal128(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    return _new_bytes(Decimal128, _fixed(buf, pos, 16, "decimal128")), pos + 16


def _d_uuid(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    return uuid.UUID(bytes=_fixed(buf, pos, 16, "uuid")), pos + 16


# ---------------------------------------------------------------------------
# Variable-width values
# ---------------------------------------------------------------------------


def _span8(buf: Buffer, pos: int, ctx: _Ctx, what: str) -> tuple[int, int]:
    try:
        n = buf[pos]
    except IndexError:
        raise _truncated(pos, what + " size") from None
    end = pos + 1 + n
    if end > len(buf):
        raise _truncated(pos, f"{what} of {n} bytes")
    if n > ctx[2]:
        raise DecodeError(f"{what} of {n} bytes exceeds max_size {ctx[2]}", pos)
    return pos + 1, end


def _size_error(buf: Buffer, pos: int, start: int, end: int, ctx: _Ctx, what: str) -> DecodeError:
    # The size field at ``pos`` declares a value spanning buf[start:end].
    if end > len(buf):
        return _truncated(pos, f"{what} of {end - start} bytes")
    return DecodeError(f"{what} of {end - start} bytes exceeds max_size {ctx[2]}", pos)


def _d_vbin8(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        start = pos + 1
        end = start + buf[pos]
    except IndexError:
        raise _truncated(pos, "binary size") from None
    if end > len(buf) or end - start > ctx[2]:
        raise _size_error(buf, pos, start, end, ctx, "binary")
    raw = buf[start:end]
    return (raw if type(raw) is bytes else bytes(raw)), end


def _d_vbin32(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        start = pos + 4
        end = start + _unpack_I(buf, pos)[0]
    except _struct_error:
        raise _truncated(pos, "binary size") from None
    if end > len(buf) or end - start > ctx[2]:
        raise _size_error(buf, pos, start, end, ctx, "binary")
    raw = buf[start:end]
    return (raw if type(raw) is bytes else bytes(raw)), end


def _utf8_error(exc: UnicodeDecodeError, start: int) -> DecodeError:
    return DecodeError(f"string is not valid UTF-8: {exc.reason}", start + exc.start)


def _d_str8(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        start = pos + 1
        end = start + buf[pos]
    except IndexError:
        raise _truncated(pos, "string size") from None
    if end > len(buf) or end - start > ctx[2]:
        raise _size_error(buf, pos, start, end, ctx, "string")
    raw = buf[start:end]
    try:
        if type(raw) is bytes:
            return raw.decode(), end
        return str(raw, "utf-8"), end
    except UnicodeDecodeError as exc:
        raise _utf8_error(exc, start) from None


def _d_str32(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        start = pos + 4
        end = start + _unpack_I(buf, pos)[0]
    except _struct_error:
        raise _truncated(pos, "string size") from None
    if end > len(buf) or end - start > ctx[2]:
        raise _size_error(buf, pos, start, end, ctx, "string")
    try:
        return str(buf[start:end], "utf-8"), end
    except UnicodeDecodeError as exc:
        raise _utf8_error(exc, start) from None


def _symbol(raw: bytes, pos: int) -> Symbol:
    sym = _SYMBOLS.get(raw)
    if sym is not None:
        return sym
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError as exc:
        raise DecodeError("symbol is not ASCII", pos + exc.start) from None
    sym = _new_str(Symbol, text)
    if len(raw) <= _SYMBOL_CACHE_MAX_LEN and len(_SYMBOLS) < _SYMBOL_CACHE_MAX:
        _SYMBOLS[raw] = sym
    return sym


def _d_sym8(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        start = pos + 1
        end = start + buf[pos]
    except IndexError:
        raise _truncated(pos, "symbol size") from None
    if end > len(buf) or end - start > ctx[2]:
        raise _size_error(buf, pos, start, end, ctx, "symbol")
    raw = buf[start:end]
    if type(raw) is not bytes:
        raw = bytes(raw)
    sym = _SYMBOLS.get(raw)
    if sym is None:
        sym = _symbol(raw, start)
    return sym, end


def _d_sym32(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        start = pos + 4
        end = start + _unpack_I(buf, pos)[0]
    except _struct_error:
        raise _truncated(pos, "symbol size") from None
    if end > len(buf) or end - start > ctx[2]:
        raise _size_error(buf, pos, start, end, ctx, "symbol")
    return _symbol(bytes(buf[start:end]), start), end


# ---------------------------------------------------------------------------
# Compound values
# ---------------------------------------------------------------------------


def _items(buf: Buffer, p: int, end: int, count: int, depth: int, ctx: _Ctx, start: int, what: str) -> list[Any]:
    """Read ``count`` constructor-prefixed values from ``p``; they must end exactly at ``end``."""
    if count > end - p:
        raise DecodeError(f"{what} declares {count} elements but holds only {end - p} bytes", start)
    if count > ctx[1]:
        raise DecodeError(f"{what} of {count} elements exceeds max_collection {ctx[1]}", start)
    if end - start > ctx[2]:
        raise DecodeError(f"{what} of {end - start} bytes exceeds max_size {ctx[2]}", start)
    if depth > ctx[0]:
        raise DecodeError(f"nesting deeper than max_depth {ctx[0]}", start)
    items: list[Any] = []
    append = items.append
    table = _TABLE
    one_byte = _ONE_BYTE
    # str8 inline (the most common field of properties): a short, valid one
    # in a bytes buffer; anything else goes through _d_str8 for its checks and errors.
    inline_str8 = type(buf) is bytes and ctx[2] >= 255
    try:
        for _ in range(count):
            c = buf[p]
            if c == 0x40:
                append(None)
                p += 1
                continue
            small = one_byte[c]
            if small is not None:
                append(small[buf[p + 1]])
                p += 2
                continue
            if c == 0xA1 and inline_str8:
                s = p + 2
                e = s + buf[p + 1]
                if e <= end:
                    try:
                        append(buf[s:e].decode())  # type: ignore[union-attr]  # bytes: inline_str8
                        p = e
                        continue
                    except UnicodeDecodeError:
                        pass
            v, p = table[c](buf, p + 1, depth, ctx)
            append(v)
    except IndexError:
        raise _truncated(p, what + " element") from None
    if p != end:
        raise DecodeError(f"{what} size field disagrees with its contents ({p - end:+d} bytes)", start)
    return items


def _d_list8(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        size = buf[pos]
        count = buf[pos + 1]
    except IndexError:
        raise _truncated(pos, "list8 header") from None
    end = pos + 1 + size
    if end > len(buf):
        raise _truncated(pos, f"list8 of {size} bytes")
    return _items(buf, pos + 2, end, count, depth + 1, ctx, pos - 1, "list"), end


def _d_list32(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        size, count = _unpack_II(buf, pos)
    except _struct_error:
        raise _truncated(pos, "list32 header") from None
    end = pos + 4 + size
    if end > len(buf):
        raise _truncated(pos, f"list32 of {size} bytes")
    if size < 4:
        raise DecodeError(f"list32 size {size} too small for its count field", pos)
    return _items(buf, pos + 8, end, count, depth + 1, ctx, pos - 1, "list"), end


def _map(buf: Buffer, p: int, end: int, count: int, depth: int, ctx: _Ctx, start: int) -> dict[Any, Any]:
    if count & 1:
        raise DecodeError(f"map holds an odd number of elements ({count})", start)
    if count > end - p:
        raise DecodeError(f"map declares {count} elements but holds only {end - p} bytes", start)
    pairs = count >> 1
    if pairs > ctx[1]:
        raise DecodeError(f"map of {pairs} pairs exceeds max_collection {ctx[1]}", start)
    if end - start > ctx[2]:
        raise DecodeError(f"map of {end - start} bytes exceeds max_size {ctx[2]}", start)
    if depth > ctx[0]:
        raise DecodeError(f"nesting deeper than max_depth {ctx[0]}", start)
    result: dict[Any, Any] = {}
    table = _TABLE
    one_byte = _ONE_BYTE
    symbols = _SYMBOLS
    sym8 = 0xA3 if type(buf) is bytes else -1  # a bytearray's slice is no dict key
    try:
        for _ in range(pairs):
            key_pos = p
            c = buf[p]
            k = None
            if c == sym8:  # the usual annotation key: a symbol met before, looked up inline
                e = p + 2 + buf[p + 1]
                if e <= end:
                    k = symbols.get(buf[p + 2 : e])  # type: ignore[arg-type]  # bytes: see sym8
                    p = e
            if k is None:
                k, p = table[c](buf, key_pos + 1, depth, ctx)
            c = buf[p]
            small = one_byte[c]
            if small is not None:
                result[k] = small[buf[p + 1]]
                p += 2
            elif c == 0x81:  # long
                result[k] = _unpack_q(buf, p + 1)[0]
                p += 9
            elif c == 0x83:  # timestamp
                result[k] = _new_int(Timestamp, _unpack_q(buf, p + 1)[0])
                p += 9
            else:
                result[k], p = table[c](buf, p + 1, depth, ctx)
    except (IndexError, _struct_error):
        raise _truncated(p, "map element") from None
    except TypeError:
        raise DecodeError(f"unhashable map key of type {type(k).__name__}", key_pos) from None
    if p != end:
        raise DecodeError(f"map size field disagrees with its contents ({p - end:+d} bytes)", start)
    if len(result) != pairs:
        raise DecodeError("map holds duplicate keys", start)
    return result


def _d_map8(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        size = buf[pos]
        count = buf[pos + 1]
    except IndexError:
        raise _truncated(pos, "map8 header") from None
    end = pos + 1 + size
    if end > len(buf):
        raise _truncated(pos, f"map8 of {size} bytes")
    return _map(buf, pos + 2, end, count, depth + 1, ctx, pos - 1), end


def _d_map32(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        size, count = _unpack_II(buf, pos)
    except _struct_error:
        raise _truncated(pos, "map32 header") from None
    end = pos + 4 + size
    if end > len(buf):
        raise _truncated(pos, f"map32 of {size} bytes")
    if size < 4:
        raise DecodeError(f"map32 size {size} too small for its count field", pos)
    return _map(buf, pos + 8, end, count, depth + 1, ctx, pos - 1), end


# Element constructors that take no bytes per element.
_ZERO_WIDTH = frozenset((0x40, 0x41, 0x42, 0x43, 0x44, 0x45))


def _array(buf: Buffer, p: int, end: int, count: int, depth: int, ctx: _Ctx, start: int) -> Array:
    if depth > ctx[0]:
        raise DecodeError(f"nesting deeper than max_depth {ctx[0]}", start)
    if count > ctx[1]:
        raise DecodeError(f"array of {count} elements exceeds max_collection {ctx[1]}", start)
    if end - start > ctx[2]:
        raise DecodeError(f"array of {end - start} bytes exceeds max_size {ctx[2]}", start)
    if p >= end:
        raise DecodeError("array has no element constructor", start)
    table = _TABLE
    c = buf[p]
    p += 1
    descriptor = None
    if c == 0x00:
        if p >= end:
            raise DecodeError("array element descriptor missing", p)
        descriptor, p = table[buf[p]](buf, p + 1, depth, ctx)
        descriptor = _typed_descriptor(descriptor)
        if p >= end:
            raise DecodeError("array element constructor missing after descriptor", p)
        c = buf[p]
        p += 1
        if c == 0x00:
            raise DecodeError("array elements with nested descriptors are not supported", p - 1)
    element_type = _CONSTRUCTOR_TYPE[c]
    if element_type is None:
        raise DecodeError(f"invalid array element constructor 0x{c:02x}", p - 1)
    if c in _ZERO_WIDTH:
        ctx[3] -= count
        if ctx[3] < 0:
            raise DecodeError(
                f"too many zero-width array elements (more than max_collection {ctx[1]} per decode)", start
            )
    elif count > end - p:
        raise DecodeError(f"array declares {count} elements but holds only {end - p} bytes", start)
    dec = table[c]
    items: list[Any] = []
    append = items.append
    try:
        for _ in range(count):
            v, p = dec(buf, p, depth, ctx)
            append(v)
    except IndexError:
        raise _truncated(p, "array element") from None
    if p != end:
        raise DecodeError(f"array size field disagrees with its contents ({p - end:+d} bytes)", start)
    return Array(items, element_type, descriptor)


def _d_array8(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        size = buf[pos]
        count = buf[pos + 1]
    except IndexError:
        raise _truncated(pos, "array8 header") from None
    end = pos + 1 + size
    if end > len(buf):
        raise _truncated(pos, f"array8 of {size} bytes")
    if size < 1:
        raise DecodeError("array8 size too small for its count field", pos)
    return _array(buf, pos + 2, end, count, depth + 1, ctx, pos - 1), end


def _d_array32(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    try:
        size, count = _unpack_II(buf, pos)
    except _struct_error:
        raise _truncated(pos, "array32 header") from None
    end = pos + 4 + size
    if end > len(buf):
        raise _truncated(pos, f"array32 of {size} bytes")
    if size < 4:
        raise DecodeError(f"array32 size {size} too small for its count field", pos)
    return _array(buf, pos + 8, end, count, depth + 1, ctx, pos - 1), end


# ---------------------------------------------------------------------------
# Described values and the composite registry
# ---------------------------------------------------------------------------

_BY_CODE: dict[int, Callable[[Any], Any]] = {}
_BY_SYMBOL: dict[str, Callable[[Any], Any]] = {}
_BY_SYMBOL_RAW: dict[bytes, Callable[[Any], Any]] = {}
_NAMES: dict[int, str] = {}
_DATA_VALUED: set[Callable[[Any], Any]] = set()
"""The factories of composites whose value is data (message sections): read in data mode."""


def register_composite(code: int, symbol: str, factory: Callable[[Any], Any], *, data: bool = False) -> None:
    """Decode described values with descriptor ``code`` (ulong) or ``symbol`` via ``factory``.

    ``factory`` receives the decoded described value (the field list of a
    list-based composite) and returns the object the decoder yields.  A
    :class:`DecodeError` raised by it propagates; any other exception becomes a
    :class:`DecodeError` naming the descriptor.  Registering a code or symbol
    again replaces the previous factory. ``data``: the composite's value is data
    (a message section's): no descriptor inside it is interpreted (the module's
    docstring).
    """
    if not 0 <= code <= 0xFFFFFFFFFFFFFFFF:
        raise ValueError(f"descriptor code out of ulong range: {code}")
    raw = symbol.encode("ascii")
    unregister_composite(code, symbol)
    _BY_CODE[code] = factory
    _BY_SYMBOL[symbol] = factory
    _BY_SYMBOL_RAW[raw] = factory
    _NAMES[code] = symbol
    if data:
        _DATA_VALUED.add(factory)


def unregister_composite(code: int, symbol: str) -> None:
    """Forget a registration made by :func:`register_composite` (mainly for tests)."""
    for factory in (_BY_CODE.pop(code, None), _BY_SYMBOL.pop(symbol, None)):
        if factory is not None:
            _DATA_VALUED.discard(factory)
    _BY_SYMBOL_RAW.pop(symbol.encode("ascii"), None)
    _NAMES.pop(code, None)


def value_decoders() -> list[_Decoder]:
    """The constructor table for decoders specialised to one layout (e.g. message sections):
    entry ``c`` reads the value whose constructor byte ``c`` is at ``pos - 1`` as
    ``(buf, pos, depth, ctx)`` -> ``(value, end)`` with every check :func:`decode` makes;
    ``ctx`` is ``DEFAULT_LIMITS._template.copy()`` (or another ``DecodeLimits``'s), or
    a copy of :func:`section_context`'s for the value of a message section."""
    return _TABLE


def section_context(limits: DecodeLimits = DEFAULT_LIMITS) -> list[int]:
    """A ``ctx`` (copy it for each read) for :func:`value_decoders`' readers reading the
    value of a message section directly (without its descriptor): in data mode, where no
    descriptor is interpreted, as when the section is decoded whole."""
    ctx = limits._template.copy()
    ctx[4] = 1
    return ctx


def registered_composites() -> dict[int, str]:
    """The registered descriptor codes and their symbols."""
    return dict(_NAMES)


def _d_described(buf: Buffer, pos: int, depth: int, ctx: _Ctx) -> tuple[Any, int]:
    depth += 1
    start = pos - 1
    if depth > ctx[0]:
        raise DecodeError(f"nesting deeper than max_depth {ctx[0]}", start)
    table = _TABLE
    try:
        c = buf[pos]
        if c == 0x53:  # smallulong code: the usual case
            pos += 1
            code = buf[pos]
            pos += 1
            factory = _BY_CODE.get(code)
            descriptor: Any = _ULONGS[code]
        elif c == 0xA3:  # sym8
            s, pos = _span8(buf, pos + 1, ctx, "symbol")
            raw = bytes(buf[s:pos])
            factory = _BY_SYMBOL_RAW.get(raw)
            descriptor = _symbol(raw, s)
        else:
            descriptor, pos = table[c](buf, pos + 1, depth, ctx)
            t = type(descriptor)
            if t is ULong:
                factory = _BY_CODE.get(descriptor)
            elif t is Symbol:
                factory = _BY_SYMBOL.get(descriptor)
            else:
                factory = None
                descriptor = _typed_descriptor(descriptor)
        if factory is None or ctx[4]:  # not registered, or inside a message section's value
            value, pos = table[buf[pos]](buf, pos + 1, depth, ctx)
            return Described(descriptor, value), pos
        if factory in _DATA_VALUED:  # a message section: its value is data
            ctx[4] = 1
            try:
                value, pos = table[buf[pos]](buf, pos + 1, depth, ctx)
            finally:
                ctx[4] = 0
        else:
            value, pos = table[buf[pos]](buf, pos + 1, depth, ctx)
    except IndexError:
        raise _truncated(pos, "described value") from None
    return _make(factory, value, descriptor, start), pos


def _make(factory: Callable[[Any], Any], value: Any, descriptor: Any, start: int) -> Any:
    """``factory(value)``; a failure other than a ``DecodeError`` as one naming the descriptor."""
    try:
        return factory(value)
    except DecodeError:
        raise
    except Exception as exc:
        name = _NAMES.get(descriptor) if isinstance(descriptor, int) else descriptor
        raise DecodeError(
            f"invalid {name or descriptor!r} (descriptor {descriptor!r}): {type(exc).__name__}: {exc}", start
        ) from exc


def interpret(value: Any) -> Any:
    """``value`` as the composite its registered descriptor makes of it, when it is a
    :class:`~amqplink.codec.types.Described` read as data (inside a message section); any
    other value as it is. For the one place where a message carries the protocol's own
    composites: the body of a transaction coordinator's control message (4.5: "the declare
    type defines the message body sent to the coordinator", an amqp-value)."""
    if type(value) is not Described:
        return value
    descriptor = value.descriptor
    t = type(descriptor)
    factory = _BY_CODE.get(descriptor) if t is ULong else _BY_SYMBOL.get(descriptor) if t is Symbol else None
    return value if factory is None else _make(factory, value.value, descriptor, 0)


def _typed_descriptor(descriptor: Any) -> Any:
    """A descriptor as it encodes back: a long (a plain ``int`` from the reader, which the
    encoder would write as a ulong code) as :class:`Long`."""
    return _new_int(Long, descriptor) if type(descriptor) is int else descriptor


def float32_nan(bits: int) -> float:
    """The float32 NaN of ``bits`` as a Python float (a double) that :func:`float32_bits`
    gives back exactly: sign, payload and the signalling bit kept (C's float-to-double cast
    sets the quiet bit of a signalling NaN)."""
    value: float = _unpack_d(_pack_Q((bits >> 31) << 63 | 0x7FF << 52 | (bits & 0x7FFFFF) << 29), 0)[0]
    return value


# ---------------------------------------------------------------------------
# Constructor table
# ---------------------------------------------------------------------------

_TABLE: list[_Decoder] = [_d_invalid] * 256
_CONSTRUCTOR_TYPE: list[AMQPType | None] = [None] * 256


def _register(code: int, decoder: _Decoder, amqp_type: AMQPType | None) -> None:
    _TABLE[code] = decoder
    _CONSTRUCTOR_TYPE[code] = amqp_type


for _code, _decoder, _type in (
    (0x00, _d_described, None),
    (0x40, _d_null, AMQPType.NULL),
    (0x41, _d_true, AMQPType.BOOLEAN),
    (0x42, _d_false, AMQPType.BOOLEAN),
    (0x56, _d_boolean, AMQPType.BOOLEAN),
    (0x50, _d_ubyte, AMQPType.UBYTE),
    (0x60, _d_ushort, AMQPType.USHORT),
    (0x43, _d_uint0, AMQPType.UINT),
    (0x52, _d_smalluint, AMQPType.UINT),
    (0x70, _d_uint, AMQPType.UINT),
    (0x44, _d_ulong0, AMQPType.ULONG),
    (0x53, _d_smallulong, AMQPType.ULONG),
    (0x80, _d_ulong, AMQPType.ULONG),
    (0x51, _d_byte, AMQPType.BYTE),
    (0x61, _d_short, AMQPType.SHORT),
    (0x54, _d_smallint, AMQPType.INT),
    (0x71, _d_int, AMQPType.INT),
    (0x55, _d_smalllong, AMQPType.LONG),
    (0x81, _d_long, AMQPType.LONG),
    (0x72, _d_float, AMQPType.FLOAT),
    (0x82, _d_double, AMQPType.DOUBLE),
    (0x74, _d_decimal32, AMQPType.DECIMAL32),
    (0x84, _d_decimal64, AMQPType.DECIMAL64),
    (0x94, _d_decimal128, AMQPType.DECIMAL128),
    (0x73, _d_char, AMQPType.CHAR),
    (0x83, _d_timestamp, AMQPType.TIMESTAMP),
    (0x98, _d_uuid, AMQPType.UUID),
    (0xA0, _d_vbin8, AMQPType.BINARY),
    (0xB0, _d_vbin32, AMQPType.BINARY),
    (0xA1, _d_str8, AMQPType.STRING),
    (0xB1, _d_str32, AMQPType.STRING),
    (0xA3, _d_sym8, AMQPType.SYMBOL),
    (0xB3, _d_sym32, AMQPType.SYMBOL),
    (0x45, _d_list0, AMQPType.LIST),
    (0xC0, _d_list8, AMQPType.LIST),
    (0xD0, _d_list32, AMQPType.LIST),
    (0xC1, _d_map8, AMQPType.MAP),
    (0xD1, _d_map32, AMQPType.MAP),
    (0xE0, _d_array8, AMQPType.ARRAY),
    (0xF0, _d_array32, AMQPType.ARRAY),
):
    _register(_code, _decoder, _type)
del _code, _decoder, _type


# ---------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------


_COPY_SMALL_VIEWS_UP_TO = 64 * 1024


def _as_buffer(data: Buffer) -> Buffer:
    t = type(data)
    if t is bytes or t is bytearray:
        return data
    if isinstance(data, memoryview):
        if data.ndim == 1 and data.format == "B":
            # Slicing bytes is much cheaper than slicing a memoryview, and a small
            # buffer costs less to copy once than to slice per string; large
            # buffers (bulk payloads) stay views so they are never copied whole.
            return data.tobytes() if data.nbytes <= _COPY_SMALL_VIEWS_UP_TO else data
        if data.c_contiguous:
            return data.cast("B")
        raise TypeError("decode needs a C-contiguous buffer")
    if isinstance(data, (bytes, bytearray)):
        return data
    raise TypeError(f"decode needs bytes, bytearray or memoryview, not {t.__name__}")


def _decode_at(buf: Buffer, pos: int, ctx: _Ctx) -> tuple[Any, int]:
    if pos < 0:
        raise DecodeError("negative offset", pos)
    try:
        c = buf[pos]
    except IndexError:
        raise _truncated(pos, "value constructor") from None
    try:
        return _TABLE[c](buf, pos + 1, 0, ctx)
    except DecodeError:
        raise
    except Exception as exc:
        raise _unexpected(exc, pos) from exc


def _unexpected(exc: Exception, pos: int) -> DecodeError:
    # Defensive: no exception but DecodeError escapes the decoder.
    if isinstance(exc, RecursionError):
        return DecodeError("nesting too deep for the Python stack", pos)
    if isinstance(exc, MemoryError):
        return DecodeError("out of memory while decoding", pos)
    return DecodeError(f"malformed input ({type(exc).__name__}: {exc})", pos)


def decode(data: Buffer, offset: int = 0, limits: DecodeLimits = DEFAULT_LIMITS) -> tuple[Any, int]:
    """Decode the value at ``offset``; return it and the offset just after it."""
    buf = data if type(data) is bytes else _as_buffer(data)
    if offset < 0:
        raise DecodeError("negative offset", offset)
    try:
        c = buf[offset]
    except IndexError:
        raise _truncated(offset, "value constructor") from None
    try:
        return _TABLE[c](buf, offset + 1, 0, limits._template.copy())
    except DecodeError:
        raise
    except Exception as exc:
        raise _unexpected(exc, offset) from exc


def decode_all(data: Buffer, limits: DecodeLimits = DEFAULT_LIMITS) -> Any:
    """Decode a buffer that holds exactly one value (trailing bytes are an error)."""
    buf = _as_buffer(data)
    value, end = _decode_at(buf, 0, limits._template.copy())
    if end != len(buf):
        raise DecodeError(f"{len(buf) - end} trailing bytes after the value", end)
    return value


def decode_sequence(data: Buffer, limits: DecodeLimits = DEFAULT_LIMITS) -> list[Any]:
    """Decode consecutive values until the end of the buffer (e.g. message sections)."""
    buf = _as_buffer(data)
    ctx = limits._template.copy()
    values: list[Any] = []
    pos = 0
    n = len(buf)
    append = values.append
    table = _TABLE
    try:
        while pos < n:
            start = pos
            value, pos = table[buf[pos]](buf, pos + 1, 0, ctx)
            append(value)
    except DecodeError:
        raise
    except Exception as exc:
        raise _unexpected(exc, start) from exc
    return values
