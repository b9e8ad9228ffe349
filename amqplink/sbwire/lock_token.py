"""Lock tokens: the 16-byte delivery-tag in .NET GUID byte order <-> a ``uuid.UUID``.

docs/protocol.md#lock-tokens: the lock token is the 16-byte delivery-tag in .NET GUID
byte order (``uuid.UUID(bytes_le=tag)``); in ``$management`` bodies and the
``x-opt-lock-token`` delivery annotation it is an AMQP uuid in RFC order. e.g. token
``0f8fad5b-d9cb-469f-a165-70867728950e`` <-> tag ``5b ad 8f 0f cb d9 9f 46 a1 65 70 86 77 28 95 0e``.
"""

from __future__ import annotations

import uuid

__all__ = ["delivery_tag_from_lock_token", "lock_token_from_delivery_tag"]


def lock_token_from_delivery_tag(tag: bytes) -> uuid.UUID:
    """The lock token a Service Bus delivery-tag encodes; ``ValueError`` unless it is 16 bytes."""
    if len(tag) != 16:
        raise ValueError(f"a Service Bus delivery-tag is 16 bytes (a .NET GUID), not {len(tag)}")
    return uuid.UUID(bytes_le=bytes(tag))


def delivery_tag_from_lock_token(token: uuid.UUID | str) -> bytes:
    """The delivery-tag (.NET GUID byte order) for a lock token."""
    value = token if isinstance(token, uuid.UUID) else uuid.UUID(token)
    return value.bytes_le
