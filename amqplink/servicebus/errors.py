"""The Service Bus exceptions (azure-servicebus 7.x's names) and the one table that picks them.

Every error carries ``condition`` (the AMQP error condition or management
``errorCondition``), ``description``, ``entity``, ``status_code`` and ``retryable``.
:data:`ERROR_TABLE` maps each AMQP condition in PROTOCOL.md, and each ``$management``
status code, to a class and to whether retrying can help; :func:`from_amqp_error` and
:func:`from_management_status` are the only two ways in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from amqplink.aio.errors import (
    AMQPError,
    AttachTimeout,
    ConnectionClosedError,
    SettlementError,
)

__all__ = [
    "ERROR_TABLE",
    "AutoLockRenewFailed",
    "AutoLockRenewTimeout",
    "ErrorKind",
    "MessageAlreadySettled",
    "MessageLockLostError",
    "MessageNotFoundError",
    "MessageSizeExceededError",
    "MessagingEntityAlreadyExistsError",
    "MessagingEntityDisabledError",
    "MessagingEntityNotFoundError",
    "OperationTimeoutError",
    "ServiceBusAuthenticationError",
    "ServiceBusAuthorizationError",
    "ServiceBusCommunicationError",
    "ServiceBusConnectionError",
    "ServiceBusError",
    "ServiceBusQuotaExceededError",
    "ServiceBusServerBusyError",
    "SessionCannotBeLockedError",
    "SessionLockLostError",
    "from_amqp_error",
    "from_management_status",
]


class _Details(Exception):
    """The fields every Service Bus error carries; the message names entity, condition and remedy."""

    default_message = "Service Bus has encountered an error."
    hint = ""
    default_retryable = False

    def __init__(
        self,
        message: str | None = None,
        *,
        condition: str | None = None,
        description: str | None = None,
        entity: str | None = None,
        status_code: int | None = None,
        retryable: bool | None = None,
        error: BaseException | None = None,
    ) -> None:
        self.condition = condition
        self.description = description if description is not None else message
        self.entity = entity
        self.status_code = status_code
        self.retryable = self.default_retryable if retryable is None else retryable
        self.error = error
        text = message or description or self.default_message
        if entity:
            text = f"{entity}: {text}"
        if condition:
            text += f" [{condition}]"
        if status_code is not None:
            text += f" (status {status_code})"
        if self.hint:
            text += f" {self.hint}"
        super().__init__(text)
        self.message = text


class ServiceBusError(_Details):
    """Base of all Service Bus errors."""


class ServiceBusConnectionError(ServiceBusError):
    """The connection or link broke; the operation may be retried on a new one."""

    default_message = "An error occurred in the connection."
    default_retryable = True


class ServiceBusCommunicationError(ServiceBusError):
    """The namespace cannot be reached."""

    default_message = "There was a general communications error encountered when interacting with Service Bus."
    default_retryable = True
    hint = "Check the host name and that a firewall or proxy does not block ports 5671/5672."


class ServiceBusAuthenticationError(ServiceBusError):
    """The credential was refused (e.g. a CBS put-token answered with a non-2xx status)."""

    default_message = "An error occurred when authenticating the connection."
    hint = "Check the SharedAccessKeyName/SharedAccessKey or the token's audience and expiry."


class ServiceBusAuthorizationError(ServiceBusError):
    """The credential is valid but lacks the right for the operation."""

    default_message = "An error occurred when authorizing the connection."
    hint = "Check the claims (Send/Listen/Manage) of the key or token."


class OperationTimeoutError(ServiceBusError):
    """The operation did not complete in time."""

    default_message = "Operation timed out."
    default_retryable = True


class MessageSizeExceededError(ServiceBusError, ValueError):
    """The message is larger than the entity accepts."""

    default_message = "Message content is larger than the service bus frame size."
    hint = "Send a smaller message, or split the batch."


class MessageLockLostError(ServiceBusError):
    """The message's lock expired or was lost with its link; it will be redelivered."""

    default_message = "The lock on the message lock has expired."
    hint = "Receive the message again (its message id is there for de-duplication); renew locks sooner."


class SessionLockLostError(ServiceBusError):
    """The session's lock expired; its unsettled messages can no longer be settled."""

    default_message = "The lock on the session has expired."
    hint = "Accept the session again."


class SessionCannotBeLockedError(ServiceBusError):
    """Another receiver holds the session."""

    default_message = "The requested session cannot be locked."
    default_retryable = True


