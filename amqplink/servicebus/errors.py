"""The one table that turns AMQP conditions and ``$management`` status codes into exceptions.

:data:`ERROR_TABLE` maps each AMQP condition of docs/protocol.md#error-conditions, and each ``$management``
status code, to a class of :mod:`amqplink.servicebus.exceptions` and to whether
retrying can help; :func:`from_amqp_error` and :func:`from_management_status` are the
only two ways in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from amqplink.aio.errors import AMQPError, ConnectionClosedError, SettlementError
from amqplink.sbwire import conditions as C
from amqplink.servicebus.exceptions import (
    MessageAlreadySettled,
    MessageLockLostError,
    MessageNotFoundError,
    MessageSizeExceededError,
    MessagingEntityAlreadyExistsError,
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
    ServiceBusTransactionError,
    SessionCannotBeLockedError,
    SessionLockLostError,
    TransactionRolledBackError,
    TransactionTimeoutError,
)

__all__ = ["ERROR_TABLE", "ErrorKind", "from_amqp_error", "from_management_status"]


@dataclass(frozen=True, slots=True)
class ErrorKind:
    """One row of :data:`ERROR_TABLE`: the exception class and whether the error is retryable.

    A frozen dataclass, not a ``NamedTuple``: a named tuple's generated ``__new__`` reads its
    annotations in another module's namespace, where the API reference cannot resolve
    ``type[ServiceBusError]``."""

    cls: type[ServiceBusError]
    retryable: bool


_T = ErrorKind
ERROR_TABLE: Mapping[str | int, ErrorKind] = {
    # -- transient (docs/protocol.md#error-conditions): retry with backoff --
    C.SERVER_BUSY: _T(ServiceBusServerBusyError, True),
    C.TIMEOUT: _T(OperationTimeoutError, True),
    C.OPERATION_CANCELLED: _T(ServiceBusError, True),
    C.INTERNAL_ERROR: _T(ServiceBusError, True),
    C.CONNECTION_FORCED: _T(ServiceBusConnectionError, True),
    C.DETACH_FORCED: _T(ServiceBusConnectionError, True),
    "amqp:link:transfer-limit-exceeded": _T(ServiceBusError, True),
    C.CONTAINER_CLOSE: _T(ServiceBusConnectionError, True),
    C.SESSION_CANNOT_BE_LOCKED: _T(SessionCannotBeLockedError, True),
    # -- not retryable (docs/protocol.md#error-conditions) --
    C.MESSAGE_LOCK_LOST: _T(MessageLockLostError, False),
    C.SESSION_LOCK_LOST: _T(SessionLockLostError, False),
    C.NOT_FOUND: _T(MessagingEntityNotFoundError, False),
    C.UNAUTHORIZED: _T(ServiceBusAuthorizationError, False),
    C.NOT_ALLOWED: _T(ServiceBusError, False),
    C.MESSAGE_SIZE_EXCEEDED: _T(MessageSizeExceededError, False),
    C.RESOURCE_LIMIT_EXCEEDED: _T(ServiceBusQuotaExceededError, False),
    C.ENTITY_DISABLED: _T(MessagingEntityDisabledError, False),
    C.ARGUMENT_ERROR: _T(ServiceBusError, False),
    C.ARGUMENT_OUT_OF_RANGE: _T(ServiceBusError, False),
    C.DECODE_ERROR: _T(ServiceBusError, False),
    "amqp:precondition-failed": _T(ServiceBusError, False),
    # -- transactions (docs/protocol.md#transactions): the work is rolled back, repeat it --
    "amqp:transaction:rollback": _T(TransactionRolledBackError, False),
    "amqp:transaction:timeout": _T(TransactionTimeoutError, False),
    "amqp:transaction:unknown-id": _T(ServiceBusTransactionError, False),
    # -- the SDK's other names, and the spec's other conditions no retry can fix --
    C.MESSAGE_NOT_FOUND: _T(MessageNotFoundError, False),
    C.ENTITY_ALREADY_EXISTS: _T(MessagingEntityAlreadyExistsError, False),
    C.AUTH_FAILED: _T(ServiceBusAuthenticationError, False),
    C.PRECONDITION_FAILED: _T(ServiceBusError, False),
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


def _settlement_kind(error: SettlementError) -> type[ServiceBusError] | type[MessageAlreadySettled]:
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
        return cls(description=str(error), condition=error.condition, retryable=False, **fields)
    if isinstance(error, AMQPError):
        kind = _kind(error.condition, None)
        description = error.description or str(error)
        if kind is None:
            if isinstance(error, TimeoutError):  # AttachTimeout, RequestTimeout
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
