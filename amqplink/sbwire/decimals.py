"""Service Bus's decimal application properties on the wire (docs/protocol.md#decimals).

Service Bus keeps an application property's AMQP decimal (decimal32, decimal64 or
decimal128) as a .NET ``System.Decimal``: a 96-bit coefficient and a scale of 0 to 28
decimal places. It delivers that value as a decimal128 written the way
Microsoft.Azure.Amqp's ``DecimalEncoding`` wrote it: the sign bit, the biased exponent
``6176 - scale`` shifted right by 9 (not 7) into the first byte and its low 7 bits in the
second, two zero bytes, then the coefficient's three 32-bit words. That is not the
standard layout (azure-amqp pull request 316 fixed the shift), and it is the one the
official Python SDK reads: azure-servicebus 7.15's decoder (pyamqp ``_decode_decimal128``)
shifts the exponent back by 9 and fails (``decimal.Overflow``) on a standard decimal128,
the one the same SDK writes. A .NET reader takes either (its decoder keeps the scale's
low byte).

:func:`dotnet_decimal` says which AMQP decimals Service Bus can keep (none that is a NaN,
an infinity, more than 96 bits of coefficient or more than 28 places; every one in its own
layout, which it writes and takes back), :func:`servicebus_decimal128` writes the layout
Service Bus delivers (bytes already in it unchanged), and
:func:`reads_servicebus_decimals` tells the receiver that needs it (the Python SDK) by the
``product`` its connection's open names.

:func:`read_decimal` reads either layout, as Service Bus's own (.NET) decoder does. The
two cannot be told apart in general: Service Bus's writing of (sign, coefficient, scale) is
bit for bit the standard decimal128 of (sign, coefficient, exponent ``-4608 - scale``), a
number below 1E-4579. But they never collide on a value a .NET decimal holds: such a value
in the standard layout has the biased exponent 6148 or more, so its first byte's low 7 bits
are 0x30 or more, and Service Bus's first byte is always 0x0C or 0x8C. So bytes of the shape
Service Bus writes (:func:`in_servicebus_layout`) are read as Service Bus wrote them, which
is what .NET's decoder makes of them too (it keeps the scale's low byte: 4608 + scale wraps
back to the scale), and all others as the standard says.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from amqplink.codec.types import Decimal32, Decimal64, Decimal128

__all__ = [
    "DOTNET_MAX_SCALE",
    "PYTHON_SDK_PRODUCT",
    "dotnet_decimal",
    "in_servicebus_layout",
    "read_decimal",
    "reads_servicebus_decimals",
    "servicebus_decimal128",
]

DOTNET_MAX_SCALE = 28
"""The most decimal places a .NET ``System.Decimal`` holds."""
PYTHON_SDK_PRODUCT = "azsdk-python-servicebus"
"""The ``product`` connection property of azure-servicebus for Python (its
``USER_AGENT_PREFIX``), sync and asyncio alike."""
_BIAS = 6176
_COEFFICIENT_BITS = 96
_HEAD = _BIAS >> 9
"""The first byte's low 7 bits in Service Bus's layout: every exponent ``6176 - scale`` (scale
0 to 28) shifted right by 9 is 12."""
_SECOND_BYTES = frozenset(((_BIAS - scale) & 0x7F) << 1 for scale in range(DOTNET_MAX_SCALE + 1))
"""The second bytes Service Bus writes: the exponent's low 7 bits, shifted left by one."""


def dotnet_decimal(value: Decimal32 | Decimal64 | Decimal128) -> tuple[int, int, int] | None:
    """(sign, coefficient, scale) of the .NET decimal Service Bus makes of an AMQP decimal
    in either layout, read as :func:`read_decimal` reads it (a positive exponent multiplied
    into the coefficient, as .NET's decoder does); None when it makes none: a NaN or an
    infinity, a coefficient of more than 96 bits, more than 28 decimal places."""
    number = read_decimal(value)
    if not number.is_finite():
        return None
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    coefficient = int("".join(map(str, digits)))
    if exponent > 0:
        coefficient *= 10**exponent
        exponent = 0
    if -exponent > DOTNET_MAX_SCALE or coefficient >> _COEFFICIENT_BITS:
        return None
    return sign, coefficient, -exponent


def servicebus_decimal128(value: Decimal32 | Decimal64 | Decimal128) -> Decimal128:
    """The decimal128 Service Bus delivers for the application property ``value`` (the
    module's docstring); ``ValueError`` if Service Bus keeps no such decimal
    (:func:`dotnet_decimal`)."""
    kept = dotnet_decimal(value)
    if kept is None:
        raise ValueError(f"{value.to_decimal()} has no .NET decimal (96 bits, at most {DOTNET_MAX_SCALE} places)")
    sign, coefficient, scale = kept
    exponent = _BIAS - scale
    head = bytes(((0x80 if sign else 0) | (exponent >> 9), (exponent & 0x7F) << 1, 0, 0))
    return Decimal128(head + coefficient.to_bytes(12, "big"))


def reads_servicebus_decimals(connection_properties: Mapping[Any, Any] | None) -> bool:
    """Whether the peer whose open carried ``connection_properties`` reads a decimal128 only
    in Service Bus's layout: the official Python SDK (``product`` is
    :data:`PYTHON_SDK_PRODUCT`)."""
    product = (connection_properties or {}).get("product")
    if isinstance(product, bytes):
        product = product.decode("utf-8", "replace")
    return product == PYTHON_SDK_PRODUCT


def in_servicebus_layout(value: bytes) -> bool:
    """Whether the 16 bytes of a decimal128 have the shape Service Bus writes (the module's
    docstring): the first byte 0x0C or 0x8C, a second byte of a scale from 0 to 28, two zero
    bytes, then the 96-bit coefficient."""
    return len(value) == 16 and value[0] & 0x7F == _HEAD and value[1] in _SECOND_BYTES and not value[2] | value[3]


def read_decimal(value: Decimal32 | Decimal64 | Decimal128) -> Decimal:
    """The number an AMQP decimal received from a Service Bus peer means: a decimal128 in
    Service Bus's layout (:func:`in_servicebus_layout`) as Service Bus wrote it, every other
    decimal as the standard (IEEE 754 BID) says (:meth:`Decimal128.to_decimal`)."""
    if type(value) is not Decimal128 or not in_servicebus_layout(value):
        return value.to_decimal()
    exponent = (_HEAD << 9 | value[1] >> 1) - _BIAS  # -scale
    coefficient = int.from_bytes(value[4:], "big")
    return Decimal((value[0] >> 7, tuple(map(int, str(coefficient))), exponent))
