"""The sender a paired client makes: a plain :class:`ServiceBusSender` while the entity is
healthy (one attribute test per send more), the backlog queue while it is failed over.

"When sending, all messages go through an internal MessageSender object that behaves
normally when everything works, and redirects to the backlog queues when things
'break'" (seed 001). A send either succeeds (on the primary, or parked in a backlog
queue) or raises: while the failover timer runs, a failed send raises its error; once
failover is engaged, a send that failed on the primary is parked instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Iterable, Mapping
from typing import Any

from amqplink.message import Message
from amqplink.servicebus._base import ConnectionHolder
from amqplink.servicebus.exceptions import ServiceBusError
from amqplink.servicebus.message import ServiceBusMessage, ServiceBusMessageBatch, to_outgoing
from amqplink.servicebus.paired.failover import FAILED_OVER, SUSPECT, counts_for_failover
from amqplink.servicebus.paired.pairing import Pairing, outgoing_list
from amqplink.servicebus.retry import RetryPolicy
from amqplink.servicebus.sender import DEFAULT_MAX_IN_FLIGHT, SendInput, ServiceBusSender

__all__ = ["PairedSender"]


class PairedSender(ServiceBusSender):
    """A sender of a paired client (same API as :class:`ServiceBusSender`).

    A list whose transfer failed is parked whole: messages of it the primary had already
    taken may then arrive twice (at least once; the message ids let duplicate detection
    drop the second copy). An iterable or async iterable is read into a list first, so
    that what failed can be parked.
    """

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
    ) -> None:
        super().__init__(
            holder, entity_name, policy=policy, max_in_flight=max_in_flight, queue_name=queue_name,
            topic_name=topic_name,
        )  # fmt: skip
        self._pairing = pairing
        self._failover = pairing.entity(entity_name)

    async def _open_for_context(self) -> None:
        """``async with``: the backlog queues are checked (a clear error if the management
        endpoint fails); an unreachable primary is not an error here (sends decide)."""
        pairing = self._pairing
        if not pairing.started:
            await pairing.start()
        if self._failover.state is FAILED_OVER:
            return
        try:
            await super()._open_for_context()
        except ServiceBusError as exc:
            pairing.primary_failed(self._failover, exc)
            if not counts_for_failover(exc):
                raise
            self._closed = False  # the base closed it: open again, for sends that may be parked

    async def send_messages(self, message: SendInput, *, timeout: float | None = None) -> None:
        """As :meth:`ServiceBusSender.send_messages`; parked in a backlog queue while the entity
        is failed over."""
        pairing = self._pairing
        if not pairing.started:
            await pairing.start()
        if not isinstance(message, ServiceBusMessage | ServiceBusMessageBatch | Mapping | Message | list | tuple):
            message = await _materialize(message)
        failover = self._failover
        if failover.state is not FAILED_OVER:
            try:
                await super().send_messages(message, timeout=timeout)
            except ServiceBusError as exc:
                if not pairing.primary_failed(failover, exc):
                    raise
            else:
                if failover.state is SUSPECT:
                    failover.succeeded()
                return
        self._check_not_closed()
        await pairing.park(self.entity_name, outgoing_list(message), timeout)

    async def send_nowait(self, message: ServiceBusMessage | Mapping[str, Any] | Message) -> asyncio.Future[None]:
        """As :meth:`ServiceBusSender.send_nowait`; parked while the entity is failed over (also
        when the primary's outcome fails once failover has engaged)."""
        pairing = self._pairing
        if not pairing.started:
            await pairing.start()
        failover = self._failover
        if failover.state is not FAILED_OVER:
            try:
                result = await super().send_nowait(message)
            except ServiceBusError as exc:
                if not pairing.primary_failed(failover, exc):
                    raise
            else:
                if failover.state is SUSPECT:
                    result.add_done_callback(self._note_outcome)
                return result
        self._check_not_closed()
        return await pairing.park_nowait(self.entity_name, to_outgoing(message))

    def _note_outcome(self, result: asyncio.Future[None]) -> None:
        if not result.cancelled() and result.exception() is None:
            self._failover.succeeded()

    def _nowait_failed(self, result: asyncio.Future[None], error: BaseException, message: ServiceBusMessage) -> None:
        if not self._pairing.primary_failed(self._failover, error):
            result.set_exception(error)
            return

        def parked(done: asyncio.Future[None]) -> None:
            if result.done():
                return
            if done.cancelled():
                result.cancel()
            elif done.exception() is not None:
                result.set_exception(done.exception())  # type: ignore[arg-type]
            else:
                result.set_result(None)

        async def park() -> None:
            (await self._pairing.park_nowait(self.entity_name, message)).add_done_callback(parked)

        self._pairing.keep(asyncio.get_running_loop().create_task(park()))


async def _materialize(messages: Iterable[Any] | AsyncIterable[Any]) -> list[Any]:
    if isinstance(messages, AsyncIterable):
        return [m async for m in messages]
    return list(messages)
