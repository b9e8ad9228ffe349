"""The connection a client's handlers share, and the one factory that builds it.

A :class:`ConnectionHolder` owns the client's AMQP connection (SASL ANONYMOUS, then a
CBS put-token per entity audience, docs/protocol.md#claims-based-security-cbs) and opens it again when it is found
closed (``amqp:connection:forced``, a socket error, an idle close): the tokens of every
audience are put again on the new connection (:meth:`CbsAuthorizer.reauthorize`).

:func:`connection_holder` builds one from ``ServiceBusClient``'s arguments. The client
calls it, and so does a handler the SDK's way constructs directly
(``ServiceBusSender(fqns, credential, queue_name=...)``): this module imports no handler
and not the client, so neither needs the other to get a connection
(docs/architecture.md#who-builds-what).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

from amqplink.aio.connection import Connection, Dialer, connect
from amqplink.aio.errors import AMQPError
from amqplink.aio.url import Endpoint
from amqplink.servicebus.cbs import CbsAuthorizer
from amqplink.servicebus.client_options import (
    FRAME_TRACE_LEVEL,
    check_socket_timeout,
    connection_properties,
    ignore_unknown,
)
from amqplink.servicebus.connection_string import TLS_PORT
from amqplink.servicebus.retry import RetryMode, RetryPolicy
from amqplink.servicebus.sas import DEFAULT_TOKEN_TTL
from amqplink.servicebus.tokens import credential_kind
from amqplink.servicebus.transport import transport_from_options

__all__ = ["CLIENT_OPTIONS", "ConnectionHolder", "Credential", "connection_holder", "namespace_name"]

log = logging.getLogger(__name__)

CLIENT_OPTIONS = (
    "use_tls", "timeout", "operation_timeout", "idle_timeout", "token_ttl", "entity_name", "paired_namespace",
    "local_queue",
    "transport_type", "http_proxy", "custom_endpoint_address", "connection_verify", "ssl_context", "user_agent",
    "logging_enable", "socket_timeout", "container_id", "uamqp_transport",
)  # fmt: skip
"""The client's keywords besides the retry options (the rest are ignored, as the SDK ignores them)."""

Credential = Any
"""A named key, a SAS credential or a token credential, recognised by what it offers
(:func:`amqplink.servicebus.tokens.credential_kind`)."""

HTTPS_PORT = 443
"""The port of ARM's ``https://NS.servicebus.windows.net:443/`` form of a namespace."""
TOKEN_EXPIRY_MARGIN = 1.0
"""A token this close to expiry (seconds) is put again before a link is attached under it."""


def _bracketed(host: str) -> str:
    """An IPv6 literal in brackets (as in a URI), any other host as it is."""
    return f"[{host}]" if ":" in host else host


def namespace_name(host: str, port: int | None, *, use_tls: bool) -> str:
    """The namespace as azure-servicebus reports it (``strip_protocol_from_uri``): the host, and
    the port when one was given, except the TLS ports Service Bus itself listens on (the SDK
    strips every port with TLS; it cannot reach another TLS port, amqplink can)."""
    name = _bracketed(host)
    if port is None or (use_tls and port in (TLS_PORT, HTTPS_PORT)):
        return name
    return f"{name}:{port}"


