"""AMQP 1.0 type system codec (spec part 1, "Types").

* :mod:`.types` - Python representations of the AMQP primitive types
  (``UInt``, ``Symbol``, ``Array``, ``Described``...).
* :mod:`.encode` - typed encoders that append the smallest valid encoding to a
  ``bytearray``, the generic :func:`encode_value`, and :func:`encode_composite`
  for list-based composites (performatives, message sections...).
* :mod:`.decode` - a defensive, table-driven decoder (:func:`decode`,
  :func:`decode_all`, :func:`decode_sequence`) with :class:`DecodeLimits` and a
  registry mapping descriptors to composite factories (:func:`register_composite`).
* :mod:`.errors` - :class:`DecodeError` and :class:`EncodeError`.

Note that the package-level names ``encode`` and ``decode`` are the functions,
which shadow the submodules of the same names as attributes of this package;
import from the submodules with ``from amqplink.codec.encode import ...``.

Typical use::

    from amqplink.codec import Symbol, UInt, decode_all, encode

    data = encode({Symbol("x-opt-partition-key"): "pk", "n": UInt(7)})
    assert decode_all(data) == {Symbol("x-opt-partition-key"): "pk", "n": UInt(7)}
"""

from __future__ import annotations

from .decode import (
    DEFAULT_LIMITS,
    DecodeLimits,
    decode,
    decode_all,
    decode_sequence,
    interpret,
    register_composite,
    registered_composites,
    unregister_composite,
)
from .encode import (
    ENCODERS,
    Encoder,
    encode,
    encode_array,
    encode_binary,
    encode_boolean,
    encode_byte,
    encode_char,
    encode_composite,
    encode_decimal32,
    encode_decimal64,
    encode_decimal128,
    encode_described,
    encode_double,
    encode_float,
    encode_int,
    encode_list,
    encode_long,
    encode_map,
    encode_null,
    encode_short,
    encode_string,
    encode_symbol,
    encode_timestamp,
    encode_ubyte,
    encode_uint,
    encode_ulong,
    encode_ushort,
    encode_uuid,
    encode_value,
    multiple,
)
from .errors import DecodeError, EncodeError
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
    same_value,
)

__all__ = [
    # types
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
    "infer_type",
    "same_value",
    # errors
    "DecodeError",
    "EncodeError",
    # encode
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
    "multiple",
    # decode
    "DEFAULT_LIMITS",
    "DecodeLimits",
    "decode",
    "decode_all",
    "decode_sequence",
    "interpret",
    "register_composite",
    "registered_composites",
    "unregister_composite",
]
