"""What the blocking and asyncio administration clients share: construction and addressing."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Self, TypeVar

from amqplink.servicebus.management import _operations as ops

__all__ = ["AdminClientBase", "DEFAULT_TIMEOUT", "docstrings_of"]

DEFAULT_TIMEOUT = 60.0
"""Seconds one request may take (connecting, sending and reading the answer)."""


class AdminClientBase:
    """``(fully_qualified_namespace, credential)`` or :meth:`from_connection_string`;
    ``connection_verify`` is a CA bundle path, ``False`` to skip the check (never in
    production) or ``None`` for the system's CAs; ``timeout`` bounds each request;
    ``use_tls=False`` speaks plain HTTP (refused with ``connection_verify``, a TLS setting)."""

    def __init__(
        self,
        fully_qualified_namespace: str,
        credential: Any,
        *,
        api_version: str = ops.DEFAULT_API_VERSION,
        connection_verify: str | bool | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        use_tls: bool = True,
        **kwargs: Any,
    ) -> None:
        if not use_tls and connection_verify is not None:
            raise ValueError(
                "connection_verify is a TLS setting and use_tls=False asks for plain HTTP: drop one of them"
            )
        self._core = ops.AdminCore(fully_qualified_namespace, credential, api_version=api_version, use_tls=use_tls)
        self.fully_qualified_namespace = self._core.fully_qualified_namespace
        self._context = ops.ssl_context(connection_verify) if use_tls else None
        self._timeout = timeout

    @classmethod
    def from_connection_string(cls, conn_str: str, **kwargs: Any) -> Self:
        """A client for the namespace of ``conn_str`` (its key or signature; ``Endpoint``'s port is kept).

        HTTPS, but plain HTTP when the string says ``UseDevelopmentEmulator=true`` and no
        ``connection_verify`` is given: a CA bundle (or ``False``) asks for TLS, so the
        string ``amqplink broker`` prints, its port changed to the management port
        (``--http-port``), works with ``connection_verify=`` the CA file it printed, as it
        does with the SDK's admin client (which speaks HTTPS whatever the string says).
        """
        netloc, use_tls, credential = ops.endpoint_from_connection_string(conn_str)
        if kwargs.get("connection_verify") is not None:
            use_tls = True
        kwargs.setdefault("use_tls", use_tls)
        return cls(netloc, credential, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.fully_qualified_namespace!r})"


_Class = TypeVar("_Class", bound=type)


def docstrings_of(twin: type) -> Callable[[_Class], _Class]:
    """A class decorator: each public method of the class without a docstring takes its
    ``twin``'s (the asyncio client's methods say what the blocking ones do, written once)."""

    def decorate(cls: _Class) -> _Class:
        for name, value in vars(cls).items():
            if not name.startswith("_") and inspect.isfunction(value) and value.__doc__ is None:
                value.__doc__ = getattr(twin, name).__doc__
        return cls

    return decorate