class ConnectionHolder:
    """The client's connection to one namespace, (re)opened on demand, with its CBS authorizer."""

    def __init__(
        self,
        endpoint: Endpoint,
        credential: Credential | None,
        *,
        policy: RetryPolicy,
        ssl_context: ssl.SSLContext | None = None,
        idle_timeout: float | None = None,
        token_ttl: int = DEFAULT_TOKEN_TTL,
        namespace: str | None = None,
        dialer: Dialer | None = None,
        properties: dict[Any, Any] | None = None,
        container_id: str | None = None,
        trace_level: int | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.properties = properties
        """The connection's open properties (product, version, user-agent: client_options)."""
        self.container_id = container_id
        self.trace_level = trace_level
        self.socket_timeout: float | None = None
        """The client's ``socket_timeout`` (seconds a send may wait for the socket), its handlers' default."""
        """The level this client's frames are logged at (``logging_enable``), None: the global trace."""
        self.namespace = namespace or _bracketed(endpoint.host)
        """The namespace as the SDK names it: the host, with the port when one was given
        (``client.namespace_name``); the audiences are under it."""
        self.dialer = dialer
        """Opens the byte stream when it is not TCP to ``endpoint`` (WebSockets, a custom endpoint)."""
        self.token_ttl = token_ttl
        self.credential = credential
        self.policy = policy
        self.ssl_context = ssl_context
        self.idle_timeout = idle_timeout
        self._connection: Connection | None = None
        self._cbs: CbsAuthorizer | None = None
        self._lock: asyncio.Lock | None = None
        self.generation = 0
        """Counts the connections opened; a handler whose links belong to an older one reattaches."""

    @property
    def host(self) -> str:
        """The namespace host (the audience's host)."""
        return self.endpoint.host

    def audience(self, entity: str) -> str:
        """``sb://NAMESPACE/ENTITY`` (docs/protocol.md#sas-tokens), the port kept when the namespace has one (as
        the SDK's ``_auth_uri``: a token minted for ``sb://host:port/...`` then covers it)."""
        return f"sb://{self.namespace}/{entity}"

    async def connection(self) -> Connection:
        """The open connection; a closed one is replaced and every audience put on it again."""
        conn = self._connection
        if conn is not None and not conn.closed and not conn.engine.close_sent:
            return conn
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            conn = self._connection
            if conn is not None and not conn.closed and not conn.engine.close_sent:
                return conn
            url = f"{'amqps' if self.endpoint.tls else 'amqp'}://{self.endpoint.host}:{self.endpoint.port}"
            new = await connect(
                url,
                sasl="anonymous",
                ssl_context=self.ssl_context,
                hostname=self.endpoint.host,
                idle_timeout=self.idle_timeout,
                timeout=self.policy.timeout,
                dialer=self.dialer,
                properties=self.properties,
                container_id=self.container_id,
                trace_level=self.trace_level,
            )
            if conn is not None:
                log.info("reconnected to %s (the previous connection ended: %s)", self.endpoint.url, conn.error)
            self._connection = new
            self.generation += 1
            if self.credential is not None:
                if self._cbs is None:
                    self._cbs = CbsAuthorizer(
                        new, self.credential, token_ttl=self.token_ttl, timeout=self.policy.timeout
                    )
                else:
                    await self._cbs.reauthorize(new)
            return new

    async def authorize(self, entity: str) -> Connection:
        """The connection, with a token for ``entity`` put on it (none without a credential)."""
        conn = await self.connection()
        cbs = self._cbs
        if cbs is not None:
            audience = self.audience(entity)
            expires = cbs.expires_on(audience)
            if expires is None or expires <= cbs.clock() + TOKEN_EXPIRY_MARGIN:
                await cbs.authorize(audience)  # none yet, or its refresh failed and it has run out
        return conn

    async def close(self) -> None:
        """Stop token refreshes and close the connection."""
        if self._cbs is not None:
            cbs, self._cbs = self._cbs, None
            try:
                await cbs.close()
            except (AMQPError, OSError) as exc:
                log.debug("closing $cbs: %s", exc)
        if self._connection is not None:
            conn, self._connection = self._connection, None
            await conn.close()


def _strip_namespace(value: str) -> tuple[str, int | None]:
    """``sb://host:port/`` or ``host`` -> (host, port or None)."""
    text = value.strip()
    if "://" in text:
        text = text.split("://", 1)[1]
    text = text.split("/", 1)[0]
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else None
    if text.count(":") == 1:
        host, port = text.split(":")
        return host, int(port)
    return text, None


def connection_holder(
    fully_qualified_namespace: str,
    credential: Credential,
    *,
    retry_total: int = 3,
    retry_backoff_factor: float = 0.8,
    retry_backoff_max: float = 120,
    retry_mode: str | RetryMode = "exponential",
    **kwargs: Any,
) -> ConnectionHolder:
    """The (not yet opened) connection ``ServiceBusClient(fully_qualified_namespace, credential,
    **keywords)`` holds, with the client's retry policy as its ``policy``. Keywords as the
    client's (:data:`CLIENT_OPTIONS`); those of the client's own features (``entity_name``,
    ``paired_namespace``, ``local_queue``) are the caller's."""
    credential_kind(credential)  # TypeError for anything that gives no token
    host, port = _strip_namespace(fully_qualified_namespace)
    use_tls = bool(kwargs.get("use_tls", True))
    namespace = namespace_name(host, port, use_tls=use_tls)
    policy = RetryPolicy(
        retry_total=retry_total,
        retry_backoff_factor=retry_backoff_factor,
        retry_backoff_max=retry_backoff_max,
        retry_mode=retry_mode,  # type: ignore[arg-type]  # a str too: RetryPolicy.__post_init__ makes it a RetryMode
        timeout=float(kwargs.get("timeout") or kwargs.get("operation_timeout") or 60.0),
    )
    ignore_unknown("ServiceBusClient", kwargs, CLIENT_OPTIONS)
    if kwargs.get("uamqp_transport"):
        raise ValueError(
            "uamqp_transport=True cannot apply: amqplink is its own AMQP stack (the SDK's default, the pure"
            " Python pyamqp, is what it replaces); leave it out or pass False"
        )
    transport = transport_from_options(host, port, use_tls, kwargs)
    holder = ConnectionHolder(
        transport.endpoint,
        credential,
        policy=policy,
        ssl_context=transport.ssl_context,
        dialer=transport.dialer,
        idle_timeout=kwargs.get("idle_timeout"),
        token_ttl=int(kwargs.get("token_ttl") or DEFAULT_TOKEN_TTL),
        namespace=namespace,
        properties=connection_properties(kwargs.get("user_agent")),
        container_id=kwargs.get("container_id"),
        trace_level=FRAME_TRACE_LEVEL if kwargs.get("logging_enable") else None,
    )
    holder.socket_timeout = check_socket_timeout(kwargs.get("socket_timeout"))
    return holder
