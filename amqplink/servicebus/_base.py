"""What every Service Bus handler shares: lazy attach, reattach, retries, management.

A :class:`Handler` (sender or receiver) is given the :class:`ConnectionHolder` of its
client (:mod:`amqplink.servicebus.holder`) and never builds a client; it attaches its
links lazily on the holder's connection, reattaches them when they are gone, and runs
every operation under the client's retry policy. Constructed directly, as the SDK allows,
it gets a holder of its own from :func:`~amqplink.servicebus.holder.connection_holder`
and closes it with itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Self, TypeVar

from amqplink.aio.connection import Connection
from amqplink.aio.errors import AMQPError
from amqplink.servicebus.client_options import check_socket_timeout
from amqplink.servicebus.client_options import client_identifier as identifier
from amqplink.servicebus.connection_args import connection_arguments, entity_of
from amqplink.servicebus.exceptions import MessageAlreadySettled, ServiceBusError
from amqplink.servicebus.holder import ConnectionHolder, connection_holder, namespace_name
from amqplink.servicebus.management_node import ManagementClient
from amqplink.servicebus.retry import RetryPolicy, run_with_retry

__all__ = ["ConnectionHolder", "Handler", "namespace_name"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class Handler:
    """Base of senders and receivers: lazy attach, reattach, retries, management, close."""

    _kind = "handler"
    _owner: ConnectionHolder | None = None
    """The connection a handler constructed directly (the SDK's ``ServiceBusSender(fqns, credential,
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
        """A connection of the handler's own for the SDK's direct construction (``options``: the
        client's keywords, e.g. ``retry_total``, ``use_tls``), as a client with them would hold it,
        and its retry policy; closed with the handler."""
        if isinstance(fully_qualified_namespace, ConnectionHolder) or not isinstance(fully_qualified_namespace, str):
            raise TypeError(f"fully_qualified_namespace must be a str, not {type(fully_qualified_namespace).__name__}")
        holder = self._owner = connection_holder(fully_qualified_namespace, credential, **options)
        return holder, holder.policy

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
