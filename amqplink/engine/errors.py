"""Errors raised inside the engine and the AMQP conditions they end a scope with."""

from __future__ import annotations

from amqplink import AMQPLinkError
from amqplink.codec.types import Symbol

__all__ = [
    "ConnectionProtocolError",
    "EngineStateError",
    "LinkProtocolError",
    "MessageSizeExceededError",
    "ProtocolError",
    "RunOfManyError",
    "SessionProtocolError",
]

# Conditions (spec 2.8.15 - 2.8.18) used by the engine.
INTERNAL_ERROR = Symbol("amqp:internal-error")
NOT_FOUND = Symbol("amqp:not-found")
UNAUTHORIZED_ACCESS = Symbol("amqp:unauthorized-access")
DECODE_ERROR = Symbol("amqp:decode-error")
RESOURCE_LIMIT_EXCEEDED = Symbol("amqp:resource-limit-exceeded")
NOT_ALLOWED = Symbol("amqp:not-allowed")
INVALID_FIELD = Symbol("amqp:invalid-field")
NOT_IMPLEMENTED = Symbol("amqp:not-implemented")
# "The peer sent a frame that is not permitted in the current state." (2.8.15)
ILLEGAL_STATE = Symbol("amqp:illegal-state")
# "The peer cannot send a frame because the smallest encoding of the performative with
# the currently valid values would be too large to fit within a frame of the agreed
# maximum frame size." (2.8.15)
FRAME_SIZE_TOO_SMALL = Symbol("amqp:frame-size-too-small")
FRAMING_ERROR = Symbol("amqp:connection:framing-error")
CONNECTION_FORCED = Symbol("amqp:connection:forced")
WINDOW_VIOLATION = Symbol("amqp:session:window-violation")
ERRANT_LINK = Symbol("amqp:session:errant-link")
HANDLE_IN_USE = Symbol("amqp:session:handle-in-use")
UNATTACHED_HANDLE = Symbol("amqp:session:unattached-handle")
DETACH_FORCED = Symbol("amqp:link:detach-forced")
TRANSFER_LIMIT_EXCEEDED = Symbol("amqp:link:transfer-limit-exceeded")
MESSAGE_SIZE_EXCEEDED = Symbol("amqp:link:message-size-exceeded")


class ProtocolError(AMQPLinkError):
    """The peer broke a protocol rule; the engine ends a scope with ``condition``."""

    def __init__(self, condition: Symbol, description: str) -> None:
        super().__init__(f"{condition}: {description}")
        self.condition = condition
        self.description = description


class ConnectionProtocolError(ProtocolError):
    """A violation that closes the whole connection."""


class SessionProtocolError(ProtocolError):
    """A violation that ends one session (the connection stays up)."""

    def __init__(self, channel: int, condition: Symbol, description: str) -> None:
        super().__init__(condition, description)
        self.channel = channel


class LinkProtocolError(ProtocolError):
    """A violation that detaches one link (the session stays up)."""

    def __init__(self, channel: int, handle: int, condition: Symbol, description: str) -> None:
        super().__init__(condition, description)
        self.channel = channel
        self.handle = handle


class EngineStateError(AMQPLinkError, RuntimeError):
    """The application asked for something the endpoint's state does not allow.

    Raised to the caller (never sent to the peer): e.g. sending on a detached link.
    """


class MessageSizeExceededError(EngineStateError):
    """A message is larger than the receiving peer's max-message-size (2.7.3).

    Raised by ``SenderLink.send`` before anything is queued; ``condition`` is
    ``amqp:link:message-size-exceeded``, the error the peer would detach with.
    """

    condition = MESSAGE_SIZE_EXCEEDED
    hint = "Send a smaller message, or split the batch."
    """What the sender can do; the Service Bus client's and the asyncio client's messages end with it."""


class RunOfManyError(AMQPLinkError, LookupError):
    """``event.delivery`` asked of a run of more than one delivery: code written for the
    former one-delivery events (``DeliveryReceived``, ``DeliveryUpdated``) meets a run
    and must loop over ``event.deliveries``."""