class MessageNotFoundError(ServiceBusError):
    """No message has the requested sequence number."""

    default_message = "The requested message was not found."


class MessagingEntityNotFoundError(ServiceBusError):
    """The queue, topic or subscription does not exist."""

    default_message = "A Service Bus resource cannot be found by the Service Bus service."
    hint = "Check the entity name, or create the entity."


class MessagingEntityDisabledError(ServiceBusError):
    """The entity is disabled."""

    default_message = "The Messaging Entity is disabled."
    hint = "Enable the entity again."


class MessagingEntityAlreadyExistsError(ServiceBusError):
    """An entity with that name exists already."""

    default_message = "An entity with the same name exists under the same namespace."


class ServiceBusQuotaExceededError(ServiceBusError):
    """The entity is full or the namespace's connection quota is reached."""

    default_message = "The quota applied to a Service Bus resource has been exceeded."
    hint = "Receive messages to make room, or raise the entity's size."


class ServiceBusServerBusyError(ServiceBusError):
    """The service is busy; wait (at least 4 s) and retry."""

    default_message = "The Service Bus service reports that it is busy."
    default_retryable = True


class AutoLockRenewFailed(ServiceBusError):
    """A background lock renewal failed."""


class AutoLockRenewTimeout(ServiceBusError):
    """The time allotted to renewing a lock elapsed."""


class MessageAlreadySettled(_Details, ValueError):
    """The message was already settled (a ``ValueError``, as in the SDK: client-side validation)."""

    default_message = "The message has either been deleted or already settled."


class ErrorKind(NamedTuple):
    """One row of :data:`ERROR_TABLE`."""

    cls: type[ServiceBusError]
    retryable: bool


_T = ErrorKind
ERROR_TABLE: Mapping[str | int, ErrorKind] = {
    # -- transient (PROTOCOL.md): retry with backoff --
    "com.microsoft:server-busy": _T(ServiceBusServerBusyError, True),
    "com.microsoft:timeout": _T(OperationTimeoutError, True),
    "com.microsoft:operation-cancelled": _T(ServiceBusError, True),
    "amqp:internal-error": _T(ServiceBusError, True),
    "amqp:connection:forced": _T(ServiceBusConnectionError, True),
    "amqp:link:detach-forced": _T(ServiceBusConnectionError, True),
    "amqp:link:transfer-limit-exceeded": _T(ServiceBusError, True),
    "com.microsoft:container-close": _T(ServiceBusConnectionError, True),
    "com.microsoft:session-cannot-be-locked": _T(SessionCannotBeLockedError, True),
    # -- not retryable (PROTOCOL.md) --
    "com.microsoft:message-lock-lost": _T(MessageLockLostError, False),
    "com.microsoft:session-lock-lost": _T(SessionLockLostError, False),
    "amqp:not-found": _T(MessagingEntityNotFoundError, False),
    "amqp:unauthorized-access": _T(ServiceBusAuthorizationError, False),
    "amqp:not-allowed": _T(ServiceBusError, False),
    "amqp:link:message-size-exceeded": _T(MessageSizeExceededError, False),
    "amqp:resource-limit-exceeded": _T(ServiceBusQuotaExceededError, False),
    "com.microsoft:entity-disabled": _T(MessagingEntityDisabledError, False),
    "com.microsoft:argument-error": _T(ServiceBusError, False),
    "com.microsoft:argument-out-of-range": _T(ServiceBusError, False),
    "amqp:decode-error": _T(ServiceBusError, False),
    "amqp:precondition-failed": _T(ServiceBusError, False),
    # -- the SDK's other names, and the spec's other conditions no retry can fix --
    "com.microsoft:message-not-found": _T(MessageNotFoundError, False),
    "com.microsoft:entity-already-exists": _T(MessagingEntityAlreadyExistsError, False),
    "com.microsoft:auth-failed": _T(ServiceBusAuthenticationError, False),
    "com.microsoft:precondition-failed": _T(ServiceBusError, False),
    "amqp:not-implemented": _T(ServiceBusError, False),
    "amqp:invalid-field": _T(ServiceBusError, False),
    "amqp:resource-deleted": _T(MessagingEntityNotFoundError, False),
    "amqp:resource-locked": _T(ServiceBusError, False),
    "amqp:illegal-state": _T(ServiceBusError, False),
    "amqp:frame-size-too-small": _T(ServiceBusError, False),
    "amqp:connection:framing-error": _T(ServiceBusConnectionError, False),
    "amqp:connection:redirect": _T(ServiceBusConnectionError, False),
    "amqp:link:redirect": _T(ServiceBusConnectionError, False),
    "amqp:link:stolen": _T(ServiceBusConnectionError, False),
    "amqp:session:window-violation": _T(ServiceBusConnectionError, False),
    "amqp:session:errant-link": _T(ServiceBusConnectionError, False),
    "amqp:session:handle-in-use": _T(ServiceBusConnectionError, False),
    "amqp:session:unattached-handle": _T(ServiceBusConnectionError, False),
    # -- $management and $cbs status codes (used when no known errorCondition came with them) --
    400: _T(ServiceBusError, False),
    401: _T(ServiceBusAuthenticationError, False),
    403: _T(ServiceBusAuthorizationError, False),
    404: _T(MessagingEntityNotFoundError, False),
    408: _T(OperationTimeoutError, True),
    409: _T(ServiceBusError, False),
    410: _T(MessageLockLostError, False),
    412: _T(ServiceBusError, False),
    413: _T(MessageSizeExceededError, False),
    429: _T(ServiceBusServerBusyError, True),
    500: _T(ServiceBusError, True),
    503: _T(ServiceBusServerBusyError, True),
    504: _T(OperationTimeoutError, True),
}
"""Condition or status code -> (exception class, retryable). Unknown conditions and
5xx codes are retryable (as in the SDK); unknown 4xx codes are not."""


