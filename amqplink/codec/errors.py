"""Errors raised by the codec."""

from __future__ import annotations

from amqplink import AMQPLinkError


class DecodeError(AMQPLinkError, ValueError):
    """Bytes that are not a valid AMQP encoding, or that break a decoder limit.

    ``offset`` is the position in the input where the problem was found.
    """

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"{message} (at offset {offset})")
        self.reason = message
        self.offset = offset


class EncodeError(AMQPLinkError, ValueError):
    """A Python value that cannot be encoded as the requested AMQP type."""
