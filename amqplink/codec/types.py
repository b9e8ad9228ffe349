"""Python representations of the AMQP 1.0 primitive types (spec part 1, "Types").

Mapping used by the encoder and the decoder:

=================  ==========================================================
AMQP type          Python value
=================  ==========================================================
null               ``None``
boolean            ``bool``
ubyte/ushort       :class:`UByte` / :class:`UShort`
uint/ulong         :class:`UInt` / :class:`ULong`
byte/short/int     :class:`Byte` / :class:`Short` / :class:`Int`
long               ``int`` (a plain int is encoded as long)
float / double     :class:`Float` / ``float``
decimal32/64/128   :class:`Decimal32` / :class:`Decimal64` / :class:`Decimal128`
                   (a ``decimal.Decimal`` encodes as the decimal128 that holds it exactly)
char               :class:`Char`
timestamp          :class:`Timestamp` (milliseconds since the Unix epoch)
uuid               :class:`uuid.UUID`
binary             ``bytes`` (``bytearray`` and ``memoryview`` also encode)
string             ``str``
symbol             :class:`Symbol`
list               ``list`` (or ``tuple`` when encoding)
map                ``dict``
array              :class:`Array`
described          :class:`Described`, or a registered composite class
=================  ==========================================================

The wrappers subclass ``int``/``float``/``str``/``bytes`` so they compare equal
to the plain values and cost nothing to read.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import enum
import struct as _struct
from collections.abc import Iterable
from typing import Any

__all__ = [
    "AMQPType",
    "Array",
    "Byte",
    "Char",
    "Decimal128",
    "Decimal32",
    "Decimal64",
    "Described",
    "Float",
    "Int",
    "Long",
    "Short",
    "Symbol",
    "Timestamp",
    "UByte",
    "UInt",
    "ULong",
    "UShort",
    "same_value",
]


class AMQPType(enum.Enum):
    """The primitive type names of AMQP 1.0 (spec 1.6), as used by arrays and specs."""

    NULL = "null"
    BOOLEAN = "boolean"
    UBYTE = "ubyte"
    USHORT = "ushort"
    UINT = "uint"
    ULONG = "ulong"
    BYTE = "byte"
    SHORT = "short"
    INT = "int"
    LONG = "long"
    FLOAT = "float"
    DOUBLE = "double"
    DECIMAL32 = "decimal32"
    DECIMAL64 = "decimal64"
    DECIMAL128 = "decimal128"
    CHAR = "char"
    TIMESTAMP = "timestamp"
    UUID = "uuid"
    BINARY = "binary"
    STRING = "string"
    SYMBOL = "symbol"
    LIST = "list"
    MAP = "map"
    ARRAY = "array"
    DESCRIBED = "described"


class UByte(int):
    """AMQP ubyte: 8-bit unsigned integer."""

    __slots__ = ()

    def __new__(cls, value: Any = 0) -> UByte:
        v = int.__new__(cls, value)
        if not 0 <= v <= 0xFF:
            raise ValueError(f"ubyte out of range: {int(v)}")
        return v

    def __repr__(self) -> str:
        return f"UByte({int(self)})"


class UShort(int):
    """AMQP ushort: 16-bit unsigned integer."""

    __slots__ = ()

    def __new__(cls, value: Any = 0) -> UShort:
        v = int.__new__(cls, value)
        if not 0 <= v <= 0xFFFF:
            raise ValueError(f"ushort out of range: {int(v)}")
        return v

    def __repr__(self) -> str:
        return f"UShort({int(self)})"


class UInt(int):
    """AMQP uint: 32-bit unsigned integer."""

    __slots__ = ()

    def __new__(cls, value: Any = 0) -> UInt:
        v = int.__new__(cls, value)
        if not 0 <= v <= 0xFFFFFFFF:
            raise ValueError(f"uint out of range: {int(v)}")
        return v

    def __repr__(self) -> str:
        return f"UInt({int(self)})"


class ULong(int):
    """AMQP ulong: 64-bit unsigned integer."""

    __slots__ = ()

    def __new__(cls, value: Any = 0) -> ULong:
        v = int.__new__(cls, value)
        if not 0 <= v <= 0xFFFFFFFFFFFFFFFF:
            raise ValueError(f"ulong out of range: {int(v)}")
        return v

    def __repr__(self) -> str:
        return f"ULong({int(self)})"


class Byte(int):
    """AMQP byte: 8-bit two's-complement integer."""

    __slots__ = ()

    def __new__(cls, value: Any = 0) -> Byte:
        v = int.__new__(cls, value)
        if not -0x80 <= v <= 0x7F:
            raise ValueError(f"byte out of range: {int(v)}")
        return v

    def __repr__(self) -> str:
        return f"Byte({int(self)})"


