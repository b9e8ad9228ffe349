"""Serial-number arithmetic on 32-bit sequence numbers (RFC 1982).

"sequence-no: 32-bit RFC-1982 serial number" (2.8.9). Transfer ids, delivery ids
and delivery-counts wrap around at 2**32.
"""

from __future__ import annotations

__all__ = ["SERIAL_MOD", "serial_add", "serial_diff"]

SERIAL_MOD = 1 << 32
"""``serial_add(a, n)`` is ``(a + n) % SERIAL_MOD``; a hot path may write it inline."""
_MOD = SERIAL_MOD
_HALF = 1 << 31


def serial_add(a: int, n: int) -> int:
    """``a + n`` modulo 2**32."""
    return (a + n) % _MOD


def serial_diff(a: int, b: int) -> int:
    """The signed distance ``a - b`` between two serial numbers, in [-2**31, 2**31)."""
    return (a - b + _HALF) % _MOD - _HALF
