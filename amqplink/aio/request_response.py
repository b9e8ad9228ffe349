"""Request/response over a link pair on one connection (CBS ``$cbs``, ``<entity>/$management``).

docs/protocol.md#request-and-response-links: a sender link with target ``$cbs`` and a
receiver link with source ``$cbs``; each request carries ``message-id`` and ``reply-to`` (the receiver's
address); the response's ``correlation-id`` is the request's ``message-id``. Here the
receiver's target is a reply address unique to the pair (its link name), requests in
flight are bounded (``max_outstanding``), each request has a timeout, and when either
link or the connection drops every waiting request fails with that error at once.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import uuid
from types import TracebackType
from typing import TYPE_CHECKING, Any

from amqplink.aio.errors import AMQPError, LinkDetachedError, MessageRejected
from amqplink.message import Message
from amqplink.protocol.definitions import Accepted, Rejected

if TYPE_CHECKING:
    from amqplink.aio.connection import Connection
    from amqplink.aio.link import LinkBase
    from amqplink.aio.receiver import ReceivedMessage, Receiver
    from amqplink.aio.sender import Sender

__all__ = ["DEFAULT_MAX_OUTSTANDING", "RequestResponseLink", "RequestTimeout"]

log = logging.getLogger(__name__)

DEFAULT_MAX_OUTSTANDING = 64
"""Requests awaiting a response at once on one pair; a further request waits for room."""


class RequestTimeout(AMQPError, TimeoutError):
    """No response came within the request's timeout (the request may still have been processed)."""


