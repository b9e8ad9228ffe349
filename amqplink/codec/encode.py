"""AMQP 1.0 type encoder (spec part 1, "Types", section 1.6).

Every typed encoder has the signature ``(out: bytearray, value) -> None`` and
appends the smallest valid encoding of ``value`` as that AMQP type to ``out``.
:func:`encode_value` picks the AMQP type from the Python type (see
:mod:`amqplink.codec.types`); objects with an ``_amqp_encode(out)`` method
(the generated composite classes) encode themselves.

Compound values (list, map, array) are encoded by writing their items straight
into ``out`` and then inserting the (8- or 32-bit) header in front of them, so
no scratch buffer is allocated per nested value.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from .errors import EncodeError
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
    infer_type,
)

__all__ = [
    "ENCODERS",
    "Encoder",
    "encode",
    "encode_array",
    "encode_binary",
    "encode_boolean",
    "encode_byte",
    "encode_char",
    "encode_composite",
    "encode_decimal128",
    "encode_decimal32",
    "encode_decimal64",
    "encode_described",
    "encode_double",
    "encode_float",
    "encode_int",
    "encode_list",
    "encode_long",
    "encode_map",
    "encode_null",
    "encode_short",
    "encode_string",
    "encode_symbol",
    "encode_timestamp",
    "encode_ubyte",
    "encode_uint",
    "encode_ulong",
    "encode_ushort",
    "encode_uuid",
    "encode_value",
    "float32_bits",
    "multiple",
]

Encoder = Callable[[bytearray, Any], None]

_struct_error = struct.error
_RANGE_ERRORS = (struct.error, TypeError, ValueError, OverflowError)

_pack_BB = struct.Struct(">BB").pack
_pack_Bb = struct.Struct(">Bb").pack
_pack_BH = struct.Struct(">BH").pack
_pack_Bh = struct.Struct(">Bh").pack
_pack_BI = struct.Struct(">BI").pack
_pack_Bi = struct.Struct(">Bi").pack
_pack_BQ = struct.Struct(">BQ").pack
_pack_Bq = struct.Struct(">Bq").pack
_pack_Bf = struct.Struct(">Bf").pack
_pack_Bd = struct.Struct(">Bd").pack
_pack_BBB = struct.Struct(">BBB").pack
_pack_BII = struct.Struct(">BII").pack
_pack_I = struct.Struct(">I").pack
_pack_II = struct.Struct(">II").pack
_pack_d = struct.Struct(">d").pack
_pack_f = struct.Struct(">f").pack
_unpack_Q = struct.Struct(">Q").unpack
_unpack_I = struct.Struct(">I").unpack

# Precomputed encodings of small values (indexed by value, or value + 128 for signed).
_SMALLUINT = [b"\x43"] + [bytes((0x52, i)) for i in range(1, 256)]
_SMALLULONG = [b"\x44"] + [bytes((0x53, i)) for i in range(1, 256)]
_UBYTE = [bytes((0x50, i)) for i in range(256)]
_SMALLINT = [bytes((0x54, i & 0xFF)) for i in range(-128, 128)]
_SMALLLONG = [bytes((0x55, i & 0xFF)) for i in range(-128, 128)]
_BYTE = [bytes((0x51, i & 0xFF)) for i in range(-128, 128)]
_STR8_HDR = [bytes((0xA1, i)) for i in range(256)]
_BIN8_HDR = [bytes((0xA0, i)) for i in range(256)]
_SYM8_HDR = [bytes((0xA3, i)) for i in range(256)]
# "0x00 0x53 code" descriptor prefixes of composites with small ulong codes.
_COMPOSITE_HDR = [bytes((0x00, 0x53, i)) for i in range(256)]

_SYMBOL_CACHE: dict[str, bytes] = {}
_SYMBOL_CACHE_MAX = 4096
_SYMBOL_CACHE_MAX_LEN = 256


def _range_error(type_name: str, value: Any) -> EncodeError:
    return EncodeError(f"cannot encode {value!r} as AMQP {type_name}")


# ---------------------------------------------------------------------------
# Fixed-width primitives
# ---------------------------------------------------------------------------


def encode_null(out: bytearray, value: Any = None) -> None:
    """null: 0x40 (the value is ignored)."""
    out.append(0x40)


def encode_boolean(out: bytearray, value: Any) -> None:
    """boolean: 0x41 (true) / 0x42 (false)."""
    out.append(0x41 if value else 0x42)


def encode_ubyte(out: bytearray, value: Any) -> None:
    """ubyte: 0x50."""
    try:
        if 0 <= value <= 255:
            out += _UBYTE[value]
            return
    except TypeError:
        pass
    raise _range_error("ubyte", value)


def encode_ushort(out: bytearray, value: Any) -> None:
    """ushort: 0x60."""
    try:
        out += _pack_BH(0x60, value)
    except _RANGE_ERRORS:
        raise _range_error("ushort", value) from None


def encode_uint(out: bytearray, value: Any) -> None:
    """uint: 0x43 (uint0), 0x52 (smalluint) or 0x70."""
    try:
        if 0 <= value <= 255:
            out += _SMALLUINT[value]
        else:
            out += _pack_BI(0x70, value)
    except _RANGE_ERRORS:
        raise _range_error("uint", value) from None


def encode_ulong(out: bytearray, value: Any) -> None:
    """ulong: 0x44 (ulong0), 0x53 (smallulong) or 0x80."""
    try:
        if 0 <= value <= 255:
            out += _SMALLULONG[value]
        else:
            out += _pack_BQ(0x80, value)
    except _RANGE_ERRORS:
        raise _range_error("ulong", value) from None


def encode_byte(out: bytearray, value: Any) -> None:
    """byte: 0x51."""
    try:
        if -128 <= value <= 127:
            out += _BYTE[value + 128]
            return
    except TypeError:
        pass
    raise _range_error("byte", value)


def encode_short(out: bytearray, value: Any) -> None:
    """short: 0x61."""
    try:
        out += _pack_Bh(0x61, value)
    except _RANGE_ERRORS:
        raise _range_error("short", value) from None


def encode_int(out: bytearray, value: Any) -> None:
    """int: 0x54 (smallint) or 0x71."""
    try:
        if -128 <= value <= 127:
            out += _SMALLINT[value + 128]
        else:
            out += _pack_Bi(0x71, value)
    except _RANGE_ERRORS:
        raise _range_error("int", value) from None


def encode_long(out: bytearray, value: Any) -> None:
    """long: 0x55 (smalllong) or 0x81."""
    try:
        if -128 <= value <= 127:
            out += _SMALLLONG[value + 128]
        else:
            out += _pack_Bq(0x81, value)
    except _RANGE_ERRORS:
        raise _range_error("long", value) from None


def _encode_int_value(out: bytearray, value: int) -> None:
    # A plain int: long, or ulong when it only fits an unsigned 64-bit integer.
    if -128 <= value <= 127:
        out += _SMALLLONG[value + 128]
    elif -0x8000000000000000 <= value <= 0x7FFFFFFFFFFFFFFF:
        out += _pack_Bq(0x81, value)
    elif 0 <= value <= 0xFFFFFFFFFFFFFFFF:
        out += _pack_BQ(0x80, value)
    else:
        raise EncodeError(f"integer {value!r} does not fit AMQP long or ulong")


def encode_float(out: bytearray, value: Any) -> None:
    """float (IEEE 754 binary32): 0x72 (a NaN with its payload and signalling bit, as
    :func:`~amqplink.codec.decode.float32_nan` read it)."""
    try:
        if value != value:
            out += _pack_BI(0x72, float32_bits(value))
        else:
            out += _pack_Bf(0x72, value)
    except _RANGE_ERRORS:
        raise _range_error("float", value) from None


def float32_bits(value: float) -> int:
    """The binary32 bits of the NaN ``value`` (a double), the inverse of
    :func:`~amqplink.codec.decode.float32_nan`: its sign and the top 23 bits of its payload
    (a payload that leaves them all 0 is a quiet NaN, as C's cast makes it, not infinity)."""
    bits: int = _unpack_Q(_pack_d(value))[0]
    payload = (bits >> 29) & 0x7FFFFF
    return (bits >> 63) << 31 | 0x7F800000 | (payload or 0x400000)


def encode_double(out: bytearray, value: Any) -> None:
    """double (IEEE 754 binary64): 0x82."""
    try:
        out += _pack_Bd(0x82, value)
    except _RANGE_ERRORS:
        raise _range_error("double", value) from None


def _fixed_bytes(out: bytearray, code: int, size: int, type_name: str, value: Any) -> None:
    try:
        n = len(value)
    except TypeError:
        raise _range_error(type_name, value) from None
    if n != size or isinstance(value, str):
        raise _range_error(type_name, value)
    out.append(code)
    out += value


def encode_decimal32(out: bytearray, value: Any) -> None:
    """decimal32: 0x74 followed by the 4 raw bytes."""
    _fixed_bytes(out, 0x74, 4, "decimal32", value)


def encode_decimal64(out: bytearray, value: Any) -> None:
    """decimal64: 0x84 followed by the 8 raw bytes."""
    _fixed_bytes(out, 0x84, 8, "decimal64", value)


def encode_decimal128(out: bytearray, value: Any) -> None:
    """decimal128: 0x94 followed by the 16 raw bytes."""
    _fixed_bytes(out, 0x94, 16, "decimal128", value)


def _encode_python_decimal(out: bytearray, value: _decimal.Decimal) -> None:
    """A ``decimal.Decimal`` as the decimal128 that holds it exactly (the standard BID layout,
    as the Service Bus SDK sends one); an ``EncodeError`` when none does (more than 34
    digits, an exponent out of range) rather than a rounded number."""
    try:
        raw = Decimal128.from_decimal(value)
    except ValueError:
        raise _range_error("decimal128", value) from None
    out.append(0x94)
    out += raw


def _char_code(value: Any) -> int:
    try:
        cp = ord(value)
    except TypeError:
        raise _range_error("char", value) from None
    if 0xD800 <= cp <= 0xDFFF:
        raise _range_error("char", value)
    return cp


def encode_char(out: bytearray, value: Any) -> None:
    """char (one UTF-32BE code point): 0x73."""
    out += _pack_BI(0x73, _char_code(value))


def _timestamp_ms(value: _dt.datetime | int) -> int:
    if isinstance(value, _dt.datetime):
        return Timestamp.from_datetime(value)
    return value


def encode_timestamp(out: bytearray, value: Any) -> None:
    """timestamp (ms since the Unix epoch, int or datetime): 0x83."""
    try:
        out += _pack_Bq(0x83, _timestamp_ms(value))
    except _RANGE_ERRORS:
        raise _range_error("timestamp", value) from None


def encode_uuid(out: bytearray, value: Any) -> None:
    """uuid: 0x98 followed by the 16 bytes of the UUID."""
    try:
        raw = value.bytes
    except AttributeError:
        raise _range_error("uuid", value) from None
    out.append(0x98)
    out += raw


# ---------------------------------------------------------------------------
# Variable-width primitives
# ---------------------------------------------------------------------------


def encode_binary(out: bytearray, value: Any) -> None:
    """binary: vbin8 (0xa0) or vbin32 (0xb0)."""
    t = type(value)
    if t is bytes or t is bytearray or isinstance(value, (bytes, bytearray)):
        n = len(value)
    elif isinstance(value, memoryview):
        if value.c_contiguous:
            n = value.nbytes
        else:
            value = value.tobytes()
            n = len(value)
    else:
        raise _range_error("binary", value)
    if n < 256:
        out += _BIN8_HDR[n]
    elif n <= 0xFFFFFFFF:
        out += _pack_BI(0xB0, n)
    else:
        raise _range_error("binary", f"<{n} bytes>")
    out += value


def encode_string(out: bytearray, value: Any) -> None:
    """string (UTF-8): str8 (0xa1) or str32 (0xb1)."""
    try:
        raw = value.encode()
    except (AttributeError, UnicodeEncodeError):
        raise _range_error("string", value) from None
    n = len(raw)
    if n < 256:
        out += _STR8_HDR[n]
    elif n <= 0xFFFFFFFF:
        out += _pack_BI(0xB1, n)
    else:
        raise _range_error("string", f"<{n} bytes>")
    out += raw


def _symbol_bytes(value: Any) -> bytes:
    enc = _SYMBOL_CACHE.get(value)
    if enc is not None:
        return enc
    try:
        raw: bytes = value.encode("ascii")
    except (AttributeError, UnicodeEncodeError):
        raise EncodeError(f"AMQP symbol must be an ASCII string, got {value!r}") from None
    n = len(raw)
    if n < 256:
        enc = _SYM8_HDR[n] + raw
    elif n <= 0xFFFFFFFF:
        enc = _pack_BI(0xB3, n) + raw
    else:
        raise _range_error("symbol", f"<{n} characters>")
    if n <= _SYMBOL_CACHE_MAX_LEN and len(_SYMBOL_CACHE) < _SYMBOL_CACHE_MAX:
        _SYMBOL_CACHE[str(value)] = enc
    return enc


def encode_symbol(out: bytearray, value: Any) -> None:
    """symbol (ASCII): sym8 (0xa3) or sym32 (0xb3)."""
    try:
        enc = _SYMBOL_CACHE.get(value)
    except TypeError:
        raise EncodeError(f"AMQP symbol must be an ASCII string, got {value!r}") from None
    if enc is None:
        enc = _symbol_bytes(value)
    out += enc


# ---------------------------------------------------------------------------
# Compound types
# ---------------------------------------------------------------------------


def _insert_header(out: bytearray, start: int, count: int, code8: int, code32: int) -> None:
    # The items occupy out[start:]; put the size/count header in front of them.
    body = len(out) - start
    if body < 255 and count < 256:
        out[start:start] = _pack_BBB(code8, body + 1, count)
    else:
        if body > 0xFFFFFFFB or count > 0xFFFFFFFF:
            del out[start:]
            raise EncodeError("compound value too large for AMQP (over 4 GiB)")
        out[start:start] = _pack_BII(code32, body + 4, count)


def encode_list(out: bytearray, value: Any) -> None:
    """list: list0 (0x45), list8 (0xc0) or list32 (0xd0)."""
    t = type(value)
    if t is not list and t is not tuple and not isinstance(value, (list, tuple)):
        raise _range_error("list", value)
    if not value:
        out.append(0x45)
        return
    start = len(out)
    get = _DISPATCH.get
    for item in value:
        enc = get(type(item))
        if enc is None:
            enc = _resolve(item)
        enc(out, item)
    _insert_header(out, start, len(value), 0xC0, 0xD0)


def encode_map(out: bytearray, value: Any) -> None:
    """map: map8 (0xc1) or map32 (0xd1); keys and values via :func:`encode_value`."""
    start = len(out)
    get = _DISPATCH.get
    try:
        items = value.items()
    except AttributeError:
        raise _range_error("map", value) from None
    merging = False
    for k, v in items:
        enc = get(type(k))
        if enc is None:
            enc = _resolve(k)
        if enc in _KEY_CHECKED:
            merging |= _check_key(k, enc)
        enc(out, k)
        enc = get(type(v))
        if enc is None:
            enc = _resolve(v)
        enc(out, v)
    if merging:
        _check_distinct_keys(value)
    _insert_header(out, start, 2 * len(value), 0xC1, 0xD1)


# Map keys that every amqplink decoder reads back only under conditions: a list key
# decodes as a Python list, which cannot be a dict key; a datetime decodes as a
# Timestamp and a described value's tuples as lists, so two distinct keys may become
# equal, which the decoder rejects ("map holds duplicate keys"). Either way every
# amqplink receiver would reject the message, so the encoder refuses it.
def _check_key(key: Any, enc: Encoder) -> bool:
    """Refuse a key that cannot be a decoded dict key; True if it may merge with another."""
    if enc is encode_list:
        raise EncodeError(
            f"map key {key!r} would encode as an AMQP list, which amqplink cannot decode as a key;"
            " use a string, symbol, number or other scalar key"
        )
    return True


def _check_distinct_keys(value: dict[Any, Any]) -> None:
    if len({_decoded_key(k) for k in value}) != len(value):
        raise EncodeError(
            f"map keys {list(value)!r} are distinct in Python but equal once encoded (a datetime"
            " and its timestamp, or a tuple and a list in a described key); a map needs distinct keys"
        )


def _decoded_key(key: Any) -> Any:
    """What ``key`` decodes back as, in a hashable form."""
    if isinstance(key, _dt.datetime):
        return _timestamp_ms(key)
    if isinstance(key, Described):
        return (Described, _decoded_key(key.descriptor), _frozen(key.value))
    return key


def _frozen(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple((_frozen(k), _frozen(v)) for k, v in value.items())
    return _decoded_key(value)


def _encode_descriptor(out: bytearray, descriptor: Any) -> None:
    """A descriptor: a plain ``str`` as a symbol and a plain ``int`` as a ulong code (1.2:
    "symbolic (symbol) or numeric (ulong)"); a value of an explicit type (``Long``, ``UInt``,
    a ``Described``...) as that type, so a decoded descriptor encodes back as it came."""
    t = type(descriptor)
    if t is str or t is Symbol:
        encode_symbol(out, descriptor)
    elif t is int or t is ULong:
        encode_ulong(out, descriptor)
    else:
        encode_value(out, descriptor)


def encode_described(out: bytearray, descriptor: Any, value: Any) -> None:
    """A described value: 0x00, the descriptor (int -> ulong code, str -> symbol), the value."""
    out.append(0x00)
    _encode_descriptor(out, descriptor)
    encode_value(out, value)


def _encode_described_obj(out: bytearray, value: Described) -> None:
    out.append(0x00)
    _encode_descriptor(out, value.descriptor)
    encode_value(out, value.value)


def encode_composite(
    out: bytearray,
    code: int,
    values: Sequence[Any],
    encoders: Sequence[Encoder],
    defaults: Sequence[Any],
) -> None:
    """A list-based composite: descriptor ``code`` (ulong) and a list of its fields.

    ``values[i]`` is encoded with ``encoders[i]``; ``None`` encodes as null.
    Trailing fields that are ``None`` or equal to ``defaults[i]`` are left out.
    """
    n = len(values)
    while n:
        v = values[n - 1]
        if v is None or v == defaults[n - 1]:
            n -= 1
        else:
            break
    if 0 <= code < 256:
        out += _COMPOSITE_HDR[code]
    else:
        out.append(0x00)
        encode_ulong(out, code)
    if not n:
        out.append(0x45)
        return
    start = len(out)
    append = out.append
    for i in range(n):
        v = values[i]
        if v is None:
            append(0x40)
        else:
            encoders[i](out, v)
    body = len(out) - start
    if body < 255 and n < 256:
        out[start:start] = _pack_BBB(0xC0, body + 1, n)
    else:
        out[start:start] = _pack_BII(0xD0, body + 4, n)


# ---------------------------------------------------------------------------
# Arrays
# ---------------------------------------------------------------------------
# An array payload is "constructor element element ...", elements without their
# own constructors.  The writers below append the element constructor and the
# elements for one element type.


def _pack_all(fmt: str, items: Sequence[Any]) -> bytes:
    return struct.pack(f">{len(items)}{fmt}", *items)


def _aw_null(out: bytearray, items: Sequence[Any]) -> None:
    for v in items:
        if v is not None:
            raise _range_error("null", v)
    out.append(0x40)


def _aw_boolean(out: bytearray, items: Sequence[Any]) -> None:
    out.append(0x56)
    out += bytes(1 if v else 0 for v in items)


def _aw_ubyte(out: bytearray, items: Sequence[Any]) -> None:
    out.append(0x50)
    out += bytes(items)


def _aw_ushort(out: bytearray, items: Sequence[Any]) -> None:
    out.append(0x60)
    out += _pack_all("H", items)


def _aw_uint(out: bytearray, items: Sequence[Any]) -> None:
    try:
        body = bytes(items)
        out.append(0x52)
    except ValueError:
        body = _pack_all("I", items)
        out.append(0x70)
    out += body


def _aw_ulong(out: bytearray, items: Sequence[Any]) -> None:
    try:
        body = bytes(items)
        out.append(0x53)
    except ValueError:
        body = _pack_all("Q", items)
        out.append(0x80)
    out += body


def _aw_byte(out: bytearray, items: Sequence[Any]) -> None:
    out.append(0x51)
    out += _pack_all("b", items)


def _aw_short(out: bytearray, items: Sequence[Any]) -> None:
    out.append(0x61)
    out += _pack_all("h", items)


def _aw_int(out: bytearray, items: Sequence[Any]) -> None:
    try:
        body = _pack_all("b", items)
        out.append(0x54)
    except _struct_error:
        body = _pack_all("i", items)
        out.append(0x71)
    out += body


def _aw_long(out: bytearray, items: Sequence[Any]) -> None:
    try:
        body = _pack_all("b", items)
        out.append(0x55)
    except _struct_error:
        body = _pack_all("q", items)
        out.append(0x81)
    out += body


def _aw_float(out: bytearray, items: Sequence[Any]) -> None:
    out.append(0x72)
    if all(v == v for v in items):
        out += _pack_all("f", items)
    else:
        out += _pack_all("I", [float32_bits(v) if v != v else _unpack_I(_pack_f(v))[0] for v in items])


def _aw_double(out: bytearray, items: Sequence[Any]) -> None:
    out.append(0x82)
    out += _pack_all("d", items)


def _aw_fixed(code: int, size: int, type_name: str) -> Callable[[bytearray, Sequence[Any]], None]:
    def write(out: bytearray, items: Sequence[Any]) -> None:
        for v in items:
            if isinstance(v, str) or len(v) != size:
                raise _range_error(type_name, v)
        out.append(code)
        out += b"".join(items)

    return write


def _aw_char(out: bytearray, items: Sequence[Any]) -> None:
    out.append(0x73)
    out += _pack_all("I", [_char_code(v) for v in items])


def _aw_timestamp(out: bytearray, items: Sequence[Any]) -> None:
    out.append(0x83)
    out += _pack_all("q", [_timestamp_ms(v) for v in items])


def _aw_uuid(out: bytearray, items: Sequence[Any]) -> None:
    out.append(0x98)
    out += b"".join(v.bytes for v in items)


def _aw_variable(out: bytearray, raws: list[bytes], code8: int, code32: int) -> None:
    if all(len(r) < 256 for r in raws):
        out.append(code8)
        for r in raws:
            out.append(len(r))
            out += r
    else:
        out.append(code32)
        for r in raws:
            out += _pack_I(len(r))
            out += r


def _aw_binary(out: bytearray, items: Sequence[Any]) -> None:
    raws = []
    for v in items:
        if not isinstance(v, (bytes, bytearray, memoryview)):
            raise _range_error("binary", v)
        raws.append(bytes(v))
    _aw_variable(out, raws, 0xA0, 0xB0)


def _aw_string(out: bytearray, items: Sequence[Any]) -> None:
    try:
        raws = [v.encode() for v in items]
    except (AttributeError, UnicodeEncodeError):
        raise EncodeError(f"array of string holds a non-string: {items!r}") from None
    _aw_variable(out, raws, 0xA1, 0xB1)


def _aw_symbol(out: bytearray, items: Sequence[Any]) -> None:
    try:
        raws = [v.encode("ascii") for v in items]
    except (AttributeError, UnicodeEncodeError):
        raise EncodeError(f"array of symbol holds a non-ASCII string: {items!r}") from None
    _aw_variable(out, raws, 0xA3, 0xB3)


def _aw_compound(
    out: bytearray,
    items: Sequence[Any],
    body_of: Callable[[Any], tuple[int, bytes]],
    code8: int,
    code32: int,
) -> None:
    # Each element: size, count, payload, with one width for the whole array.
    parts = [body_of(v) for v in items]
    if all(len(p) < 255 and c < 256 for c, p in parts):
        out.append(code8)
        for c, p in parts:
            out += _pack_BB(len(p) + 1, c)
            out += p
    else:
        out.append(code32)
        for c, p in parts:
            out += _pack_II(len(p) + 4, c)
            out += p


def _list_body(value: Any) -> tuple[int, bytes]:
    if not isinstance(value, (list, tuple)):
        raise _range_error("list", value)
    buf = bytearray()
    for item in value:
        encode_value(buf, item)
    return len(value), bytes(buf)


def _map_body(value: Any) -> tuple[int, bytes]:
    if not isinstance(value, dict):
        raise _range_error("map", value)
    buf = bytearray()
    encode_map(buf, value)
    return 2 * len(value), bytes(buf[_MAP_HEADER_SIZE[buf[0]] :])


def _array_body(value: Any) -> tuple[int, bytes]:
    if not isinstance(value, (list, tuple)):
        raise _range_error("array", value)
    buf = bytearray()
    if isinstance(value, Array):
        _array_payload(buf, value, value.element_type, value.descriptor)
    else:
        _array_payload(buf, value, infer_type(value[0]) if value else AMQPType.NULL, None)
    return len(value), bytes(buf)


def _aw_list(out: bytearray, items: Sequence[Any]) -> None:
    _aw_compound(out, items, _list_body, 0xC0, 0xD0)


def _aw_map(out: bytearray, items: Sequence[Any]) -> None:
    _aw_compound(out, items, _map_body, 0xC1, 0xD1)


def _aw_array(out: bytearray, items: Sequence[Any]) -> None:
    _aw_compound(out, items, _array_body, 0xE0, 0xF0)


def _aw_described(out: bytearray, items: Sequence[Any]) -> None:
    # element_type DESCRIBED without a descriptor: Described elements sharing one descriptor.
    if not items:
        raise EncodeError("empty array of described values needs Array.descriptor")
    descriptor = None
    values = []
    for i, v in enumerate(items):
        if not isinstance(v, Described):
            raise EncodeError(f"array of described holds a non-Described value: {v!r}")
        if i == 0:
            descriptor = v.descriptor
        elif v.descriptor != descriptor or type(v.descriptor) is not type(descriptor):
            raise EncodeError("Described values in one array must share the descriptor")
        values.append(v.value)
    element_type = infer_type(values[0])
    if element_type is AMQPType.DESCRIBED:
        raise EncodeError("arrays of described values take one descriptor level only")
    out.append(0x00)
    _encode_descriptor(out, descriptor)
    _array_payload(out, values, element_type, None)


_ARRAY_WRITERS: dict[AMQPType, Callable[[bytearray, Sequence[Any]], None]] = {
    AMQPType.NULL: _aw_null,
    AMQPType.BOOLEAN: _aw_boolean,
    AMQPType.UBYTE: _aw_ubyte,
    AMQPType.USHORT: _aw_ushort,
    AMQPType.UINT: _aw_uint,
    AMQPType.ULONG: _aw_ulong,
    AMQPType.BYTE: _aw_byte,
    AMQPType.SHORT: _aw_short,
    AMQPType.INT: _aw_int,
    AMQPType.LONG: _aw_long,
    AMQPType.FLOAT: _aw_float,
    AMQPType.DOUBLE: _aw_double,
    AMQPType.DECIMAL32: _aw_fixed(0x74, 4, "decimal32"),
    AMQPType.DECIMAL64: _aw_fixed(0x84, 8, "decimal64"),
    AMQPType.DECIMAL128: _aw_fixed(0x94, 16, "decimal128"),
    AMQPType.CHAR: _aw_char,
    AMQPType.TIMESTAMP: _aw_timestamp,
    AMQPType.UUID: _aw_uuid,
    AMQPType.BINARY: _aw_binary,
    AMQPType.STRING: _aw_string,
    AMQPType.SYMBOL: _aw_symbol,
    AMQPType.LIST: _aw_list,
    AMQPType.MAP: _aw_map,
    AMQPType.ARRAY: _aw_array,
    AMQPType.DESCRIBED: _aw_described,
}


def _array_payload(
    out: bytearray,
    items: Sequence[Any],
    element_type: AMQPType,
    descriptor: Any,
) -> None:
    """Append the element constructor (with descriptor, if any) and the elements."""
    if descriptor is not None:
        if element_type is AMQPType.DESCRIBED:
            raise EncodeError("arrays of described values take one descriptor level only")
        out.append(0x00)
        _encode_descriptor(out, descriptor)
    writer = _ARRAY_WRITERS.get(element_type)
    if writer is None:
        raise EncodeError(f"unknown array element type {element_type!r}")
    try:
        writer(out, items)
    except EncodeError:
        raise
    except (*_RANGE_ERRORS, AttributeError) as exc:
        raise EncodeError(f"cannot encode array of {element_type.value}: {exc}") from None


def _encode_array_of(out: bytearray, items: Sequence[Any], element_type: AMQPType, descriptor: Any) -> None:
    start = len(out)
    try:
        _array_payload(out, items, element_type, descriptor)
    except BaseException:
        del out[start:]
        raise
    _insert_header(out, start, len(items), 0xE0, 0xF0)


def encode_array(out: bytearray, value: Any) -> None:
    """array: array8 (0xe0) or array32 (0xf0); one element constructor for all elements.

    An :class:`Array` uses its ``element_type`` (and ``descriptor``, for arrays
    of described values); for a plain list/tuple the type of the first element
    is used (an empty one becomes an array of null).
    """
    if isinstance(value, Array):
        _encode_array_of(out, value, value.element_type, value.descriptor)
    elif isinstance(value, (list, tuple)):
        _encode_array_of(out, value, infer_type(value[0]) if value else AMQPType.NULL, None)
    else:
        raise _range_error("array", value)


# ---------------------------------------------------------------------------
# Generic dispatch
# ---------------------------------------------------------------------------


def _encode_amqp_object(out: bytearray, value: Any) -> None:
    value._amqp_encode(out)


def _encode_datetime(out: bytearray, value: Any) -> None:
    encode_timestamp(out, value)


_DISPATCH: dict[type, Encoder] = {
    type(None): encode_null,
    bool: encode_boolean,
    int: _encode_int_value,
    float: encode_double,
    str: encode_string,
    bytes: encode_binary,
    bytearray: encode_binary,
    memoryview: encode_binary,
    list: encode_list,
    tuple: encode_list,
    dict: encode_map,
    UByte: encode_ubyte,
    UShort: encode_ushort,
    UInt: encode_uint,
    ULong: encode_ulong,
    Byte: encode_byte,
    Short: encode_short,
    Int: encode_int,
    Long: encode_long,
    Float: encode_float,
    Timestamp: encode_timestamp,
    Char: encode_char,
    Symbol: encode_symbol,
    Decimal32: encode_decimal32,
    Decimal64: encode_decimal64,
    Decimal128: encode_decimal128,
    _decimal.Decimal: _encode_python_decimal,
    Array: encode_array,
    Described: _encode_described_obj,
    uuid.UUID: encode_uuid,
    _dt.datetime: _encode_datetime,
}

# Checked in order for types that are not in _DISPATCH (subclasses).  Wrapper
# types come before their builtin bases, bool before int.
_FALLBACK: tuple[tuple[type, Encoder], ...] = (
    (bool, encode_boolean),
    (UByte, encode_ubyte),
    (UShort, encode_ushort),
    (UInt, encode_uint),
    (ULong, encode_ulong),
    (Byte, encode_byte),
    (Short, encode_short),
    (Int, encode_int),
    (Long, encode_long),
    (Timestamp, encode_timestamp),
    (int, _encode_int_value),
    (Float, encode_float),
    (float, encode_double),
    (Char, encode_char),
    (Symbol, encode_symbol),
    (str, encode_string),
    (Decimal32, encode_decimal32),
    (Decimal64, encode_decimal64),
    (Decimal128, encode_decimal128),
    (_decimal.Decimal, _encode_python_decimal),
    (bytes, encode_binary),
    (bytearray, encode_binary),
    (memoryview, encode_binary),
    (Array, encode_array),
    (list, encode_list),
    (tuple, encode_list),
    (dict, encode_map),
    (uuid.UUID, encode_uuid),
    (_dt.datetime, _encode_datetime),
    (Described, _encode_described_obj),
)

_DISPATCH_CACHE_MAX = 1024
_KEY_CHECKED = frozenset((encode_list, _encode_datetime, _encode_described_obj))
_MAP_HEADER_SIZE = {0xC1: 3, 0xD1: 9}  # constructor, size and count: map8, map32


def _resolve(value: Any) -> Encoder:
    """Find (and remember) the encoder for a type missing from the dispatch dict."""
    t = type(value)
    enc: Encoder | None = None
    if callable(getattr(t, "_amqp_encode", None)):
        enc = _encode_amqp_object
    else:
        for base, candidate in _FALLBACK:
            if isinstance(value, base):
                enc = candidate
                break
    if enc is None:
        raise EncodeError(f"no AMQP encoding for Python value of type {t.__name__}: {value!r}")
    if len(_DISPATCH) < _DISPATCH_CACHE_MAX:
        _DISPATCH[t] = enc
    return enc


def encode_value(out: bytearray, value: Any) -> None:
    """Append ``value`` encoded as the AMQP type its Python type maps to."""
    enc = _DISPATCH.get(type(value))
    if enc is None:
        enc = _resolve(value)
    enc(out, value)


def encode(value: Any) -> bytes:
    """The AMQP encoding of ``value`` (see :func:`encode_value`)."""
    out = bytearray()
    encode_value(out, value)
    return bytes(out)


ENCODERS: dict[AMQPType, Encoder] = {
    AMQPType.NULL: encode_null,
    AMQPType.BOOLEAN: encode_boolean,
    AMQPType.UBYTE: encode_ubyte,
    AMQPType.USHORT: encode_ushort,
    AMQPType.UINT: encode_uint,
    AMQPType.ULONG: encode_ulong,
    AMQPType.BYTE: encode_byte,
    AMQPType.SHORT: encode_short,
    AMQPType.INT: encode_int,
    AMQPType.LONG: encode_long,
    AMQPType.FLOAT: encode_float,
    AMQPType.DOUBLE: encode_double,
    AMQPType.DECIMAL32: encode_decimal32,
    AMQPType.DECIMAL64: encode_decimal64,
    AMQPType.DECIMAL128: encode_decimal128,
    AMQPType.CHAR: encode_char,
    AMQPType.TIMESTAMP: encode_timestamp,
    AMQPType.UUID: encode_uuid,
    AMQPType.BINARY: encode_binary,
    AMQPType.STRING: encode_string,
    AMQPType.SYMBOL: encode_symbol,
    AMQPType.LIST: encode_list,
    AMQPType.MAP: encode_map,
    AMQPType.ARRAY: encode_array,
    AMQPType.DESCRIBED: encode_value,
}

_TYPE_OF_ENCODER: dict[Encoder, AMQPType] = {enc: t for t, enc in ENCODERS.items() if t is not AMQPType.DESCRIBED}


class _Multiple:
    """Encoder for a multiple="true" field: a list/tuple becomes an array."""

    __slots__ = ("element_encoder", "element_type")

    def __init__(self, element_encoder: Encoder) -> None:
        self.element_encoder = element_encoder
        self.element_type = _TYPE_OF_ENCODER.get(element_encoder)

    def __call__(self, out: bytearray, value: Any) -> None:
        if isinstance(value, (list, tuple)):
            if isinstance(value, Array):
                encode_array(out, value)
            elif self.element_type is not None:
                _encode_array_of(out, value, self.element_type, None)
            else:
                encode_array(out, value)
        else:
            self.element_encoder(out, value)

    def __repr__(self) -> str:
        return f"multiple({getattr(self.element_encoder, '__name__', self.element_encoder)!r})"


def multiple(encoder: Encoder) -> Encoder:
    """The encoder of a multiple="true" field whose element type ``encoder`` encodes.

    A list or tuple encodes as an array of that element type; any other value
    encodes as a single element (spec 1.3: a single value is a valid "array of one").
    """
    return _Multiple(encoder)