class Short(int):
    """AMQP short: 16-bit two's-complement integer."""

    __slots__ = ()

    def __new__(cls, value: Any = 0) -> Short:
        v = int.__new__(cls, value)
        if not -0x8000 <= v <= 0x7FFF:
            raise ValueError(f"short out of range: {int(v)}")
        return v

    def __repr__(self) -> str:
        return f"Short({int(self)})"


class Int(int):
    """AMQP int: 32-bit two's-complement integer."""

    __slots__ = ()

    def __new__(cls, value: Any = 0) -> Int:
        v = int.__new__(cls, value)
        if not -0x80000000 <= v <= 0x7FFFFFFF:
            raise ValueError(f"int out of range: {int(v)}")
        return v

    def __repr__(self) -> str:
        return f"Int({int(self)})"


class Long(int):
    """AMQP long: 64-bit two's-complement integer (a plain ``int`` encodes the same)."""

    __slots__ = ()

    def __new__(cls, value: Any = 0) -> Long:
        v = int.__new__(cls, value)
        if not -0x8000000000000000 <= v <= 0x7FFFFFFFFFFFFFFF:
            raise ValueError(f"long out of range: {int(v)}")
        return v

    def __repr__(self) -> str:
        return f"Long({int(self)})"


class Timestamp(int):
    """AMQP timestamp: milliseconds since the Unix epoch (64-bit signed)."""

    __slots__ = ()

    def __new__(cls, value: Any = 0) -> Timestamp:
        v = int.__new__(cls, value)
        if not -0x8000000000000000 <= v <= 0x7FFFFFFFFFFFFFFF:
            raise ValueError(f"timestamp out of range: {int(v)}")
        return v

    def __repr__(self) -> str:
        return f"Timestamp({int(self)})"

    @classmethod
    def from_datetime(cls, when: _dt.datetime) -> Timestamp:
        """The timestamp of an aware datetime (naive datetimes are taken as UTC)."""
        if when.tzinfo is None:
            when = when.replace(tzinfo=_dt.UTC)
        delta = when - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
        return cls(delta // _dt.timedelta(milliseconds=1))

    def to_datetime(self) -> _dt.datetime:
        """This timestamp as an aware UTC datetime."""
        epoch = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
        return epoch + _dt.timedelta(milliseconds=int(self))


class Float(float):
    """AMQP float: IEEE 754-2008 binary32 (a plain ``float`` encodes as double)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Float({float(self)!r})"


class Char(str):
    """AMQP char: a single Unicode code point (UTF-32BE on the wire)."""

    __slots__ = ()

    def __new__(cls, value: str) -> Char:
        if len(value) != 1:
            raise ValueError(f"char must be one code point, got {len(value)}")
        return str.__new__(cls, value)

    def __repr__(self) -> str:
        return f"Char({str(self)!r})"


class Symbol(str):
    """AMQP symbol: a string of ASCII characters naming a constant."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Symbol({str(self)!r})"


class _FixedBytes(bytes):
    SIZE = 0

    def __new__(cls, value: bytes) -> _FixedBytes:
        if len(value) != cls.SIZE:
            raise ValueError(f"{cls.__name__} takes exactly {cls.SIZE} bytes, got {len(value)}")
        return bytes.__new__(cls, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({bytes(self)!r})"


class _DecimalBID(_FixedBytes):
    """An IEEE 754-2008 decimal in its binary integer decimal (BID) encoding, the one AMQP
    names (1.6.17-19: "IEEE 754-2008 decimal32 using the Binary Integer Decimal encoding"),
    kept as its raw bytes: what was sent is what is kept and compared (two encodings of one
    number, 1.5 and 1.50, are two values), and :meth:`to_decimal` and :meth:`from_decimal`
    convert to and from :class:`decimal.Decimal`.

    The layout (k bits: sign, then e exponent bits and c = k - 1 - e coefficient bits; or,
    after the sign, ``11``, the exponent, and c - 2 bits after an implicit ``100``; a
    combination ``11110`` is an infinity, ``11111`` a NaN, signalling when the next bit is
    set, with its payload in the last c - 3 bits). A coefficient above the precision's
    largest (10**p - 1) is not canonical and reads as zero, as IEEE 754 says.
    """

    EXPONENT_BITS = 0
    BIAS = 0
    DIGITS = 0

    def to_decimal(self) -> _decimal.Decimal:
        """The number (or infinity or NaN) these bytes encode."""
        k = self.SIZE * 8
        bits = int.from_bytes(self, "big")
        sign = bits >> (k - 1)
        e = self.EXPONENT_BITS
        c = k - 1 - e
        top = (bits >> (k - 6)) & 0x1F  # the combination field's first five bits
        minus = "-" if sign else ""
        if top == 0x1E:
            return _decimal.Decimal(f"{minus}Infinity")
        if top == 0x1F:
            payload = bits & ((1 << (c - 3)) - 1)
            signalling = "s" if (bits >> (k - 7)) & 1 else ""
            kept = payload if payload < 10 ** (self.DIGITS - 1) else 0  # (a payload past it: not canonical)
            return _decimal.Decimal(f"{minus}{signalling}NaN{kept or ''}")
        if top >> 3 == 3:  # 11: the exponent after them, an implicit 100 before the coefficient
            exponent = (bits >> (c - 2)) & ((1 << e) - 1)
            coefficient = (4 << (c - 2)) | (bits & ((1 << (c - 2)) - 1))
        else:
            exponent = (bits >> c) & ((1 << e) - 1)
            coefficient = bits & ((1 << c) - 1)
        if coefficient >= 10**self.DIGITS:
            coefficient = 0
        return _decimal.Decimal((sign, _digits(coefficient), exponent - self.BIAS))

    @classmethod
    def from_decimal(cls, value: _decimal.Decimal | int | str) -> Any:
        """The canonical encoding of ``value`` exactly (its exponent kept where the type's
        range and precision allow it, else moved by trailing zeros); ``ValueError`` when the
        type cannot hold it without rounding."""
        number = _decimal.Decimal(value)
        k = cls.SIZE * 8
        e = cls.EXPONENT_BITS
        c = k - 1 - e
        sign, digits, exponent = number.as_tuple()
        if number.is_infinite():
            bits = 0x1E << (k - 6)
        elif number.is_nan():
            payload = int("".join(map(str, digits))) if digits else 0
            if payload >= 10 ** (cls.DIGITS - 1):
                raise ValueError(f"the NaN payload of {value!r} does not fit a {cls.__name__}")
            bits = 0x1F << (k - 6) | (1 << (k - 7) if number.is_snan() else 0) | payload
        else:
            place = int(exponent)
            coefficient = int("".join(map(str, digits)))
            largest, low, high = 10**cls.DIGITS - 1, -cls.BIAS, 3 * (1 << (e - 2)) - 1 - cls.BIAS
            while place > high and coefficient * 10 <= largest:
                coefficient, place = coefficient * 10, place - 1
            while (place < low or coefficient > largest) and coefficient % 10 == 0 and coefficient:
                coefficient, place = coefficient // 10, place + 1
            if coefficient == 0:
                place = min(max(place, low), high)
            if coefficient > largest or not low <= place <= high:
                raise ValueError(f"{value!r} has no exact {cls.__name__} (precision {cls.DIGITS})")
            biased = place + cls.BIAS
            if coefficient < 1 << c:
                bits = biased << c | coefficient
            else:
                bits = 3 << (k - 3) | biased << (c - 2) | (coefficient & ((1 << (c - 2)) - 1))
        return cls((bits | sign << (k - 1)).to_bytes(cls.SIZE, "big"))


def _digits(n: int) -> tuple[int, ...]:
    return tuple(map(int, str(n)))


class Decimal32(_DecimalBID):
    """AMQP decimal32: IEEE 754-2008 decimal32 (BID), kept as its 4 raw bytes."""

    SIZE = 4
    EXPONENT_BITS = 8
    BIAS = 101
    DIGITS = 7


class Decimal64(_DecimalBID):
    """AMQP decimal64: IEEE 754-2008 decimal64 (BID), kept as its 8 raw bytes."""

    SIZE = 8
    EXPONENT_BITS = 10
    BIAS = 398
    DIGITS = 16


class Decimal128(_DecimalBID):
    """AMQP decimal128: IEEE 754-2008 decimal128 (BID), kept as its 16 raw bytes."""

    SIZE = 16
    EXPONENT_BITS = 14
    BIAS = 6176
    DIGITS = 34


class Described:
    """A described value whose descriptor no composite class claims (spec 1.2).

    ``descriptor`` is a :class:`ULong` code or a :class:`Symbol`.
    """

    __slots__ = ("descriptor", "value")

    def __init__(self, descriptor: Any, value: Any) -> None:
        self.descriptor = descriptor
        self.value = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Described):
            return NotImplemented
        return bool(self.descriptor == other.descriptor and self.value == other.value)

    def __hash__(self) -> int:
        return hash((self.descriptor, _freeze(self.value)))

    def __repr__(self) -> str:
        return f"Described({self.descriptor!r}, {self.value!r})"


class Array(list[Any]):
    """AMQP array: a sequence of values of one type, encoded with one constructor.

    ``element_type`` names the primitive type of every element; for arrays of
    described values ``descriptor`` gives the shared descriptor and
    ``element_type`` the type of the described values.
    """

    __slots__ = ("descriptor", "element_type")

    def __init__(
        self,
        items: Iterable[Any] = (),
        element_type: AMQPType | None = None,
        descriptor: Any = None,
    ) -> None:
        super().__init__(items)
        if element_type is None:
            element_type = infer_type(self[0]) if self else AMQPType.NULL
        self.element_type = element_type
        self.descriptor = descriptor

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Array):
            return (
                self.element_type == other.element_type
                and self.descriptor == other.descriptor
                and list.__eq__(self, other)
            )
        return list.__eq__(self, other)

    __hash__ = None

    def __repr__(self) -> str:
        extra = f", descriptor={self.descriptor!r}" if self.descriptor is not None else ""
        return f"Array({list.__repr__(self)}, {self.element_type.value}{extra})"


