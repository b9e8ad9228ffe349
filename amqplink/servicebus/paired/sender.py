"""The sender a paired client makes: exactly a plain :class:`ServiceBusSender` while its
entity is healthy, a routed one otherwise.

"When sending, all messages go through an internal MessageSender object that behaves
normally when everything works, and redirects to the backlog queues when things
'break'" (seed 001). While the entity is healthy a paired sender runs the plain sender's
code (no check per message): the plain sender consults its failure hooks
(:class:`~amqplink.servicebus.sender.SendFailureHooks`, implemented here) only once a
send has failed. When the entity's state changes, the pairing switches every sender of
the entity between the plain methods and the routed ones (instance attributes), so that
they all learn of the failure at once.

A send either succeeds (on the primary, or parked in a backlog queue) or raises: while
the failover timer runs, a failed send raises its error; once failover is engaged, a send
that failed on the primary is parked instead. A list whose transfer failed is parked
whole: messages of it the primary had already taken may then arrive twice (at least
once; the message ids let duplicate detection drop the second copy). An iterable or
async iterable is read into a list first, so that what failed can be parked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from amqplink.message import Message
from amqplink.servicebus._base import ConnectionHolder
from amqplink.servicebus.exceptions import ServiceBusError
from amqplink.servicebus.localqueue.queue import LocalQueue
from amqplink.servicebus.localqueue.sender import done_future, route, store_failed_nowait, store_or_raise, stored_first
from amqplink.servicebus.message import MAX_MESSAGE_LENGTH_BYTES, ServiceBusMessage, ServiceBusMessageBatch, to_outgoing
from amqplink.servicebus.paired.failover import FAILED_OVER, HEALTHY, SUSPECT, counts_for_failover
from amqplink.servicebus.paired.pairing import Pairing, listed, outgoing_list
from amqplink.servicebus.retry import RetryPolicy
from amqplink.servicebus.sender import DEFAULT_MAX_IN_FLIGHT, SendError, SendInput, ServiceBusSender

if TYPE_CHECKING:
    from amqplink.servicebus.transaction import ServiceBusTransaction

__all__ = ["PairedSender"]


class PairedSender(ServiceBusSender):
    """A sender of a paired client (the API of :class:`ServiceBusSender`)."""

    def __init__(
        self,
        holder: ConnectionHolder,
        entity_name: str,
        *,
        pairing: Pairing,
        policy: RetryPolicy,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        queue_name: str | None = None,
        topic_name: str | None = None,
        client_identifier: str | None = None,
        socket_timeout: float | None = None,
        local: LocalQueue | None = None,
    ) -> None:
        super().__init__(
            holder, entity_name, policy=policy, max_in_flight=max_in_flight, queue_name=queue_name,
            topic_name=topic_name, client_identifier=client_identifier, socket_timeout=socket_timeout,
        )  # fmt: skip
        self._pairing = pairing
        self._failover = pairing.entity(entity_name)
        self._paired = self
        self._local = local
        """The client's local queue: the tier after the backlog queues (None: none)."""
        pairing.register(self)
        if local is not None:
            local.register(self)

    def reroute(self) -> None:
        """The plain methods while the entity is healthy (and the backlog queues were
        checked); the routed ones otherwise."""
        local = self._local
        healthy = self._pairing.started and self._failover.state is HEALTHY
        route(self, plain=healthy and (local is None or local.lets_through(self.entity_name)))

    async def _open_for_context(self) -> None:
        """``async with``: the backlog queues are checked (a clear error if the management
        endpoint fails); an unreachable primary is not an error here (sends decide)."""
        pairing = self._pairing
        if not pairing.started:
            await pairing.start()
        if self._local is not None:
            await self._local.start()  # a damaged local queue raises here
        if self._failover.state is FAILED_OVER:
            return
        try:
            await super()._open_for_context()
        except ServiceBusError as exc:
            pairing.primary_failed(self._failover, exc)
            if not counts_for_failover(exc):
                raise
            self._closed = False  # the base closed it: open again, for sends that may be parked

    async def create_message_batch(self, max_size_in_bytes: int | None = None) -> ServiceBusMessageBatch:
        """As :meth:`ServiceBusSender.create_message_batch`; while the primary entity cannot be
        reached (failed over, or the failure counts), a batch bounded by the backlog queue's
        max-message-size (or ``max_size_in_bytes``), since its messages may be parked."""
        if self._failover.state is not FAILED_OVER:
            try:
                return await super().create_message_batch(max_size_in_bytes)
            except ServiceBusError as exc:
                self._pairing.primary_failed(self._failover, exc)
                if not counts_for_failover(exc):
                    raise
        self._check_not_closed()
        if max_size_in_bytes:
            return ServiceBusMessageBatch(max_size_in_bytes)
        try:
            return ServiceBusMessageBatch(await self._pairing.backlog_max_size())
        except ServiceBusError:
            if self._local is None:
                raise
            return ServiceBusMessageBatch(MAX_MESSAGE_LENGTH_BYTES)  # (it may be stored locally)

    # -- the routed methods (not healthy, or not started) ------------------------------------
    async def _routed_send_messages(
        self, message: SendInput, *, timeout: float | None = None, transaction: ServiceBusTransaction | None = None
    ) -> None:
        if transaction is not None:  # on its connection or not at all: never parked or stored locally
            await ServiceBusSender.send_messages(self, message, timeout=timeout, transaction=transaction)
            return
        pairing = self._pairing
        if not pairing.started:
            await pairing.start()
        if self._local is not None and await stored_first(self._local, self, message):
            return
        failover = self._failover
        if failover.state is FAILED_OVER:
            self._check_not_closed()
            await self._park(await listed(message), timeout)
            return
        await ServiceBusSender.send_messages(self, message, timeout=timeout)  # a failure: send_failed
        if failover.state is SUSPECT:
            failover.succeeded()

    async def _routed_send_nowait(
        self, message: ServiceBusMessage | Mapping[str, Any] | Message
    ) -> asyncio.Future[None]:
        pairing = self._pairing
        if not pairing.started:
            await pairing.start()
        if self._local is not None and await stored_first(self._local, self, to_outgoing(message)):
            return done_future()
        if self._failover.state is FAILED_OVER:
            self._check_not_closed()
            return await self._park_nowait(to_outgoing(message))
        result = await ServiceBusSender.send_nowait(self, message)
        if self._failover.state is SUSPECT:
            result.add_done_callback(self._note_outcome)
        return result

    def _note_outcome(self, result: asyncio.Future[None]) -> None:
        if not result.cancelled() and result.exception() is None:
            self._failover.succeeded()

    # -- SendFailureHooks: a send to the primary failed -------------------------------------
    def attempt_failed(self, error: SendError) -> None:
        """One attempt on the primary failed (more may follow): the failover timer starts."""
        self._pairing.attempt_failed(self._failover, error)

    def retried_send_succeeded(self) -> None:
        """A send whose attempts had failed went through: the timer stops (while SUSPECT)."""
        self._failover.succeeded()

    async def send_failed(self, message: SendInput, error: ServiceBusError, timeout: float | None) -> None:
        """Park ``message`` if failover is (now) engaged for the entity; raise ``error`` otherwise
        (with a local queue: store it there, if it shields from the error)."""
        if not self._pairing.primary_failed(self._failover, error):
            if self._local is None:
                raise error
            await store_or_raise(self._local, self.entity_name, message, error)
            return
        self._check_not_closed()
        await self._park(outgoing_list(message), timeout)

    async def _park(self, messages: list[ServiceBusMessage], timeout: float | None) -> None:
        """Park ``messages``; when no backlog queue takes them, into the local queue (if any)."""
        try:
            await self._pairing.park(self.entity_name, messages, timeout)
        except ServiceBusError as exc:
            if self._local is None:
                raise
            await store_or_raise(self._local, self.entity_name, messages, exc)

    async def _park_nowait(self, message: ServiceBusMessage) -> asyncio.Future[None]:
        return await self._pairing.park_nowait(self.entity_name, message, park=self._park)

    async def nowait_refused(self, message: ServiceBusMessage, error: SendError) -> asyncio.Future[None]:
        """``send_nowait`` could not hand ``message`` to the primary: park it, or raise."""
        if not self._pairing.primary_failed(self._failover, error):
            if self._local is None or not isinstance(error, ServiceBusError):
                raise error
            await store_or_raise(self._local, self.entity_name, [message], error)
            return done_future()
        return await self._park_nowait(message)

    def nowait_failed(self, result: asyncio.Future[None], error: BaseException, message: ServiceBusMessage) -> None:
        """The primary's outcome for a ``send_nowait`` failed: park it (``result`` gets the
        parking's outcome), or hand ``result`` the error."""
        if not self._pairing.primary_failed(self._failover, error):
            if self._local is None:
                result.set_exception(error)
            else:
                store_failed_nowait(self._local, result, error, message, self.entity_name)
            return

        def parked(done: asyncio.Future[None]) -> None:
            if result.done():
                return
            failure = None if done.cancelled() else done.exception()
            if done.cancelled():
                result.cancel()
            elif failure is not None:
                result.set_exception(failure)
            else:
                result.set_result(None)

        async def park() -> None:
            (await self._park_nowait(message)).add_done_callback(parked)

        self._pairing.keep(asyncio.get_running_loop().create_task(park()))