def _kind(condition: str | None, status_code: int | None) -> ErrorKind | None:
    """The table's row; an unknown condition is a retryable ``ServiceBusError`` (as in the SDK)."""
    if condition is not None and condition in ERROR_TABLE:
        return ERROR_TABLE[condition]
    if status_code is not None:
        return ERROR_TABLE.get(status_code, ErrorKind(ServiceBusError, status_code >= 500))
    if condition is not None:
        return ErrorKind(ServiceBusError, True)
    return None


def from_management_status(
    status_code: int,
    description: str | None = None,
    condition: str | None = None,
    *,
    entity: str | None = None,
    session: bool = False,
) -> ServiceBusError:
    """The exception for a failed ``$management``/``$cbs`` response.

    A known ``errorCondition`` decides; otherwise the status code does (410 = lock lost:
    the session's lock when ``session`` is true, else the message's).
    """
    kind = _kind(condition, status_code)
    assert kind is not None
    cls = kind.cls
    if session and cls is MessageLockLostError:
        cls = SessionLockLostError
    return cls(
        description=description,
        condition=condition,
        entity=entity,
        status_code=status_code,
        retryable=kind.retryable,
    )


def _settlement_kind(error: SettlementError) -> type[_Details]:
    # aio.SettlementError covers several faults; its wording is pinned by tests/servicebus/test_errors.py.
    text = str(error)
    if "already settled" in text:
        return MessageAlreadySettled
    if "link is gone" in text or "not confirmed" in text:
        return MessageLockLostError
    return ServiceBusError


def from_amqp_error(error: BaseException, *, entity: str | None = None) -> ServiceBusError | MessageAlreadySettled:
    """The Service Bus exception for an ``amqplink.aio`` error (or a socket error or a timeout).

    A Service Bus error passes through unchanged. Settlement on a link that is gone is a
    lost lock: Service Bus redelivers the message, and the broker is not asked.
    """
    if isinstance(error, ServiceBusError | MessageAlreadySettled):
        return error
    fields: dict[str, Any] = {"entity": entity, "error": error}
    if isinstance(error, SettlementError):
        cls = _settlement_kind(error)
        return cls(description=str(error), condition=error.condition, retryable=False, **fields)  # type: ignore[return-value]
    if isinstance(error, AMQPError):
        kind = _kind(error.condition, None)
        description = error.description or str(error)
        if kind is None:
            if isinstance(error, AttachTimeout):
                return OperationTimeoutError(description=description, **fields)
            return ServiceBusConnectionError(description=description, **fields)
        cls = kind.cls
        if cls is MessagingEntityNotFoundError and isinstance(error, ConnectionClosedError):
            cls = ServiceBusCommunicationError  # not-found on a whole connection: the host, not an entity
        return cls(description=description, condition=error.condition, retryable=kind.retryable, **fields)
    if isinstance(error, TimeoutError):
        return OperationTimeoutError(description=str(error) or None, **fields)
    if isinstance(error, OSError):
        return ServiceBusConnectionError(description=str(error) or None, **fields)
    return ServiceBusError(description=f"{type(error).__name__}: {error}", retryable=False, **fields)
