"""Exceptions of the asyncio client: each carries the AMQP condition that caused it.

The engine reports errors as values (an ``Error`` with a condition symbol); this
module turns them into exceptions the application can catch by scope: the
connection, a session, a link, or one delivery. The Service Bus layer maps the
conditions to its own classes and decides what is retryable.
"""

from __future__ import annotations

from typing import Any

from amqplink import AMQPLinkError
from amqplink.engine import errors as engine_errors
from amqplink.protocol.definitions import Error

__all__ = [
    "AMQPError",
    "AttachTimeout",
    "ConnectionClosedError",
    "LinkDetachedError",
    "MessageRejected",
    "MessageSizeExceededError",
    "SessionEndedError",
    "SettlementError",
    "TransactionError",
    "TransactionInDoubt",
]


class AMQPError(AMQPLinkError):
    """Base class: ``condition`` is the AMQP error condition (a symbol string) or None."""

    def __init__(
        self,
        message: str,
        *,
        condition: str | None = None,
        description: str | None = None,
        info: dict[Any, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.condition = condition
        self.description = description
        self.info = info

    @classmethod
    def from_error(cls, what: str, error: Error | None, hint: str = "") -> AMQPError:
        """Build from a wire ``Error``: the message names the entity, condition and hint."""
        condition = str(error.condition) if error is not None and error.condition is not None else None
        description = error.description if error is not None else None
        info = error.info if error is not None else None
        text = what
        if condition:
            text += f" [{condition}]"
        if description:
            text += f": {description}"
        if hint:
            text += f" ({hint})"
        return cls(text, condition=condition, description=description, info=info)


class ConnectionClosedError(AMQPError):
    """The connection closed (by the peer, on a protocol error, or the socket dropped)."""


class SessionEndedError(AMQPError):
    """The session carrying a link ended."""


class LinkDetachedError(AMQPError):
    """A link was detached by the peer (refused at attach, or closed later)."""


class AttachTimeout(LinkDetachedError, TimeoutError):
    """The peer did not answer an attach in time; the link was detached locally."""


class MessageRejected(AMQPError):
    """The peer settled a sent message with the ``rejected`` outcome (3.4.2)."""

    def __init__(self, message: str, *, outcome: Any = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.outcome = outcome


class SettlementError(AMQPError):
    """A received message could not be settled (its link is gone, or it is already settled)."""


class MessageSizeExceededError(AMQPError, engine_errors.MessageSizeExceededError):  # type: ignore[misc]  # condition: str | None here, the engine's class says which
    """A message larger than the peer's max-message-size (its attach, 2.7.3), refused before
    anything is sent. The asyncio client's form of
    :class:`amqplink.engine.errors.MessageSizeExceededError`, which it derives from (as the
    Service Bus client's does): its message names the link, the sizes, the condition
    (``amqp:link:message-size-exceeded``, the one the peer would detach with) and the hint;
    ``description`` has the sizes alone."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        description = f"{what}: message of {size} bytes exceeds the peer's max-message-size {limit}"
        condition = str(engine_errors.MESSAGE_SIZE_EXCEEDED)
        super().__init__(f"{description} [{condition}] {self.hint}", condition=condition, description=description)
        self.size = size
        self.limit = limit


class TransactionError(AMQPError):
    """A transaction could not be declared, or its commit was refused and it was rolled back
    (``condition``: the coordinator's, e.g. ``amqp:transaction:rollback`` or
    ``amqp:transaction:timeout``), or work could not join it."""


class TransactionInDoubt(TransactionError):
    """A commit was asked and its answer never came (the control link or the connection
    ended first): it may or may not have been applied; check before doing it again."""
