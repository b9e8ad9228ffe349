"""The errors the administration client raises: azure-core's names and fields.

The SDK's ``ServiceBusAdministrationClient`` raises ``azure.core.exceptions`` errors:
``ResourceNotFoundError`` (404), ``ResourceExistsError`` (409), ``ClientAuthenticationError``
(401), ``HttpResponseError`` for any other status (``status_code``, ``reason``, ``message``
the service's ``Detail``) and ``ServiceRequestError`` when no answer came. Where azure-core
is importable each of ours also derives from azure-core's class of the same name, so
``except azure.core.exceptions.ResourceNotFoundError`` catches it; without azure-core they
stand alone (amqplink needs no azure package).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amqplink import AMQPLinkError

__all__ = [
    "AZURE_CORE_BASES",
    "ClientAuthenticationError",
    "HttpResponseError",
    "InvalidNameError",
    "InvalidNameTypeError",
    "ResourceExistsError",
    "ResourceNotFoundError",
    "ServiceRequestError",
    "error_for_status",
]


def _core(name: str) -> type[Exception]:
    """azure-core's exception class ``name``; without azure-core ``Exception``, which every
    class here derives from anyway (a base that changes no MRO)."""
    try:
        from azure.core import exceptions
    except ImportError:  # azure-core is optional
        return Exception
    found: type[Exception] = getattr(exceptions, name)
    return found


if TYPE_CHECKING:  # the bases as mypy sees them: none of azure-core's (it is optional)
    _CoreHttpResponseError = Exception
    _CoreResourceNotFoundError = Exception
    _CoreResourceExistsError = Exception
    _CoreClientAuthenticationError = Exception
    _CoreServiceRequestError = Exception
else:
    _CoreHttpResponseError = _core("HttpResponseError")
    _CoreResourceNotFoundError = _core("ResourceNotFoundError")
    _CoreResourceExistsError = _core("ResourceExistsError")
    _CoreClientAuthenticationError = _core("ClientAuthenticationError")
    _CoreServiceRequestError = _core("ServiceRequestError")

AZURE_CORE_BASES = _core("AzureError") is not Exception
"""Whether these errors derive from azure-core's here."""


class HttpResponseError(AMQPLinkError, _CoreHttpResponseError):
    """The service answered with an error status; ``message`` is its ``Detail``."""

    def __init__(self, message: str, *, status_code: int | None = None, reason: str | None = None, **_: Any) -> None:
        Exception.__init__(self, message)  # azure-core's __init__ wants a response object: fields set here
        self.message = message
        self.status_code = status_code
        self.reason = reason
        self.response: Any = None
        self.model: Any = None
        self.error: Any = None
        self.inner_exception: BaseException | None = None
        self.continuation_token: str | None = None
        self.exc_type = self.exc_value = self.exc_traceback = None
        self.exc_msg = message

    def __str__(self) -> str:
        return self.message


class ResourceNotFoundError(HttpResponseError, _CoreResourceNotFoundError):
    """404: no such queue, topic, subscription or rule."""


class ResourceExistsError(HttpResponseError, _CoreResourceExistsError):
    """409: an entity of that name exists already."""


class ClientAuthenticationError(HttpResponseError, _CoreClientAuthenticationError):
    """401: the token is missing, not valid, or lacks the Manage right."""


class InvalidNameError(HttpResponseError, ValueError):
    """An empty entity name. The SDK sends it and reports the service's refusal (an
    ``HttpResponseError``) or checks it first (a ``ValueError``): this is both, and no request is made."""


class InvalidNameTypeError(HttpResponseError, TypeError):
    """An entity name that is not a ``str`` (both an ``HttpResponseError`` and a ``TypeError``, as above)."""


class ServiceRequestError(AMQPLinkError, _CoreServiceRequestError):
    """No answer: the connection could not be made or broke (``inner_exception`` says how)."""

    def __init__(self, message: str, *, error: BaseException | None = None) -> None:
        Exception.__init__(self, message)
        self.message = message
        self.inner_exception = error
        self.exc_type = self.exc_value = self.exc_traceback = None
        self.exc_msg = message
        self.continuation_token: str | None = None

    def __str__(self) -> str:
        return self.message


_BY_STATUS: dict[int, type[HttpResponseError]] = {
    401: ClientAuthenticationError,
    404: ResourceNotFoundError,
    409: ResourceExistsError,
    412: ResourceNotFoundError,  # an update (If-Match: *) of an entity that is not there
}


def error_for_status(status: int, reason: str, detail: str, what: str) -> HttpResponseError:
    """The error for an answer ``status`` about ``what`` (e.g. ``queue 'orders'``)."""
    cls = _BY_STATUS.get(status, HttpResponseError)
    message = f"{what}: {detail or reason} (HTTP {status})"
    return cls(message, status_code=status, reason=reason)
