"""Where a client's sends meet its local queue: the last tier (primary, then the backlog
queues when paired, then the local queue).

Two rules, used by both senders that can have a local queue (:class:`LocalQueueSender`
here, for a client without a paired namespace, and
:class:`~amqplink.servicebus.paired.sender.PairedSender`):

* **local first while it holds the entity's messages** (:func:`stored_first`): a send to
  an entity with messages in the local queue is stored behind them, so that it does not
  overtake them; the senders run their plain methods again once the queue has forwarded
  them all (``reroute``);
* **stored instead of raised** (:func:`store_or_raise`): a send that failed with an error
  the local queue shields from (:func:`~.queue.shields`) is stored, and the send returns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from amqplink.message import Message
from amqplink.servicebus._base import ConnectionHolder
from amqplink.servicebus.exceptions import ServiceBusError
from amqplink.servicebus.localqueue.queue import LocalQueue, shields
from amqplink.servicebus.message import MAX_MESSAGE_LENGTH_BYTES, ServiceBusMessage, ServiceBusMessageBatch
from amqplink.servicebus.message import to_outgoing as outgoing
from amqplink.servicebus.paired.pairing import listed, settle
from amqplink.servicebus.sender import SendError, SendInput, ServiceBusSender

if TYPE_CHECKING:
    from amqplink.servicebus.transaction import ServiceBusTransaction

__all__ = ["LocalQueueSender", "done_future", "route", "store_failed_nowait", "store_or_raise", "stored_first"]


async def stored_first(local: LocalQueue, sender: ServiceBusSender, message: Any) -> bool:
    """Open the local queue if need be; if it holds messages of ``sender``'s entity, store
    ``message`` behind them and return True."""
    if not local.started:
        await local.start()
    if not local.has(sender.entity_name):
        return False
    sender._check_not_closed()
    await local.store(sender.entity_name, await listed(message))
    return True


async def store_or_raise(local: LocalQueue, entity: str, message: Any, error: ServiceBusError) -> None:
    """The send of ``message`` failed with ``error``: stored, or ``error`` raised."""
    if not shields(error):
        raise error
    await local.take(entity, await listed(message), error)


def route(sender: Any, *, plain: bool) -> None:
    """Switch ``sender`` to the plain sender's ``send_messages``/``send_nowait`` (no check per
    message) or to its ``_routed_*`` methods (instance attributes, so every caller sees it)."""
    attributes = vars(sender)
    if plain:
        attributes.pop("send_messages", None)
        attributes.pop("send_nowait", None)
    else:
        attributes["send_messages"] = sender._routed_send_messages
        attributes["send_nowait"] = sender._routed_send_nowait


def done_future() -> asyncio.Future[None]:
    """The outcome of a ``send_nowait`` whose message is stored already (synced)."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    done.set_result(None)
    return done


def store_failed_nowait(
    local: LocalQueue, result: asyncio.Future[None], error: BaseException, message: ServiceBusMessage, entity: str
) -> None:
    """The outcome of a ``send_nowait`` failed with ``error``: ``result`` gets the store's
    outcome (or ``error``, when the local queue does not shield from it)."""
    if not isinstance(error, ServiceBusError) or not shields(error):
        if not result.done():
            result.set_exception(error)
        return

    local.keep(asyncio.get_running_loop().create_task(settle(result, local.take(entity, [message], error))))


class LocalQueueSender(ServiceBusSender):
    """A sender of a client with ``local_queue`` (and no paired namespace): the plain
    sender's code while its entity has nothing in the local queue; a send that fails with
    an error the queue shields from is stored there instead of raised."""

    def __init__(self, holder: ConnectionHolder, entity_name: str, *, local: LocalQueue, **options: Any) -> None:
        """As :class:`ServiceBusSender` (from a client), with the client's local queue."""
        super().__init__(holder, entity_name, **options)
        self._local = local
        self._paired = self
        local.register(self)

    def reroute(self) -> None:
        """The plain methods while the local queue is open and holds nothing of the entity."""
        route(self, plain=self._local.lets_through(self.entity_name))

    async def _open_for_context(self) -> None:
        """``async with``: the local queue is opened (a damaged one raises here); a primary
        that cannot be reached is not an error (sends are stored)."""
        await self._local.start()
        try:
            await super()._open_for_context()
        except ServiceBusError as exc:
            if not shields(exc):
                raise
            self._closed = False  # the base closed it: open again, for sends that may be stored

    async def create_message_batch(self, max_size_in_bytes: int | None = None) -> ServiceBusMessageBatch:
        """As :meth:`ServiceBusSender.create_message_batch`; while the entity cannot be reached,
        a batch of ``max_size_in_bytes`` (default the Service Bus limit), since it may be stored."""
        try:
            return await super().create_message_batch(max_size_in_bytes)
        except ServiceBusError as exc:
            if not shields(exc):
                raise
        return ServiceBusMessageBatch(max_size_in_bytes or MAX_MESSAGE_LENGTH_BYTES)

    async def _routed_send_messages(
        self, message: SendInput, *, timeout: float | None = None, transaction: ServiceBusTransaction | None = None
    ) -> None:
        if transaction is not None:  # on its connection or not at all: never stored locally
            await ServiceBusSender.send_messages(self, message, timeout=timeout, transaction=transaction)
        elif not await stored_first(self._local, self, message):
            await ServiceBusSender.send_messages(self, message, timeout=timeout)  # a failure: send_failed

    async def _routed_send_nowait(
        self, message: ServiceBusMessage | Mapping[str, Any] | Message
    ) -> asyncio.Future[None]:
        if await stored_first(self._local, self, outgoing(message)):
            return done_future()
        return await ServiceBusSender.send_nowait(self, message)

    # -- SendFailureHooks ---------------------------------------------------------------
    def attempt_failed(self, error: SendError) -> None:
        """(No failover timer without a paired namespace.)"""

    def retried_send_succeeded(self) -> None:
        """(No failover timer without a paired namespace.)"""

    async def send_failed(self, message: SendInput, error: ServiceBusError, timeout: float | None) -> None:
        """A send no namespace took: store it locally, or raise ``error`` where the local queue does not shield it."""
        await store_or_raise(self._local, self.entity_name, message, error)

    async def nowait_refused(self, message: ServiceBusMessage, error: SendError) -> asyncio.Future[None]:
        """A ``send_nowait`` refused before it was sent: stored locally (a done future), or ``error`` raised."""
        if not isinstance(error, ServiceBusError) or not shields(error):
            raise error
        await self._local.take(self.entity_name, [message], error)
        return done_future()

    def nowait_failed(self, result: asyncio.Future[None], error: BaseException, message: ServiceBusMessage) -> None:
        """A ``send_nowait`` whose outcome failed: ``result`` completes once the message is stored
        locally (or with ``error``)."""
        store_failed_nowait(self._local, result, error, message, self.entity_name)
