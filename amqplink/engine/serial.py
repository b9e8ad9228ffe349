"""Serial-number arithmetic on 32-bit sequence numbers (RFC 1982).

"sequence-no: 32-bit RFC-1982 serial number" (2.8.9). Transfer ids, delivery ids
and delivery-counts wrap around at 2**32.

The engine does this arithmetic here and in :mod:`amqplink.engine.flow` (the flow-control
rules, on this modulus) only. Its hot write path gives a run of deliveries ids that count
up without wrapping: it stops the run at ``SERIAL_MOD`` and moves on with
:func:`~amqplink.engine.flow.deliveries_sent`.
"""

from __future__ import annotations

__all__ = ["SERIAL_MOD", "serial_add", "serial_diff", "serial_range"]

SERIAL_MOD = 1 << 32
"""The modulus: a sequence number is in ``range(SERIAL_MOD)``."""
_MOD = SERIAL_MOD
_HALF = 1 << 31


def serial_add(a: int, n: int) -> int:
    """``a + n`` modulo 2**32."""
    return (a + n) % _MOD


def serial_diff(a: int, b: int) -> int:
    """The signed distance ``a - b`` between two serial numbers, in [-2**31, 2**31)."""
    return (a - b + _HALF) % _MOD - _HALF


def serial_range(first: int, count: int) -> range | list[int]:
    """The ``count`` serial numbers from ``first`` on, in order (across the wrap: ...,
    2**32-1, 0, 1, ...)."""
    end = first + count
    if end <= _MOD:
        return range(first, end)
    return [*range(first, _MOD), *range(end - _MOD)]