class RequestResponseLink:
    """A sender to ``node`` and a receiver from it; open with :meth:`open`.

    ``await pair.request(message)`` sets ``message_id`` (when unset) and ``reply_to``
    on ``message``, sends it, and returns the response whose ``correlation_id``
    matches. Responses nobody waits for (late ones) are dropped.
    """

    def __init__(
        self, connection: Connection, node: str, sender: Sender, receiver: Receiver, max_outstanding: int
    ) -> None:
        self.connection = connection
        self.node = node
        self.reply_to = receiver.name
        self.max_outstanding = max_outstanding
        self.error: AMQPError | None = None
        self._sender = sender
        self._receiver = receiver
        self._loop = asyncio.get_running_loop()
        self._slots = asyncio.Semaphore(max_outstanding)
        self._pending: dict[Any, asyncio.Future[ReceivedMessage]] = {}
        self._ids = itertools.count(1)
        self._id_prefix = f"{uuid.uuid4().hex[:12]}-"
        self._closed = False
        self._closing: asyncio.Task[None] | None = None
        for link in (sender, receiver):
            link._detached.add_done_callback(functools.partial(self._on_link_closed, link))
        self._reader = self._loop.create_task(self._read(), name=f"amqplink-responses-{node}")

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._pending)} pending"
        return f"<amqplink RequestResponseLink {self.node!r} on {self.connection.endpoint.url} {state}>"

    @classmethod
    async def open(
        cls,
        connection: Connection,
        node: str,
        *,
        max_outstanding: int = DEFAULT_MAX_OUTSTANDING,
        properties: dict[Any, Any] | None = None,
        timeout: float | None = None,
    ) -> RequestResponseLink:
        """Attach the sender (target ``node``) and the receiver (source ``node``, a unique target)."""
        if max_outstanding < 1:
            raise ValueError(f"max_outstanding must be at least 1, not {max_outstanding}")
        unique = uuid.uuid4()
        sender = await connection.create_sender(
            node, max_in_flight=max_outstanding, name=f"{node}-request-{unique}", properties=properties, timeout=timeout
        )
        try:
            receiver = await connection.create_receiver(
                node,
                mode="receive-and-delete",
                prefetch=max_outstanding,
                name=f"{node}-reply-{unique}",
                properties=properties,
                timeout=timeout,
            )
        except BaseException:
            await sender.close()
            raise
        return cls(connection, node, sender, receiver, max_outstanding)

    # -- state ------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True once either link or the connection has gone, or after :meth:`close`."""
        return self._closed

    @property
    def pending(self) -> int:
        """Requests sent and not yet answered (not counting those waiting for room)."""
        return len(self._pending)

    def _check_open(self) -> None:
        if self._closed:
            raise self.error or LinkDetachedError(f"request/response link to {self.node!r} is closed")

    # -- requests ---------------------------------------------------------------------
    async def request(self, message: Message, *, timeout: float | None = None) -> ReceivedMessage:
        """Send ``message`` and wait up to ``timeout`` s (default: the connection's) for its response.

        Raises :class:`RequestTimeout` on time-out, :class:`MessageRejected` if the node
        rejects the request, or the error that closed a link or the connection.
        """
        self._check_open()
        wait = self.connection.timeout if timeout is None else timeout
        if message.message_id is None:
            message.message_id = f"{self._id_prefix}{next(self._ids)}"
        message_id = message.message_id
        if message_id in self._pending:
            raise ValueError(f"a request with message-id {message_id!r} is already waiting on {self.node!r}")
        message.reply_to = self.reply_to
        future: asyncio.Future[ReceivedMessage] = self._loop.create_future()
        try:
            async with asyncio.timeout(wait) as scope:
                await self._slots.acquire()
                try:
                    self._check_open()
                    self._pending[message_id] = future
                    outcome = await self._sender.send_nowait(message)
                    outcome.add_done_callback(lambda done: self._on_outcome(message_id, done))
                    return await future
                finally:
                    self._pending.pop(message_id, None)
                    self._slots.release()
        except TimeoutError:
            if not scope.expired():
                raise
            raise RequestTimeout(
                f"no response from {self.node!r} on {self.connection.endpoint.url} within {wait} s"
                f" (message-id {message_id!r})"
            ) from None

    def _on_outcome(self, message_id: Any, done: asyncio.Future[Any]) -> None:
        if done.cancelled():
            return
        if done.exception() is not None:
            return  # the link failed: _on_link_closed fails every waiter
        outcome = done.result()
        future = self._pending.get(message_id)
        if future is None or future.done() or isinstance(outcome, Accepted):
            return
        what = f"{self.node!r} did not take request {message_id!r}"
        if isinstance(outcome, Rejected):
            failure = MessageRejected.from_error(what, outcome.error)
        else:
            failure = MessageRejected(f"{what} ({type(outcome).__name__.lower()})", outcome=outcome)
        future.set_exception(failure)

    # -- responses --------------------------------------------------------------------
    async def _read(self) -> None:
        receiver = self._receiver
        try:
            while True:
                batch = await receiver.receive(self.max_outstanding)
                if not batch:
                    return  # closed cleanly; _on_link_closed fails the waiters
                for response in batch:
                    future = self._pending.get(response.correlation_id)
                    if future is None or future.done():
                        log.debug("%s: dropped a response with no waiting request", self.node)
                        continue
                    future.set_result(response)
        except AMQPError:
            return  # the receiver failed; _on_link_closed reports it

    def _on_link_closed(self, link: LinkBase, _detached: asyncio.Future[None]) -> None:
        if self._closed:
            return
        failure = link.error or LinkDetachedError(
            f"request/response link to {self.node!r}: the {link.kind} link was closed"
        )
        if self._pending:
            log.warning(
                "request/response link to %r failed with %d request(s) waiting: %s",
                self.node,
                len(self._pending),
                failure,
            )
        else:
            log.debug("request/response link to %r ended: %s", self.node, failure)
        self._fail(failure)
        # the other half of the pair is useless alone
        self._closing = self._loop.create_task(self._close_links())

    def _fail(self, failure: AMQPError) -> None:
        self._closed = True
        self.error = failure
        for future in self._pending.values():
            if not future.done():
                future.set_exception(failure)

    async def _close_links(self) -> None:
        await asyncio.gather(self._sender.close(), self._receiver.close(), return_exceptions=True)

    async def close(self) -> None:
        """Detach both links; waiting requests fail with ``LinkDetachedError``."""
        if not self._closed:
            self._fail(LinkDetachedError(f"request/response link to {self.node!r} was closed by the application"))
        self._reader.cancel()
        await self._close_links()
        await asyncio.gather(self._reader, return_exceptions=True)

    async def __aenter__(self) -> RequestResponseLink:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
