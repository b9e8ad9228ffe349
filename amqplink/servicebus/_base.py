"""What every Service Bus handler shares: the client's one connection, CBS, retries.

A :class:`ConnectionHolder` owns the client's AMQP connection (SASL ANONYMOUS, then a
CBS put-token per entity audience, docs/protocol.md#claims-based-security-cbs) and opens it again when it is found
closed (``amqp:connection:forced``, a socket error, an idle close): the tokens of every
audience are put again on the new connection (:meth:`CbsAuthorizer.reauthorize`).
A :class:`Handler` (sender or receiver) attaches its links lazily, reattaches them
when they are gone, and runs every operation under the client's retry policy.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import ssl
import uuid
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Self, TypeVar

from amqplink.aio.connection import Connection, Dialer, connect
from amqplink.aio.errors import AMQPError
from amqplink.aio.url import Endpoint
from amqplink.servicebus.cbs import CbsAuthorizer
from amqplink.servicebus.client_options import check_socket_timeout
from amqplink.servicebus.client_options import client_identifier as identifier
from amqplink.servicebus.connection_args import connection_arguments, entity_of
from amqplink.servicebus.connection_string import TLS_PORT
from amqplink.servicebus.exceptions import MessageAlreadySettled, ServiceBusError
from amqplink.servicebus.management_node import ManagementClient
from amqplink.servicebus.retry import RetryPolicy, run_with_retry
from amqplink.servicebus.sas import DEFAULT_TOKEN_TTL

__all__ = ["ConnectionHolder", "Handler", "namespace_name"]

log = logging.getLogger(__name__)

T = TypeVar("T")

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


class Handler:
    """Base of senders and receivers: lazy attach, reattach, retries, management, close."""

    _kind = "handler"
    _owner: Any = None
    """The client a handler constructed directly (the SDK's ``ServiceBusSender(fqns, credential,
    queue_name=...)``) made for itself; closed with it."""

    def __init__(
        self,
        holder: ConnectionHolder,
        entity_name: str,
        *,
        policy: RetryPolicy,
        client_identifier: str | None = None,
        socket_timeout: float | None = None,
    ) -> None:
        self._holder = holder
        self.entity_name = entity_name
        self.fully_qualified_namespace = holder.namespace
        self._policy = policy
        self._running = False
        self._closed = False
        self._generation = -1
        self._open_lock: asyncio.Lock | None = None
        self._management: ManagementClient | None = None
        self._client_identifier = identifier(self._kind, client_identifier)
        # link names start with it, unique however often a user gives the same identifier
        self._name = f"{self._client_identifier}-{uuid.uuid4().hex[:8]}"
        self._attaches = 0
        self._socket_timeout = check_socket_timeout(socket_timeout)
        if self._socket_timeout is None:
            self._socket_timeout = holder.socket_timeout

    def _standalone(
        self, fully_qualified_namespace: str, credential: Any, options: dict[str, Any]
    ) -> tuple[ConnectionHolder, RetryPolicy]:
        """A client of the handler's own for the SDK's direct construction (``options``: the
        client's keywords, e.g. ``retry_total``, ``use_tls``); its connection and retry policy."""
        from amqplink.servicebus.client import ServiceBusClient  # the client module imports the handlers

        if isinstance(fully_qualified_namespace, ConnectionHolder) or not isinstance(fully_qualified_namespace, str):
            raise TypeError(f"fully_qualified_namespace must be a str, not {type(fully_qualified_namespace).__name__}")
        client = self._owner = ServiceBusClient(fully_qualified_namespace, credential, **options)
        return client._holder, client._policy

    @classmethod
    def from_connection_string(cls, conn_str: str, **kwargs: Any) -> Self:
        """The SDK's ``ServiceBusSender._from_connection_string(conn_str, queue_name=... | topic_name=...)``
        and ``ServiceBusReceiver._from_connection_string(conn_str, queue_name=... | topic_name=...,
        subscription_name=...)``: a handler with a connection of its own, on the string's namespace
        and key; the entity is the string's ``EntityPath`` or the keyword's (both: the same one,
        else ``ValueError``; :mod:`amqplink.servicebus.connection_args`). Other keywords as the
        direct constructor's."""
        args = connection_arguments(conn_str)
        entity = entity_of(args.entity_path, kwargs.get("queue_name"), kwargs.get("topic_name"))
        cls._check_named(kwargs)
        if not args.use_tls:  # UseDevelopmentEmulator=true
            kwargs["use_tls"] = False
        direct: Callable[..., Self] = cls  # a subclass's direct construction (the base takes a holder)
        return direct(args.namespace, args.credential, _entity_path=entity, **kwargs)

    _from_connection_string = from_connection_string
    """The SDK 7.15's name (its handlers have only this private one)."""

    @classmethod
    def _check_named(cls, kwargs: dict[str, Any]) -> None:
        """What else :meth:`from_connection_string` refuses in the keywords (a receiver's subscription rules)."""

    def _next_link_name(self) -> str:
        """A name for the next attach: the previous link may still be detaching under its own."""
        self._attaches += 1
        return self._name if self._attaches == 1 else f"{self._name}-{self._attaches}"

    @property
    def client_identifier(self) -> str:
        """The SDK's ``client_identifier``: as given, or ``SBSender-<uuid4>`` / ``SBReceiver-<uuid4>``;
        the links' names start with it (:mod:`amqplink.servicebus.client_options`)."""
        return self._client_identifier

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open" if self._running else "not opened"
        return f"<{type(self).__name__} {self.entity_name!r} on {self.fully_qualified_namespace} {state}>"

    # -- links ------------------------------------------------------------------------
    def _links_alive(self) -> bool:
        """Hook: True while the handler's links are attached."""
        raise NotImplementedError

    async def _attach(self, connection: Connection) -> None:
        """Hook: attach the handler's links on ``connection``."""
        raise NotImplementedError

    def _on_links_lost(self) -> None:
        """Hook: the links are gone (before reattaching)."""

    @property
    def _management_link_name(self) -> str | None:
        return None

    def _check_not_closed(self) -> None:
        if self._closed:
            raise ValueError(
                f"The {self._kind} for {self.entity_name!r} has already been shut down."
                " Please use ServiceBusClient to create a new instance."
            )

    def _ready(self) -> bool:
        """True while the links are attached on the client's current connection."""
        return self._running and self._links_alive() and self._generation == self._holder.generation

    async def _open(self) -> None:
        """Attach (or reattach) the links; idempotent while they are alive."""
        self._check_not_closed()
        if self._ready():
            return
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if self._ready():
                return
            if self._running:
                self._on_links_lost()
            conn = await self._holder.authorize(self.entity_name)
            await self._attach(conn)
            self._generation = self._holder.generation
            self._running = True

    async def _retry(
        self,
        operation: Callable[[float], Awaitable[T]],
        *,
        timeout: float | None = None,
        tried: int = 0,
        on_failure: Callable[[ServiceBusError | MessageAlreadySettled], None] | None = None,
    ) -> T:
        """Run ``operation(remaining)`` under the retry policy; each attempt reattaches if needed.

        ``timeout`` replaces the policy's overall timeout; ``tried`` attempts already made
        (a fast path's) count against ``retry_total``; ``on_failure`` is told of each failed
        attempt (:func:`~amqplink.servicebus.retry.run_with_retry`)."""
        policy = self._policy
        if (timeout is not None and timeout > 0 and timeout != policy.timeout) or tried:
            policy = dataclasses.replace(
                policy,
                retry_total=max(0, policy.retry_total - tried),
                timeout=timeout if timeout is not None and timeout > 0 else policy.timeout,
            )

        async def attempt(remaining: float) -> T:
            await self._open()
            return await operation(remaining)

        return await run_with_retry(attempt, policy, entity=self.entity_name, on_failure=on_failure)

    async def _mgmt(self) -> ManagementClient:
        """The handler's ``$management`` link pair (opened on first use, again after a loss)."""
        await self._open()
        mgmt = self._management
        if mgmt is None or mgmt.closed:
            conn = await self._holder.authorize(self.entity_name)
            mgmt = self._management = await ManagementClient.open(
                conn, self.entity_name, associated_link_name=self._management_link_name
            )
        mgmt.associated_link_name = self._management_link_name
        return mgmt

    async def _mgmt_call(self, call: Callable[[ManagementClient], Awaitable[T]], timeout: float | None = None) -> T:
        async def operation(_remaining: float) -> T:
            return await call(await self._mgmt())

        return await self._retry(operation, timeout=timeout)

    # -- closing ----------------------------------------------------------------------
    async def _close_links(self) -> None:
        """Hook: detach the handler's links."""

    async def close(self) -> None:
        """Detach the handler's links (the client's connection stays open)."""
        if self._closed:
            return
        self._closed = True
        self._running = False
        mgmt, self._management = self._management, None
        try:
            await self._close_links()
            if mgmt is not None:
                await mgmt.close()
        except (AMQPError, OSError, ServiceBusError) as exc:
            log.debug("%s: error while closing: %s", self.entity_name, exc)
        owner, self._owner = self._owner, None
        if owner is not None:
            await owner.close()

    async def __aenter__(self) -> Any:
        await self._open_for_context()
        return self

    async def _open_for_context(self) -> None:
        try:
            await self._retry(lambda _remaining: _done())
        except BaseException:
            await self.close()
            raise

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


async def _done() -> None:
    return None
