"""Lock tokens: the 16-byte delivery-tag in .NET GUID byte order <-> a ``uuid.UUID``.

docs/protocol.md#lock-tokens: the lock token is the 16-byte delivery-tag in .NET GUID
byte order (``uuid.UUID(bytes_le=tag)``); in ``$management`` bodies and the
``x-opt-lock-token`` delivery annotation it is an AMQP uuid in RFC order. e.g. token
``0f8fad5b-d9cb-469f-a165-70867728950e`` <-> tag ``5b ad 8f 0f cb d9 9f 46 a1 65 70 86 77 28 95 0e``.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence

__all__ = ["delivery_tag_from_lock_token", "lock_token_from_delivery_tag", "rfc_order"]

_SPLITTERS: dict[int, Callable[[bytes | bytearray], tuple[bytes, ...]]] = {}
_SPLITTERS_MAX = 256


def lock_token_from_delivery_tag(tag: bytes) -> uuid.UUID:
    """The lock token a Service Bus delivery-tag encodes; ``ValueError`` unless it is 16 bytes."""
    if len(tag) != 16:
        raise ValueError(f"a Service Bus delivery-tag is 16 bytes (a .NET GUID), not {len(tag)}")
    return uuid.UUID(bytes_le=bytes(tag))


def delivery_tag_from_lock_token(token: uuid.UUID | str) -> bytes:
    """The delivery-tag (.NET GUID byte order) for a lock token."""
    value = token if isinstance(token, uuid.UUID) else uuid.UUID(token)
    return value.bytes_le


def rfc_order(tags: Sequence[bytes]) -> list[bytes]:
    """Each delivery-tag's lock token as the 16 bytes of its AMQP ``uuid`` (RFC order: the
    ``x-opt-lock-token`` delivery annotation's), all at once: ``uuid.UUID(bytes_le=tag).bytes``
    of each, the first three fields of every tag reversed in place by a few slice copies
    over their concatenation (a broker's batch of deliveries is converted in one go)."""
    count = len(tags)
    if not count:
        return []
    le = b"".join(tags)
    if len(le) != 16 * count:
        raise ValueError("a Service Bus delivery-tag is 16 bytes (a .NET GUID)")
    out = bytearray(le)
    # time_low (4 bytes), time_mid (2), time_hi_and_version (2) are little-endian in a .NET GUID
    for to, source in ((0, 3), (1, 2), (2, 1), (3, 0), (4, 5), (5, 4), (6, 7), (7, 6)):
        out[to::16] = le[source::16]
    split = _SPLITTERS.get(count)
    if split is None:
        if len(_SPLITTERS) >= _SPLITTERS_MAX:
            _SPLITTERS.clear()
        split = _SPLITTERS[count] = struct.Struct("16s" * count).unpack
    return list(split(out))
