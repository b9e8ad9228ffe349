"""The exception names of azure-servicebus 7.x, at the path its users import them from
(``azure.servicebus.exceptions``).

Every error carries ``condition`` (the AMQP error condition or management
``errorCondition``), ``description``, ``entity``, ``status_code`` and ``retryable``; the
message names the entity, the condition and what the user can do.
:mod:`amqplink.servicebus.errors` decides which one a failure becomes.

As the SDK's (whose ``ServiceBusError`` derives from ``azure.core.exceptions.AzureError``):
``message``, ``inner_exception`` (the error this one wraps), ``exc_type``/``exc_value``/
``exc_traceback``/``exc_msg``, ``continuation_token`` and the SDK's private ``_retryable``,
``_condition``, ``_status_code``, ``_shutdown_handler``; ``reason`` is the service's own words
(the description). Where azure-core is importable, :class:`ServiceBusError` derives from its
``AzureError``, so ``except AzureError`` catches ours as it catches the SDK's; without it, from
``Exception`` (amqplink itself needs no azure package). :class:`MessageAlreadySettled` is a
``ValueError`` and not a ``ServiceBusError``, as in the SDK.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import TYPE_CHECKING, Any

from amqplink import AMQPLinkError
from amqplink.engine import errors as engine_errors

if TYPE_CHECKING:
    _AzureBase = Exception
else:
    try:
        from azure.core.exceptions import AzureError as _AzureBase
    except ImportError:  # azure-core is optional: amqplink's errors stand alone
        _AzureBase = Exception

__all__ = [
    "AutoLockRenewFailed",
    "AutoLockRenewTimeout",
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
    "ServiceBusTransactionError",
    "SessionCannotBeLockedError",
    "SessionLockLostError",
    "TransactionInDoubtError",
    "TransactionRolledBackError",
    "TransactionTimeoutError",
]

AZURE_CORE_BASE = _AzureBase is not Exception
"""Whether :class:`ServiceBusError` derives from ``azure.core.exceptions.AzureError`` here."""


class _Details(AMQPLinkError):
    """The fields every Service Bus error carries; the message names entity, condition and remedy."""

    default_message = "Service Bus has encountered an error."
    hint = ""
    default_retryable = False
    shutdown_handler = True
    """The SDK's ``_shutdown_handler``: whether the SDK would close the handler on this error."""

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
        hint: str | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(condition, bytes):
            condition = condition.decode("utf-8", "replace")
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
        if hint is not None:
            self.hint = hint  # this error's own remedy, in place of its class's
        if self.hint:
            text += f" {self.hint}"
        # azure-core's AzureError fields, set here (its __init__ is not called: the same
        # fields whether or not azure-core is installed, whatever its version).
        self.inner_exception: BaseException | None = error
        exc_type, exc_value, exc_traceback = sys.exc_info()
        self.exc_type: type[BaseException] | None = exc_type or (type(error) if error is not None else None)
        self.exc_value: BaseException | None = exc_value
        self.exc_traceback: TracebackType | None = exc_traceback
        self.exc_msg = f"{text}, {getattr(self.exc_type, '__name__', None)}: {exc_value}"
        self.continuation_token: str | None = kwargs.get("continuation_token")
        Exception.__init__(self, text)
        self.message = text

    @property
    def reason(self) -> str | None:
        """Why, in the service's words (the AMQP or status description)."""
        return self.description

    @property
    def _retryable(self) -> bool:
        return self.retryable

    @property
    def _condition(self) -> str | None:
        return self.condition

    @property
    def _status_code(self) -> int | None:
        return self.status_code

    @property
    def _shutdown_handler(self) -> bool:
        return self.shutdown_handler


class ServiceBusError(_Details, _AzureBase):
    """Base of all Service Bus errors (an ``azure.core.exceptions.AzureError`` where azure-core is installed)."""


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
    shutdown_handler = False
    default_retryable = True


class MessageSizeExceededError(  # type: ignore[misc]  # condition: str | None here, the engine's class says which
    ServiceBusError, engine_errors.MessageSizeExceededError, ValueError
):
    """The message is larger than the entity accepts.

    The Service Bus form (the SDK's name, a :class:`ServiceBusError`) of the engine's
    :class:`amqplink.engine.errors.MessageSizeExceededError`, which it derives from: one
    ``except`` of the engine's class catches a too-large message at any layer."""

    default_message = "Message content is larger than the service bus frame size."
    shutdown_handler = False
    hint = engine_errors.MessageSizeExceededError.hint


class MessageLockLostError(ServiceBusError):
    """The message's lock expired or was lost with its link; it will be redelivered."""

    default_message = "The lock on the message lock has expired."
    shutdown_handler = False
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
    shutdown_handler = False


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
    shutdown_handler = False


class ServiceBusQuotaExceededError(ServiceBusError):
    """The entity is full or the namespace's connection quota is reached."""

    default_message = "The quota applied to a Service Bus resource has been exceeded."
    shutdown_handler = False
    hint = "Receive messages to make room, or raise the entity's size."


class ServiceBusServerBusyError(ServiceBusError):
    """The service is busy; wait (at least 4 s) and retry."""

    default_message = "The Service Bus service reports that it is busy."
    shutdown_handler = False
    default_retryable = True


class ServiceBusTransactionError(ServiceBusError):
    """A transaction could not be declared, or an operation could not join it (docs/transactions.md)."""

    default_message = "The transaction could not be used."
    shutdown_handler = False


class TransactionRolledBackError(ServiceBusTransactionError):
    """The commit was refused and the transaction rolled back: none of its operations took
    effect (``condition`` ``amqp:transaction:rollback``; the description says why)."""

    default_message = "The transaction was rolled back; none of its operations took effect."
    hint = "Receive the messages again and repeat the work in a new transaction."


class TransactionTimeoutError(TransactionRolledBackError):
    """The transaction was not committed within two minutes of its first operation, so Service
    Bus rolled it back (``amqp:transaction:timeout``)."""

    default_message = "The transaction timed out and was rolled back."
    hint = "Commit within two minutes of a transaction's first operation."


class TransactionInDoubtError(ServiceBusTransactionError):
    """The commit was sent and its answer never came (the connection closed first): it may or
    may not have been applied."""

    default_message = "Whether the transaction committed is not known."
    hint = "Check the entities (e.g. by message id) before doing the work again."


class AutoLockRenewFailed(ServiceBusError):
    """A background lock renewal failed."""


class AutoLockRenewTimeout(ServiceBusError):
    """The time allotted to renewing a lock elapsed."""


class MessageAlreadySettled(_Details, ValueError):
    """The message was already settled (a ``ValueError``, as in the SDK: client-side validation;
    not a ``ServiceBusError``)."""

    default_message = "The message has either been deleted or already settled."
    shutdown_handler = False
