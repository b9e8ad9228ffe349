"""Which errors mean "that namespace is down", and the error raised when both are.

One classification, on top of the project's one error table
(:mod:`amqplink.servicebus.errors`), for the passive replication sender's role swap and
the de-duplicating receiver's retry of a namespace.
"""

from __future__ import annotations

from collections.abc import Sequence

from amqplink.servicebus.errors import from_amqp_error
from amqplink.servicebus.exceptions import (
    MessageSizeExceededError,
    MessagingEntityDisabledError,
    MessagingEntityNotFoundError,
    OperationTimeoutError,
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
    ServiceBusCommunicationError,
    ServiceBusConnectionError,
    ServiceBusError,
    ServiceBusQuotaExceededError,
    ServiceBusServerBusyError,
)

__all__ = ["ReplicationError", "suggests_outage"]

_NOT_AN_OUTAGE: tuple[type[ServiceBusError], ...] = (
    ServiceBusServerBusyError,  # the namespace answers: it is throttling
    ServiceBusAuthenticationError,  # configuration: the other namespace is no cure
    ServiceBusAuthorizationError,
    MessageSizeExceededError,  # the message: it is as large for the other namespace
    ServiceBusQuotaExceededError,  # the entity is full, not gone
    MessagingEntityNotFoundError,  # a missing entity is a configuration error, said loudly
)
_OUTAGE: tuple[type[ServiceBusError], ...] = (
    ServiceBusConnectionError,
    ServiceBusCommunicationError,
    OperationTimeoutError,
    MessagingEntityDisabledError,
)


def suggests_outage(error: BaseException) -> bool:
    """Whether ``error`` "indicates the datacenter that hosts the active entity might be
    unavailable" (seed 003), as classified by the project's one error table
    (:mod:`amqplink.servicebus.errors`).

    Yes: a connection or communication error, a timeout, a disabled entity, and any other
    error the table marks retryable (``amqp:internal-error``,
    ``com.microsoft:operation-cancelled``, unknown conditions, 5xx). No: server-busy (the
    namespace is up and throttling), authentication and authorisation errors, a message
    too large, a full entity, an entity not found, and every other non-retryable error.
    """
    converted = from_amqp_error(error)
    if isinstance(converted, _NOT_AN_OUTAGE):
        return False
    if isinstance(converted, _OUTAGE):
        return True
    return isinstance(converted, ServiceBusError) and converted.retryable


class ReplicationError(ServiceBusError):
    """Neither namespace could do the operation; :attr:`errors` holds each namespace's error."""

    default_message = "Both namespaces failed."

    def __init__(self, message: str, errors: Sequence[BaseException], *, entity: str | None = None) -> None:
        self.errors = tuple(errors)
        details = "; ".join(f"{type(e).__name__}: {e}" for e in self.errors)
        last = self.errors[-1] if self.errors else None
        super().__init__(
            f"{message} ({details})",
            entity=entity,
            condition=getattr(last, "condition", None),
            retryable=any(getattr(e, "retryable", False) for e in self.errors),
            error=last,
        )