_TYPE_OF: dict[type, AMQPType] = {
    type(None): AMQPType.NULL,
    bool: AMQPType.BOOLEAN,
    UByte: AMQPType.UBYTE,
    UShort: AMQPType.USHORT,
    UInt: AMQPType.UINT,
    ULong: AMQPType.ULONG,
    Byte: AMQPType.BYTE,
    Short: AMQPType.SHORT,
    Int: AMQPType.INT,
    Long: AMQPType.LONG,
    int: AMQPType.LONG,
    Float: AMQPType.FLOAT,
    float: AMQPType.DOUBLE,
    Decimal32: AMQPType.DECIMAL32,
    Decimal64: AMQPType.DECIMAL64,
    Decimal128: AMQPType.DECIMAL128,
    Char: AMQPType.CHAR,
    Timestamp: AMQPType.TIMESTAMP,
    bytes: AMQPType.BINARY,
    bytearray: AMQPType.BINARY,
    memoryview: AMQPType.BINARY,
    str: AMQPType.STRING,
    Symbol: AMQPType.SYMBOL,
    list: AMQPType.LIST,
    tuple: AMQPType.LIST,
    dict: AMQPType.MAP,
    Array: AMQPType.ARRAY,
    Described: AMQPType.DESCRIBED,
}


def infer_type(value: Any) -> AMQPType:
    """The AMQP type a Python value encodes as (see the module table)."""
    t = _TYPE_OF.get(type(value))
    if t is not None:
        return t
    import uuid

    if isinstance(value, uuid.UUID):
        return AMQPType.UUID
    if isinstance(value, _dt.datetime):
        return AMQPType.TIMESTAMP
    if hasattr(value, "_amqp_fields"):
        return AMQPType.DESCRIBED
    for base, amqp_type in _TYPE_OF.items():
        if isinstance(value, base) and base is not type(None):
            return amqp_type
    raise TypeError(f"no AMQP type for Python value of type {type(value).__name__}")


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple((_freeze(k), _freeze(v)) for k, v in value.items())
    return value


def same_value(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same AMQP value, which ``==`` does not say (``UInt(1) ==
    1``, ``nan != nan``): the same Python types all the way down, floats by their bits (a NaN
    is the NaN it was), arrays with their element type and descriptor, described values with
    their descriptors, maps with their entries in the same order."""
    t = type(a)
    if t is not type(b):
        return False
    if t is float or t is Float:
        return _pack_d(a) == _pack_d(b)
    if t is Array:
        return a.element_type is b.element_type and same_value(a.descriptor, b.descriptor) and _same_items(a, b)
    if t is list or t is tuple:
        return _same_items(a, b)
    if t is dict:
        return len(a) == len(b) and all(
            same_value(ka, kb) and same_value(va, vb) for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True)
        )
    if t is Described:
        return same_value(a.descriptor, b.descriptor) and same_value(a.value, b.value)
    return bool(a == b)


def _same_items(a: Any, b: Any) -> bool:
    return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))


_pack_d = _struct.Struct(">d").pack
