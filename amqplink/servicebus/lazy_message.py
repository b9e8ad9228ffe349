"""Received messages decoded on first access.

Service Bus settles by the delivery (the lock token is the delivery-tag, PROTOCOL.md), so
a receiver that completes a message without reading it never needs its sections: the
payload is kept as it came and decoded the first time a section is read.
"""

from __future__ import annotations

from typing import Any

from amqplink.aio.receiver import ReceivedMessage
from amqplink.message import Message

__all__ = ["LazyReceivedMessage"]

_SECTIONS = frozenset(Message.__slots__)


class LazyReceivedMessage(ReceivedMessage):
    """A :class:`ReceivedMessage` whose sections are decoded when one is first read; a
    malformed payload raises ``DecodeError`` then (and on every later read)."""

    __slots__ = ("_payload",)

    _payload: bytes | None

    @classmethod
    def from_payload(cls, payload: bytes | bytearray | memoryview) -> LazyReceivedMessage:
        """Keep ``payload`` (copied unless it is ``bytes``: a view may be reused) undecoded."""
        message = cls.__new__(cls)
        message._payload = payload if type(payload) is bytes else bytes(payload)
        return message

    def __getattr__(self, name: str) -> Any:
        # Reached only when normal lookup fails: here, a section slot not yet filled.
        if name not in _SECTIONS:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        payload = self._payload
        if payload is None:
            raise AttributeError(name)
        decoded = Message.decode(payload)
        for section in _SECTIONS:
            setattr(self, section, getattr(decoded, section))
        self._payload = None
        return getattr(self, name)
