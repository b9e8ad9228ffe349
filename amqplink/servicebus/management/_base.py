"""What the blocking and asyncio administration clients share: construction and addressing."""

from __future__ import annotations

from typing import Any, Self

from amqplink.servicebus.management import _operations as ops

__all__ = ["AdminClientBase", "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 60.0
"""Seconds one request may take (connecting, sending and reading the answer)."""


class AdminClientBase:
    """``(fully_qualified_namespace, credential)`` or :meth:`from_connection_string`;
    ``connection_verify`` is a CA bundle path, ``False`` to skip the check (never in
    production) or ``None`` for the system's CAs; ``timeout`` bounds each request."""

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
        self._core = ops.AdminCore(fully_qualified_namespace, credential, api_version=api_version, use_tls=use_tls)
        self.fully_qualified_namespace = self._core.fully_qualified_namespace
        self._context = ops.ssl_context(connection_verify) if use_tls else None
        self._timeout = timeout

    @classmethod
    def from_connection_string(cls, conn_str: str, **kwargs: Any) -> Self:
        """A client for the namespace of ``conn_str`` (its key or signature; ``Endpoint``'s port is kept)."""
        netloc, use_tls, credential = ops.endpoint_from_connection_string(conn_str)
        kwargs.setdefault("use_tls", use_tls)
        return cls(netloc, credential, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.fully_qualified_namespace!r})"
